"""The steps of a trace under construction: ``Node`` (a step plus what ordering and merging
need), the ``Assembly`` of a group's nodes, ordering, stable ids and timestamps.

Shared by the span and log mappings (``spans``, ``logs``) and the trace builder (``build``),
with the nodes every harness's log records make (a user prompt, a permission decision).
Pure functions over plain dicts; no I/O.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.otel.semconv import as_float

# A harness record is matched to a span step when its time falls inside the span, or this
# soon after it ends (the record is written once the call returns).
MATCH_SLACK_NS = 2_000_000_000


# Lowercase RFC 4648 base32, ten bits (two characters) at a time.
_B32_PAIRS = [
    a + b for a in "abcdefghijklmnopqrstuvwxyz234567" for b in "abcdefghijklmnopqrstuvwxyz234567"
]


def derived_ids(prefix: str, keys: list[str]) -> list[str]:
    """Stable ids (``stp_`` + 16 base32 characters, as ``ids.new_ids`` makes them) for item
    keys: the first 80 bits of each key's SHA-256, in lowercase base32 (what
    ``base64.b32encode(digest[:10]).lower()`` gives, without its per-byte Python loop)."""
    pairs = _B32_PAIRS
    sha256 = hashlib.sha256
    out = []
    for key in keys:
        n = int.from_bytes(sha256(key.encode()).digest()[:10], "big")
        out.append(
            f"{prefix}_{pairs[n >> 70]}{pairs[(n >> 60) & 1023]}{pairs[(n >> 50) & 1023]}"
            f"{pairs[(n >> 40) & 1023]}{pairs[(n >> 30) & 1023]}{pairs[(n >> 20) & 1023]}"
            f"{pairs[(n >> 10) & 1023]}{pairs[n & 1023]}"
        )
    return out


@functools.lru_cache(maxsize=8192)
def trace_id_for(group_key: str) -> str:
    """The agent-replay trace id of a group (the same on every rebuild)."""
    return derived_ids("trc", [group_key])[0]


_SECONDS: dict[int, str] = {}


def iso(ns: int | None) -> str | None:
    """Unix nanoseconds as canonical UTC ISO-8601 (``None`` for 0 or missing): milliseconds
    always, microseconds when they aren't zero (as ``trace.base.canonical_time`` renders)."""
    if not ns or ns < 0:
        return None
    seconds, rest = divmod(ns, 1_000_000_000)
    stem = _SECONDS.get(seconds)
    if stem is None:
        try:
            stem = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        except (OverflowError, OSError, ValueError):
            return None
        if len(_SECONDS) > 4096:  # spans of a batch share seconds; keep the cache small
            _SECONDS.clear()
        _SECONDS[seconds] = stem
    micros = rest // 1000
    if micros % 1000:
        return f"{stem}.{micros:06d}Z"
    return f"{stem}.{micros // 1000:03d}Z"


@dataclass
class Node:
    """A step under construction, with what ordering and merging need to know about it."""

    key: str
    start_ns: int
    end_ns: int
    step: dict[str, Any]
    parent: str | None = None
    caused_by: str | None = None
    fallback_cause: str | None = None
    """Linked when ``caused_by`` names no step (a tool result whose decision never came)."""
    order: int = 0
    response_id: str | None = None
    from_span: bool = False
    harness_matched: bool = False
    """A harness record (api_response, tool_call) was merged in: the next one must look
    elsewhere."""


def make_step(
    step_type: str,
    name: str | None,
    start_ns: int,
    end_ns: int,
    **fields: Any,
) -> dict[str, Any]:
    step: dict[str, Any] = {
        "step_type": step_type,
        "name": name,
        "started_at": iso(start_ns),
        "ended_at": iso(end_ns) if end_ns else None,
        "duration_ms": (end_ns - start_ns) / 1e6 if start_ns and end_ns >= start_ns else None,
        "metadata": {},
    }
    step.update({k: v for k, v in fields.items() if v is not None})
    return step


