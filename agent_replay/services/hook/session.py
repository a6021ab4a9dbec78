"""One hook payload being recorded (``Hook``): the helpers every dialect maps its events onto.

The shared piece below the capture (``hook.capture``), the dialects (``hook.dialects``) and
the session-file follower (``capture.transcript_follow``): they all import it, it imports none
of them, so the capture and its dialects no longer import each other.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from agent_replay.clock import Clock
from agent_replay.services.capture import vocabulary
from agent_replay.services.hook.harness import Dialect
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store
from agent_replay.store.mapping import dec, dec_meta
from agent_replay.store.models import StepRow, TraceRow
from agent_replay.store.statements import Statement, arg
from agent_replay.trace.base import canonical_time, parse_time

NO_RESULT = "no result recorded: the tool call was blocked, denied or interrupted"
SESSION_ENDED = "the session ended before this step finished"
NAME_KEY = "tool:"
"""The call key prefix of a call without an id: its result pairs with the open call of the
same tool, in order (the dialects' ``call_key``, and the guard step's)."""
SUBAGENT_KEY = "subagent:"
"""The call key prefix of a subagent's step (``subagent:<agent_id>``)."""


def event_time(payload: dict[str, Any], options: dict[str, Any], clock: Clock) -> str:
    """When the event happened: the payload's own ``timestamp`` (Gemini CLI), else when the
    hook queued it (``received_ms``), else the clock."""
    stamp = payload.get("timestamp")
    if isinstance(stamp, str):
        try:
            return canonical_time(parse_time(stamp))
        except ValueError:
            pass
    received = options.get("received_ms")
    if isinstance(received, int | float) and not isinstance(received, bool):
        return canonical_time(dt.datetime.fromtimestamp(received / 1000, dt.UTC))
    return canonical_time(clock.now())


def shifted(at: str, milliseconds: float) -> str:
    """The instant ``milliseconds`` before ``at``."""
    return canonical_time(parse_time(at) - dt.timedelta(milliseconds=milliseconds))


