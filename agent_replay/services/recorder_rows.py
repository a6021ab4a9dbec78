"""The recorder's rows in the store: every statement ``TraceRecorder`` reads and writes with.

Built by Peewee's query builder, so one statement runs on SQLite and PostgreSQL alike. The ones
a recording runs per step (or per batch) are ``Statement``s, compiled once per backend at first
use, since compiling a query costs tens of microseconds, a large share of a step; the few that
run once per trace, or whose shape depends on their arguments (an ``IN`` list), are built per
call.

Reads here are plain lookups any capture path may use (the event engine's next step number,
whether a trace exists). Writes take rows the recorder built from validated, redacted models
(``store/mapping``): only ``services/recorder`` and its batch path (``recorder_batch``) call
them, so every writer goes through the one write path. Every function expects to run inside
``Store.write()`` when it writes (or must read what it is about to write).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

from peewee import SQL, Case, Field, Model, NodeList, fn

from agent_replay.errors import NotFoundError
from agent_replay.services import costs
from agent_replay.store.db import Store
from agent_replay.store.mapping import (
    ANNOTATION_COLUMNS,
    DECISION_COLUMNS,
    SNAPSHOT_COLUMNS,
    STEP_COLUMNS,
    decision_dict,
    snapshot_dict,
    step_dict,
)
from agent_replay.store.models import AnnotationRow, DecisionRow, SnapshotRow, StepRow, TraceRow
from agent_replay.store.statements import Statement, arg, insert_statement
from agent_replay.trace.models import Trace

_CHUNK = 500  # values per IN list: well under SQLite's and PostgreSQL's parameter limits


def fields(model: type[Model], columns: Sequence[str]) -> list[Field]:
    """The model's fields for these column names, in their order (the mapping's row order)."""
    by_column = model._meta.columns
    return [by_column[column] for column in columns]


STEP_FIELDS = fields(StepRow, STEP_COLUMNS)
DECISION_FIELDS = fields(DecisionRow, DECISION_COLUMNS)
SNAPSHOT_FIELDS = fields(SnapshotRow, SNAPSHOT_COLUMNS)

# --- reads ---------------------------------------------------------------------------------

_TRACE_HEAD = Statement(
    lambda: TraceRow.select(
        TraceRow.id, TraceRow.status, TraceRow.started_at, TraceRow.ended_at
    ).where(TraceRow.id == arg())
)
_STEP_EXISTS = Statement(
    lambda: StepRow.select(StepRow.id).where(
        (StepRow.trace_id == arg()) & (StepRow.step_number == arg())
    )
)
_LAST_NUMBER = Statement(
    lambda: StepRow.select(fn.MAX(StepRow.step_number)).where(StepRow.trace_id == arg())
)
_STEP = Statement(
    lambda: StepRow.select(*STEP_FIELDS).where(
        (StepRow.trace_id == arg()) & (StepRow.step_number == arg())
    )
)
_DECISION = Statement(
    lambda: DecisionRow.select(*DECISION_FIELDS).where(DecisionRow.step_id == arg())
)
_SNAPSHOT = Statement(
    lambda: SnapshotRow.select(*SNAPSHOT_FIELDS).where(SnapshotRow.step_id == arg())
)
_OPEN_STEP = Statement(
    lambda: (
        StepRow.select(StepRow.step_number)
        .where(
            (StepRow.trace_id == arg())
            & (StepRow.call_id == arg())
            # A literal, not a parameter: SQLite uses the partial steps_open_call index
            # (``WHERE is_open = 1``) only when the query's own condition says so.
            & (StepRow.is_open == SQL("1"))
        )
        # ``+step_number``: without the unary plus SQLite sorts through the (trace_id,
        # step_number) index and scans the whole trace (O(steps) per lookup) instead of seeking
        # the partial index.
        .order_by(NodeList((SQL("+"), StepRow.step_number), glue=""))
        .limit(arg())
    )
)
_NUMBERS_BETWEEN = Statement(
    lambda: StepRow.select(StepRow.step_number).where(
        (StepRow.trace_id == arg()) & StepRow.step_number.between(arg(), arg())
    )
)


def trace_exists(store: Store, trace_id: str) -> bool:
    """Whether ``trace_id`` names a trace in the store."""
    return trace_head(store, trace_id) is not None


def trace_head(store: Store, trace_id: str) -> tuple[Any, ...] | None:
    """A trace's ``(id, status, started_at, ended_at)``, or ``None`` when there is none."""
    row = _TRACE_HEAD.run(store, (trace_id,)).fetchone()
    return None if row is None else tuple(row)


