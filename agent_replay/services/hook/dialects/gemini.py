"""Gemini CLI hook events -> steps.

| event | recorded as |
|---|---|
| SessionStart | the trace (created ``running``; ``resume`` continues it) |
| BeforeAgent | the trace input (first prompt) and a ``thought`` step ``user_prompt`` |
| BeforeModel | an open ``llm_call`` step named after the model; input: the request's last |
|  | message, its message count and config (the whole context is in the transcript) |
| AfterModel | fires once per streamed chunk: the chunks merge into that one step (text |
|  | appended; tokens from the chunk that carries ``usageMetadata``, taken once) |
| BeforeTool | an open ``tool_call`` step, caused by the turn's latest model call (no call id |
|  | in these payloads: results pair with the open call of the same tool and input, |
|  | else the oldest of that tool) |
| AfterTool | that step closed with ``tool_response``; an ``error`` in it, or a shell |
|  | ``Exit Code`` other than 0, makes it a failed step |
| AfterAgent | an ``output`` step ``assistant_message`` with the turn's final model text; |
|  | the trace ends ``completed`` (a later prompt reopens it) |
| SessionEnd | open steps closed; the trace ends |
| anything else | skipped (BeforeToolSelection, PreCompress, Notification, ...) |

Times come from the payloads' own ``timestamp``.
"""

from __future__ import annotations

import re
from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.derive import duration_between
from agent_replay.services.hook.dialects import claude
from agent_replay.services.hook.session import NAME_KEY, NO_RESULT, SESSION_ENDED, Hook, as_int

MODEL_KEY = "gemini:model"
NO_RESPONSE = "no model response recorded"
_EXIT_CODE = re.compile(r"^Exit Code:\s*(-?\d+)\s*$", re.MULTILINE)


def apply(hook: Hook) -> None:
    """Record one Gemini CLI hook payload."""
    event = hook.event
    if event == "SessionStart":
        hook.active_trace()
    elif event == "BeforeAgent":
        claude.user_prompt(hook)
    elif event == "BeforeModel":
        before_model(hook)
    elif event == "AfterModel":
        after_model(hook)
    elif event == "BeforeTool":
        key = call_key(hook)
        hook.start(
            "tool_call",
            hook.text("tool_name"),
            call_id=key,
            input=hook.payload.get("tool_input"),
            caused_by_step=hook.turn_step(MODEL_KEY),  # the reply that asked for it
            unique=not key.startswith(NAME_KEY),
        )
    elif event == "AfterTool":
        after_tool(hook)
    elif event == "AfterAgent":
        after_agent(hook)
    elif event == "SessionEnd":
        hook.trace()
        hook.close_open(SESSION_ENDED)
        reason = hook.text("reason")
        hook.finish("completed", metadata={"end_reason": reason} if reason else None)


def call_key(hook: Hook) -> str:
    """A call id if the payload has one, else the tool's name (pairing by name and order)."""
    for key in ("tool_call_id", "call_id", "tool_use_id"):
        if hook.text(key):
            return str(hook.payload[key])
    return f"{NAME_KEY}{hook.text('tool_name') or 'tool'}"


def _request(hook: Hook) -> dict[str, Any]:
    request = hook.payload.get("llm_request")
    return request if isinstance(request, dict) else {}


def _model(hook: Hook) -> str | None:
    model = _request(hook).get("model")
    return model if isinstance(model, str) and model else None


def _request_input(request: dict[str, Any]) -> dict[str, Any]:
    """What a model call is shown as: the newest message of the request (the full context
    grows with every call and is in the transcript), how many there were, and the config."""
    messages = request.get("messages")
    shown: dict[str, Any] = {}
    if isinstance(messages, list):
        shown["messages"] = messages[-1:]
        shown["message_count"] = len(messages)
    if isinstance(request.get("config"), dict):
        shown["config"] = request["config"]
    return shown


def before_model(hook: Hook) -> None:
    """A model call starts: an open llm_call step (an earlier one that never got a response
    is closed with an error first)."""
    trace_id = hook.active_trace()
    for number, call_id in hook.open_steps(step_type="llm_call"):
        if call_id == MODEL_KEY:
            hook.rec.end_step(trace_id, number, error=NO_RESPONSE, ended_at=hook.at)
    _open_model_step(hook, trace_id)


def _open_model_step(hook: Hook, trace_id: str) -> int:
    """A model call, caused by the tool call it answers: the turn's newest tool call when
    it came after the turn's newest model call (as the chat recording's import links it)."""
    model = _model(hook)
    latest = hook.turn_latest("tool_call", "llm_call")
    return hook.start(
        "llm_call",
        vocabulary.model_step_name(model),
        call_id=MODEL_KEY,
        input=_request_input(_request(hook)),
        model=model,
        trace_id=trace_id,
        caused_by_step=latest[0] if latest and latest[1] == "tool_call" else None,
    )