def as_int(value: Any) -> int | None:
    """A non-negative integer, or ``None`` (bools, negatives, text and floats with a fraction
    are not counts)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value >= 0 else None


_EXIT_CODE = re.compile(r"^\s*exit code:?\s*(-?\d+)", re.IGNORECASE)


def error_marker(text: str) -> str:
    """The content-free form of an error for ``--no-input``: the exit code if the error
    starts with one, else just that it failed."""
    found = _EXIT_CODE.match(text)
    return f"Exit code {found.group(1)}" if found else "failed"


# Every payload runs some of these: built once (per backend), not once a payload.
@functools.cache  # one per number of formats (a dialect has one or two)
def _session_trace(formats: int) -> Statement:
    """``(id, status, has_input)`` of a session's newest trace of some formats:
    (session_id, *formats, 1)."""
    return Statement(
        lambda: (
            TraceRow.select(TraceRow.id, TraceRow.status, TraceRow.input.is_null(False))
            .where(
                TraceRow.session_id == arg(),
                TraceRow.source_format.in_([arg() for _ in range(formats)]),
            )
            .order_by(TraceRow.started_at_ms.desc(), TraceRow.created_at_ms.desc())
            .limit(arg())
        )
    )


def session_trace(
    store: Store, session_id: str, formats: tuple[str, ...]
) -> tuple[str, str, bool] | None:
    """``(id, status, has_input)`` of the session's most recent trace with one of these
    ``source_format``s (a dialect's: the hook's own, and the proxy's)."""
    row = _session_trace(len(formats)).run(store, (session_id, *formats, 1)).fetchone()
    return (row[0], row[1], bool(row[2])) if row is not None else None


_ENDING = Statement(
    lambda: TraceRow.select(
        TraceRow.status, TraceRow.output, TraceRow.error, TraceRow.metadata
    ).where(TraceRow.id == arg())
)
"""What ending a trace keeps: (trace_id,)."""
_LAST_MODEL = Statement(
    lambda: (
        StepRow.select(StepRow.model)
        .where(StepRow.trace_id == arg(), StepRow.step_type == arg(), StepRow.model.is_null(False))
        .order_by(StepRow.step_number.desc())
        .limit(arg())
    )
)
"""The model of a trace's last LLM call: (trace_id, "llm_call", 1)."""
_LATEST = Statement(
    lambda: (
        StepRow.select(StepRow.step_number, StepRow.is_open)
        .where(StepRow.trace_id == arg(), StepRow.call_id == arg())
        .order_by(StepRow.step_number.desc())
        .limit(arg())
    )
)
"""The newest step with a call id: (trace_id, call_id, 1)."""
_PROMPT_AFTER = Statement(
    lambda: (
        StepRow.select(StepRow.step_number)
        .where(
            StepRow.trace_id == arg(),
            StepRow.step_number > arg(),
            StepRow.step_type == arg(),
            StepRow.name == arg(),
        )
        .limit(arg())
    )
)
"""A step of a type and name after a step: (trace_id, step_number, step_type, name, 1)."""
_NEWEST_OF_TYPES = Statement(
    lambda: (
        StepRow.select(StepRow.step_number, StepRow.step_type)
        .where(StepRow.trace_id == arg(), StepRow.step_type.in_([arg(), arg()]))
        .order_by(StepRow.step_number.desc())
        .limit(arg())
    )
)
"""The newest step of either of two types: (trace_id, step_type, step_type, 1)."""
_STEP = Statement(
    lambda: StepRow.select(
        StepRow.input, StepRow.output, StepRow.metadata, StepRow.started_at, StepRow.name
    ).where(StepRow.trace_id == arg(), StepRow.step_number == arg())
)
"""A few columns of one step: (trace_id, step_number)."""
_OPEN = Statement(
    lambda: (
        StepRow.select(StepRow.step_number, StepRow.call_id)
        .where(StepRow.trace_id == arg(), StepRow.is_open == arg())
        .order_by(StepRow.step_number)
    )
)
"""A trace's open steps: (trace_id, 1)."""
_OPEN_OF_TYPE = Statement(
    lambda: (
        StepRow.select(StepRow.step_number, StepRow.call_id)
        .where(StepRow.trace_id == arg(), StepRow.is_open == arg(), StepRow.step_type == arg())
        .order_by(StepRow.step_number)
    )
)
"""A trace's open steps of one type: (trace_id, 1, step_type)."""


@dataclass
class Hook:
    """One payload being recorded: its session's trace and the steps it opens or closes."""

    store: Store
    rec: TraceRecorder
    payload: dict[str, Any]
    dialect: Dialect
    session_id: str
    event: str
    at: str
    no_input: bool
    _trace: tuple[str, str, bool] | None = field(default=None, repr=False)

    # --- payload access ----------------------------------------------------------------

    def text(self, key: str) -> str | None:
        """A string field of the payload (``None`` when absent or not a string)."""
        value = self.payload.get(key)
        return value if isinstance(value, str) else None

    def keep(self, value: Any) -> Any:
        """Content (prompts, tool inputs and outputs, model text), or ``None`` under
        ``--no-input``."""
        return None if self.no_input else value

    def error(self, text: str | None) -> str | None:
        """An error to record: its text, or only the marker under ``--no-input``."""
        if text is None:
            return None
        return error_marker(text) if self.no_input else text

    # --- the trace ---------------------------------------------------------------------

    def find_trace(self) -> tuple[str, str, bool] | None:
        """``(id, status, has_input)`` of this session's most recent trace of this dialect."""
        if self._trace is None:
            self._trace = session_trace(self.store, self.session_id, self.dialect.formats)
        return self._trace

    def trace(self, *, prompt: str | None = None) -> str:
        """This session's trace, created (status ``running``) on first sight.

        ``prompt`` becomes the trace's input when it has none yet (the session's first
        prompt)."""
        found = self.find_trace()
        if found is None:
            trace_id = self.rec.start_trace(
                self.dialect.agent_name,
                input=self.keep(prompt),
                session_id=self.session_id,
                started_at=self.at,
                metadata=self._trace_metadata(),
                source_format=self.dialect.source_format,
            )
            self._trace = (trace_id, "running", self.keep(prompt) is not None)
            return trace_id
        trace_id, status, has_input = found
        if prompt is not None and not has_input and not self.no_input:
            self.rec.set_input(trace_id, prompt)
            has_input = True
        self._trace = (trace_id, status, has_input)
        return trace_id

    def active_trace(self, *, prompt: str | None = None) -> str:
        """This session's trace, set back to ``running`` if a turn had finished it (the
        session goes on: a new prompt, a tool call, a resume)."""
        trace_id = self.trace(prompt=prompt)
        assert self._trace is not None
        if self._trace[1] != "running":
            self.rec.reopen_trace(trace_id)
            self._trace = (trace_id, "running", self._trace[2])
        return trace_id

    def _trace_metadata(self) -> dict[str, Any]:
        keys = ("cwd", "transcript_path", "model", "permission_mode")
        meta = {k: self.payload[k] for k in keys if isinstance(self.payload.get(k), str)}
        if self.event == "SessionStart" and isinstance(self.payload.get("source"), str):
            meta["session_source"] = self.payload["source"]
        return meta

    def finish(
        self,
        status: str,
        *,
        output: Any = None,
        error: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """End the trace (a turn or the session finished), keeping the output and error it
        already has unless new ones are given. A failed trace stays failed."""
        trace_id = self.trace()
        row = _ENDING.run(self.store, (trace_id,)).fetchone()
        if output is None:
            output = dec(row[1])
        if row[0] == "failed" and status == "completed":
            status, error = "failed", error or row[2]
        meta = dict(metadata or {})
        known = dec_meta(row[3])
        for key, value in self._trace_metadata().items():
            if key not in known and key != "session_source":
                meta[key] = value  # learned after the trace began (Stop has permission_mode)
        if "model" not in known and "model" not in meta:
            model = _LAST_MODEL.run(self.store, (trace_id, "llm_call", 1)).fetchone()
            if model:
                meta["model"] = model[0]
        self.rec.end_trace(
            trace_id, status=status, output=output, error=error, ended_at=self.at, metadata=meta
        )
        self._trace = (trace_id, status, self._trace[2] if self._trace else False)

    # --- steps -------------------------------------------------------------------------

    def start(
        self,
        step_type: str,
        name: str | None,
        *,
        call_id: str | None,
        input: Any = None,
        parent_step: int | None = None,
        caused_by_step: int | None = None,
        model: str | None = None,
        metadata: dict[str, Any] | None = None,
        trace_id: str | None = None,
        unique: bool = True,
        any_state: bool = False,
    ) -> int:
        """Open a step (its result comes later, found by ``call_id``). A unique call id (the
        harness's own) that is already open is not opened twice (a hook registered twice, a
        retried payload); a key shared by several calls (a tool's name) is. ``any_state``: a
        step with this call id is this call even when closed (the session file's follower
        may have recorded the call and its result first)."""
        trace_id = trace_id or self.active_trace()
        if call_id is not None and unique:
            existing = self.rec.find_open_step(trace_id, call_id)
            if existing is None and any_state:
                found = self.latest_step(call_id)
                existing = found[0] if found is not None else None
            if existing is not None:
                return existing
        return self.rec.start_step(
            trace_id,
            step_type,
            name,
            input=self.keep(input),
            started_at=self.at,
            parent_step=parent_step,
            caused_by_step=caused_by_step,
            model=model,
            metadata=metadata,
            call_id=call_id,
        )

    def record(self, step: dict[str, Any], *, trace_id: str | None = None) -> int:
        """Record a complete step at this event's time."""
        trace_id = trace_id or self.active_trace()
        return self.rec.step(trace_id, {"started_at": self.at, "ended_at": self.at, **step})

    def finish_tool(
        self,
        call_id: str,
        name: str | None,
        *,
        input: Any = None,
        output: Any = None,
        error: str | None = None,
        duration_ms: float | None = None,
        tokens_used: int | None = None,
        model: str | None = None,
        parent_step: int | None = None,
        metadata: dict[str, Any] | None = None,
        step_number: int | None = None,
        any_state: bool = False,
    ) -> int:
        """Close the tool step opened with ``call_id`` with its result. A result whose call
        was never recorded (its pre-tool hook not registered) becomes one complete step.
        ``any_state``: a closed step with this call id takes the result too (the session
        file's follower closed it first; the hook's result wins)."""
        trace_id = self.active_trace()
        number = step_number or self.rec.find_open_step(trace_id, call_id)
        if number is None and any_state:
            found = self.latest_step(call_id)
            number = found[0] if found is not None else None
        if number is not None:
            return self.rec.end_step(
                trace_id,
                number,
                output=self.keep(output),
                error=self.error(error),
                ended_at=self.at,
                duration_ms=duration_ms,
                tokens_used=tokens_used,
                model=model,
                metadata=metadata,
            )
        started = shifted(self.at, duration_ms) if duration_ms is not None else self.at
        return self.record(
            {
                "step_type": "tool_call",
                "name": name,
                "input": self.keep(input),
                "output": self.keep(output),
                "error": self.error(error),
                "started_at": started,
                "duration_ms": duration_ms,
                "tokens_used": tokens_used,
                "model": model,
                "parent_step": parent_step,
                "metadata": {"call_id": call_id, **(metadata or {})},
            },
            trace_id=trace_id,
        )

    def latest_step(self, call_id: str) -> tuple[int, bool] | None:
        """``(step_number, is_open)`` of the newest step started with ``call_id``."""
        found = self.find_trace()
        if found is None:
            return None
        row = _LATEST.run(self.store, (found[0], call_id, 1)).fetchone()
        return (int(row[0]), bool(row[1])) if row else None

    def turn_step(self, call_id: str) -> int | None:
        """The newest step started with ``call_id`` in the current turn (no user prompt came
        after it), or ``None``: what a harness that names no call ids links a step to."""
        found = self.find_trace()
        latest = self.latest_step(call_id)
        if found is None or latest is None:
            return None
        return latest[0] if self._in_turn(found[0], latest[0]) else None

    def turn_latest(self, step_type: str, other: str | None = None) -> tuple[int, str] | None:
        """``(step_number, step_type)`` of the newest step of ``step_type`` (or ``other``) in
        the current turn, or ``None``: a turn's answer is caused by its last model call,
        whoever recorded it."""
        found = self.find_trace()
        if found is None:
            return None
        types = (step_type, other or step_type)
        row = _NEWEST_OF_TYPES.run(self.store, (found[0], *types, 1)).fetchone()
        if row is None or not self._in_turn(found[0], int(row[0])):
            return None
        return int(row[0]), str(row[1])

    def _in_turn(self, trace_id: str, number: int) -> bool:
        """No user prompt came after step ``number``."""
        prompt = (trace_id, number, "thought", vocabulary.PROMPT_STEP, 1)
        return _PROMPT_AFTER.run(self.store, prompt).fetchone() is None

    def step_row(self, number: int) -> dict[str, Any]:
        """A few columns of one of this trace's steps, decoded."""
        found = self.find_trace()
        assert found is not None
        row = _STEP.run(self.store, (found[0], number)).fetchone()
        return {
            "input": dec(row[0]),
            "output": dec(row[1]),
            "metadata": dec_meta(row[2]),
            "started_at": row[3],
            "name": row[4],
        }

    def open_steps(self, *, step_type: str | None = None) -> list[tuple[int, str | None]]:
        """``(step_number, call_id)`` of the trace's open steps, oldest first."""
        found = self.find_trace()
        if found is None:
            return []
        if step_type is None:
            rows = _OPEN.run(self.store, (found[0], 1)).fetchall()
        else:
            rows = _OPEN_OF_TYPE.run(self.store, (found[0], 1, step_type)).fetchall()
        return [(int(r[0]), r[1]) for r in rows]

    def close_open(self, error: str | None, *, step_type: str | None = None) -> None:
        """Close every open step (of one type) with ``error`` (``None``: closed cleanly)."""
        found = self.find_trace()
        if found is None:
            return
        for number, _ in self.open_steps(step_type=step_type):
            self.rec.end_step(found[0], number, error=error, ended_at=self.at)
