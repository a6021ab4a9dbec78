"""Spans -> steps: the step type, name, model, tokens, input/output, error and metadata of a
span in any dialect (GenAI conventions current and deprecated, OpenInference, OpenLLMetry), the
agent root of a span tree, and the tool calls an LLM step asked for.

Pure functions over the staged span dicts; no I/O.
"""

from __future__ import annotations

import operator
import re
from collections import defaultdict
from typing import Any

from agent_replay.services.otel import semconv
from agent_replay.services.otel.nodes import Assembly, Node, iso
from agent_replay.services.otel.semconv import first, parse_json

_STATUS_ERROR = 2

_IS_INDEXED_MESSAGE_KEY = operator.methodcaller(
    "startswith", ("gen_ai.prompt.", "gen_ai.completion.")
)
_INDEXED_MESSAGE = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(\w+)$")
_DROPPED_KEYS = re.compile(
    r"^(llm\.(input|output)_messages\.|embedding\.embeddings\.\d+\.embedding\.vector)"
)
INPUT_KEYS = ("gen_ai.input.messages", "input.value", "traceloop.entity.input")
OUTPUT_KEYS = ("gen_ai.output.messages", "output.value", "traceloop.entity.output")
# The call's own arguments before any schema: OpenInference puts the tool's parameter JSON
# schema in ``tool.parameters`` and the arguments of this call in ``input.value``.
_TOOLINPUT_KEYS: tuple[str, ...] = ("gen_ai.tool.call.arguments", *INPUT_KEYS, "tool.parameters")
_TOOLOUTPUT_KEYS: tuple[str, ...] = ("gen_ai.tool.call.result", *OUTPUT_KEYS)


