"""The native event protocol v1 and the group-commit pump every live stream goes through.

Owns: ``EventEngine`` (native events -> ``TraceRecorder`` calls, lenient, redacting by
default), the report of what a stream did (``EventReport``), reading a file descriptor line by
line without buffering that hides data from ``select`` (``FdReader``), and ``pump``, which
commits events in small transactions as they arrive. ``record``, ``run`` and the stream formats
(``streams.py``) all write through this module. Stdlib, the store and the recorder only: never
Textual, Rich or an AI SDK.

Protocol v1: one JSON object a line, ``{"v": 1, "type": ..., "trace_id": ...}``; types
``trace_start``, ``step_start``, ``step_end``, ``step``, ``decision``, ``snapshot``,
``trace_end`` (fields in ``FIELDS``). ``trace_id`` is the producer's: it is mapped to one of our
ids (kept in the trace's ``metadata.producer_trace_id`` and its ``producer_trace_id`` column),
unless it already names a trace in the store, which is then recorded into; a producer id of a
trace still ``running`` (an earlier stream's ``--leave-open``) resumes that trace. Unknown
types and fields are skipped with one warning per kind; lines that are not JSON objects with a
``type`` are counted as malformed; events the recorder can't place or keep (unknown trace, a
``step_end`` with nothing to close, an unknown ``step_type``, a step number out of range) are
rejected and counted, and the events around them still land. Nothing a producer sends makes
the engine crash: any error while recording one event rejects that event only.

Group commit: ``pump`` opens one ``BEGIN IMMEDIATE`` transaction per batch and commits when no
more input is immediately available or ``WINDOW_S`` has passed since the batch began, so a
recorder killed at any moment loses at most the batch in flight. Within a batch the engine
coalesces steps (a ``step_start`` whose ``step_end`` arrives in the same batch becomes one
complete row) and writes them with ``TraceRecorder.record_steps_if_clean``; anything that needs
a repair falls back to the one-by-one recorder calls, so the stored rows and warnings are the
same either way.
"""

from __future__ import annotations

import datetime as dt
import os
import select
import stat
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import AgentReplayError, NotFoundError
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store
from agent_replay.store.queries import producer_trace
from agent_replay.store.writes import execute
from agent_replay.trace.base import STEP_TYPES, canonical_time
from agent_replay.trace.models import MAX_SAFE_INT

PROTOCOL_VERSION = 1
# The longest a batch stays uncommitted (seconds): the most a killed recorder can lose.
WINDOW_S = 0.1
READ_SIZE = 1 << 20
# What a pipe on stdin may hold (Linux: ``F_SETPIPE_SZ``, default 64 KiB; 1 MiB is what an
# unprivileged process may ask): the producer keeps writing while a batch is recorded, so the
# next batch takes everything that came meanwhile, in one read (group commit by itself).
PIPE_SIZE = 1 << 20
# How many malformed lines / rejected events / repairs are kept with their details.
SAMPLES = 5

_COMMON = frozenset({"v", "type", "trace_id"})
FIELDS: dict[str, frozenset[str]] = {
    "trace_start": _COMMON
    | {
        "agent_name",
        "agent_version",
        "trigger",
        "session_id",
        "input",
        "tags",
        "metadata",
        "started_at",
    },
    "step_start": _COMMON
    | {
        "step_type",
        "name",
        "input",
        "step_number",
        "parent_step",
        "caused_by_step",
        "call_id",
        "started_at",
        "model",
        "metadata",
    },
    "step_end": _COMMON
    | {
        "step_number",
        "call_id",
        "output",
        "error",
        "ended_at",
        "tokens_used",
        "duration_ms",
        "model",
        "metadata",
    },
    "step": _COMMON
    | {
        "step_number",
        "step_type",
        "name",
        "input",
        "output",
        "error",
        "started_at",
        "ended_at",
        "duration_ms",
        "tokens_used",
        "model",
        "parent_step",
        "caused_by_step",
        "decision",
        "snapshot",
        "metadata",
    },
    "decision": _COMMON
    | {
        "step_number",
        "name",
        "started_at",
        "parent_step",
        "caused_by_step",
        "decision",
        "options",
        "chosen",
        "rationale",
        "confidence",
        "decided_by",
    },
    "snapshot": _COMMON
    | {"step_number", "call_id", "snapshot", "context_window", "environment", "tool_state"},
    "trace_end": _COMMON
    | {
        "status",
        "output",
        "error",
        "ended_at",
        "total_tokens",
        "total_cost_usd",
        "total_duration_ms",
        "metadata",
    },
}
EVENT_TYPES = tuple(FIELDS)
_TRACE_START_FIELDS = (
    "agent_name",
    "agent_version",
    "trigger",
    "session_id",
    "input",
    "tags",
    "started_at",
)
_DECISION_FIELDS = ("options", "chosen", "rationale", "confidence", "decided_by")
_SNAPSHOT_FIELDS = ("context_window", "environment", "tool_state")
_END_FIELDS = ("output", "error", "ended_at", "tokens_used", "duration_ms", "model", "metadata")
_START_FIELDS = (
    "step_number",
    "step_type",
    "name",
    "input",
    "started_at",
    "model",
    "parent_step",
    "caused_by_step",
    "metadata",
)
_STEP_FIELDS = (
    "step_number",
    "step_type",
    "name",
    "input",
    "output",
    "error",
    "started_at",
    "ended_at",
    "duration_ms",
    "tokens_used",
    "model",
    "parent_step",
    "caused_by_step",
    "decision",
    "snapshot",
    "metadata",
)
# How the engine coerces a field before the recorder validates it (see ``_fields``).
_FIELD_KINDS = {
    "name": "text",
    "model": "text",
    "error": "text",
    "parent_step": "link",
    "caused_by_step": "link",
    "metadata": "object",
    "decision": "object",
    "snapshot": "object",
    "step_number": "number",
}


