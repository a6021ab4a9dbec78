"""Copying whole traces between stores, row for row (``push``: a local store to a team store).

A trace travels as its rows (the trace, tags, steps, decisions, snapshots, evals, annotations),
exactly as stored, so the copy is identical: ids, times, ingest time, source format, open steps.
Each copy carries a digest of its rows; the target keeps the digest it was last pushed with
(``push_digests``), so a trace whose rows did not change since is skipped, and one that grew is
replaced (its evaluations and annotations made on the target are kept).

A store module: no services, Textual or Rich.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from peewee import SQL, Field, Model, Node, chunked

from agent_replay.store.core import pg_sql
from agent_replay.store.db import Store
from agent_replay.store.models import (
    ANNOTATION_FIELDS,
    DECISION_FIELDS,
    EVAL_FIELDS,
    SNAPSHOT_FIELDS,
    STEP_FIELDS,
    TAG_FIELDS,
    TRACE_FIELDS,
    AnnotationRow,
    DecisionRow,
    EvalRow,
    PushDigestRow,
    SnapshotRow,
    StepRow,
    TagRow,
    TraceRow,
)
from agent_replay.store.writes import (
    existing_trace_ids,
    insert_rows,
    position,
    update_rows,
)
from agent_replay.trace.io import dumps_bytes

_CHUNK = 500


@dataclass(frozen=True)
class Table:
    """A table a trace travels as: its model, the fields of a row (``store/mapping``'s order),
    the field naming the trace, and the order its rows are digested in."""

    model: type[Model]
    fields: tuple[Field, ...]
    key: Field
    order: tuple[Field, ...] = ()
    in_write_order: bool = False
    """Then by arrival (SQLite's rowid, PostgreSQL's ``seq``): the write order of evals and
    annotations is part of the trace (``trace_detail.write_order``)."""


TABLES: dict[str, Table] = {
    "traces": Table(TraceRow, TRACE_FIELDS, TraceRow.id, (TraceRow.id,)),
    "tags": Table(TagRow, TAG_FIELDS, TagRow.trace_id, (TagRow.position, TagRow.tag)),
    "steps": Table(StepRow, STEP_FIELDS, StepRow.trace_id, (StepRow.step_number,)),
    "decisions": Table(DecisionRow, DECISION_FIELDS, DecisionRow.trace_id, (DecisionRow.step_id,)),
    "snapshots": Table(SnapshotRow, SNAPSHOT_FIELDS, SnapshotRow.trace_id, (SnapshotRow.step_id,)),
    "evals": Table(EvalRow, EVAL_FIELDS, EvalRow.trace_id, (EvalRow.created_at_ms,), True),
    "annotations": Table(
        AnnotationRow,
        ANNOTATION_FIELDS,
        AnnotationRow.trace_id,
        (AnnotationRow.created_at_ms,),
        True,
    ),
}
"""Table name (as digested) -> how its rows are read and written, parents first."""


@dataclass
class TraceCopy:
    """One trace's rows, table by table (in ``TABLES`` order), and their digest."""

    trace_id: str
    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    digest: str = ""

    @property
    def steps(self) -> int:
        return len(self.rows.get("steps", []))


def trace_ids(
    store: Store, where: Node | str | None = None, params: Sequence[Any] = ()
) -> list[str]:
    """Ids of the traces matching ``where``, oldest first.

    Args:
        where: a condition on ``TraceRow``; or, while issue 19's conversion is under way, a
            SQL condition on ``traces t`` with ``?`` placeholders for ``params`` (being
            removed, with ``queries.where_sql``).
    """
    if isinstance(where, str):
        t = TraceRow.alias("t")
        condition = where if store.is_sqlite else pg_sql(where)
        query = t.select(t.id).where(SQL(condition, list(params)))
        query = query.order_by(t.started_at_ms, t.id)
    else:
        query = TraceRow.select(TraceRow.id).order_by(TraceRow.started_at_ms, TraceRow.id)
        if where is not None:
            query = query.where(where)
    return [str(r[0]) for r in query.tuples().execute(store.db)]


def read_traces(store: Store, ids: Sequence[str]) -> list[TraceCopy]:
    """The rows of these traces (those that exist), with their digests.

    Rows are read as the driver returns them (``db.execute``, no field conversion), so the
    copy is the stored values exactly."""
    copies: dict[str, TraceCopy] = {}
    arrival = SQL("rowid" if store.is_sqlite else "seq")
    for chunk in chunked(ids, _CHUNK):
        for name, table in TABLES.items():
            order: list[Any] = [table.key]
            order.extend(f.asc(nulls="first") for f in table.order)  # untimed first
            if table.in_write_order:
                order.append(arrival)
            query = table.model.select(*table.fields).where(table.key.in_(chunk)).order_by(*order)
            at = position(table.fields, table.key)
            for row in store.db.execute(query).fetchall():
                trace_id = row[at]
                if name == "traces":
                    copies[trace_id] = TraceCopy(trace_id, {t: [] for t in TABLES})
                copy = copies.get(trace_id)
                if copy is not None:
                    copy.rows[name].append(tuple(row))
    for copy in copies.values():
        copy.digest = digest(copy)
    return [copies[i] for i in ids if i in copies]


def digest(copy: TraceCopy) -> str:
    """A digest of a trace's rows: equal digests, equal rows."""
    hasher = hashlib.blake2b(digest_size=16)
    for table in TABLES:
        rows = copy.rows.get(table, [])
        if table == "annotations" and not rows:
            continue  # digests of traces pushed before annotations existed stay the same
        hasher.update(table.encode())
        hasher.update(dumps_bytes([list(r) for r in rows]))
    return hasher.hexdigest()


def stored_digests(store: Store, ids: Sequence[str]) -> dict[str, str]:
    """The digest each of these traces was last pushed with (traces never pushed are absent,
    as are traces deleted since: the digest goes with its trace)."""
    found: dict[str, str] = {}
    for chunk in chunked(ids, _CHUNK):
        query = (
            PushDigestRow.select(PushDigestRow.trace_id, PushDigestRow.digest)
            .join(TraceRow, on=TraceRow.id == PushDigestRow.trace_id)
            .where(PushDigestRow.trace_id.in_(chunk))
        )
        for trace_id, value in query.tuples().execute(store.db):
            found[str(trace_id)] = str(value)
    return found


_DIGEST_FIELDS = (PushDigestRow.trace_id, PushDigestRow.digest, PushDigestRow.pushed_ms)


def write_traces(store: Store, copies: Sequence[TraceCopy], now_ms: int) -> tuple[int, int]:
    """Write these traces into ``store`` in one transaction: new ones inserted, existing ones
    replaced in place (the trace row updated, its steps, tags, decisions and snapshots
    rewritten, its evaluations and annotations upserted by id: those made on this store stay).

    Returns:
        ``(inserted, replaced)``.
    """
    if not copies:
        return 0, 0
    with store.write():
        existing = existing_trace_ids(store, [c.trace_id for c in copies])
        replaced = [c for c in copies if c.trace_id in existing]
        for group in chunked(replaced, _CHUNK):
            chunk = [c.trace_id for c in group]
            # Steps take their decisions and snapshots with them (ON DELETE CASCADE).
            attached: tuple[Any, ...] = (StepRow, TagRow, PushDigestRow)
            for model in attached:
                model.delete().where(model.trace_id.in_(chunk)).execute(store.db)
            by_id: tuple[tuple[Any, str], ...] = (
                (EvalRow, "evals"),
                (AnnotationRow, "annotations"),
            )
            for kept, name in by_id:
                row_ids = [r[0] for c in group for r in c.rows[name]]
                for part in chunked(row_ids, _CHUNK):
                    kept.delete().where(kept.id.in_(part)).execute(store.db)
        for copy in replaced:
            (row,) = copy.rows["traces"]
            update_rows(
                store,
                TraceRow,
                {TraceRow.id: row[0]},
                dict(zip(TRACE_FIELDS[1:], row[1:], strict=True)),
            )
        fresh = [c for c in copies if c.trace_id not in existing]
        insert_rows(store, TraceRow, TRACE_FIELDS, [r for c in fresh for r in c.rows["traces"]])
        for name, table in TABLES.items():
            if name != "traces":
                rows = [r for c in copies for r in c.rows[name]]
                insert_rows(store, table.model, table.fields, rows)
        digests = [(c.trace_id, c.digest, now_ms) for c in copies]
        insert_rows(store, PushDigestRow, _DIGEST_FIELDS, digests)
    return len(fresh), len(replaced)