def _indexed_messages(attrs: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """OpenLLMetry's older flat form: ``gen_ai.prompt.0.role``, ``gen_ai.prompt.0.content``."""
    found: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in attrs.items():
        match = _INDEXED_MESSAGE.match(key)
        if match and match.group(1) == kind:
            found[int(match.group(2))][match.group(3)] = parse_json(value)
    return [found[i] for i in sorted(found)]


def span_error(span: dict[str, Any]) -> str | None:
    status = span.get("status") or {}
    if status.get("code") != _STATUS_ERROR:
        return None
    for event in span.get("events") or ():
        if event.get("name") == "exception":
            message = first(event.get("attributes") or {}, "exception.message", "exception.type")
            if message:
                return str(message)
    return status.get("message") or str(span["attributes"].get("error.type") or "error")


def span_node(span: dict[str, Any]) -> Node:
    """A span as a step: type, name, model, tokens, input/output, error and metadata."""
    attrs = span["attributes"]
    step_type = semconv.step_type(span)
    consumed: set[str] = set()
    if step_type == "tool_call":
        name = first(attrs, "gen_ai.tool.name", "tool.name", "traceloop.entity.name")
        input_keys, output_keys = _TOOLINPUT_KEYS, _TOOLOUTPUT_KEYS
    else:
        name = None
        input_keys, output_keys = INPUT_KEYS, OUTPUT_KEYS
    input_value = output_value = None
    for key in input_keys:  # the first non-empty one, decoded when it is JSON text
        value = attrs.get(key)
        if value is not None and value != "":
            consumed.add(key)
            input_value = parse_json(value)
            break
    for key in output_keys:
        value = attrs.get(key)
        if value is not None and value != "":
            consumed.add(key)
            output_value = parse_json(value)
            break
    if input_value is None and output_value is None and any(map(_IS_INDEXED_MESSAGE_KEY, attrs)):
        prompts = _indexed_messages(attrs, "prompt")
        completions = _indexed_messages(attrs, "completion")
        consumed.update(k for k in attrs if _INDEXED_MESSAGE.match(k))
        input_value, output_value = prompts or None, completions or None
    events = span.get("events")
    if events:
        event_inputs, event_outputs = semconv.message_events(events)
        if input_value is None and event_inputs:
            input_value = event_inputs
        if output_value is None and event_outputs:
            output_value = event_outputs

    tokens, usage = semconv.usage(attrs)
    response_id = attrs.get("gen_ai.response.id")
    if response_id == "":
        response_id = None
    if response_id is None and isinstance(output_value, dict) and step_type == "llm_call":
        response_id = output_value.get("id") if isinstance(output_value.get("id"), str) else None
    start, end = span.get("start_ns") or 0, span.get("end_ns") or 0
    otel: dict[str, Any] = {"trace_id": span["trace_id"], "span_id": span["span_id"]}
    if span.get("parent_span_id"):
        otel["parent_span_id"] = span["parent_span_id"]
    otel["span_name"] = span.get("name")
    if span.get("scope"):
        otel["scope"] = span["scope"]
    metadata: dict[str, Any] = {"otel": otel}
    provider = semconv.provider(attrs)
    if provider:
        metadata["provider"] = provider
    if response_id:
        metadata["response_id"] = str(response_id)
    if usage:
        metadata["usage"] = usage
    # OpenInference repeats input.value/output.value as flat message attributes, and
    # embedding vectors are numbers nobody reads in a trace: keep neither twice.
    if "input.value" in consumed or "output.value" in consumed:
        rest = {
            k: v
            for k, v in attrs.items()
            if k not in consumed
            and not k.endswith(".embedding.vector")
            and not _DROPPED_KEYS.match(k)
        }
    else:
        rest = {
            k: v
            for k, v in attrs.items()
            if k not in consumed and not k.endswith(".embedding.vector")
        }
    if rest:
        metadata["attributes"] = rest
    if events:
        others = [
            e["name"]
            for e in events
            if not str(e.get("name", "")).startswith("gen_ai.") and e.get("name") != "exception"
        ]
        if others:
            otel["events"] = others[:50]
    # As ``make_step`` builds it (the fields that are set, in this order).
    step: dict[str, Any] = {
        "step_type": step_type,
        "name": str(name) if name is not None else (span.get("name") or step_type),
        "started_at": iso(start),
        "ended_at": iso(end) if end else None,
        "duration_ms": (end - start) / 1e6 if start and end >= start else None,
        "metadata": metadata,
    }
    if input_value is not None:
        step["input"] = input_value
    if output_value is not None:
        step["output"] = output_value
    error = span_error(span)
    if error is not None:
        step["error"] = error
    if tokens is not None:
        step["tokens_used"] = tokens
    model = semconv.model(attrs)
    if model is not None:
        step["model"] = model
    return Node(
        key=f"span:{span['trace_id']}:{span['span_id']}",
        start_ns=start,
        end_ns=end,
        step=step,
        response_id=str(response_id) if response_id else None,
        from_span=True,
    )


def requested_tool_calls(output: Any, depth: int = 0) -> list[str]:
    """The tool-call ids an LLM output asked for (GenAI ``tool_call`` parts, OpenAI-style
    ``tool_calls``), so each tool step can point at the call that caused it."""
    found: list[str] = []
    if depth > 6:
        return found
    if isinstance(output, dict):
        if output.get("type") in ("tool_call", "function_call", "function") and isinstance(
            output.get("id"), str
        ):
            found.append(output["id"])
        for key in ("parts", "tool_calls", "choices", "message", "content", "output"):
            if key in output:
                found.extend(requested_tool_calls(output[key], depth + 1))
    elif isinstance(output, list):
        for item in output[:200]:
            found.extend(requested_tool_calls(item, depth + 1))
    return found


def top_agent_span(spans: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The outermost agent span of one OTel trace's spans (the one with no agent ancestor)."""
    by_id = {s["span_id"]: s for s in spans}
    best: tuple[int, int, str] | None = None
    chosen = None
    for span in spans:
        if not semconv.is_agent_span(span):
            continue
        depth, parent, agent_above = 0, span.get("parent_span_id"), False
        seen = {span["span_id"]}
        while parent and parent in by_id and parent not in seen:
            seen.add(parent)
            if semconv.is_agent_span(by_id[parent]):
                agent_above = True
                break
            depth += 1
            parent = by_id[parent].get("parent_span_id")
        if agent_above:
            continue
        rank = (depth, span.get("start_ns") or 0, span["span_id"])
        if best is None or rank < best:
            best, chosen = rank, span
    return chosen


def link_tool_calls(asm: Assembly) -> None:
    """A tool step is caused by the LLM step whose output requested its call id."""
    requested: dict[str, Node] = {}
    llm_nodes = [n for n in asm.nodes.values() if n.step["step_type"] == "llm_call"]
    for node in sorted(llm_nodes, key=lambda n: (n.start_ns, n.key)):  # the earliest wins
        for call_id in requested_tool_calls(node.step.get("output")):
            requested.setdefault(call_id, node)
    if not requested:
        return
    for node in asm.nodes.values():
        if node.step["step_type"] != "tool_call" or node.caused_by is not None:
            continue
        attrs = node.step["metadata"].get("attributes") or {}
        call_id = first(attrs, "gen_ai.tool.call.id", "tool_call.id")
        source = requested.get(str(call_id)) if call_id is not None else None
        if source is not None and source.start_ns <= node.start_ns:
            node.caused_by = source.key


def fold_phases(asm: Assembly) -> None:
    """A span naming a phase of its parent (``claude_code.tool.execution`` under
    ``claude_code.tool``: waiting for permission, running) is not a step of its own: it goes
    in the parent step's ``metadata.otel.phases`` (name, duration, error), and a failed phase
    fails a step that has no error yet. Its children move up to the parent."""
    for key in list(asm.nodes):
        node = asm.nodes[key]
        parent = asm.nodes.get(node.parent) if node.parent else None
        if parent is None or not node.from_span or not parent.from_span:
            continue
        name = node.step["metadata"]["otel"].get("span_name") or ""
        parent_name = parent.step["metadata"]["otel"].get("span_name") or ""
        if not parent_name or not str(name).startswith(f"{parent_name}."):
            continue
        phase = {
            "name": name,
            "duration_ms": node.step.get("duration_ms"),
            **({"error": node.step["error"]} if node.step.get("error") else {}),
        }
        parent.step["metadata"]["otel"].setdefault("phases", []).append(phase)
        if node.step.get("error") and not parent.step.get("error"):
            parent.step["error"] = node.step["error"]
        for child in asm.nodes.values():
            if child.parent == key:
                child.parent = parent.key
        asm.aliases[key] = parent.key
        del asm.nodes[key]