def step_exists(store: Store, trace_id: str, number: int) -> bool:
    """Whether the trace has a step numbered ``number``."""
    return _STEP_EXISTS.run(store, (trace_id, number)).fetchone() is not None


def next_step_number(store: Store, trace_id: str) -> int:
    """One past the trace's last step number (1 for a trace without steps)."""
    row = _LAST_NUMBER.run(store, (trace_id,)).fetchone()
    return int(row[0] or 0) + 1


def load_step(store: Store, trace_id: str, number: int, *, children: bool = True) -> dict[str, Any]:
    """A stored step as the format's object; ``children=False`` skips reading its decision
    and snapshot (closing a step never touches them).

    Raises:
        NotFoundError: the trace has no such step.
    """
    row = _STEP.run(store, (trace_id, number)).fetchone()
    if row is None:
        raise NotFoundError(f"trace {trace_id} has no step {number}")
    # A plain dict: the recorder edits the stored step before validating it again.
    if not children:
        return cast("dict[str, Any]", step_dict(tuple(row)))
    decision = _DECISION.run(store, (row[0],)).fetchone()
    snapshot = _SNAPSHOT.run(store, (row[0],)).fetchone()
    step = step_dict(
        tuple(row),
        decision_dict(tuple(decision)) if decision else None,
        snapshot_dict(tuple(snapshot)) if snapshot else None,
    )
    return cast("dict[str, Any]", step)


def open_step_number(store: Store, trace_id: str, call_id: str) -> int | None:
    """The first open step started with this producer call id, if any."""
    row = _OPEN_STEP.run(store, (trace_id, call_id, 1)).fetchone()
    return int(row[0]) if row else None


def stored_numbers(store: Store, trace_id: str, numbers: list[int]) -> set[int]:
    """Which of these step numbers the trace already has.

    A batch's numbers are mostly one run past the trace's last step: one range query (one
    statement, prepared once) answers for a run; scattered numbers are looked up by list.
    """
    unique = sorted(set(numbers))
    if unique and unique[-1] - unique[0] < 2 * len(unique) + 64:
        rows = _NUMBERS_BETWEEN.run(store, (trace_id, unique[0], unique[-1])).fetchall()
        wanted = set(unique)
        return {int(r[0]) for r in rows if int(r[0]) in wanted}
    found: set[int] = set()
    for chunk in _chunks(unique):
        query = StepRow.select(StepRow.step_number).where(
            (StepRow.trace_id == trace_id) & StepRow.step_number.in_(chunk)
        )
        found.update(int(number) for (number,) in query.tuples().execute(store.db))
    return found


def step_tokens(store: Store, trace_id: str) -> list[Any]:
    """The ``tokens_used`` of each of the trace's steps (``None`` where unknown)."""
    query = StepRow.select(StepRow.tokens_used).where(StepRow.trace_id == trace_id)
    return [tokens for (tokens,) in query.tuples().execute(store.db)]


def derive_cost(store: Store, trace_id: str, trace: Trace) -> None:
    """A trace without a producer total costs the sum of its steps' costs (one indexed
    aggregate), as ``costs.derive_total`` computes it for ingest: sets ``total_cost_usd`` and
    the metadata saying how many steps were priced (and how many ``llm_call`` steps are
    marked unpriced, ``costs.MISSING``)."""
    unpriced = (
        (StepRow.step_type == "llm_call")
        & StepRow.cost_usd.is_null()
        & StepRow.metadata.contains(f'"{costs.MISSING}"')
    )
    query = StepRow.select(
        fn.SUM(StepRow.cost_usd),
        fn.COUNT(StepRow.cost_usd),
        fn.SUM(Case(None, [(unpriced, 1)], 0)),
    ).where(StepRow.trace_id == trace_id)
    row = query.tuples().first(store.db)
    if not row or not row[1]:
        return
    trace.total_cost_usd = float(row[0])
    trace.metadata["cost_from_steps"] = int(row[1])
    if row[2]:
        trace.metadata["cost_unpriced_steps"] = int(row[2])


def trace_metadata(store: Store, trace_id: str) -> str | None:
    """A trace's stored ``metadata`` column (the JSON text)."""
    query = TraceRow.select(TraceRow.metadata).where(TraceRow.id == trace_id)
    value: str | None = query.scalar(store.db)
    return value


# --- writes (the recorder's, from validated rows) -----------------------------------------

