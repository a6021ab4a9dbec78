"""``LiveFeed``: what ``agent-replay watch`` shows, kept up to date one ``poll`` at a time.

A trace first seen gets a one-time baseline (its tokens, errors, blocks, last activity and
open steps); from then on its figures move by deltas. The feed keeps that state and one
connection of its own, so ``PRAGMA data_version`` (per connection: it changes when another
connection commits) turns an idle poll into a single pragma. The incremental reads it runs,
and the shapes they return, are ``store.live``.

No Textual, no Rich: the TUI calls this from thread workers.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from agent_replay.store.db import Store, data_version, shared_connection
from agent_replay.store.live import (
    FINISHED_LIMIT,
    RUNNING_LIMIT,
    FeedStats,
    LiveCursor,
    LiveFilter,
    LiveStep,
    LiveTrace,
    LiveUpdate,
    TraceHead,
    latest_ms,
    max_rowids,
    steps_after,
    steps_by_rowid,
    touched_steps,
    trace_baseline,
    trace_live_steps,
    watched_traces,
)

# How often a feed with a reaper looks for traces whose writer died (seconds).
REAP_EVERY_S = 2.0


@dataclass
class _Tally:
    """A watched trace's running figures, moved by deltas after its baseline."""

    count: int = 0
    tokens: int = 0
    has_tokens: bool = False
    errors: int = 0
    blocks: int = 0
    last_ms: int | None = None

    def add(self, step: LiveStep, sign: int = 1) -> None:
        self.count += sign
        if step.tokens_used is not None:
            self.tokens += sign * step.tokens_used
            self.has_tokens = True
        self.errors += sign * step.is_error
        self.blocks += sign * step.blocked
        activity = step.activity_ms
        if sign > 0 and activity is not None and (self.last_ms is None or activity > self.last_ms):
            self.last_ms = activity


@dataclass
class _Selected:
    """The selected trace's steps, kept in step order, updated in place."""

    trace_id: str
    steps: list[LiveStep] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)

    def put(self, step: LiveStep) -> None:
        """Add a new step or replace the one with its number (usually an append)."""
        number = step.step_number
        if not self.numbers or number > self.numbers[-1]:
            self.steps.append(step)
            self.numbers.append(number)
            return
        index = bisect_left(self.numbers, number)
        if index < len(self.numbers) and self.numbers[index] == number:
            self.steps[index] = step
        else:
            self.steps.insert(index, step)
            self.numbers.insert(index, number)

    def drop(self, step: LiveStep) -> None:
        index = bisect_left(self.numbers, step.step_number)
        if index < len(self.numbers) and self.steps[index].rowid == step.rowid:
            del self.steps[index]
            del self.numbers[index]


