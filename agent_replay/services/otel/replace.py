"""Storing the traces a batch of the OTLP writer rebuilt: only what changed since the last build.

A group's trace is rebuilt from all its staged items whenever one arrives, so a long session
(a harness's log events, batch after batch) would otherwise be deleted and inserted whole on
every batch: every step row, its indexes, its full-text search queue entries (the triggers
queue a deleted row's text and an inserted row), its WAL pages. Instead each stored trace is
compared with its new build, step by step (the step row with its decision and snapshot):

- a step that is the same is left alone; a changed one is deleted and inserted again (its
  decision and snapshot go with it); a step the new build no longer has is deleted; a new one
  is inserted. Deletes come first, so ``(trace_id, step_number)`` stays unique throughout;
- the trace row is updated in place when it changed, keeping its first-seen time: it is
  never deleted, so what belongs to the trace rather than to one build of it (evals,
  annotations, a push digest) stays with it;
- a trace not stored yet is inserted whole; a group with nothing left to show is deleted.

The rows compared are ``ingest.prepare``'s, as the one write path makes them, against the
stored values as the driver returns them. Python equality is exact for these values (text,
integers, floats), so a step is rewritten when anything differs; a value the store holds in
another form (PostgreSQL's U+FFFD for a NUL) only makes a step look changed, and be rewritten.
"""

from __future__ import annotations

from typing import Any

from agent_replay.services.otel.runner import InList, run
from agent_replay.store.core import Store
from agent_replay.store.mapping import (
    DECISION_COLUMNS,
    SNAPSHOT_COLUMNS,
    STEP_COLUMNS,
    TAG_COLUMNS,
    TRACE_COLUMNS,
    TraceRows,
)
from agent_replay.store.models import (
    DECISION_FIELDS,
    SNAPSHOT_FIELDS,
    STEP_FIELDS,
    TAG_FIELDS,
    DecisionRow,
    SnapshotRow,
    StepRow,
    TagRow,
    TraceRow,
)
from agent_replay.store.statements import Statement, arg
from agent_replay.store.writes import insert_rows, insert_trace_rows

_CREATED = TRACE_COLUMNS.index("created_at_ms")
_STARTED_MS = TRACE_COLUMNS.index("started_at_ms")
_STARTED = TRACE_COLUMNS.index("started_at")
_STEP_TRACE = STEP_COLUMNS.index("trace_id")


def _columns(model: Any, names: tuple[str, ...]) -> list[Any]:
    """The model's fields in the mapping's column order (the order of the rows compared)."""
    return [getattr(model, name) for name in names]


_TRACES = InList(
    lambda keys: TraceRow.select(*_columns(TraceRow, TRACE_COLUMNS)).where(TraceRow.id.in_(keys))
)
_STEPS = InList(
    lambda keys: StepRow.select(*_columns(StepRow, STEP_COLUMNS)).where(StepRow.trace_id.in_(keys))
)
_DECISIONS = InList(
    lambda keys: DecisionRow.select(*_columns(DecisionRow, DECISION_COLUMNS)).where(
        DecisionRow.trace_id.in_(keys)
    )
)
_SNAPSHOTS = InList(
    lambda keys: SnapshotRow.select(*_columns(SnapshotRow, SNAPSHOT_COLUMNS)).where(
        SnapshotRow.trace_id.in_(keys)
    )
)
_TAGS = InList(
    lambda keys: TagRow.select(*_columns(TagRow, TAG_COLUMNS)).where(TagRow.trace_id.in_(keys))
)
_DELETE_TRACES = InList(lambda keys: TraceRow.delete().where(TraceRow.id.in_(keys)))
_DELETE_STEPS = InList(lambda keys: StepRow.delete().where(StepRow.id.in_(keys)))
_DELETE_TAGS = InList(lambda keys: TagRow.delete().where(TagRow.trace_id.in_(keys)))


