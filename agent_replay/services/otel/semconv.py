"""Reading the attribute dialects: OpenTelemetry GenAI semantic conventions (current and
deprecated forms), OpenInference, OpenLLMetry (Traceloop), and the Claude Code / Gemini CLI
log events. GenAI attributes win; the others are read when GenAI's are absent.

Pure functions over plain dicts (the staged spans and log records); no I/O.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

Attrs = dict[str, Any]

# --- values ---------------------------------------------------------------------------------


def first(attrs: Attrs, *keys: str) -> Any:
    """The value of the first key present with a non-empty value."""
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def as_int(value: Any) -> int | None:
    """An integer from an int, a float or a numeric string (OTLP/JSON sends int64 as text)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value == value and abs(value) < 2**63 else None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                return as_int(float(text))
            except ValueError:
                return None
    return None


def as_float(value: Any) -> float | None:
    """A float from a number or a numeric string."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def as_bool(value: Any) -> bool | None:
    """A boolean from a bool or ``"true"``/``"false"`` text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def parse_json(value: Any) -> Any:
    """A JSON-encoded attribute (``gen_ai.input.messages`` is text on the wire) decoded; any
    other value, or text that isn't JSON, as given."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[") or text in ("null", "true", "false"):
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError:
                return value
    return value


# --- spans ----------------------------------------------------------------------------------

# gen_ai.operation.name -> step type. Gemini CLI names its spans' operations llm_call/tool_call.
_OPERATIONS = {
    "chat": "llm_call",
    "generate_content": "llm_call",
    "text_completion": "llm_call",
    "completion": "llm_call",
    "llm_call": "llm_call",
    "embeddings": "retrieval",
    "embedding": "retrieval",
    "retrieval": "retrieval",
    "retrieve": "retrieval",
    "rerank": "retrieval",
    "execute_tool": "tool_call",
    "tool_call": "tool_call",
}
AGENT_OPERATIONS = ("invoke_agent", "invoke_workflow")
_OPENINFERENCE = {
    "LLM": "llm_call",
    "EMBEDDING": "retrieval",
    "RETRIEVER": "retrieval",
    "RERANKER": "retrieval",
    "TOOL": "tool_call",
    "GUARDRAIL": "guard_check",
}
_TRACELOOP_REQUEST = {
    "chat": "llm_call",
    "completion": "llm_call",
    "embedding": "retrieval",
    "rerank": "retrieval",
}


def operation(attrs: Attrs) -> str | None:
    """``gen_ai.operation.name``, lowercased."""
    value = attrs.get("gen_ai.operation.name")
    return value.strip().lower() if isinstance(value, str) and value.strip() else None


def is_agent_span(span: dict[str, Any]) -> bool:
    """Whether a span stands for an agent or workflow run (the root of a trace).

    GenAI ``invoke_agent``/``invoke_workflow``; else OpenInference ``AGENT``/``CHAIN``; else
    OpenLLMetry ``traceloop.span.kind`` ``agent``/``workflow``.
    """
    attrs = span["attributes"]
    op = operation(attrs)
    if op is not None:
        return op in AGENT_OPERATIONS
    kind = attrs.get("openinference.span.kind")
    if isinstance(kind, str):
        return kind.upper() in ("AGENT", "CHAIN")
    kind = attrs.get("traceloop.span.kind")
    if isinstance(kind, str):
        return kind.lower() in ("agent", "workflow")
    return False


def is_agent_span_step(node: Any) -> bool:
    """Whether a span step stands for an agent run (``invoke_agent``/``invoke_workflow``)."""
    attrs = node.step["metadata"].get("attributes") or {}
    return operation(attrs) in AGENT_OPERATIONS


def step_type(span: dict[str, Any]) -> str:
    """The step type of a (non-root) span; ``thought`` for anything that isn't a model call, a
    tool call, a retrieval or a guardrail (chains, tasks, nested agents, plain spans)."""
    attrs = span["attributes"]
    op = operation(attrs)
    if op is not None:
        return _OPERATIONS.get(op, "thought")
    kind = attrs.get("openinference.span.kind")
    if isinstance(kind, str):
        return _OPENINFERENCE.get(kind.upper(), "thought")
    kind = attrs.get("traceloop.span.kind")
    if isinstance(kind, str):
        return "tool_call" if kind.lower() == "tool" else "thought"
    request_type = attrs.get("llm.request.type")
    if isinstance(request_type, str):
        return _TRACELOOP_REQUEST.get(request_type.lower(), "llm_call")
    if first(attrs, "gen_ai.request.model", "gen_ai.usage.input_tokens", "llm.model_name"):
        return "llm_call"
    return "thought"


def agent_name(attrs: Attrs) -> str | None:
    """The agent a span declares (GenAI, OpenInference, or an OpenLLMetry agent/workflow)."""
    name = first(attrs, "gen_ai.agent.name", "agent.name", "gen_ai.workflow.name")
    if name is None and str(attrs.get("traceloop.span.kind", "")).lower() in ("agent", "workflow"):
        name = first(attrs, "traceloop.entity.name", "traceloop.workflow.name")
    return str(name) if name is not None else None


def session_id(attrs: Attrs, resource: Attrs | None = None) -> str | None:
    """The conversation/session a span or record belongs to, in any dialect."""
    value = first(
        attrs,
        "gen_ai.conversation.id",
        "session.id",
        "traceloop.association.properties.session_id",
        "conversation.id",  # Codex CLI
    )
    if value is None and resource:
        value = resource.get("session.id")
    return str(value) if value is not None else None


def model(attrs: Attrs) -> str | None:
    """The model: the response's when known, else the request's."""
    value = first(
        attrs,
        "gen_ai.response.model",
        "gen_ai.request.model",
        "llm.model_name",
        "embedding.model_name",
        "llm.response.model",
        "llm.request.model",
    )
    return str(value) if value is not None else None


def provider(attrs: Attrs) -> str | None:
    """The provider, normalizing the deprecated ``gen_ai.system``."""
    value = first(attrs, "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
    return str(value) if value is not None else None


_INPUT_TOKENS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "llm.usage.prompt_tokens",
)
_OUTPUT_TOKENS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "llm.usage.completion_tokens",
)
_TOTAL_TOKENS = ("gen_ai.usage.total_tokens", "llm.token_count.total")
_USAGE_KEYS = frozenset((*_INPUT_TOKENS, *_OUTPUT_TOKENS, *_TOTAL_TOKENS, "llm.usage.total_tokens"))


def usage(attrs: Attrs) -> tuple[int | None, dict[str, int]]:
    """Token usage: (tokens used, the breakdown), normalizing the deprecated
    ``prompt_tokens``/``completion_tokens`` and the OpenInference/OpenLLMetry forms."""
    if _USAGE_KEYS.isdisjoint(attrs):  # most spans carry no usage at all
        return None, {}
    inp = as_int(first(attrs, *_INPUT_TOKENS))
    out = as_int(first(attrs, *_OUTPUT_TOKENS))
    total = as_int(first(attrs, *_TOTAL_TOKENS))
    total = total if total is not None else as_int(attrs.get("llm.usage.total_tokens"))
    breakdown = {
        k: v
        for k, v in (("input_tokens", inp), ("output_tokens", out), ("total_tokens", total))
        if v is not None and v >= 0
    }
    used: int | None
    if inp is not None or out is not None:
        used = max(inp or 0, 0) + max(out or 0, 0)
    else:
        used = total if total is not None and total >= 0 else None
    return used, breakdown


# --- messages -------------------------------------------------------------------------------

_DEPRECATED_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def message_events(events: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """Input and output messages carried as deprecated GenAI events (``gen_ai.user.message``,
    ``gen_ai.choice``, ...) on a span or as log records."""
    inputs: list[Any] = []
    outputs: list[Any] = []
    for event in events:
        name = event.get("name")
        attrs = event.get("attributes") or {}
        role = _DEPRECATED_MESSAGE_EVENTS.get(name or "")
        if role is not None:
            message: dict[str, Any] = {"role": attrs.get("role") or role}
            for key in ("content", "tool_calls", "id"):
                if key in attrs:
                    message[key] = parse_json(attrs[key])
            if "content" not in message and event.get("body") is not None:
                message["content"] = event["body"]
            inputs.append(message)
        elif name == "gen_ai.choice":
            choice = parse_json(attrs.get("message", event.get("body")))
            if choice is not None:
                outputs.append(choice)
    return inputs, outputs


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part.get("content") or part.get("text")
            for part in content
            if isinstance(part, dict) and part.get("type", "text") in ("text", "output_text")
        ]
        joined = "".join(t for t in texts if isinstance(t, str))
        return joined or None
    return None


def _messages(value: Any) -> list[Any]:
    if isinstance(value, dict):
        for key in ("messages", "input"):
            if isinstance(value.get(key), list):
                return list(value[key])
        return [value]
    return list(value) if isinstance(value, list) else []


def first_user_text(value: Any) -> str | None:
    """The first user message's text in a message list (GenAI parts, OpenAI-style content, or a
    request object with ``messages``)."""
    for message in _messages(value):
        if isinstance(message, dict) and message.get("role") == "user":
            text = _text_of(message.get("parts")) or _text_of(message.get("content"))
            if text:
                return text
    return None


def last_assistant_text(value: Any) -> str | None:
    """The last assistant text in output messages (GenAI parts, an OpenAI response's
    ``choices``, or a deprecated ``gen_ai.choice`` message)."""
    if isinstance(value, dict) and isinstance(value.get("choices"), list):
        value = [c.get("message") for c in value["choices"] if isinstance(c, dict)]
    elif isinstance(value, dict) and isinstance(value.get("output"), list):
        # An OpenAI Responses object: its ``message`` output items.
        value = [i for i in value["output"] if isinstance(i, dict) and i.get("type") == "message"]
    found = None
    for message in value if isinstance(value, list) else [value]:
        if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
            text = _text_of(message.get("parts")) or _text_of(message.get("content"))
            if text:
                found = text
    return found


# --- log records ----------------------------------------------------------------------------

CLAUDE_EVENTS = frozenset(
    {
        "user_prompt",
        "api_request",
        "api_error",
        "assistant_response",
        "tool_decision",
        "tool_result",
    }
)
GEMINI_EVENTS = frozenset({"user_prompt", "api_response", "api_error", "tool_call", "config"})
CODEX_EVENTS = frozenset(
    {"user_prompt", "api_request", "sse_event", "tool_decision", "tool_result"}
)
"""Codex CLI's log events the builder maps (``codex.*``; of ``codex.sse_event`` only the
``response.completed`` records, which carry the call's tokens)."""
GENAI_EVENTS = frozenset(
    {
        "gen_ai.client.inference.operation.details",
        "gen_ai.choice",
        *_DEPRECATED_MESSAGE_EVENTS,
    }
)


