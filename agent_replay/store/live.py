"""Live reads for ``agent-replay watch``: the traces worth watching and their steps as they
arrive, read incrementally so a poll costs what changed, not what exists.

Two kinds of change reach the store while a trace runs (see ``services.recorder``): new step
rows (``start_step``/``step`` insert with ``is_open`` 1 or 0) and updates in place (``end_step``
closes an open step and sets its output, error and tokens; ``decision``/``snapshot`` replace a
row in their own tables; ``end_trace`` updates the trace). So a poll reads:

- new steps: ``rowid > cursor`` on the rowid B-tree (a range seek; ``+trace_id`` keeps SQLite
  from preferring the ``(trace_id, step_number)`` index, which would scan whole traces);
- the steps it last saw open, by rowid, to catch the ones closed since;
- new decision and snapshot rows past their own rowid cursors (markers on the selected trace);
- the short list of watched traces (running first, then recently finished: two ``LIMIT``
  queries on indexed columns).

``store.live_feed.LiveFeed`` runs these reads and keeps the state between polls (a trace's
baseline, then deltas); ``data_version`` lets it skip a poll when nothing was committed.

On PostgreSQL the arrival order is the ``seq`` identity column of steps, decisions and
snapshots (migration 0007) in place of the rowid: writers hold the store's write lock from
their first insert to their commit, so sequence values become visible in order. There is no
``data_version``, so every poll reads (still incrementally).

No Textual, no Rich: the TUI calls this from thread workers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from peewee import SQL, Case, ColumnBase, Expression, Node, NodeList, Select, fn

from agent_replay.store.db import Store
from agent_replay.store.models import DecisionRow, SnapshotRow, StepRow, TraceRow
from agent_replay.store.stats import guard_blocked
from agent_replay.trace.base import time_ms

RUNNING_LIMIT = 50
"""Running traces listed at most (the newest started)."""
FINISHED_LIMIT = 20
"""Finished traces listed at most, after the running ones."""
PREVIEW_CHARS = 500
"""How much of an error or a guard check's output a live step carries (for the note line)."""
_CHUNK = 500  # bound on the number of parameters in one IN (...) list


def _arrival(store: Store) -> SQL:
    """The arrival-order column: SQLite's rowid, PostgreSQL's ``seq`` (migration 0007). Not in
    the models (``models.BACKEND_COLUMNS``), so named as a column of the query's one table."""
    return SQL("rowid") if store.is_sqlite else SQL("seq")


def _unindexed(store: Store, column: ColumnBase) -> ColumnBase:
    """SQLite's unary ``+`` on ``column``: a planner hint that keeps SQLite off an index for
    it (a rowid range seek beats scanning whole traces); PostgreSQL needs no hint and has no
    unary plus on text. The one backend branch here: a hint, not a different query."""
    return NodeList((SQL("+"), column), glue="") if store.is_sqlite else column


def _step_columns(store: Store) -> list[Node]:
    """What ``LiveStep.from_row`` reads, in its order."""
    is_guard = StepRow.step_type == "guard_check"
    return [
        _arrival(store),
        StepRow.trace_id,
        StepRow.step_number,
        StepRow.step_type,
        StepRow.name,
        fn.substr(StepRow.error, 1, PREVIEW_CHARS),
        guard_blocked(),
        Case(None, [(is_guard, fn.substr(StepRow.output, 1, PREVIEW_CHARS))]),
        StepRow.started_at,
        StepRow.ended_at,
        StepRow.duration_ms,
        StepRow.tokens_used,
        StepRow.is_open,
        fn.EXISTS(DecisionRow.select(SQL("1")).where(DecisionRow.step_id == StepRow.id)),
        fn.EXISTS(SnapshotRow.select(SQL("1")).where(SnapshotRow.step_id == StepRow.id)),
    ]


def _live_steps(store: Store, where: Expression, *, ordered: Node | None = None) -> list[LiveStep]:
    query = StepRow.select(*_step_columns(store)).where(where)
    if ordered is not None:
        query = query.order_by(ordered)
    return [LiveStep.from_row(row) for row in query.tuples().execute(store.db)]


_TRACE_COLUMNS = (
    TraceRow.id,
    TraceRow.agent_name,
    TraceRow.status,
    TraceRow.session_id,
    TraceRow.started_at,
    TraceRow.ended_at,
    TraceRow.step_count,
    TraceRow.total_tokens,
    TraceRow.error,
)


