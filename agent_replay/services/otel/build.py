"""Building one agent-replay trace from everything staged for it: spans and log records.

A *group* is what becomes one trace (see ``otel_trace_group`` and the writer): the spans of
one OTel trace, or a harness session (Claude Code or Gemini CLI log events correlated by
``session.id``, plus the Gemini CLI spans that carry that session but no agent root). The
build is a pure function of the group's items, so rebuilding after more items arrive (in any
order, any number of times) always gives the same trace:

- the agent root span (``invoke_agent``/``invoke_workflow``, OpenInference ``AGENT``/``CHAIN``,
  OpenLLMetry ``agent``/``workflow``) becomes the trace; every other span becomes a step whose
  ``parent_step`` is its parent span's step;
- steps are ordered by start time with parents always before their children (a child that
  claims to start before its parent, through clock skew, waits for it);
- harness log events become steps, or are merged into the span step they describe (Gemini CLI
  reports each model call both as a span and as ``api_response``/operation-details records);
- tokens of one LLM call reported twice (the same ``gen_ai.response.id`` from a framework span
  and a provider span, or a span and its log record) are counted once.

Ids are derived from the group and item keys, so a rebuilt trace keeps its trace and step ids.
Pure functions over plain dicts; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.otel import semconv
from agent_replay.services.otel.logs import apply_logs
from agent_replay.services.otel.nodes import (
    Assembly,
    Node,
    derived_ids,
    iso,
    make_step,
    order_nodes,
    trace_id_for,
)
from agent_replay.services.otel.responses import duplicate
from agent_replay.services.otel.semconv import first, parse_json
from agent_replay.services.otel.spans import (
    INPUT_KEYS,
    OUTPUT_KEYS,
    fold_phases,
    link_tool_calls,
    span_error,
    span_node,
    top_agent_span,
)

__all__ = ["Group", "build_trace", "otel_trace_group", "trace_id_for"]

_MAX_LISTED_TRACE_IDS = 50
CLAUDE_SERVICE = "claude-code"


@dataclass
class Group:
    """Everything staged for one group."""

    key: str
    spans: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)


def otel_trace_group(trace_id: str, spans: list[dict[str, Any]]) -> str:
    """The group the spans of one OTel trace are built into.

    ``t:<trace id>``: one trace per OTel trace, whether it has an agent root or not (a plain
    LLM-client span is a trace of its own). The exception is a harness that declares its agent
    and session on every span but starts a new OTel trace for each model call and tool batch
    (Gemini CLI): with no agent root, a top span carrying both an agent name and a session id
    joins that session's group, ``s:<service>:<session>``, which its log events join too.
    """
    fallback = f"t:{trace_id}"
    if spans and semconv.is_codex(spans[0].get("resource")):
        # Codex CLI: its tracing spans belong to the conversation its log events describe.
        conversation = next(filter(None, map(semconv.codex_conversation, spans)), None)
        if conversation is not None:
            service = (spans[0].get("resource") or {}).get("service.name")
            return semconv.session_group(service, conversation)
        return fallback
    if spans and (spans[0].get("resource") or {}).get("service.name") == CLAUDE_SERVICE:
        # Claude Code starts an OTel trace per prompt (``claude_code.interaction``): its turns
        # join the session's group, which its log events join too (one trace per session,
        # whether traces are exported or only logs).
        session = next(
            (
                semconv.session_id(s["attributes"])
                for s in spans
                if semconv.session_id(s["attributes"])
            ),
            None,
        )
        if session is not None:
            return semconv.session_group(CLAUDE_SERVICE, session)
    if not spans or any(semconv.is_agent_span(s) for s in spans):
        return fallback
    ids = {s["span_id"] for s in spans}
    tops = [s for s in spans if not s.get("parent_span_id") or s["parent_span_id"] not in ids]
    top = min(tops or spans, key=lambda s: (s.get("start_ns") or 0, s["span_id"]))
    agent = semconv.agent_name(top["attributes"])
    session = semconv.session_id(top["attributes"], top.get("resource"))
    if agent and session:
        return semconv.session_group((top.get("resource") or {}).get("service.name"), session)
    return fallback


def build_trace(group: Group) -> dict[str, Any] | None:
    """The trace (the format's JSON object, with its derived id) built from a group's items;
    ``None`` when there is nothing to show."""
    if not group.spans and not group.logs:
        return None
    codex = [s for s in group.spans if semconv.is_codex(s.get("resource"))]
    if codex:
        if not group.logs:
            return None  # Codex's housekeeping (auth, plugins, ...): no conversation to show
        group = Group(group.key, [s for s in group.spans if s not in codex], group.logs)
    trace_id = trace_id_for(group.key)
    root = top_agent_span(group.spans) if group.key.startswith("t:") else None
    asm = Assembly()
    span_ids = {(s["trace_id"], s["span_id"]) for s in group.spans}
    missing_parent = False
    root_key = f"span:{root['trace_id']}:{root['span_id']}" if root else None
    for span in group.spans:
        if span is root:
            continue
        node = asm.add(span_node(span))
        asm.by_span[(span["trace_id"], span["span_id"])] = node.key
        parent = span.get("parent_span_id")
        if parent:
            if (span["trace_id"], parent) not in span_ids:
                missing_parent = True
            else:
                parent_key = f"span:{span['trace_id']}:{parent}"
                node.parent = None if parent_key == root_key else parent_key
    for node in asm.nodes.values():
        if node.parent is not None:
            asm.children[node.parent].append(node.key)
    apply_logs(asm, group.logs)
    fold_phases(asm)
    if group.key.startswith(f"s:{CLAUDE_SERVICE}:"):
        _drop_turn_spans(asm)
    link_tool_calls(asm)
    if group.key.startswith("s:"):
        _link_turns(asm)

    ordered = order_nodes(asm.nodes)
    numbers = {node.key: index for index, node in enumerate(ordered, start=1)}
    step_ids = derived_ids("stp", [f"{trace_id}:{node.key}" for node in ordered])
    counted: dict[str, int] = {}
    steps = []
    for number, node in enumerate(ordered, start=1):
        step = node.step
        step["id"] = step_ids[number - 1]
        step["step_number"] = number
        if node.parent is not None:
            step["parent_step"] = numbers.get(node.parent)
        cause = numbers.get(asm.resolve(node.caused_by) or "")
        if cause is None and node.fallback_cause:
            cause = numbers.get(asm.resolve(node.fallback_cause) or "")
        if cause is not None and cause < number:
            step["caused_by_step"] = cause
        if node.response_id and step.get("tokens_used") is not None:
            if node.response_id in counted:  # the same call seen twice: count it once
                step["metadata"]["tokens_counted_in_step"] = counted[node.response_id]
                duplicate(step, {"trace_id": trace_id, "step_number": counted[node.response_id]})
            else:
                counted[node.response_id] = number
        steps.append(step)
    trace = _trace(group, trace_id, root, ordered, steps, asm, missing_parent)
    if codex:
        _fold_codex_spans(trace, codex)
    return trace


def _link_turns(asm: Assembly) -> None:
    """A harness session's turns, linked and ended as every other capture path does
    (``vocabulary``): a model call is caused by the tool call it answers (the turn's newest
    since its previous model call), a permission decision by the model call that asked for the
    tool, and a turn whose last model call answered in text, with no tool call after it, ends
    in a ``final_answer`` step caused by that call. Gemini CLI's routing calls (``role:
    utility_router``) pick a model; they answer nothing."""
    tool: Node | None = None
    reply: Node | None = None
    answers: list[Node] = []

    def end_turn() -> None:
        text = reply.step.get("output") if reply is not None else None
        if reply is None or not isinstance(text, str) or not text.strip():
            return
        at = reply.end_ns or reply.start_ns
        step = make_step("output", vocabulary.ANSWER_STEP, at, at, output=text.strip())
        key = f"{reply.key}:answer"
        answers.append(Node(key, at, at, step, parent=reply.parent, caused_by=reply.key, order=1))

    for node in order_nodes(asm.nodes):
        kind = node.step["step_type"]
        if kind == "thought" and node.step.get("name") == vocabulary.PROMPT_STEP:
            end_turn()
            tool = reply = None
        elif kind == "tool_call":
            tool, reply = node, None
        elif kind == "decision" and reply is not None and node.caused_by is None:
            node.caused_by = reply.key  # a permission asked for a call the reply made
        elif kind == "llm_call" and node.step["metadata"].get("role") != "utility_router":
            if tool is not None and node.caused_by is None and node.fallback_cause is None:
                node.caused_by = tool.key
            tool, reply = None, node
    end_turn()
    for node in answers:
        asm.add(node)


def _drop_turn_spans(asm: Assembly) -> None:
    """A Claude Code session's ``claude_code.interaction`` spans (one per prompt) are its
    turns, which the prompt steps already mark: not steps of their own; their calls move up."""
    for key in [k for k, n in asm.nodes.items() if n.from_span and semconv.is_agent_span_step(n)]:
        node = asm.nodes.pop(key)
        for child in asm.nodes.values():
            if child.parent == key:
                child.parent = node.parent


def _fold_codex_spans(trace: dict[str, Any], spans: list[dict[str, Any]]) -> None:
    """Codex CLI's internal spans (``session_task.turn``, ``handle_responses``, ``fs.read_file``,
    ...) describe the program, not the agent's steps: they are counted by name in
    ``metadata.otel.internal_spans``, the trace spans their time, and it is Codex's trace."""
    counts: dict[str, int] = {}
    for span in spans:
        counts[str(span.get("name"))] = counts.get(str(span.get("name")), 0) + 1
    top = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:_MAX_LISTED_TRACE_IDS])
    otel = trace["metadata"]["otel"]
    otel["internal_spans"] = {"count": len(spans), "by_name": top}
    otel["spans"] = len(spans)
    otel["trace_ids"] = sorted({s["trace_id"] for s in spans} | set(otel.get("trace_ids", [])))[
        :_MAX_LISTED_TRACE_IDS
    ]
    trace["agent_name"] = semconv.CODEX_AGENT
    version = (spans[0].get("resource") or {}).get("service.version")
    if version and not trace.get("agent_version"):
        trace["agent_version"] = str(version)


