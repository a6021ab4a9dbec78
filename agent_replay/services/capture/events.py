"""``EventEngine``: native protocol v1 events -> ``TraceRecorder`` calls, lenient and redacting
by default. ``record``, ``run`` and the stream formats (``streams.py``) all write through it;
the protocol itself (fields, coercions, the report) is ``protocol``, which trace an event goes
to is ``event_traces``, reading lines and committing batches is ``pump``. Stdlib, the store
and the recorder only: never Textual, Rich or an AI SDK.

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
from typing import Any

import orjson

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import NotFoundError
from agent_replay.services.capture.event_traces import PendingStep, TraceBook, TraceState
from agent_replay.services.capture.protocol import (
    DECISION_FIELDS,
    END_FIELDS,
    FIELDS,
    PROTOCOL_VERSION,
    SAMPLES,
    SNAPSHOT_FIELDS,
    START_FIELDS,
    STEP_FIELDS,
    TRACE_START_FIELDS,
    EventReport,
    Rejected,
    Warn,
    as_call_id,
    as_step_type,
    as_text,
    event_fields,
    event_number,
    event_object,
    event_tags,
    link_value,
    no_warn,
    rejection_reason,
)
from agent_replay.services.recorder import TraceRecorder
from agent_replay.services.recorder_rows import next_step_number
from agent_replay.store.db import Store
from agent_replay.trace.base import canonical_time


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
        warn: Warn = no_warn,
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
        self.book = TraceBook(store, self.report, default_trace)
        # Traces holding steps for this batch's write (insertion-ordered).
        self._dirty: dict[int, TraceState] = {}
        self._batching = False
        # When the line being recorded was read (``time.time()``; set by ``pump``).
        self.arrived_at: float | None = None
        # How held batches were written (a diagnostic for tests and profiling).
        self.fast_batches = 0
        self.replayed_batches = 0

    # --- batches --------------------------------------------------------------------------

    def begin_batch(self) -> None:
        """Start coalescing steps (call inside the batch's ``store.write()``)."""
        self._batching = True
        for state in self.book.order:
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
            self._reject(where, str(kind), rejection_reason(exc))
        return None

    def _dispatch(self, kind: str, event: dict[str, Any], where: str) -> Any:
        if kind == "trace_start":
            return self._trace_start(event, where)
        state = self.book.resolve(event)
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

    def _trace_start(self, event: dict[str, Any], where: str) -> str:
        producer_id = event.get("trace_id")
        key = None if producer_id is None else str(producer_id)
        metadata = event_object(event, "metadata", where, self.skip) or {}
        target = self.book.attach_target(key)
        if target is not None:
            target.started_here = target is not self.book.default
            target.claimed = True
            target.ended = False
            if key is not None and key != target.trace_id:
                metadata = {**metadata, "producer_trace_id": key}
            # The trace exists already (its name, input and tags stay): what the producer
            # said about it is kept beside them, in metadata.
            said = {name: event[name] for name in TRACE_START_FIELDS if name in event}
            if said:
                metadata = {**metadata, "producer_trace_start": said}
            target.pending_metadata.update(metadata)
            self.book.remember(key or target.trace_id, target)
            if self.writer is not None and target.started_here:
                self.recorder.claim(target.trace_id, self.writer)
            return target.trace_id
        agent_name = event.get("agent_name") or self.default_agent_name
        if not agent_name:
            raise Rejected("agent_name is required")
        if not isinstance(agent_name, str):
            agent_name = str(agent_name)
        tags = event_tags(event, where, self.skip)
        if key is not None:
            metadata = {**metadata, "producer_trace_id": key}
        trace_id = self.recorder.start_trace(
            agent_name,
            input=event.get("input"),
            tags=[*tags, *self.tags],
            session_id=as_text(event.get("session_id")),
            started_at=event.get("started_at") or self._now(),
            agent_version=as_text(event.get("agent_version")),
            trigger=as_text(event.get("trigger")),
            metadata=metadata,
            source_format=self.source_format,
        )
        self._repairs(where)
        if self.writer is not None:
            self.recorder.claim(trace_id, self.writer)
        if key is None:
            self.book.anonymous += 1
            key = f"#{self.book.anonymous}"
        state = self.book.remember(key, TraceState(trace_id, started_here=True, claimed=True))
        state.next_number = 1
        return trace_id

    def _trace_end(self, state: TraceState, event: dict[str, Any], where: str) -> None:
        values = {
            "status": event.get("status") or "completed",
            "output": event.get("output"),
            "error": as_text(event.get("error")),
            "ended_at": event.get("ended_at") or self._now(),
            "total_tokens": event.get("total_tokens"),
            "total_cost_usd": event.get("total_cost_usd"),
            "total_duration_ms": event.get("total_duration_ms"),
        }
        metadata = {
            **state.pending_metadata,
            **(event_object(event, "metadata", where, self.skip) or {}),
        }
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
        return self.book.by_key.get(trace_id)

    # --- steps ----------------------------------------------------------------------------

    def _next(self, state: TraceState) -> int:
        if state.next_number is None:
            state.next_number = next_step_number(self.store, state.trace_id)
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

    def _step_start(self, state: TraceState, event: dict[str, Any], where: str) -> int | None:
        call_id = event.get("call_id")
        if call_id is not None:
            call_id = (call_id or None) if call_id.__class__ is str else as_call_id(call_id)
        data = event_fields(state.renumbered, event, where, START_FIELDS, self.skip)
        data["step_type"] = as_step_type(data["step_type"])
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
            call_id = (call_id or None) if call_id.__class__ is str else as_call_id(call_id)
        number = event_number(event, where, self.skip)
        if number is not None:
            number = state.renumbered.get(number, number)
        elif call_id is not None:
            number = state.open_calls.get(call_id)
        else:
            raise Rejected("needs a step_number or a call_id")
        updates = event_fields(state.renumbered, event, where, END_FIELDS, self.skip)
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
        data = event_fields(state.renumbered, event, where, STEP_FIELDS, self.skip)
        data["step_type"] = as_step_type(data["step_type"])
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
        decision = event_object(event, "decision", where, self.skip)
        if decision is None:
            decision = {name: event[name] for name in DECISION_FIELDS if name in event}
        number = event_number(event, where, self.skip)
        links = {
            name: state.link(link_value(name, event[name], where, self.skip))
            for name in ("parent_step", "caused_by_step")
            if event.get(name) is not None
        }
        created = self.recorder.decision(
            state.trace_id,
            decision,
            step_number=state.link(number) if number is not None else None,
            name=as_text(event.get("name")),
            started_at=event.get("started_at") or self._now(),
            **links,
        )
        self._recorded(state, number, created, where, new=number is None)
        return created

    def _snapshot(self, state: TraceState, event: dict[str, Any], where: str) -> int:
        snapshot = event_object(event, "snapshot", where, self.skip)
        if snapshot is None:
            snapshot = {name: event[name] for name in SNAPSHOT_FIELDS if name in event}
        number = event_number(event, where, self.skip)
        call_id = as_call_id(event.get("call_id"))
        if number is not None:
            number = state.renumbered.get(number, number)
        elif call_id is not None:
            number = state.open_calls.get(call_id) or self.recorder.find_open_step(
                state.trace_id, call_id
            )
            if number is None:
                raise Rejected(f"no open step for call_id {call_id!r}")
        else:
            number = state.last_step
            if number is None:
                raise Rejected("needs a step_number (no step recorded yet)")
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
        pending = PendingStep(state, data, call_id, is_open, [event])
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

    def _replay(self, state: TraceState, items: list[PendingStep]) -> None:
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
                    self._reject(where, kind, rejection_reason(exc))

    # --- the end of the stream ------------------------------------------------------------

    def finish(self, *, leave_open: bool = False) -> None:
        """At the end of the stream: write held steps, then finalize every trace this stream
        started and didn't end as ``timeout`` (or list it as left open)."""
        self._flush()
        for state in self.book.order:
            if not state.started_here or state.ended or state is self.book.default:
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