@dataclass(frozen=True, slots=True)
class LiveFilter:
    """Which traces ``watch`` shows (``None``: any)."""

    session: str | None = None
    """Only traces of this ``session_id`` (exact)."""
    agent: str | None = None
    """Only traces of this ``agent_name`` (exact)."""

    def describe(self) -> str:
        """``session S · agent A`` (empty when nothing is filtered)."""
        parts = []
        if self.session:
            parts.append(f"session {self.session}")
        if self.agent:
            parts.append(f"agent {self.agent}")
        return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class LiveStep:
    """What the live view needs of one step (payloads left out but for short previews)."""

    rowid: int
    """The row's SQLite rowid: the feed's cursor."""
    trace_id: str
    step_number: int
    step_type: str
    name: str | None
    error: str | None
    """The step's error, cut to ``PREVIEW_CHARS``."""
    blocked: bool
    """A guard check that blocked its action (``stats.guard_blocked``)."""
    guard_output: str | None
    """A guard check's output (JSON text), cut to ``PREVIEW_CHARS``."""
    started_at: str | None
    ended_at: str | None
    duration_ms: float | None
    tokens_used: int | None
    is_open: bool
    """Started and not yet ended (``start_step`` without ``end_step``)."""
    has_decision: bool
    has_snapshot: bool

    @property
    def is_error(self) -> bool:
        """An error step, or a step that failed (a blocked guard check counts as a block)."""
        return not self.blocked and (self.step_type == "error" or self.error is not None)

    @property
    def activity_ms(self) -> int | None:
        """The latest instant this step shows activity at (its end, else its start)."""
        return latest_ms(self.started_at, self.ended_at)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LiveStep:
        return cls(
            rowid=int(row[0]),
            trace_id=str(row[1]),
            step_number=int(row[2]),
            step_type=str(row[3]),
            name=row[4],
            error=row[5],
            blocked=bool(row[6]),
            guard_output=row[7],
            started_at=row[8],
            ended_at=row[9],
            duration_ms=row[10],
            tokens_used=row[11],
            is_open=bool(row[12]),
            has_decision=bool(row[13]),
            has_snapshot=bool(row[14]),
        )


@dataclass(frozen=True, slots=True)
class TraceHead:
    """A watched trace's own columns (no step aggregates)."""

    id: str
    agent_name: str
    status: str
    session_id: str | None
    started_at: str | None
    ended_at: str | None
    step_count: int
    total_tokens: int | None
    error: str | None

    @property
    def is_running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True, slots=True)
class LiveTrace:
    """One row of the watch list: the trace and its live figures."""

    id: str
    agent_name: str
    status: str
    session_id: str | None
    started_at: str | None
    ended_at: str | None
    step_count: int
    tokens: int | None
    """The trace's total once finished; while running, the sum over its steps so far."""
    errors: int
    """Error steps and failed steps (blocked guard checks are counted in ``blocks``)."""
    blocks: int
    """Guard checks that blocked their action."""
    open_steps: int
    """Steps started and not yet ended."""
    last_activity_ms: int | None
    """The latest start or end of the trace or any of its steps (ms since the epoch)."""
    error: str | None

    @property
    def is_running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True, slots=True)
class LiveCursor:
    """The highest rowids read so far, per table."""

    steps: int = 0
    decisions: int = 0
    snapshots: int = 0


@dataclass(frozen=True, slots=True)
class Baseline:
    """A trace's figures at first sight, read once."""

    count: int
    tokens: int
    has_tokens: bool
    errors: int
    blocks: int
    last_activity_ms: int | None
    open_steps: list[LiveStep]


@dataclass(frozen=True)
class LiveUpdate:
    """What one poll saw: the watched traces and the selected trace's steps (snapshots)."""

    traces: tuple[LiveTrace, ...]
    """Running traces (newest start first), then finished ones (latest end first)."""
    selected: str | None
    """The trace whose steps are in ``steps`` (the first listed when none was asked for)."""
    steps: tuple[LiveStep, ...]
    """Every step of the selected trace, in step order."""

    @property
    def running(self) -> int:
        return sum(1 for trace in self.traces if trace.is_running)


@dataclass
class FeedStats:
    """Counters that show a poll's cost (the tests assert polls stay incremental)."""

    polls: int = 0
    """Calls to ``poll``."""
    idle: int = 0
    """Polls answered by ``data_version`` alone (nothing committed since the last read)."""
    steps_read: int = 0
    """Step rows read, over all polls."""
    full_loads: int = 0
    """Whole-trace step loads (once per selected trace)."""
    baselines: int = 0
    """Per-trace baselines read (once per trace first seen)."""


# --- queries ---------------------------------------------------------------------------------


def max_rowids(store: Store) -> LiveCursor:
    """The highest rowid of steps, decisions and snapshots (each a seek to the B-tree's end)."""
    arrival = _arrival(store)
    query = Select(
        columns=[model.select(fn.MAX(arrival)) for model in (StepRow, DecisionRow, SnapshotRow)]
    )
    row = store.db.execute(query).fetchone()
    return LiveCursor(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))