def _update_trace() -> Any:
    # peewee writes SET in the model's field order: the mapping's, which the row follows.
    assert tuple(TraceRow._meta.sorted_field_names) == TRACE_COLUMNS
    values = {field: arg() for field in _columns(TraceRow, TRACE_COLUMNS[1:])}
    return TraceRow.update(values).where(TraceRow.id == arg())


_UPDATE_TRACE = Statement(_update_trace)


def replace_traces(store: Store, built: list[TraceRows], gone: list[str]) -> None:
    """Store the batch's rebuilt traces (see the module docstring); delete those ``gone``."""
    stored = {row[0]: row for row in _TRACES.rows(store, [rows.trace[0] for rows in built])}
    _DELETE_TRACES.run(store, gone)
    fresh: list[TraceRows] = []
    again: list[TraceRows] = []
    for rows in built:
        previous = stored.get(rows.trace[0])
        if previous is None:
            fresh.append(rows)
            continue
        trace_row = list(rows.trace)
        trace_row[_CREATED] = previous[_CREATED]  # first seen then, whatever the build says
        if trace_row[_STARTED] is None:
            trace_row[_STARTED_MS] = previous[_CREATED]
        rows.trace = tuple(trace_row)
        again.append(rows)
    if again:
        _update(store, again, stored)
    insert_trace_rows(store, fresh)


def _update(store: Store, built: list[TraceRows], stored: dict[str, tuple[Any, ...]]) -> None:
    """Write what changed in traces already stored (``stored``: their trace rows)."""
    ids = [rows.trace[0] for rows in built]
    old_steps: dict[str, dict[str, tuple[Any, ...]]] = {trace_id: {} for trace_id in ids}
    for row in _STEPS.rows(store, ids):
        old_steps[row[_STEP_TRACE]][row[0]] = row
    old_decisions = {row[0]: row for row in _DECISIONS.rows(store, ids)}
    old_snapshots = {row[0]: row for row in _SNAPSHOTS.rows(store, ids)}
    old_tags: dict[str, list[tuple[Any, ...]]] = {}
    for row in _TAGS.rows(store, ids):
        old_tags.setdefault(row[0], []).append(row)
    drop: list[str] = []
    retag: list[str] = []
    steps: list[tuple[Any, ...]] = []
    decisions: list[tuple[Any, ...]] = []
    snapshots: list[tuple[Any, ...]] = []
    tags: list[tuple[Any, ...]] = []
    for rows in built:
        trace_id = rows.trace[0]
        if rows.trace != stored[trace_id]:
            run(store, _UPDATE_TRACE, (*rows.trace[1:], trace_id))
        if sorted(rows.tags) != sorted(old_tags.get(trace_id, [])):
            retag.append(trace_id)
            tags.extend(rows.tags)
        new_decisions = {row[0]: row for row in rows.decisions}
        new_snapshots = {row[0]: row for row in rows.snapshots}
        before = old_steps[trace_id]
        for step in rows.steps:
            step_id = step[0]
            decision = new_decisions.get(step_id)
            snapshot = new_snapshots.get(step_id)
            old = before.pop(step_id, None)
            if old is not None:
                if (
                    old == step
                    and old_decisions.get(step_id) == decision
                    and old_snapshots.get(step_id) == snapshot
                ):
                    continue  # the same step: left alone
                drop.append(step_id)
            steps.append(step)
            if decision is not None:
                decisions.append(decision)
            if snapshot is not None:
                snapshots.append(snapshot)
        drop.extend(before)  # steps this build no longer has
    _DELETE_STEPS.run(store, drop)  # their decisions and snapshots go with them (cascade)
    _DELETE_TAGS.run(store, retag)
    insert_rows(store, TagRow, TAG_FIELDS, tags)
    insert_rows(store, StepRow, STEP_FIELDS, steps)
    insert_rows(store, DecisionRow, DECISION_FIELDS, decisions)
    insert_rows(store, SnapshotRow, SNAPSHOT_FIELDS, snapshots)