@dataclass
class EventReport:
    """What a stream did: counts, the first few problems with where they were, and warnings.

    ``malformed`` and ``rejected`` are problems (``record`` exits 1); ``skipped`` (unknown
    types and fields, by kind) and ``repairs`` (values the recorder coerced or dropped) are
    warnings.
    """

    events: int = 0
    steps: int = 0
    traces: list[str] = field(default_factory=list)
    malformed: int = 0
    malformed_samples: list[tuple[str, str]] = field(default_factory=list)
    rejected: int = 0
    rejected_samples: list[tuple[str, str]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    repairs: int = 0
    repair_samples: list[tuple[str, str]] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    left_open: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every line was an event and every event was recorded."""
        return not self.malformed and not self.rejected

    def as_json(self) -> dict[str, Any]:
        """The summary ``record --json`` prints."""
        return {
            "ok": self.ok,
            "events": self.events,
            "steps": self.steps,
            "traces": list(self.traces),
            "timed_out": list(self.timed_out),
            "left_open": list(self.left_open),
            "malformed": {
                "count": self.malformed,
                "first": [{"where": w, "reason": r} for w, r in self.malformed_samples],
            },
            "rejected": {
                "count": self.rejected,
                "first": [{"where": w, "reason": r} for w, r in self.rejected_samples],
            },
            "skipped": [{"kind": k, "count": n} for k, n in self.skipped.items()],
            "repairs": {
                "count": self.repairs,
                "first": [{"where": w, "warning": m} for w, m in self.repair_samples],
            },
        }


Warn = Callable[[str], None]


def _no_warn(message: str) -> None:
    """The default warning sink: warnings are only counted in the report."""


class _Rejected(Exception):
    """An event the engine refuses (counted in the report, never raised out of the engine)."""


@dataclass(eq=False)
class TraceState:
    """What the engine knows about one trace it records into (``run`` reads ``end_values``
    and ``pending_metadata`` of its own trace)."""

    trace_id: str
    # Started (or attached to) by a trace_start in this stream: finalized at the end.
    started_here: bool = False
    ended: bool = False
    # Claimed by a producer's trace_start (``run``: the child's first trace_start).
    claimed: bool = False
    # The next free step number, read from the store once per batch.
    next_number: int | None = None
    # Open steps this stream started: producer call id -> step number.
    open_calls: dict[str, int] = field(default_factory=dict)
    # Producer step number -> ours, when the recorder had to renumber.
    renumbered: dict[int, int] = field(default_factory=dict)
    last_step: int | None = None
    # trace_start fields that can't be applied to a trace that already existed.
    pending_metadata: dict[str, Any] = field(default_factory=dict)
    # What a trace_end said (``run`` re-finalizes its trace from the exit with these).
    end_values: dict[str, Any] | None = None
    # Steps held for this batch's one-pass write, by arrival, by number and by open call id.
    pending: list[_Pending] = field(default_factory=list)
    pending_numbers: dict[int, _Pending] = field(default_factory=dict)
    pending_calls: dict[str, _Pending] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class _Pending:
    """A step held for the batch's one-pass write."""

    state: TraceState
    data: dict[str, Any]
    call_id: str | None
    is_open: bool
    # The original events, replayed one by one if the batch isn't clean.
    events: list[tuple[str, dict[str, Any], str]]


class EventEngine:
    """Records native protocol v1 events through a lenient ``TraceRecorder``.

    Args:
        store: the store (the engine writes only inside ``store.write()``).
        clock: stamps the times events leave out (their arrival).
        redact: replace secrets before anything is written (``--no-redact`` turns it off).
        tags: tags added to every trace this stream starts.
        default_agent_name: the agent name of a ``trace_start`` that has none.
        default_trace: the trace events without a ``trace_id`` go to (``run``'s trace).
        source_format: stored on the traces this stream starts (``native``, ``codex-exec``…).
        warn: called once per kind of warning, and for the first few problems, as they occur.
        writer: registered as the live writer of every trace this stream starts or resumes
            (``store/writers``: a reader finalizes them if this process dies); ``None``: not.
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        redact: bool = True,
        tags: list[str] | None = None,
        default_agent_name: str | None = None,
        default_trace: str | None = None,
        source_format: str = "native",
        warn: Warn = _no_warn,
        writer: str | None = "record",
    ) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.recorder = TraceRecorder(store, clock=self.clock, lenient=True, redact=redact)
        self.tags = list(tags or [])
        self.default_agent_name = default_agent_name
        self.source_format = source_format
        self.warn = warn
        self.writer = writer
        self.report = EventReport()
        # producer trace id (and our own id) -> state
        self._traces: dict[str, TraceState] = {}
        self._order: list[TraceState] = []
        self._default: TraceState | None = None
        if default_trace is not None:
            self._default = self._remember(default_trace, TraceState(default_trace))
        # Traces holding steps for this batch's write (insertion-ordered).
        self._dirty: dict[int, TraceState] = {}
        self._batching = False
        self._anonymous = 0
        # When the line being recorded was read (``time.time()``; set by ``pump``).
        self.arrived_at: float | None = None
        # How held batches were written (a diagnostic for tests and profiling).
        self.fast_batches = 0
        self.replayed_batches = 0

    # --- batches --------------------------------------------------------------------------

    def begin_batch(self) -> None:
        """Start coalescing steps (call inside the batch's ``store.write()``)."""
        self._batching = True
        for state in self._order:
            state.next_number = None  # another writer may have added steps since

    def end_batch(self) -> None:
        """Write the steps held in this batch (call before the batch commits)."""
        self._flush()
        self._batching = False

    # --- reading lines --------------------------------------------------------------------

    def feed_line(self, line: bytes, where: str) -> None:
        """Decode one line of the native protocol and record it."""
        if not line or line.isspace():
            return
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            self.malformed(where, f"not valid JSON ({exc})")
            return
        if not isinstance(event, dict):
            self.malformed(where, f"not a JSON object (got {type(event).__name__})")
            return
        kind = event.get("type")
        if not isinstance(kind, str) or not kind:
            self.malformed(where, "no event type")
            return
        self.handle(event, where)

    def malformed(self, where: str, reason: str) -> None:
        """Count a line that is not an event."""
        self.report.malformed += 1
        if len(self.report.malformed_samples) < SAMPLES:
            self.report.malformed_samples.append((where, reason))
            self.warn(f"{where}: malformed: {reason}")

    def skip(self, kind: str, where: str) -> None:
        """Count a skipped kind of thing (unknown type or field); warn the first time."""
        count = self.report.skipped.get(kind, 0)
        self.report.skipped[kind] = count + 1
        if not count:
            self.warn(f"{where}: {kind} skipped")

    def reject(self, where: str, kind: str, reason: str) -> None:
        """Count an event that could not be recorded (a stream format's mapper reports its
        own through this too)."""
        self._reject(where, kind, reason)

    def _reject(self, where: str, kind: str, reason: str) -> None:
        self.report.rejected += 1
        if len(self.report.rejected_samples) < SAMPLES:
            self.report.rejected_samples.append((where, f"{kind}: {reason}"))
            self.warn(f"{where}: {kind} rejected: {reason}")

    # --- events ---------------------------------------------------------------------------

    def handle(self, event: dict[str, Any], where: str) -> Any:
        """Record one native event; returns the step number or trace id it produced, if any.

        Never raises for the producer's data: problems are counted in ``report``.
        """
        kind = event.get("type")
        allowed = FIELDS.get(kind) if isinstance(kind, str) else None
        if allowed is None:
            self.skip(f"unknown event type {kind!r}", where)
            return None
        self.report.events += 1
        version = event.get("v")
        if version != PROTOCOL_VERSION:
            if version is None:
                self.skip("event without 'v' (taken as v1)", where)
            else:
                self._reject(where, str(kind), f"unsupported protocol version v={version!r}")
                return None
        if not allowed.issuperset(event):
            for name in sorted(event.keys() - allowed):
                self.skip(f"unknown field {name!r} in {kind}", where)
        try:
            return self._dispatch(str(kind), event, where)
        except Exception as exc:  # noqa: BLE001 - one bad event never costs its neighbours
            self._reject(where, str(kind), _reason(exc))
        return None

    def _dispatch(self, kind: str, event: dict[str, Any], where: str) -> Any:
        if kind == "trace_start":
            return self._trace_start(event, where)
        state = self._resolve(event)
        if kind == "step_start":
            return self._step_start(state, event, where)
        if kind == "step_end":
            return self._step_end(state, event, where)
        if kind == "step":
            return self._step(state, event, where)
        self._flush(state)
        if kind == "decision":
            return self._decision(state, event, where)
        if kind == "snapshot":
            return self._snapshot(state, event, where)
        return self._trace_end(state, event, where)

    # --- traces ---------------------------------------------------------------------------

    def _remember(self, key: str, state: TraceState) -> TraceState:
        if state.trace_id not in self.report.traces:
            self.report.traces.append(state.trace_id)
            self._order.append(state)
        self._traces[key] = state
        self._traces[state.trace_id] = state
        return state

    def _stored(self, trace_id: str) -> bool:
        row = execute(self.store, "SELECT 1 FROM traces WHERE id = ?", [trace_id]).fetchone()
        return row is not None

    def _resolve(self, event: dict[str, Any]) -> TraceState:
        producer_id = event.get("trace_id")
        if producer_id is None:
            if self._default is not None:
                return self._default
            open_here = [s for s in self._order if s.started_here and not s.ended]
            if len(open_here) == 1:
                return open_here[0]
            raise _Rejected(
                "no trace_id"
                + (" (more than one trace is open)" if open_here else " and no trace started")
            )
        if not isinstance(producer_id, str | int) or isinstance(producer_id, bool):
            raise _Rejected(f"trace_id must be a string (got {type(producer_id).__name__})")
        key = str(producer_id)
        state = self._traces.get(key)
        if state is not None:
            return state
        if self._stored(key):
            return self._remember(key, TraceState(key))
        resumed = producer_trace(self.store, key, running=True)
        if resumed is not None:  # a trace an earlier stream left open (``--leave-open``)
            return self._remember(key, TraceState(resumed))
        raise _Rejected(f"unknown trace_id {key!r} (no trace_start for it, not in the store)")

    def _trace_start(self, event: dict[str, Any], where: str) -> str:
        producer_id = event.get("trace_id")
        key = None if producer_id is None else str(producer_id)
        metadata = self._object(event, "metadata", where) or {}
        target = self._attach_target(key)
        if target is not None:
            target.started_here = target is not self._default
            target.claimed = True
            target.ended = False
            if key is not None and key != target.trace_id:
                metadata = {**metadata, "producer_trace_id": key}
            # The trace exists already (its name, input and tags stay): what the producer
            # said about it is kept beside them, in metadata.
            said = {name: event[name] for name in _TRACE_START_FIELDS if name in event}
            if said:
                metadata = {**metadata, "producer_trace_start": said}
            target.pending_metadata.update(metadata)
            self._remember(key or target.trace_id, target)
            if self.writer is not None and target.started_here:
                self.recorder.claim(target.trace_id, self.writer)
            return target.trace_id
        agent_name = event.get("agent_name") or self.default_agent_name
        if not agent_name:
            raise _Rejected("agent_name is required")
        if not isinstance(agent_name, str):
            agent_name = str(agent_name)
        tags = self._tags(event, where)
        if key is not None:
            metadata = {**metadata, "producer_trace_id": key}
        trace_id = self.recorder.start_trace(
            agent_name,
            input=event.get("input"),
            tags=[*tags, *self.tags],
            session_id=_text(event.get("session_id")),
            started_at=event.get("started_at") or self._now(),
            agent_version=_text(event.get("agent_version")),
            trigger=_text(event.get("trigger")),
            metadata=metadata,
            source_format=self.source_format,
        )
        self._repairs(where)
        if self.writer is not None:
            self.recorder.claim(trace_id, self.writer)
        if key is None:
            self._anonymous += 1
            key = f"#{self._anonymous}"
        state = self._remember(key, TraceState(trace_id, started_here=True, claimed=True))
        state.next_number = 1
        return trace_id

    def _attach_target(self, key: str | None) -> TraceState | None:
        """The existing trace a trace_start attaches to, if any (``None``: start a new one).

        A producer id naming a trace in the store attaches to it. Under ``run``, the child's
        first trace_start (without an id, or with one the store doesn't know) claims the
        run's trace; later ones start traces of their own.
        """
        default = self._default
        if key is None:
            return default if default is not None and not default.claimed else None
        known = self._traces.get(key)
        if known is not None and known.started_here and not known.ended:
            raise _Rejected(f"trace {key!r} was already started and is still open")
        if default is not None and (known is default or key == default.trace_id):
            return default
        if known is not None and known.trace_id == key:
            return known
        if (known is None or known.ended) and self._stored(key):
            return TraceState(key)
        if default is not None and not default.claimed:
            return default
        if known is None:
            resumed = producer_trace(self.store, key, running=True)
            if resumed is not None:  # an earlier stream left it open: this one resumes it
                return TraceState(resumed)
        return None

    def _trace_end(self, state: TraceState, event: dict[str, Any], where: str) -> None:
        values = {
            "status": event.get("status") or "completed",
            "output": event.get("output"),
            "error": _text(event.get("error")),
            "ended_at": event.get("ended_at") or self._now(),
            "total_tokens": event.get("total_tokens"),
            "total_cost_usd": event.get("total_cost_usd"),
            "total_duration_ms": event.get("total_duration_ms"),
        }
        metadata = {**state.pending_metadata, **(self._object(event, "metadata", where) or {})}
        self.end_trace(state, values, metadata, where)

    def end_trace(
        self,
        state: TraceState,
        values: dict[str, Any],
        metadata: dict[str, Any] | None = None,
        where: str = "",
    ) -> None:
        """Finalize a trace through the recorder (after writing any held steps)."""
        self._flush(state)
        self.recorder.end_trace(state.trace_id, **values, metadata=metadata or None)
        self._repairs(where)
        state.ended = True
        state.pending_metadata = {}
        state.end_values = values

    def trace_state(self, trace_id: str) -> TraceState | None:
        """The engine's view of a trace (by producer id or ours), if it has one."""
        return self._traces.get(trace_id)

    # --- steps ----------------------------------------------------------------------------

    def _next(self, state: TraceState) -> int:
        if state.next_number is None:
            row = execute(
                self.store,
                "SELECT MAX(step_number) FROM steps WHERE trace_id = ?",
                [state.trace_id],
            ).fetchone()
            state.next_number = int(row[0] or 0) + 1
        return state.next_number

    def _claim_number(self, state: TraceState, requested: Any) -> int | None:
        """The step number a new step will get (``None``: let the recorder decide)."""
        if requested is None:
            number = self._next(state)
        elif type(requested) is int:
            number = requested
        else:
            return None
        state.next_number = max(self._next(state), number + 1)
        return number

    def _link(self, state: TraceState, value: Any) -> Any:
        if type(value) is int:
            return state.renumbered.get(value, value)
        return value

    def _fields(
        self, state: TraceState, event: dict[str, Any], where: str, names: tuple[str, ...]
    ) -> dict[str, Any]:
        """The step fields of an event, with the engine's coercions (the hot path: plain
        values pass through without a call)."""
        data: dict[str, Any] = {}
        get = event.get
        for name in names:
            value = get(name)
            if value is not None:
                kind = _FIELD_KINDS.get(name)
                if kind is None:
                    pass
                elif kind == "text":
                    if value.__class__ is not str:
                        value = _text(value)
                elif kind == "link":
                    if value.__class__ is not int or not 0 < value <= MAX_SAFE_INT:
                        value = self._link_value(name, value, where)
                    if state.renumbered:
                        value = self._link(state, value)
                elif kind == "object":
                    if value.__class__ is not dict:
                        value = self._object(event, name, where)
                elif kind == "number":
                    if value.__class__ is not int or not 0 < value <= MAX_SAFE_INT:
                        value = self._number(event, where)
            data[name] = value
        return data

    def _step_start(self, state: TraceState, event: dict[str, Any], where: str) -> int | None:
        call_id = event.get("call_id")
        if call_id is not None:
            call_id = (call_id or None) if call_id.__class__ is str else _call_id(call_id)
        data = self._fields(state, event, where, _START_FIELDS)
        data["step_type"] = _step_type(data["step_type"])
        if data["started_at"] is None:
            data["started_at"] = self._now()
        if data["metadata"] is None:
            data["metadata"] = {}
        if self._batching:
            number = self._claim_number(state, data["step_number"])
            if number is not None:
                data["step_number"] = number
                self._hold(state, data, call_id, True, ("step_start", event, where))
                return number
        self._flush(state)
        number = self.recorder.start_step(
            state.trace_id,
            data.pop("step_type"),
            data.pop("name"),
            call_id=call_id,
            **data,
        )
        self._recorded(state, event.get("step_number"), number, where)
        if call_id is not None:
            state.open_calls[call_id] = number
        return number

    def _step_end(self, state: TraceState, event: dict[str, Any], where: str) -> int:
        call_id = event.get("call_id")
        if call_id is not None:
            call_id = (call_id or None) if call_id.__class__ is str else _call_id(call_id)
        number = self._number(event, where)
        if number is not None:
            number = state.renumbered.get(number, number)
        elif call_id is not None:
            number = state.open_calls.get(call_id)
        else:
            raise _Rejected("needs a step_number or a call_id")
        updates = self._fields(state, event, where, _END_FIELDS)
        if updates["ended_at"] is None:
            updates["ended_at"] = self._now()
        metadata = updates.pop("metadata")
        pending = None
        if call_id is not None and number is None:
            pending = state.pending_calls.get(call_id)
        elif number is not None:
            pending = state.pending_numbers.get(number)
        if pending is not None and pending.is_open:
            data = pending.data
            for name, value in updates.items():
                if value is not None:
                    data[name] = value
            if metadata:
                data["metadata"] = {**data["metadata"], **metadata}
            pending.is_open = False
            pending.events.append(("step_end", event, where))
            if pending.call_id is not None:
                state.pending_calls.pop(pending.call_id, None)
                state.open_calls.pop(pending.call_id, None)
            return int(data["step_number"])
        if pending is not None:
            self._flush(state)  # closing a held complete step: write it first
        closed = self.recorder.end_step(
            state.trace_id,
            number,
            call_id=call_id if number is None else None,
            metadata=metadata,
            **updates,
        )
        self._repairs(where)
        if call_id is not None and state.open_calls.get(call_id) == closed:
            del state.open_calls[call_id]
        return closed

    def _step(self, state: TraceState, event: dict[str, Any], where: str) -> int | None:
        data = self._fields(state, event, where, _STEP_FIELDS)
        data["step_type"] = _step_type(data["step_type"])
        if data["metadata"] is None:
            data["metadata"] = {}
        if data["started_at"] is None and data["ended_at"] is None:
            data["started_at"] = self._now()
        if self._batching:
            number = self._claim_number(state, data["step_number"])
            if number is not None:
                data["step_number"] = number
                self._hold(state, data, None, False, ("step", event, where))
                return number
        self._flush(state)
        number = self.recorder.step(state.trace_id, data)
        self._recorded(state, event.get("step_number"), number, where)
        return number

    def _decision(self, state: TraceState, event: dict[str, Any], where: str) -> int:
        decision = self._object(event, "decision", where)
        if decision is None:
            decision = {name: event[name] for name in _DECISION_FIELDS if name in event}
        number = self._number(event, where)
        links = {
            name: self._link(state, self._link_value(name, event[name], where))
            for name in ("parent_step", "caused_by_step")
            if event.get(name) is not None
        }
        created = self.recorder.decision(
            state.trace_id,
            decision,
            step_number=self._link(state, number) if number is not None else None,
            name=_text(event.get("name")),
            started_at=event.get("started_at") or self._now(),
            **links,
        )
        self._recorded(state, number, created, where, new=number is None)
        return created

    def _snapshot(self, state: TraceState, event: dict[str, Any], where: str) -> int:
        snapshot = self._object(event, "snapshot", where)
        if snapshot is None:
            snapshot = {name: event[name] for name in _SNAPSHOT_FIELDS if name in event}
        number = self._number(event, where)
        call_id = _call_id(event.get("call_id"))
        if number is not None:
            number = state.renumbered.get(number, number)
        elif call_id is not None:
            number = state.open_calls.get(call_id) or self.recorder.find_open_step(
                state.trace_id, call_id
            )
            if number is None:
                raise _Rejected(f"no open step for call_id {call_id!r}")
        else:
            number = state.last_step
            if number is None:
                raise _Rejected("needs a step_number (no step recorded yet)")
        self.recorder.snapshot(state.trace_id, number, snapshot)
        self._repairs(where)
        return int(number)

    def _recorded(
        self, state: TraceState, requested: Any, number: int, where: str, *, new: bool = True
    ) -> None:
        """Bookkeeping after a one-by-one recorder call that may have created a step."""
        self.report.steps += new
        state.last_step = number
        if type(requested) is int and requested != number:
            state.renumbered[requested] = number
        if state.next_number is not None:
            state.next_number = max(state.next_number, number + 1)
        self._repairs(where)

    # --- holding and writing a batch's steps ----------------------------------------------

    def _hold(
        self,
        state: TraceState,
        data: dict[str, Any],
        call_id: str | None,
        is_open: bool,
        event: tuple[str, dict[str, Any], str],
    ) -> None:
        pending = _Pending(state, data, call_id, is_open, [event])
        if not state.pending:
            self._dirty[id(state)] = state
        state.pending.append(pending)
        number = data["step_number"]
        state.pending_numbers[number] = pending
        if call_id is not None and is_open:
            state.pending_calls[call_id] = pending
            state.open_calls[call_id] = number
        state.last_step = number

    def _flush(self, only: TraceState | None = None) -> None:
        """Write held steps (of one trace, or all): one pass per trace when the steps are
        clean, else one by one."""
        if only is not None:
            if not only.pending:
                return
            states = [self._dirty.pop(id(only))]
        elif self._dirty:
            states = list(self._dirty.values())
            self._dirty.clear()
        else:
            return
        batching, self._batching = self._batching, False
        try:
            for state in states:
                items = state.pending
                state.pending = []
                state.pending_numbers.clear()
                state.pending_calls.clear()
                try:
                    clean = self.recorder.record_steps_if_clean(
                        state.trace_id, [(p.data, p.call_id, p.is_open) for p in items]
                    )
                except NotFoundError as exc:
                    for item in items:
                        for kind, _event, where in item.events:
                            self._reject(where, kind, exc.message)
                    continue
                except Exception:  # noqa: BLE001 - one by one, each event on its own
                    clean = False
                if clean:
                    self.report.steps += len(items)
                    self.fast_batches += 1
                    continue
                self.replayed_batches += 1
                self._replay(state, items)
        finally:
            self._batching = batching

    def _replay(self, state: TraceState, items: list[_Pending]) -> None:
        """Record held steps one by one (the recorder repairs and warns as usual)."""
        state.next_number = None
        for item in items:
            if item.call_id is not None:
                state.open_calls.pop(item.call_id, None)
        for item in items:
            for kind, event, where in item.events:
                try:
                    if kind == "step_start":
                        self._step_start(state, event, where)
                    elif kind == "step_end":
                        self._step_end(state, event, where)
                    else:
                        self._step(state, event, where)
                except Exception as exc:  # noqa: BLE001 - as in ``handle``
                    self._reject(where, kind, _reason(exc))

    # --- the end of the stream ------------------------------------------------------------

    def finish(self, *, leave_open: bool = False) -> None:
        """At the end of the stream: write held steps, then finalize every trace this stream
        started and didn't end as ``timeout`` (or list it as left open)."""
        self._flush()
        for state in self._order:
            if not state.started_here or state.ended or state is self._default:
                continue
            if leave_open:
                self.report.left_open.append(state.trace_id)
                if self.writer is not None:
                    self.recorder.release(state.trace_id)
                continue
            self.end_trace(
                state,
                {"status": "timeout", "error": "the event stream ended before trace_end"},
                state.pending_metadata,
            )
            self.report.timed_out.append(state.trace_id)

    # --- helpers --------------------------------------------------------------------------

    def _now(self) -> str:
        """When the event being recorded arrived: the time its line was read, when known
        (``pump``), else now."""
        if self.arrived_at is not None and isinstance(self.clock, SystemClock):
            return canonical_time(dt.datetime.fromtimestamp(self.arrived_at, dt.UTC))
        return canonical_time(self.clock.now())

    def _repairs(self, where: str) -> None:
        warnings = self.recorder.warnings
        if not warnings:
            return
        for message in warnings:
            self.report.repairs += 1
            if len(self.report.repair_samples) < SAMPLES:
                self.report.repair_samples.append((where, message))
                self.warn(f"{where}: {message}")
        warnings.clear()

    def _number(self, event: dict[str, Any], where: str) -> int | None:
        """A step number as given (digits in a string coerced); anything else is dropped and
        the recorder numbers the step."""
        value = event.get("step_number")
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if value is None:
            return None
        if type(value) is int:
            if not 0 < value <= MAX_SAFE_INT:
                raise _Rejected(f"step_number must be a positive integer (got {value})")
            return value
        self.skip("step_number that is not a number", where)
        return None

    def _link_value(self, name: str, value: Any, where: str) -> int | None:
        """A ``parent_step``/``caused_by_step`` as a step number (digits in a string
        coerced); anything else can't name a step and is dropped with a warning."""
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if type(value) is int and 0 < value <= MAX_SAFE_INT:
            return value
        self.skip(f"{name} that is not a step number", where)
        return None

    def _object(self, event: dict[str, Any], name: str, where: str) -> dict[str, Any] | None:
        value = event.get(name)
        if value is None or isinstance(value, dict):
            return value
        self.skip(f"{name} that is not an object", where)
        return None

    def _tags(self, event: dict[str, Any], where: str) -> list[str]:
        value = event.get("tags")
        if value is None:
            return []
        if isinstance(value, list) and all(isinstance(t, str) for t in value):
            return [t for t in value if t.strip()]
        self.skip("tags that are not a list of strings", where)
        return []


def _reason(exc: BaseException) -> str:
    """Why an event was rejected, in words: our own errors say it; anything else (a value no
    check foresaw) is named by its kind, so the summary still points at the line."""
    if isinstance(exc, _Rejected):
        return str(exc)
    if isinstance(exc, AgentReplayError):
        return exc.message
    return f"could not be recorded ({type(exc).__name__}: {exc})"


def _step_type(value: Any) -> str:
    """The step type of a step event: one of the format's, as given or differing only in case
    and surrounding spaces (unambiguous); anything else is refused, never guessed."""
    if value.__class__ is str and value in STEP_TYPES:
        return str(value)
    if value is None:
        raise _Rejected(f"needs a step_type (one of {', '.join(STEP_TYPES)})")
    if isinstance(value, str) and value.strip().lower() in STEP_TYPES:
        return value.strip().lower()
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise _Rejected(f"unknown step_type {shown} (one of {', '.join(STEP_TYPES)})")


def _text(value: Any) -> str | None:
    """A text field: strings as they are, other scalars as text, ``None`` kept."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return str(value)


def _call_id(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


# --- reading a file descriptor --------------------------------------------------------------


class Interrupted(Exception):
    """A signal arrived while the pump was waiting for input."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class FdReader:
    """Complete lines from a file descriptor, read with ``os.read`` (a buffered reader would
    hold data ``select`` can't see).

    Args:
        fd: a pipe, terminal or file.
        follow: tail a growing file instead of reading to EOF: called when no data is left,
            returns ``True`` once the writer is done (then the rest is read and the reader
            ends).
        poll_s: how long to sleep between reads when following.
    """

    def __init__(
        self,
        fd: int,
        *,
        follow: Callable[[], bool] | None = None,
        poll_s: float = 0.05,
    ) -> None:
        self.fd = fd
        self.follow = follow
        self.poll_s = poll_s
        # (line number, line, when it was read: ``time.time()``)
        self.lines: deque[tuple[int, bytes, float]] = deque()
        self.eof = False
        self.line_number = 0
        self.interrupted: int | None = None
        # True while blocked waiting for input: a signal handler may raise Interrupted then.
        self.waiting = False
        self._partial = b""
        _grow_pipe(fd)
        try:
            select.select([fd], [], [], 0)
            self._selectable = follow is None
        except (OSError, ValueError):  # e.g. Windows pipes: no select
            self._selectable = False

    def _take(self, chunk: bytes) -> None:
        # A line is stamped when it is read, not when the recorder gets to it (a busy batch
        # must not shift the times of events that leave them out).
        read_at = time.time()
        if not chunk:
            self.eof = True
            if self._partial:
                self.line_number += 1
                self.lines.append((self.line_number, self._partial, read_at))
                self._partial = b""
            return
        data = self._partial + chunk if self._partial else chunk
        parts = data.split(b"\n")
        self._partial = parts.pop()
        for part in parts:
            self.line_number += 1
            self.lines.append((self.line_number, part, read_at))

    def wait(self) -> bool:
        """Block until at least one more line (or the end) is there; ``False`` at the end."""
        while not self.lines:
            if self.eof or self.interrupted is not None:
                return bool(self.lines)
            if self.follow is not None:
                chunk = os.read(self.fd, READ_SIZE)
                if chunk:
                    self._take(chunk)
                    continue
                if self.follow():
                    self._take(os.read(self.fd, READ_SIZE))
                    if self.eof:
                        break
                    continue
                self.waiting = True
                try:
                    if self.interrupted is None:
                        time.sleep(self.poll_s)
                finally:
                    self.waiting = False
                continue
            # Only the wait itself may be cut short by a signal: data once read is kept.
            self.waiting = True
            try:
                if self.interrupted is not None:
                    continue
                if self._selectable:
                    select.select([self.fd], [], [])
                    self.waiting = False
                chunk = os.read(self.fd, READ_SIZE)
            finally:
                self.waiting = False
            self._take(chunk)
        return bool(self.lines)

    def poll(self) -> bool:
        """Read what is available right now without blocking; ``True`` if anything came."""
        if self.eof or self.interrupted is not None:
            return False
        if self.follow is not None:
            chunk = os.read(self.fd, READ_SIZE)
            if not chunk:
                return False  # a file at its current end is not EOF while following
        else:
            if not self._selectable:
                return False
            ready, _, _ = select.select([self.fd], [], [], 0)
            if not ready:
                return False
            chunk = os.read(self.fd, READ_SIZE)
        self._take(chunk)
        return True


def _grow_pipe(fd: int) -> None:
    """Ask for a bigger pipe buffer when ``fd`` is a pipe (best effort: Linux only, and the
    system's limit may refuse it)."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setsize is None:
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            fcntl.fcntl(fd, setsize, PIPE_SIZE)
    except OSError:
        pass  # a smaller pipe only means smaller batches


class LineSink:
    """What ``pump`` feeds: the native engine, or a stream format's mapper."""

    engine: EventEngine

    def feed_line(self, line: bytes, where: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def finish(self, *, leave_open: bool = False) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class NativeSink(LineSink):
    """Native protocol v1 lines straight into the engine."""

    def __init__(self, engine: EventEngine) -> None:
        self.engine = engine

    def feed_line(self, line: bytes, where: str) -> None:
        self.engine.feed_line(line, where)

    def finish(self, *, leave_open: bool = False) -> None:
        self.engine.finish(leave_open=leave_open)


def pump(reader: FdReader, sink: LineSink, *, window_s: float = WINDOW_S) -> None:
    """Record every line from ``reader`` with group commit.

    Each batch is one ``store.write()`` transaction: lines are recorded until no more input is
    immediately available, or ``window_s`` has passed since the batch began, then it commits.
    Returns at the end of input, or, once ``reader.interrupted`` is set (a signal handler sets
    it), after recording and committing every line already read.
    """
    engine = sink.engine
    store = engine.store
    monotonic = time.monotonic
    while reader.wait():
        with store.write():
            engine.begin_batch()
            deadline = monotonic() + window_s
            lines = reader.lines
            while True:
                while lines:
                    number, line, read_at = lines.popleft()
                    where = f"line {number}"
                    engine.arrived_at = read_at
                    try:
                        sink.feed_line(line, where)
                    except Exception as exc:  # noqa: BLE001 - a stream format's mapper too
                        engine.reject(where, "line", _reason(exc))
                    if monotonic() >= deadline:
                        break
                if lines or monotonic() >= deadline or not reader.poll():
                    break
            engine.arrived_at = None
            engine.end_batch()


def finish(sink: LineSink, *, leave_open: bool = False) -> EventReport:
    """End a stream: write what is held and finalize the traces it left open."""
    with sink.engine.store.write():
        sink.finish(leave_open=leave_open)
    return sink.engine.report