def watched_traces(
    store: Store,
    filters: LiveFilter | None = None,
    *,
    running_limit: int = RUNNING_LIMIT,
    finished_limit: int = FINISHED_LIMIT,
) -> list[TraceHead]:
    """Running traces (newest started first), then recently finished ones (latest end first).

    "Recently finished" is taken among the ``finished_limit`` traces started last (an index
    range), then ordered by their end, so the query stays a ``LIMIT`` on a large store.
    """
    filters = filters or LiveFilter()
    only: list[Expression] = []
    if filters.session is not None:
        only.append(TraceRow.session_id == filters.session)
    if filters.agent is not None:
        only.append(TraceRow.agent_name == filters.agent)

    def heads(status: Expression, limit: int) -> list[TraceHead]:
        query = (
            TraceRow.select(*_TRACE_COLUMNS)
            .where(status, *only)
            .order_by(TraceRow.started_at_ms.desc(), TraceRow.id.desc())
            .limit(limit)
        )
        return [_head(row) for row in query.tuples().execute(store.db)]

    running = heads(TraceRow.status == "running", running_limit)
    done = heads(TraceRow.status != "running", finished_limit)
    # Latest end first; a trace without an end (imported that way) goes by its start.
    done.sort(key=lambda h: latest_ms(h.started_at, h.ended_at) or 0, reverse=True)
    return running + done


def steps_after(store: Store, after: int, upto: int, trace_ids: Sequence[str]) -> list[LiveStep]:
    """Steps of these traces with ``after < rowid <= upto``, in rowid (arrival) order."""
    out: list[LiveStep] = []
    if upto <= after:
        return out
    arrival = _arrival(store)
    for chunk in _chunks(list(dict.fromkeys(trace_ids))):
        in_range = (arrival > after) & (arrival <= upto)
        out += _live_steps(
            store, in_range & _unindexed(store, StepRow.trace_id).in_(chunk), ordered=arrival
        )
    if len(trace_ids) > _CHUNK:  # several chunks: merge them back into arrival order
        out.sort(key=lambda step: step.rowid)
    return out


def steps_by_rowid(store: Store, rowids: Sequence[int]) -> list[LiveStep]:
    """These steps as they are now (rowids that no longer exist are left out)."""
    out: list[LiveStep] = []
    for chunk in _chunks(list(rowids)):
        out += _live_steps(store, _arrival(store).in_(chunk))
    return out


def trace_live_steps(store: Store, trace_id: str) -> list[LiveStep]:
    """Every step of a trace, in step order (the one full read, when a trace is selected)."""
    return _live_steps(store, StepRow.trace_id == trace_id, ordered=StepRow.step_number)


def touched_steps(
    store: Store, after: LiveCursor, upto: LiveCursor, trace_id: str
) -> list[LiveStep]:
    """Steps of a trace that got a decision or a snapshot between the two cursors."""
    ids: list[str] = []
    arrival = _arrival(store)
    for model, low, high in (
        (DecisionRow, after.decisions, upto.decisions),
        (SnapshotRow, after.snapshots, upto.snapshots),
    ):
        if high > low:
            query = model.select(model.step_id).where(
                (arrival > low)
                & (arrival <= high)
                & (_unindexed(store, model.trace_id) == trace_id)
            )
            ids += [row[0] for row in query.tuples().execute(store.db)]
    out: list[LiveStep] = []
    for chunk in _chunks(list(dict.fromkeys(ids))):
        out += _live_steps(store, StepRow.id.in_(chunk))
    return out


def trace_baseline(store: Store, trace_id: str) -> Baseline:
    """A trace's steps, tokens, errors, blocks, last activity and open steps, read once."""
    steps = (
        StepRow.select(
            StepRow.tokens_used,
            StepRow.step_type,
            StepRow.error,
            StepRow.started_at_ms,
            StepRow.ended_at,
            guard_blocked().alias("blocked"),
        )
        .where(StepRow.trace_id == trace_id)
        .alias("x")
    )
    c = steps.c
    failed = (c.blocked == 0) & ((c.step_type == "error") | c.error.is_null(False))
    query = Select(
        from_list=[steps],
        columns=[
            fn.COUNT(SQL("*")),
            fn.COALESCE(fn.SUM(c.tokens_used), 0),
            fn.COUNT(c.tokens_used),
            fn.COALESCE(fn.SUM(Case(None, [(failed, 1)], 0)), 0),
            fn.COALESCE(fn.SUM(c.blocked), 0),
            fn.MAX(c.started_at_ms),
            fn.MAX(c.ended_at),
        ],
    )
    row = store.db.execute(query).fetchone()
    open_steps = _live_steps(store, (StepRow.trace_id == trace_id) & (StepRow.is_open == 1))
    ended_ms = time_ms(row[6]) if row[6] else None
    last = max((ms for ms in (row[5], ended_ms) if ms is not None), default=None)
    return Baseline(
        count=int(row[0]),
        tokens=int(row[1]),
        has_tokens=int(row[2]) > 0,
        errors=int(row[3]),
        blocks=int(row[4]),
        last_activity_ms=None if last is None else int(last),
        open_steps=open_steps,
    )


def _head(row: Sequence[Any]) -> TraceHead:
    return TraceHead(
        id=str(row[0]),
        agent_name=str(row[1]),
        status=str(row[2]),
        session_id=row[3],
        started_at=row[4],
        ended_at=row[5],
        step_count=int(row[6] or 0),
        total_tokens=row[7],
        error=row[8],
    )


def _chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def latest_ms(*instants: str | None) -> int | None:
    values = [time_ms(value) for value in instants if value]
    return max((v for v in values if v is not None), default=None)