def _trace(
    group: Group,
    trace_id: str,
    root: dict[str, Any] | None,
    ordered: list[Node],
    steps: list[dict[str, Any]],
    asm: Assembly,
    missing_parent: bool,
) -> dict[str, Any]:
    items = [*group.spans, *group.logs]
    resource: dict[str, Any] = next((i["resource"] for i in items if i.get("resource")), {})
    service = resource.get("service.name")
    agent = session = None
    if root is not None:
        agent = semconv.agent_name(root["attributes"]) or _root_name(root, service)
        session = semconv.session_id(root["attributes"], root.get("resource"))
    for span in group.spans:
        agent = agent or semconv.agent_name(span["attributes"])
        session = session or semconv.session_id(span["attributes"], span.get("resource"))
    if session is None and group.key.startswith("s:"):
        session = group.key.split(":", 2)[2]
    if root is not None:
        start_ns, end_ns = root.get("start_ns") or 0, root.get("end_ns") or 0
    else:
        start_ns = min((n.start_ns for n in ordered if n.start_ns), default=0)
        end_ns = max((n.end_ns or n.start_ns for n in ordered if n.end_ns or n.start_ns), default=0)

    top = [s for s, n in zip(steps, ordered, strict=True) if n.parent is None]
    llm_steps = [s for s in steps if s["step_type"] == "llm_call"]
    status, error = "completed", None
    if root is not None:
        error = span_error(root)
        status = "failed" if error else "completed"
    elif group.key.startswith("s:"):
        if llm_steps and llm_steps[-1].get("error"):
            status, error = "failed", llm_steps[-1]["error"]
    elif missing_parent:
        status = "running"
    else:
        failed = next((s for s in top if s.get("error")), None)
        if failed is not None:
            status, error = "failed", failed["error"]

    trace_input: Any = None
    trace_output: Any = None
    if root is not None:
        attrs = root["attributes"]
        raw_in = parse_json(first(attrs, *INPUT_KEYS))
        raw_out = parse_json(first(attrs, *OUTPUT_KEYS))
        trace_input = semconv.first_user_text(raw_in) or raw_in
        trace_output = semconv.last_assistant_text(raw_out) or raw_out
    if trace_input is None and asm.prompts:
        trace_input = asm.prompts[0]
    if trace_input is None and len(top) == 1 and top[0].get("input") is not None:
        trace_input = semconv.first_user_text(top[0]["input"]) or top[0]["input"]
    if trace_input is None:
        trace_input = next(
            (t for s in llm_steps if (t := semconv.first_user_text(s.get("input")))), None
        )
    if trace_output is None and asm.answers:
        trace_output = max(asm.answers, key=lambda a: a[0])[1]
    if trace_output is None and root is not None:
        trace_output = _own_answer(trace_input, llm_steps)
    if trace_output is None:
        for s in reversed(llm_steps):
            text = semconv.last_assistant_text(s.get("output"))
            if text:
                trace_output = text
                break
    if trace_output is None and len(top) == 1 and top[0].get("output") is not None:
        trace_output = top[0]["output"]

    otel_ids = sorted(
        {s["trace_id"] for s in group.spans}
        | {r["trace_id"] for r in group.logs if r.get("trace_id")}
    )
    otel: dict[str, Any] = {
        "group": group.key,
        "spans": len(group.spans),
        "log_records": len(group.logs),
    }
    if service:
        otel["service"] = service
    if otel_ids:
        otel["trace_ids"] = otel_ids[:_MAX_LISTED_TRACE_IDS]
    if root is not None:
        otel["root_span_id"] = root["span_id"]
        otel["root_span_name"] = root.get("name")
    metadata: dict[str, Any] = {"otel": otel}
    if resource:
        metadata["resource"] = resource
    if root is not None:
        attrs = root["attributes"]
        for key, name in (
            ("gen_ai.agent.id", "agent_id"),
            ("gen_ai.agent.description", "agent_description"),
        ):
            if attrs.get(key):
                metadata[name] = attrs[key]
        provider = semconv.provider(attrs)
        if provider:
            metadata["provider"] = provider
        if root.get("events"):
            metadata["otel"]["root_events"] = [e["name"] for e in root["events"]][:50]
    elif not group.key.startswith("s:"):
        metadata["otel"]["synthetic"] = True  # no agent root: one trace per OTel trace id

    version = None
    if root is not None:
        version = first(root["attributes"], "gen_ai.agent.version")
    version = version or resource.get("service.version")
    return {
        "id": trace_id,
        "agent_name": str(agent or service or "otel"),
        "agent_version": str(version) if version is not None else None,
        "status": status,
        "input": trace_input,
        "output": trace_output,
        "started_at": iso(start_ns),
        "ended_at": iso(end_ns) if end_ns and status != "running" else None,
        "error": error,
        "session_id": session,
        "total_cost_usd": round(asm.cost_usd, 10) if asm.has_cost else None,
        "metadata": metadata,
        "steps": steps,
    }


def _root_name(root: dict[str, Any], service: Any) -> str | None:
    """An agent root's name when no attribute gives it: its span name without the GenAI
    operation (``invoke_workflow weather_workflow`` -> ``weather_workflow``), or, for a
    harness's internal span name (``claude_code.interaction``), the service it came from."""
    name = root.get("name")
    if not isinstance(name, str) or not name:
        return str(service) if service else None
    op, _, rest = name.partition(" ")
    if rest and op == semconv.operation(root["attributes"]):
        return rest
    if " " not in name and "." in name and service:
        return str(service)
    return name


def _own_answer(trace_input: Any, llm_steps: list[dict[str, Any]]) -> Any:
    """The final answer of the run the trace's input started, for a root span without its own
    output: the last model call answering in the same conversation (a later call in the same
    OTel trace that started from another prompt is not this run's answer)."""
    if not isinstance(trace_input, str):
        return None
    for step in reversed(llm_steps):
        if semconv.first_user_text(step.get("input")) != trace_input:
            continue
        text = semconv.last_assistant_text(step.get("output"))
        if text:
            return text
    return None