class Assembly:
    """The nodes of one group while spans and log records are folded in."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.by_span: dict[tuple[str, str], str] = {}
        self.by_response: dict[str, str] = {}
        self.children: dict[str, list[str]] = defaultdict(list)
        self.cost_usd = 0.0
        self.has_cost = False
        self.prompts: list[str] = []
        self.answers: list[tuple[int, str]] = []
        self.approval_mode: str | None = None
        self.by_tool_call: dict[str, str] = {}
        """A tool span's step by the call id it carries (``gen_ai.tool.call.id``)."""
        self.aliases: dict[str, str] = {}
        """The key a log record would have given its step -> the span step it merged into."""
        self.current_call: str | None = None
        """The model call a harness's later records complete (Codex CLI: its api_request,
        then the response's tokens, then the tool calls it asked for)."""

    def add(self, node: Node) -> Node:
        if node.key in self.nodes:  # the same item twice (another instrumentation's echo)
            return self.nodes[node.key]
        self.nodes[node.key] = node
        if node.response_id:
            self.by_response.setdefault(node.response_id, node.key)
        if node.from_span and node.step["step_type"] == "tool_call":
            attrs = node.step["metadata"].get("attributes") or {}
            call_id = attrs.get("gen_ai.tool.call.id") or attrs.get("tool_use_id")
            if isinstance(call_id, str) and call_id:
                self.by_tool_call.setdefault(call_id, node.key)
        return node

    def resolve(self, key: str | None) -> str | None:
        """A node key, through the aliases of records merged into span steps."""
        return self.aliases.get(key, key) if key is not None else None

    def span_step(self, *, response_id: Any = None, tool_call_id: Any = None) -> Node | None:
        """The span step a harness record describes, by the response (request) id or tool call
        id both carry, if it is not matched yet."""
        key = None
        if response_id:
            key = self.by_response.get(str(response_id))
        elif tool_call_id:
            key = self.by_tool_call.get(str(tool_call_id))
        node = self.nodes.get(key) if key else None
        if node is None or not node.from_span or node.harness_matched:
            return None
        return node

    # --- matching a harness record to a span step ---

    def linked(self, item: dict[str, Any]) -> Node | None:
        if item.get("trace_id") and item.get("span_id"):
            key = self.by_span.get((item["trace_id"], item["span_id"]))
            return self.nodes.get(key) if key else None
        return None

    def match(
        self, item: dict[str, Any], step_type: str, t: int, name: str | None, model: str | None
    ) -> Node | None:
        """The span step a harness record describes: the linked span (or, for a tool, the
        tool span under it), else the unmatched span step of that type and name/model whose
        time window holds the record's time."""
        linked = self.linked(item)
        if linked is not None:
            if linked.step["step_type"] == step_type and not linked.harness_matched:
                return linked
            for child_key in self.children.get(linked.key, ()):
                child = self.nodes[child_key]
                if (
                    child.step["step_type"] == step_type
                    and not child.harness_matched
                    and (name is None or child.step.get("name") == name)
                ):
                    return child
        best: tuple[int, str] | None = None
        chosen = None
        for node in self.nodes.values():
            if not node.from_span or node.harness_matched or node.step["step_type"] != step_type:
                continue
            if name is not None and node.step.get("name") != name:
                continue
            if model is not None and node.step.get("model") not in (None, model):
                continue
            if not node.start_ns or not (node.start_ns <= t <= node.end_ns + MATCH_SLACK_NS):
                continue
            rank = (abs(t - node.end_ns), node.key)
            if best is None or rank < best:
                best, chosen = rank, node
        return chosen


def merge(node: Node, **fields: Any) -> None:
    """Fill what the step doesn't have yet (the span's own values win)."""
    step = node.step
    metadata = fields.pop("metadata", None) or {}
    for key, value in fields.items():
        if value is not None and step.get(key) is None:
            step[key] = value
    for key, value in metadata.items():
        step["metadata"].setdefault(key, value)


# --- ordering and the trace -------------------------------------------------------------------


def order_nodes(nodes: dict[str, Node]) -> list[Node]:
    """Nodes in start-time order, each after its parent (ties: ``order``, then key)."""
    children: dict[str, list[Node]] = defaultdict(list)
    heap: list[tuple[int, int, str]] = []
    for node in nodes.values():
        if node.parent is not None and node.parent in nodes and node.parent != node.key:
            children[node.parent].append(node)
        else:
            node.parent = None
            heap.append((node.start_ns, node.order, node.key))
    heapq.heapify(heap)
    out: list[Node] = []
    emitted: set[str] = set()
    while heap:
        _, _, key = heapq.heappop(heap)
        node = nodes[key]
        out.append(node)
        emitted.add(key)
        for child in children.get(key, ()):
            heapq.heappush(heap, (child.start_ns, child.order, child.key))
    if len(out) < len(nodes):  # a parent cycle (malformed ids): keep them, unparented
        for node in sorted(
            (n for n in nodes.values() if n.key not in emitted),
            key=lambda n: (n.start_ns, n.order, n.key),
        ):
            node.parent = None
            out.append(node)
    return out


# --- nodes of harness log records (shared by logs, logs_codex, logs_gemini) ----------------


def ms_ns(value: Any) -> int:
    """A producer's duration in milliseconds (number or text) in nanoseconds; 0 when unknown."""
    number = as_float(value)
    return int(number * 1e6) if number is not None and number >= 0 else 0


def user_prompt(asm: Assembly, item: dict[str, Any], t: int, prompt: Any, prompt_id: Any) -> None:
    """A harness's user prompt: a ``user_prompt`` step, named as the hook and the importers
    name it (the first is the trace's input)."""
    asm.prompts.append(prompt) if isinstance(prompt, str) else None
    metadata = {"role": "user", "prompt_id": prompt_id} if prompt_id else {"role": "user"}
    asm.add(
        Node(
            f"log:{item['key']}",
            t,
            t,
            make_step("thought", vocabulary.PROMPT_STEP, t, t, input=prompt, metadata=metadata),
        )
    )


def permission_node(
    key: str,
    t: int,
    tool: str,
    options: tuple[str, ...],
    source: str,
    decided_by: str,
    metadata: dict[str, Any],
    caused_by: str | None,
) -> Node:
    """A harness's permission decision on a tool call (the last option is the one chosen)."""
    return Node(
        key,
        t,
        t,
        make_step(
            "decision",
            f"permission: {tool}",
            t,
            t,
            decision={
                "options": [{"option": o} for o in dict.fromkeys(options)],
                "chosen": options[-1],
                "rationale": f"source: {source}" if source else None,
                "decided_by": decided_by,
            },
            metadata={**metadata, "source": source or None},
        ),
        caused_by=caused_by,
        order=-1,
    )
