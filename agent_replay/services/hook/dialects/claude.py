"""Claude Code hook events -> steps (Codex CLI shares these event names; see ``codex``).

| event | recorded as |
|---|---|
| SessionStart | the trace (created ``running``; ``resume`` and the others continue it) |
| UserPromptSubmit | the trace input (first prompt) and a ``thought`` step ``user_prompt`` |
| PreToolUse | an open ``tool_call`` step named after the tool (``vocabulary``), keyed by |
|  | ``tool_use_id`` |
| PostToolUse | that step closed with ``tool_response`` as output (tokens and model for Agent) |
| PostToolUseFailure | that step closed with the ``error`` text |
| PermissionDenied | that step closed with a ``permission denied`` error |
| SubagentStart | a ``thought`` step ``subagent:<type>`` under the spawning Agent/Task step; the |
|  | subagent's tool calls (payloads with ``agent_id``) nest under it |
| SubagentStop | the subagent step closed with its last message |
| Stop | an ``output`` step ``assistant_message``; the trace ends ``completed`` with that output |
|  | (a later prompt reopens it: one trace per session, finished after every turn); a call |
|  | still open was refused: closed with the harness's reason from its session file |
| StopFailure | an ``error`` step; the trace ends ``failed`` |
| SessionEnd | open steps closed; the trace ends (``completed`` unless it failed) |
| anything else | skipped (Notification, PreCompact, MessageDisplay, PostToolBatch, ...) |
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from agent_replay.services.capture import transcript_follow, vocabulary
from agent_replay.services.hook.session import (
    NAME_KEY,
    NO_RESULT,
    SESSION_ENDED,
    SUBAGENT_KEY,
    Hook,
    as_int,
)
from agent_replay.store.mapping import dec
from agent_replay.store.models import StepRow

ToolFailure = Callable[[Hook], str | None]
"""The error of a successful-looking PostToolUse (Codex reports failed commands there)."""
Refusal = Callable[[Hook, str], tuple[str, dict[str, Any]] | None]
"""Why a call that never returned was refused, from the harness's session file."""

SESSION_TAIL_BYTES = 4 * 1024 * 1024
"""How much of a session file's end is read for a refused call's reason."""
_SESSION_FILE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl")

SUBAGENT_TOOLS = frozenset({"Agent", "Task"})


def apply(
    hook: Hook, *, tool_failure: ToolFailure | None = None, refused: Refusal | None = None
) -> None:
    """Record one Claude Code (or Codex CLI) hook payload."""
    event = hook.event
    if event == "SessionStart":
        hook.active_trace()
    elif event == "UserPromptSubmit":
        user_prompt(hook)
    elif event == "PreToolUse":
        pre_tool(hook)
    elif event == "PostToolUse":
        post_tool(hook, tool_failure(hook) if tool_failure else None)
    elif event == "PostToolUseFailure":
        failed = hook.text("error") or "the tool call failed"
        post_tool(hook, failed, interrupted=hook.payload.get("is_interrupt") is True)
    elif event == "PermissionDenied":
        reason = hook.text("reason")
        post_tool(hook, "permission denied" + (f": {reason}" if reason else ""))
    elif event == "SubagentStart":
        agent_id = hook.text("agent_id")
        if agent_id:
            subagent_step(hook, agent_id, hook.text("agent_type"))
    elif event == "SubagentStop":
        subagent_stop(hook)
    elif event == "Stop":
        stop(hook, hook.text("last_assistant_message"), refused=refused or transcript_refusal)
    elif event == "StopFailure":
        stop_failure(hook)
    elif event == "SessionEnd":
        session_end(hook)


def call_key(hook: Hook) -> str:
    """The harness's call id, or (without one) the tool's name: results then pair with calls
    of the same tool in order."""
    call_id = hook.text("tool_use_id")
    return call_id or f"{NAME_KEY}{hook.text('tool_name') or 'tool'}"


def user_prompt(hook: Hook) -> None:
    """A prompt starts a turn: the session's first one is the trace's input."""
    prompt = hook.text("prompt")
    trace_id = hook.active_trace(prompt=prompt)
    meta = {k: hook.payload[k] for k in ("prompt_id", "turn_id") if hook.text(k)}
    hook.record(
        {
            "step_type": "thought",
            "name": vocabulary.PROMPT_STEP,
            "input": hook.keep(prompt),
            "metadata": meta,
        },
        trace_id=trace_id,
    )


def _agent_metadata(hook: Hook) -> dict[str, Any]:
    return {k: hook.payload[k] for k in ("agent_id", "agent_type") if hook.text(k)}


def _parent(hook: Hook) -> int | None:
    """The subagent step a subagent's tool call nests under (``None`` for the main agent)."""
    agent_id = hook.text("agent_id")
    return subagent_step(hook, agent_id, hook.text("agent_type")) if agent_id else None


def canonical(hook: Hook) -> vocabulary.Tool:
    """The payload's tool call in the canonical vocabulary of its harness."""
    return vocabulary.canonical_tool(
        hook.dialect.key, hook.text("tool_name"), hook.payload.get("tool_input")
    )