class LiveFeed:
    """Incremental reads of the watched traces, one ``poll`` at a time from any thread.

    Args:
        store: the store to watch; the feed opens its own connection to the same file (so
            ``PRAGMA data_version`` compares like with like) and closes it in ``close``.
        filters: which traces to watch.
        running_limit, finished_limit: how many running and finished traces to list.
        reaper: called with the feed's store every ``REAP_EVERY_S`` (the watch passes
            ``services.liveness.finalize_orphans``: a trace whose recorder died shows ended).

    Example:
        >>> feed = LiveFeed(store, LiveFilter(agent="support-bot"))
        >>> update = feed.poll(None)       # the first running trace, with all its steps
        >>> feed.poll(update.selected)     # None until something is committed
        >>> feed.close()
    """

    def __init__(
        self,
        store: Store,
        filters: LiveFilter | None = None,
        *,
        running_limit: int = RUNNING_LIMIT,
        finished_limit: int = FINISHED_LIMIT,
        reaper: Callable[[Store], object] | None = None,
    ) -> None:
        self.store = store
        # Finalizes traces whose writer died (``services/liveness``), every ``REAP_EVERY_S``:
        # nothing is committed when a recorder dies, so no change would show it otherwise.
        self.reaper = reaper
        self._reaped_at = 0.0
        self.filters = filters or LiveFilter()
        self.running_limit = running_limit
        self.finished_limit = finished_limit
        self.stats = FeedStats()
        """What the polls cost so far."""
        self._lock = threading.Lock()
        self._closed = False
        self._own: Store | None = None
        self._version: int | None = None
        self._cursor: LiveCursor | None = None
        self._tallies: dict[str, _Tally] = {}
        self._open: dict[int, LiveStep] = {}
        self._selected: _Selected | None = None

    # --- connection ----------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Store]:
        """The feed's own long-lived connection (a file or a server store), else (an
        in-memory store) a connection for this poll."""
        if self.store.path is not None or self.store.url is not None:
            if self._own is None:
                # Used by one worker thread at a time (poll holds the lock), from many threads.
                self._own = shared_connection(self.store)
            yield self._own
        else:
            with self.store.db.connection_context():
                yield self.store

    def close(self) -> None:
        """Close the feed's connection; a poll running meanwhile closes it on its way out."""
        self._closed = True
        if self._lock.acquire(timeout=1.0):
            try:
                self._disconnect()
            finally:
                self._lock.release()

    def _disconnect(self) -> None:
        if self._own is not None:
            self._own.close()
            self._own = None

    # --- polling -------------------------------------------------------------------------

    def poll(self, selected: str | None, *, force: bool = False) -> LiveUpdate | None:
        """Read what changed since the last poll.

        Args:
            selected: the trace whose steps to return; ``None`` picks the first listed.
            force: read even if nothing was committed since the last poll.

        Returns:
            The watched traces and the selected trace's steps, or ``None`` when nothing was
            committed since the last poll and the selection is unchanged (or the feed is
            closed).
        """
        with self._lock:
            if self._closed:
                return None
            try:
                self.stats.polls += 1
                with self._connection() as store:
                    if (
                        self.reaper is not None
                        and time.monotonic() - self._reaped_at >= REAP_EVERY_S
                    ):
                        self._reaped_at = time.monotonic()
                        self.reaper(store)
                    version = data_version(store)
                    same_selection = selected is None or (
                        self._selected is not None and self._selected.trace_id == selected
                    )
                    if (
                        not force
                        and version is not None
                        and version == self._version
                        and self._cursor is not None
                        and same_selection
                    ):
                        self.stats.idle += 1
                        return None
                    with store.db.atomic():  # one read snapshot for the whole poll
                        update = self._read(store, selected)
                    self._version = version
                    return update
            finally:
                if self._closed:
                    self._disconnect()

    def _read(self, store: Store, selected: str | None) -> LiveUpdate:
        heads = watched_traces(
            store,
            self.filters,
            running_limit=self.running_limit,
            finished_limit=self.finished_limit,
        )
        top = max_rowids(store)
        if self._cursor is not None and top.steps < self._cursor.steps:
            self._reset()  # rows at the tail were deleted: rowids may be reused, start over
        if self._cursor is not None:
            self._apply_changes(store, self._cursor, top)
        self._cursor = top
        if selected is None and self._selected is not None:
            selected = self._selected.trace_id
        if selected is None and heads:
            selected = heads[0].id
        for head in heads:
            tally = self._tallies.get(head.id)
            if tally is not None and tally.count != head.step_count:
                # Steps were deleted or rewritten in place of others (not something the
                # recorder does): deltas can't follow that, so read this trace afresh.
                self._forget(head.id)
                if self._selected is not None and self._selected.trace_id == head.id:
                    self._selected = None
        self._track(store, [h.id for h in heads] + ([selected] if selected else []))
        if selected is not None and (self._selected is None or self._selected.trace_id != selected):
            steps = trace_live_steps(store, selected)
            self.stats.steps_read += len(steps)
            self.stats.full_loads += 1
            self._selected = _Selected(selected, steps, [s.step_number for s in steps])
        elif selected is None:
            self._selected = None
        return LiveUpdate(
            traces=tuple(self._live_trace(head) for head in heads),
            selected=selected,
            steps=tuple(self._selected.steps) if self._selected else (),
        )

    def _reset(self) -> None:
        self._cursor = None
        self._tallies.clear()
        self._open.clear()
        self._selected = None

    def _apply_changes(self, store: Store, cursor: LiveCursor, top: LiveCursor) -> None:
        """Fold in the steps added since ``cursor``, the open steps closed since, and the
        steps of the selected trace that got a decision or a snapshot."""
        selected = self._selected
        new = steps_after(store, cursor.steps, top.steps, list(self._tallies))
        self.stats.steps_read += len(new)
        for step in new:
            self._tallies[step.trace_id].add(step)
            if step.is_open:
                self._open[step.rowid] = step
            if selected is not None and step.trace_id == selected.trace_id:
                selected.put(step)
        watching = [rowid for rowid, step in self._open.items() if step.rowid <= cursor.steps]
        if watching:
            now = {step.rowid: step for step in steps_by_rowid(store, watching)}
            self.stats.steps_read += len(now)
            for rowid in watching:
                before = self._open[rowid]
                after = now.get(rowid)
                if after == before:
                    continue
                tally = self._tallies.get(before.trace_id)
                if tally is not None:
                    tally.add(before, -1)
                    if after is not None:
                        tally.add(after)
                if after is None or not after.is_open:
                    del self._open[rowid]
                else:
                    self._open[rowid] = after
                if selected is not None and before.trace_id == selected.trace_id:
                    if after is None:
                        selected.drop(before)
                    else:
                        selected.put(after)
        if selected is not None and (
            top.decisions > cursor.decisions or top.snapshots > cursor.snapshots
        ):
            touched = touched_steps(store, cursor, top, selected.trace_id)
            self.stats.steps_read += len(touched)
            for step in touched:
                selected.put(step)
                if step.rowid in self._open:
                    self._open[step.rowid] = step

    def _forget(self, trace_id: str) -> None:
        self._tallies.pop(trace_id, None)
        for rowid in [r for r, step in self._open.items() if step.trace_id == trace_id]:
            del self._open[rowid]

    def _track(self, store: Store, trace_ids: list[str]) -> None:
        """Start tallying traces first seen (a baseline each); forget the ones gone."""
        wanted = set(trace_ids)
        for trace_id in list(self._tallies):
            if trace_id not in wanted:
                del self._tallies[trace_id]
        for rowid in [r for r, step in self._open.items() if step.trace_id not in wanted]:
            del self._open[rowid]
        for trace_id in dict.fromkeys(trace_ids):
            if trace_id in self._tallies:
                continue
            base = trace_baseline(store, trace_id)
            self.stats.baselines += 1
            self.stats.steps_read += len(base.open_steps)
            self._tallies[trace_id] = _Tally(
                base.count,
                base.tokens,
                base.has_tokens,
                base.errors,
                base.blocks,
                base.last_activity_ms,
            )
            for step in base.open_steps:
                self._open[step.rowid] = step

    def _live_trace(self, head: TraceHead) -> LiveTrace:
        tally = self._tallies.get(head.id) or _Tally()
        if not head.is_running and head.total_tokens is not None:
            tokens: int | None = head.total_tokens
        else:
            tokens = tally.tokens if tally.has_tokens else None
        instants = [latest_ms(head.started_at, head.ended_at), tally.last_ms]
        last = max((ms for ms in instants if ms is not None), default=None)
        return LiveTrace(
            id=head.id,
            agent_name=head.agent_name,
            status=head.status,
            session_id=head.session_id,
            started_at=head.started_at,
            ended_at=head.ended_at,
            step_count=head.step_count,
            tokens=tokens,
            errors=tally.errors,
            blocks=tally.blocks,
            open_steps=sum(1 for step in self._open.values() if step.trace_id == head.id),
            last_activity_ms=last,
            error=head.error,
        )