def _chunk_text(response: dict[str, Any]) -> str:
    text = response.get("text")
    if isinstance(text, str):
        return text
    parts: list[str] = []
    for candidate in response.get("candidates") or []:
        content = candidate.get("content") if isinstance(candidate, dict) else None
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            continue
        for part in content["parts"]:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
    return "".join(parts)


def _finish_reason(response: dict[str, Any]) -> str | None:
    for candidate in response.get("candidates") or []:
        if isinstance(candidate, dict) and isinstance(candidate.get("finishReason"), str):
            return str(candidate["finishReason"])
    return None


def after_model(hook: Hook) -> None:
    """One streamed chunk of a model response: merged into the current model call's step."""
    response = hook.payload.get("llm_response")
    response = response if isinstance(response, dict) else {}
    trace_id = hook.active_trace()
    latest = hook.latest_step(MODEL_KEY)
    current = hook.step_row(latest[0]) if latest else None
    if latest is None or current is None or "finish_reason" in current["metadata"]:
        # No BeforeModel recorded for this call (not registered): the first chunk opens it.
        number = _open_model_step(hook, trace_id)
        current = hook.step_row(number)
    else:
        number = latest[0]
    meta: dict[str, Any] = {"chunks": int(current["metadata"].get("chunks", 0)) + 1}
    finish = _finish_reason(response)
    if finish:
        meta["finish_reason"] = finish
    usage = response.get("usageMetadata")
    tokens = None
    if isinstance(usage, dict):
        tokens = as_int(usage.get("totalTokenCount"))
        for ours, theirs in (
            ("input_tokens", "promptTokenCount"),
            ("output_tokens", "candidatesTokenCount"),
        ):
            if as_int(usage.get(theirs)) is not None:
                meta[ours] = usage[theirs]
    text = None
    if not hook.no_input:
        previous = current["output"] if isinstance(current["output"], str) else ""
        text = (previous + _chunk_text(response)) or None
    hook.rec.end_step(
        trace_id,
        number,
        output=text,
        ended_at=hook.at,
        duration_ms=duration_between(current["started_at"], hook.at),
        tokens_used=tokens,
        model=_model(hook),
        metadata=meta,
    )


def tool_error(response: Any) -> str | None:
    """The error of a tool response: its ``error``, or a shell exit code other than 0."""
    if not isinstance(response, dict):
        return None
    error = response.get("error")
    if isinstance(error, dict):
        error = error.get("message") or error.get("type") or "the tool call failed"
    if isinstance(error, str) and error:
        return vocabulary.tool_error(vocabulary.GEMINI, error)[0] or error
    content = response.get("llmContent")
    if isinstance(content, list):
        content = "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    if not isinstance(content, str):
        return None
    found = _EXIT_CODE.search(content)
    if found is None or int(found.group(1)) == 0:
        return None
    shown = response.get("returnDisplay")
    detail = shown if isinstance(shown, str) and shown.strip() else ""
    return f"Exit code {found.group(1)}" + (f"\n{detail.strip()}" if detail else "")


def after_tool(hook: Hook) -> None:
    """A tool returned: close the open call of this tool (the one with the same input when
    several are open)."""
    key = call_key(hook)
    tool_input = hook.payload.get("tool_input")
    hook.active_trace()
    candidates = [n for n, call_id in hook.open_steps(step_type="tool_call") if call_id == key]
    number = candidates[0] if candidates else None
    if len(candidates) > 1 and not hook.no_input:
        wanted = hook.rec.redact(tool_input)
        number = next((n for n in candidates if hook.step_row(n)["input"] == wanted), candidates[0])
    response = hook.payload.get("tool_response")
    hook.finish_tool(
        key,
        hook.text("tool_name"),
        input=tool_input,
        output=response,
        error=tool_error(response),
        step_number=number,
    )


def after_agent(hook: Hook) -> None:
    """The turn finished. Its answer is the last model call's merged text (Gemini's
    ``prompt_response`` concatenates every model text of the turn), else ``prompt_response``."""
    trace_id = hook.trace()
    hook.close_open(NO_RESULT, step_type="tool_call")
    answer = None
    latest = hook.latest_step(MODEL_KEY)
    if latest is not None:
        text = hook.step_row(latest[0])["output"]
        answer = text.strip() if isinstance(text, str) and text.strip() else None
    answer = answer or hook.text("prompt_response")
    if answer:
        step = {
            "step_type": "output",
            "name": vocabulary.ANSWER_STEP,
            "output": hook.keep(answer),
            "caused_by_step": hook.turn_step(MODEL_KEY),
        }
        hook.record(step, trace_id=trace_id)
    hook.finish("completed", output=hook.keep(answer))
