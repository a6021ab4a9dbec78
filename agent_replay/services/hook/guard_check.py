"""The drainer's side of ``hook --enforce``: a decision becomes a ``guard_check`` step.

The hook decided a pre-tool payload and queued it with the decision in its options
(``enforce.guard_record``). After the capture recorded the attempted call (an open
``tool_call`` step), this records the decision right after it, in the same trace:

- a ``guard_check`` step named after the deciding policy, ``caused_by_step`` the tool call
  (so ``why`` walks from the check to the attempt), nested where the call is;
- input: the tool and its arguments (only the tool under ``--no-input``);
- output: what the harness was told (``decision``: deny, ask or allow) and the evaluation
  (``action``, ``policy``, ``reason``, ``matches``); a ``decision`` of ``deny`` is what the
  dashboard, the live watch and the timeline count as a block;
- a blocked call's step is closed with the reason the harness was given
  (``enforce.message``: "Blocked by agent-replay guard: policy ..."), the same error an
  import of the harness's own session file records for it (``capture.vocabulary``): the
  harness never runs the call, so no result will come.

Everything goes through ``TraceRecorder`` (lenient, redacting as the capture does).
"""

from __future__ import annotations

from typing import Any

from agent_replay.clock import Clock
from agent_replay.services.guard.decide import Evaluation
from agent_replay.services.hook.capture import detect_dialect
from agent_replay.services.hook.enforce import message
from agent_replay.services.hook.harness import DIALECTS, HARNESSES
from agent_replay.services.hook.session import NAME_KEY, event_time, session_trace
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store
from agent_replay.store.models import StepRow
from agent_replay.store.statements import Statement, arg

GEMINI_ID_KEYS = ("tool_call_id", "call_id", "tool_use_id")
_CALL = Statement(
    lambda: (
        StepRow.select(StepRow.step_number, StepRow.parent_step, StepRow.is_open)
        .where(StepRow.trace_id == arg(), StepRow.call_id == arg(), StepRow.step_type == arg())
        .order_by(StepRow.step_number.desc())
        .limit(arg())
    )
)
"""The newest tool call step with a call id: (trace_id, call_id, "tool_call", 1)."""


def call_key(payload: dict[str, Any], dialect: str) -> str:
    """The call id the capture opened the tool step with (``dialects.claude.call_key`` and
    ``dialects.gemini.call_key``)."""
    keys = GEMINI_ID_KEYS if dialect == "gemini" else ("tool_use_id",)
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    name = payload.get("tool_name")
    return f"{NAME_KEY}{name if isinstance(name, str) and name else 'tool'}"


def record_guard_check(
    store: Store, payload: dict[str, Any], options: dict[str, Any], clock: Clock
) -> int | None:
    """Record the decision queued with ``payload``; returns the guard step's number.

    ``None`` when the session has no trace to record into (the capture could not record the
    call: its own error is in the log already).
    """
    guard = options.get("guard")
    session_id = payload.get("session_id")
    if not isinstance(guard, dict) or not isinstance(session_id, str) or not session_id:
        return None
    key = detect_dialect(store, payload, str(options.get("dialect") or "auto"))
    found = session_trace(store, session_id, (DIALECTS[key].source_format,))
    if found is None:
        return None
    trace_id = found[0]
    call_id = call_key(payload, key)
    tool = _CALL.run(store, (trace_id, call_id, "tool_call", 1)).fetchone()
    evaluation = dict(guard.get("evaluation") or {})
    decision = str(guard.get("decision") or "allow")
    at = event_time(payload, options, clock)
    no_input = bool(options.get("no_input"))
    tool_name = payload.get("tool_name")
    shown: dict[str, Any] = {"tool": tool_name}
    if not no_input:
        shown["arguments"] = payload.get("tool_input")
    rec = TraceRecorder(store, lenient=True, redact=bool(options.get("redact", True)), clock=clock)
    metadata: dict[str, Any] = {"enforced": True, "call_id": call_id}
    if isinstance(guard.get("harness"), str):
        metadata["harness"] = guard["harness"]
    number = rec.step(
        trace_id,
        {
            "step_type": "guard_check",
            "name": evaluation.get("policy") or "guard",
            "input": shown,
            "output": {"decision": decision, **evaluation},
            "started_at": at,
            "ended_at": at,
            "duration_ms": 0.0,
            "caused_by_step": int(tool[0]) if tool else None,
            "parent_step": int(tool[1]) if tool and tool[1] is not None else None,
            "metadata": metadata,
        },
    )
    if tool is not None and tool[2] and decision == "deny":
        rec.end_step(trace_id, int(tool[0]), error=_told(evaluation, guard), ended_at=at)
    return number


def _told(evaluation: dict[str, Any], guard: dict[str, Any]) -> str:
    """The reason a denied call's harness was given (what its own session file records)."""
    reason = str(evaluation.get("reason") or "a guard policy denied it")
    action = str(evaluation.get("action") or "deny")
    harness = guard.get("harness")
    told = message(
        Evaluation(action if action in ("deny", "require_review") else "deny", None, reason),
        harness if harness in HARNESSES else "claude",
    )
    return told or f"Blocked by agent-replay guard: {reason}"