def pre_tool(hook: Hook) -> None:
    """A tool call starts: an open step keyed by the call id."""
    key = call_key(hook)
    tool = canonical(hook)
    hook.start(
        "tool_call",
        tool.name,
        call_id=key,
        input=tool.input,
        parent_step=_parent(hook),
        metadata={**_agent_metadata(hook), **tool.metadata},
        unique=not key.startswith(NAME_KEY),
        any_state=True,
    )


def post_tool(hook: Hook, error: str | None, *, interrupted: bool = False) -> None:
    """A tool call returned (or failed): close its step with the result."""
    name = hook.text("tool_name")
    tool_input = hook.payload.get("tool_input")
    tool = canonical(hook)
    response = hook.payload.get("tool_response")
    tokens = model = None
    if name in SUBAGENT_TOOLS and isinstance(response, dict):  # the subagent's usage
        resolved = response.get("resolvedModel")
        model = resolved if isinstance(resolved, str) else None
        # Followed from the transcript, the subagent's own calls carry its tokens (and the
        # call its totals): ``totalTokens`` would count them twice.
        if not transcript_follow.following(hook):
            tokens = as_int(response.get("totalTokens"))
    duration = hook.payload.get("duration_ms")
    meta = _agent_metadata(hook)
    if interrupted:
        meta["interrupted"] = True
    number = hook.finish_tool(
        call_key(hook),
        tool.name,
        input=tool.input,
        output=response,
        error=error,
        duration_ms=float(duration)
        if duration is not None and as_int(duration) is not None
        else None,
        tokens_used=tokens,
        model=model,
        parent_step=_parent(hook),
        metadata=meta,
        any_state=True,
    )
    background = isinstance(tool_input, dict) and tool_input.get("run_in_background") is True
    if name in SUBAGENT_TOOLS and not background:  # a background agent outlives its call
        _close_subagents_of(hook, number)


def _close_subagents_of(hook: Hook, parent: int) -> None:
    """A subagent whose stop was not recorded ends with the tool call that spawned it."""
    trace_id = hook.active_trace()
    rows = list(
        StepRow.select(StepRow.step_number)
        .where(
            StepRow.trace_id == trace_id,
            StepRow.parent_step == parent,
            StepRow.is_open == 1,
            _is_subagent(),
        )
        .tuples()
        .execute(hook.store.db)
    )
    for (number,) in rows:
        hook.rec.end_step(trace_id, int(number), ended_at=hook.at)


def _is_subagent() -> Any:
    """A step is a subagent's: its call key starts with ``SUBAGENT_KEY`` (``LIKE``, not
    peewee's ``startswith``, which is ``ILIKE`` on PostgreSQL; the key has no wildcard)."""
    return StepRow.call_id % f"{SUBAGENT_KEY}%"


def subagent_step(hook: Hook, agent_id: str, agent_type: str | None) -> int:
    """The step of subagent ``agent_id``, opened under the tool call that spawned it on
    first sight (its SubagentStart, or its first tool call if SubagentStart is not
    registered)."""
    key = SUBAGENT_KEY + agent_id
    found = hook.latest_step(key)
    if found is not None:
        return found[0]
    trace_id = hook.active_trace()
    parent = _spawning_step(hook, trace_id, agent_type)
    prompt = None
    if parent is not None:
        spawn_input = hook.step_row(parent)["input"]
        if isinstance(spawn_input, dict):
            prompt = spawn_input.get("prompt")
    meta = {"agent_id": agent_id, **({"agent_type": agent_type} if agent_type else {})}
    return hook.start(
        "thought",
        f"subagent:{agent_type or 'agent'}",
        call_id=key,
        input=prompt,
        parent_step=parent,
        metadata=meta,
        trace_id=trace_id,
    )


def _spawning_step(hook: Hook, trace_id: str, agent_type: str | None) -> int | None:
    """The open Agent/Task call that spawned a subagent: the oldest not yet claimed by
    another subagent, preferring one that asked for this agent type."""
    calls = StepRow.select(StepRow.step_number, StepRow.name, StepRow.input).order_by(
        StepRow.step_number
    )
    rows = list(
        calls.where(
            StepRow.trace_id == trace_id, StepRow.is_open == 1, StepRow.step_type == "tool_call"
        )
        .tuples()
        .execute(hook.store.db)
    )
    spawners = [(int(n), dec(raw)) for n, name, raw in rows if name in SUBAGENT_TOOLS]
    if not spawners:  # another harness's name for it (spawn_agent, ...)
        spawners = [(int(n), dec(raw)) for n, name, raw in rows if "agent" in (name or "").lower()]
    if not spawners:
        # The call already returned: a background agent, or the session file's follower read
        # the call and its result before this event was recorded.
        rows = list(
            calls.where(
                StepRow.trace_id == trace_id,
                StepRow.step_type == "tool_call",
                StepRow.name.in_(sorted(SUBAGENT_TOOLS)),
            )
            .tuples()
            .execute(hook.store.db)
        )
        spawners = [(int(n), dec(raw)) for n, _, raw in rows]
    if not spawners:
        return None
    claimed = {
        int(parent)
        for (parent,) in StepRow.select(StepRow.parent_step)
        .where(StepRow.trace_id == trace_id, _is_subagent(), StepRow.parent_step.is_null(False))
        .tuples()
        .execute(hook.store.db)
    }
    free = [(n, data) for n, data in spawners if n not in claimed]
    for number, data in free:
        if isinstance(data, dict) and agent_type and data.get("subagent_type") == agent_type:
            return number
    return free[0][0] if free else spawners[-1][0]