def log_event(
    event_name: str, attrs: Attrs, body: Any, scope: dict[str, Any], resource: Attrs
) -> str | None:
    """The canonical name of a log record's event when the trace builder maps it, else ``None``.

    Claude Code puts the full name (``claude_code.tool_result``) in the body and the bare one
    (``tool_result``) in ``event.name``; either is matched. Gemini CLI names its events
    ``gemini_cli.*``; GenAI events use ``gen_ai.*`` (in the record's ``event_name`` field or the
    ``event.name`` attribute).
    """
    name = event_name or attrs.get("event.name") or ""
    if not isinstance(name, str):
        return None
    candidates = [name]
    attribute = attrs.get("event.name")
    if isinstance(attribute, str) and attribute != name:
        # Codex CLI's record name is Rust's event site ("event otel/src/...rs:737"); the
        # attribute names the event.
        candidates.append(attribute)
    if isinstance(body, str) and len(body) < 100:
        candidates.append(body)
    for candidate in candidates:
        if candidate in GENAI_EVENTS:
            return candidate
        prefix, _, bare = candidate.partition(".")
        if prefix == "claude_code" and bare in CLAUDE_EVENTS:
            return candidate
        if prefix == "gemini_cli" and bare in GEMINI_EVENTS:
            return candidate
        if prefix == "codex" and bare in CODEX_EVENTS:
            if bare == "sse_event" and attrs.get("event.kind") != "response.completed":
                return None  # stream progress: nothing the trace shows
            return candidate
    claude_scope = str(scope.get("name", "")).startswith("com.anthropic.claude_code")
    if name in CLAUDE_EVENTS and (claude_scope or resource.get("service.name") == "claude-code"):
        return f"claude_code.{name}"
    return None


