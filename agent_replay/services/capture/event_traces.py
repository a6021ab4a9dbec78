"""Which trace a native event goes to, and what the engine knows of each trace it records into.

A ``trace_id`` is the producer's: it is mapped to one of our ids, unless it already names a
trace in the store (then recorded into); a producer id of a trace still ``running`` (an
earlier stream's ``--leave-open``) resumes that trace; under ``run``, the child's first
trace_start claims the run's trace. ``TraceBook`` keeps that mapping for one stream;
``TraceState`` is one trace's bookkeeping (open calls, renumbered steps, steps held for the
batch). Used by ``events.EventEngine`` only (see ``protocol`` for the whole map).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_replay.services.capture.protocol import EventReport, Rejected
from agent_replay.services.recorder_rows import trace_exists
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import producer_trace


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
    pending: list[PendingStep] = field(default_factory=list)
    pending_numbers: dict[int, PendingStep] = field(default_factory=dict)
    pending_calls: dict[str, PendingStep] = field(default_factory=dict)

    def link(self, value: Any) -> Any:
        """Our step number for a producer's (``parent_step``, ``caused_by_step``)."""
        if type(value) is int:
            return self.renumbered.get(value, value)
        return value


@dataclass(slots=True, eq=False)
class PendingStep:
    """A step held for the batch's one-pass write."""

    state: TraceState
    data: dict[str, Any]
    call_id: str | None
    is_open: bool
    # The original events, replayed one by one if the batch isn't clean.
    events: list[tuple[str, dict[str, Any], str]]


class TraceBook:
    """The traces one stream records into: by producer id and by ours, in the order met.

    Args:
        store: read to tell stored and resumable traces from unknown ones.
        report: the stream's report (every trace met is listed in ``report.traces``).
        default_trace: where events without a ``trace_id`` go (``run``'s trace), if any.
    """

    def __init__(self, store: Store, report: EventReport, default_trace: str | None) -> None:
        self.store = store
        self.report = report
        # producer trace id (and our own id) -> state
        self.by_key: dict[str, TraceState] = {}
        self.order: list[TraceState] = []
        self.default: TraceState | None = None
        # trace_starts without a trace_id so far (their keys: ``#1``, ``#2``...)
        self.anonymous = 0
        if default_trace is not None:
            self.default = self.remember(default_trace, TraceState(default_trace))

    def remember(self, key: str, state: TraceState) -> TraceState:
        """Know ``state`` by ``key`` (a producer id) and by its own id; a new trace joins the
        report and the order traces are finalized in."""
        if state.trace_id not in self.report.traces:
            self.report.traces.append(state.trace_id)
            self.order.append(state)
        self.by_key[key] = state
        self.by_key[state.trace_id] = state
        return state

    def stored(self, trace_id: str) -> bool:
        """Whether ``trace_id`` names a trace in the store."""
        return trace_exists(self.store, trace_id)

    def resolve(self, event: dict[str, Any]) -> TraceState:
        """The trace an event other than trace_start records into (``Rejected``: none)."""
        producer_id = event.get("trace_id")
        if producer_id is None:
            if self.default is not None:
                return self.default
            open_here = [s for s in self.order if s.started_here and not s.ended]
            if len(open_here) == 1:
                return open_here[0]
            raise Rejected(
                "no trace_id"
                + (" (more than one trace is open)" if open_here else " and no trace started")
            )
        if not isinstance(producer_id, str | int) or isinstance(producer_id, bool):
            raise Rejected(f"trace_id must be a string (got {type(producer_id).__name__})")
        key = str(producer_id)
        state = self.by_key.get(key)
        if state is not None:
            return state
        if self.stored(key):
            return self.remember(key, TraceState(key))
        resumed = producer_trace(self.store, key, running=True)
        if resumed is not None:  # a trace an earlier stream left open (``--leave-open``)
            return self.remember(key, TraceState(resumed))
        raise Rejected(f"unknown trace_id {key!r} (no trace_start for it, not in the store)")

    def attach_target(self, key: str | None) -> TraceState | None:
        """The existing trace a trace_start attaches to, if any (``None``: start a new one).

        A producer id naming a trace in the store attaches to it. Under ``run``, the child's
        first trace_start (without an id, or with one the store doesn't know) claims the
        run's trace; later ones start traces of their own.
        """
        default = self.default
        if key is None:
            return default if default is not None and not default.claimed else None
        known = self.by_key.get(key)
        if known is not None and known.started_here and not known.ended:
            raise Rejected(f"trace {key!r} was already started and is still open")
        if default is not None and (known is default or key == default.trace_id):
            return default
        if known is not None and known.trace_id == key:
            return known
        if (known is None or known.ended) and self.stored(key):
            return TraceState(key)
        if default is not None and not default.claimed:
            return default
        if known is None:
            resumed = producer_trace(self.store, key, running=True)
            if resumed is not None:  # an earlier stream left it open: this one resumes it
                return TraceState(resumed)
        return None