_INSERT_STEP = insert_statement(StepRow, STEP_FIELDS)
_INSERT_DECISION = insert_statement(DecisionRow, DECISION_FIELDS)
_INSERT_SNAPSHOT = insert_statement(SnapshotRow, SNAPSHOT_FIELDS)
_INSERT_ANNOTATION = insert_statement(AnnotationRow, fields(AnnotationRow, ANNOTATION_COLUMNS))
_UPSERT_DECISION = Statement(
    lambda: DecisionRow.insert_many(
        [tuple(arg() for _ in DECISION_FIELDS)], fields=DECISION_FIELDS
    ).on_conflict(conflict_target=[DecisionRow.step_id], preserve=DECISION_FIELDS[1:])
)
_UPSERT_SNAPSHOT = Statement(
    lambda: SnapshotRow.insert_many(
        [tuple(arg() for _ in SNAPSHOT_FIELDS)], fields=SNAPSHOT_FIELDS
    ).on_conflict(conflict_target=[SnapshotRow.step_id], preserve=SNAPSHOT_FIELDS[1:])
)
_ADD_STEPS = Statement(
    lambda: TraceRow.update(step_count=TraceRow.step_count + arg()).where(TraceRow.id == arg())
)
_CLOSED = frozenset(
    {
        "output",
        "error",
        "ended_at",
        "duration_ms",
        "tokens_used",
        "model",
        "metadata",
        "is_open",
        "cost_usd",
    }
)
# Peewee writes an UPDATE's SET list in the model's field order, whatever the order given:
# ``close_step`` passes its values in that order.
_CLOSED_STEP_FIELDS = [
    field for field in StepRow._meta.sorted_fields if field.column_name in _CLOSED
]
_CLOSE_STEP = Statement(
    lambda: StepRow.update({field: arg() for field in _CLOSED_STEP_FIELDS}).where(
        (StepRow.trace_id == arg()) & (StepRow.step_number == arg())
    )
)


def insert_step(
    store: Store,
    step: tuple[Any, ...],
    decision: tuple[Any, ...] | None,
    snapshot: tuple[Any, ...] | None,
) -> None:
    """One step's rows, and one more step on its trace's ``step_count``."""
    _INSERT_STEP.run(store, step)
    if decision is not None:
        _INSERT_DECISION.run(store, decision)
    if snapshot is not None:
        _INSERT_SNAPSHOT.run(store, snapshot)
    add_steps(store, step[1], 1)


def add_steps(store: Store, trace_id: str, count: int) -> None:
    """Count ``count`` more steps on the trace (``step_count``)."""
    _ADD_STEPS.run(store, (count, trace_id))


def close_step(store: Store, trace_id: str, number: int, values: dict[str, Any]) -> None:
    """Set a step's result: its output, error, ended_at, tokens_used, duration_ms, model,
    metadata, is_open and cost_usd columns (``values``, by column name; all of them)."""
    params = [values[field.column_name] for field in _CLOSED_STEP_FIELDS]
    _CLOSE_STEP.run(store, (*params, trace_id, number))


def put_decision(store: Store, row: tuple[Any, ...]) -> None:
    """Store (or replace) a step's decision row."""
    _UPSERT_DECISION.run(store, row)


def put_snapshot(store: Store, row: tuple[Any, ...]) -> None:
    """Store (or replace) a step's snapshot row."""
    _UPSERT_SNAPSHOT.run(store, row)


def insert_annotation(store: Store, row: tuple[Any, ...]) -> None:
    """Store an annotation row (``ANNOTATION_COLUMNS`` order)."""
    _INSERT_ANNOTATION.run(store, row)


def update_trace(store: Store, trace_id: str, values: dict[str, Any]) -> None:
    """Set some of a trace's columns (by column name); once per trace, built per call."""
    TraceRow.update(fields_values(TraceRow, values)).where(TraceRow.id == trace_id).execute(
        store.db
    )


def fields_values(model: type[Model], values: dict[str, Any]) -> dict[Field, Any]:
    """``values`` keyed by the model's fields instead of column names."""
    by_column = model._meta.columns
    return {by_column[column]: value for column, value in values.items()}


def delete_steps(store: Store, step_ids: list[str]) -> None:
    """Delete these steps and their decisions and snapshots (children first)."""
    for chunk in _chunks(step_ids):
        DecisionRow.delete().where(DecisionRow.step_id.in_(chunk)).execute(store.db)
        SnapshotRow.delete().where(SnapshotRow.step_id.in_(chunk)).execute(store.db)
        StepRow.delete().where(StepRow.id.in_(chunk)).execute(store.db)


def _chunks(values: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]