def subagent_stop(hook: Hook) -> None:
    """A subagent finished: close its step with its last message (also when the spawning
    call already returned and closed it)."""
    agent_id = hook.text("agent_id")
    found = hook.latest_step(SUBAGENT_KEY + agent_id) if agent_id else None
    if found is None:
        return
    meta = {}
    if hook.text("agent_transcript_path"):
        meta["agent_transcript_path"] = hook.payload["agent_transcript_path"]
    hook.rec.end_step(
        hook.active_trace(),
        found[0],
        output=hook.keep(hook.text("last_assistant_message")),
        ended_at=hook.at,
        metadata=meta,
    )


def stop(hook: Hook, message: str | None, *, refused: Refusal | None = None) -> None:
    """A turn finished: its last message is an output step and the trace's output, and the
    trace is ``completed`` until the next prompt reopens it. A tool call still open never
    ran: it is closed with the reason the session file gives (a permission refusal, another
    hook's block), else ``NO_RESULT``."""
    trace_id = hook.trace()
    close_refused(hook, refused or transcript_refusal)
    if message:
        # Caused by the turn's last model call, which the session file gave (as on import).
        reply = hook.turn_latest("llm_call")
        answer = {
            "step_type": "output",
            "name": vocabulary.ANSWER_STEP,
            "output": hook.keep(message),
            "caused_by_step": reply[0] if reply else None,
        }
        hook.record(answer, trace_id=trace_id)
    hook.finish("completed", output=hook.keep(message))


def stop_failure(hook: Hook) -> None:
    """A turn ended on an API error: an error step, and the trace ``failed``."""
    parts = [hook.payload.get(k) for k in ("error", "error_type", "error_message", "message")]
    texts = [p for p in parts if isinstance(p, str) and p]
    details = hook.payload.get("error_details")
    if isinstance(details, str) and details:
        texts.append(details)
    error = "\n".join(dict.fromkeys(texts)) or "the turn stopped on an error"
    trace_id = hook.trace()
    hook.close_open(NO_RESULT, step_type="tool_call")
    hook.record(
        {"step_type": "error", "name": "stop_failure", "error": hook.error(error)},
        trace_id=trace_id,
    )
    hook.finish("failed", error=hook.error(error))


def session_end(hook: Hook) -> None:
    """The session ended: close what is still open and end the trace."""
    hook.trace()
    hook.close_open(SESSION_ENDED)
    reason = hook.text("reason")
    hook.finish("completed", metadata={"end_reason": reason} if reason else None)


def close_refused(hook: Hook, refused: Refusal) -> None:
    """Close the turn's open tool calls, each with the harness's reason when it has one."""
    found = hook.find_trace()
    if found is None:
        return
    for number, call_id in hook.open_steps(step_type="tool_call"):
        reason = None
        if call_id and not call_id.startswith(NAME_KEY):
            reason = refused(hook, call_id)
        error, metadata = reason if reason is not None else (NO_RESULT, {})
        hook.rec.end_step(
            found[0], number, error=hook.error(error), ended_at=hook.at, metadata=metadata
        )


def transcript_refusal(hook: Hook, call_id: str) -> tuple[str, dict[str, Any]] | None:
    """A refused call's reason from the Claude Code transcript (``transcript_path``): the
    error ``tool_result`` Claude Code wrote for it ("Claude requested permissions to write to
    ..., but you haven't granted it yet.", a hook's block), read from the file's tail."""
    path = hook.text("transcript_path")
    if not path or not _SESSION_FILE.fullmatch(path.rsplit("/", 1)[-1]):
        return None  # only ever read Claude Code's own session files
    for record in tail_records(path, call_id):
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and block.get("tool_use_id") == call_id
                and block.get("is_error") is True
            ):
                text = _text(block.get("content"))
                error, metadata = vocabulary.tool_error(vocabulary.CLAUDE, text)
                return (error, metadata) if error else None
    return None


def tail_records(path: str, needle: str) -> list[dict[str, Any]]:
    """The JSON records near the end of a session file that mention ``needle``, newest
    first (an unreadable file has none)."""
    try:
        with open(path, "rb") as stream:
            stream.seek(0, 2)
            size = stream.tell()
            stream.seek(max(0, size - SESSION_TAIL_BYTES))
            data = stream.read()
    except OSError:
        return []
    wanted = needle.encode("utf-8")
    records = []
    for line in reversed(data.splitlines()):
        if wanted not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str)) or None
    return None