def log_session_key(item: dict[str, Any]) -> str | None:
    """The session group of a log record: ``s:<service>:<session id>``, when it has a session."""
    session = session_id(item["attributes"], item["resource"])
    if session is None:
        return None
    return session_group(item["resource"].get("service.name"), session)


def session_group(service: Any, session: str) -> str:
    """The group key of a harness session (one agent-replay trace per session)."""
    return f"s:{service or 'unknown'}:{session}"


_RESPONSE_ID = re.compile(r'"(?:responseId|id)"\s*:\s*"([^"]{1,200})"')


def response_id_in(text: Any) -> str | None:
    """A response id quoted in a raw provider response (``responseId``/``id``)."""
    if isinstance(text, str):
        match = _RESPONSE_ID.search(text)
        if match:
            return match.group(1)
    return None


# --- Codex CLI ------------------------------------------------------------------------------

CODEX_AGENT = "codex"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def is_codex(resource: Attrs | None) -> bool:
    """Whether an item comes from Codex CLI's own telemetry (``codex_exec``, ``codex_tui``,
    ... services): its spans are the program's internal tracing, not GenAI spans."""
    service = (resource or {}).get("service.name")
    return isinstance(service, str) and service.startswith("codex")


def codex_conversation(span: dict[str, Any]) -> str | None:
    """The conversation a Codex span belongs to: its ``conversation.id``, or the thread id
    (the conversation's UUID) some spans carry instead."""
    attrs = span["attributes"]
    for key in ("conversation.id", "thread_id", "thread.id"):
        value = attrs.get(key)
        if isinstance(value, str) and _UUID.match(value):
            return value
    return None
