"""Writing rows through Peewee's query builder: the bulk path ingest uses, and the small
statements the recorder runs per row.

Callers (the ingest and recorder services) validate first; nothing here decides what is valid.
Every function expects to run inside ``Store.write()``. Tables are the models of
``store/models.py`` and columns their fields; a row is a tuple lined up with the fields given
(``models.TRACE_FIELDS`` and the others line up with ``store/mapping``'s row tuples).

One spelling for both backends: the SQL comes from the query builder (``INSERT OR IGNORE`` on
SQLite, ``ON CONFLICT DO NOTHING`` on PostgreSQL), and the PostgreSQL database maps parameters
itself (NUL, bool: ``store/db.pg_value``). What differs is how rows travel:

- SQLite: a statement built once per (model, fields) (``store/statements``), ``executemany``'d;
  compiling a peewee query per row would cost more than the insert.
- PostgreSQL: multi-row ``Model.insert_many(...)`` chunks of at most 500 rows and 30,000
  parameters (the protocol allows 65,535): one round trip per chunk, not per row, which is what
  makes ``push`` to a remote server fast. Peewee compiles a value in ~10 us (a 500-row chunk of
  steps: 0.1-0.3 s, against 0.2 ms for the string this module used to join), so a chunk is a
  statement of ``arg()`` placeholders too, compiled once per size: full chunks, then the rest
  in power-of-two sizes.

Peewee and the models are imported when a write first needs them, not with this module (it
is imported on paths that never write); callers pass models, so peewee is loaded by the time a
write runs anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent_replay.store.core import Store
from agent_replay.store.mapping import TraceRows

if TYPE_CHECKING:
    from peewee import Field, Model

    from agent_replay.store.statements import Statement

PG_MAX_PARAMS = 30_000
"""Parameters bound by one multi-row ``INSERT`` on PostgreSQL (well under the protocol's 65,535)."""
PG_MAX_ROWS = 500
"""Rows of one multi-row ``INSERT`` on PostgreSQL (narrow tables reach this before the cap)."""

_CACHE_SIZE = 512  # statements kept; a caller building field lists afresh never grows it past

_BY_ID: dict[tuple[Any, ...], tuple[object, Statement]] = {}
_BY_NAME: dict[tuple[Any, ...], Statement] = {}


def _statement(
    kind: str, model: type[Model], fields: Sequence[Field], extra: Any, build: Any
) -> Statement:
    """The cached statement of ``kind`` for these fields: found by the identity of the
    ``fields`` object first (a module-level tuple: one dict lookup on the hot path), else by
    the field names (a list built afresh reuses the compiled SQL)."""
    key = (kind, model, id(fields), extra)
    found = _BY_ID.get(key)
    if found is not None and found[0] is fields:
        return found[1]
    named = (kind, model, tuple(f.name for f in fields), extra)
    statement = _BY_NAME.get(named)
    if statement is None:
        if len(_BY_NAME) >= _CACHE_SIZE:
            _BY_NAME.clear()
        statement = _BY_NAME[named] = build()
    if len(_BY_ID) >= _CACHE_SIZE:
        _BY_ID.clear()
    _BY_ID[key] = (fields, statement)  # holds ``fields``, so its id is not reused meanwhile
    return statement


def insert_rows(
    store: Store,
    model: type[Model],
    fields: Sequence[Field],
    rows: Sequence[Sequence[Any]],
    *,
    ignore: bool = False,
) -> None:
    """Insert ``rows`` (each lined up with ``fields``) into ``model``'s table; no-op for none.

    Args:
        ignore: skip a row whose key (primary or unique) is already stored.
    """
    if not rows:
        return
    if store.is_sqlite:
        _insert_statement(model, fields, ignore).run_many(store, rows)
        return
    per = max(1, min(PG_MAX_ROWS, PG_MAX_PARAMS // max(1, len(fields))))
    start, total = 0, len(rows)
    while start < total:
        left = total - start
        # Full chunks, then the rest in power-of-two chunks (37 rows: 32 + 4 + 1): compiling a
        # multi-row INSERT costs ~10 us a value, so each size is compiled once and reused.
        size = per if left >= per else 1 << (left.bit_length() - 1)
        params = [value for row in rows[start : start + size] for value in row]
        _insert_statement(model, fields, ignore, size).run(store, params)
        start += size


def _insert_statement(
    model: type[Model], fields: Sequence[Field], ignore: bool, rows: int = 1
) -> Statement:
    found = _BY_ID.get(("insert", model, id(fields), (ignore, rows)))
    if found is not None and found[0] is fields:
        return found[1]  # the hot path (one row per step on SQLite): one lookup, no closure

    def build() -> Statement:
        from agent_replay.store.statements import insert_statement

        return insert_statement(model, fields, ignore=ignore, rows=rows)

    return _statement("insert", model, fields, (ignore, rows), build)


def replace_rows(
    store: Store, model: type[Model], fields: Sequence[Field], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert the rows, each replacing a stored row with the same primary key (decisions and
    snapshots, keyed by their step).

    A delete and an insert, not ``ON CONFLICT DO UPDATE``: a replaced row arrives anew (a new
    rowid on SQLite, a new ``seq`` on PostgreSQL), which is how the live view and the change
    signal see that it changed (``store/live``, ``store/changes``); an update in place would
    keep its arrival position and go unnoticed. (SQLite's ``INSERT OR REPLACE`` does the same,
    but PostgreSQL has no such statement.)
    """
    if not rows:
        return
    keys = model._meta.get_primary_keys()
    at = tuple(position(fields, key) for key in keys)

    def build() -> Statement:
        from agent_replay.store.statements import Statement, arg

        return Statement(lambda: model.delete().where(_all([key == arg() for key in keys])))

    delete = _statement("delete", model, fields, None, build)
    delete.run_many(store, [tuple(row[i] for i in at) for row in rows])
    insert_rows(store, model, fields, rows)


def position(fields: Sequence[Field], field: Field) -> int:
    """Where ``field`` is in ``fields`` (by identity: ``==`` on a field builds an expression,
    which is always true, so ``fields.index`` would answer 0)."""
    for i, candidate in enumerate(fields):
        if candidate is field:
            return i
    raise ValueError(f"{field} is not among the fields given")


def update_rows(
    store: Store,
    model: type[Model],
    key: Mapping[Field, Any],
    values: Mapping[Field, Any],
) -> int:
    """``UPDATE model SET values WHERE key`` (every key field equal); returns the rows changed.

    One statement per (model, key fields, value fields), built once: the recorder closes a
    step this way per event.
    """
    if not values:
        return 0
    return _update(
        store,
        model,
        tuple(field.column_name for field in key),
        list(key.values()),
        tuple(field.column_name for field in values),
        list(values.values()),
    )


_UPDATES: dict[tuple[Any, ...], tuple[tuple[int, ...], Statement]] = {}


def _update(
    store: Store,
    model: type[Model],
    key_columns: tuple[str, ...],
    key_params: list[Any],
    columns: tuple[str, ...],
    params: list[Any],
) -> int:
    cache_key = (model, key_columns, columns)
    found = _UPDATES.get(cache_key)
    if found is None:
        from agent_replay.store.statements import Statement, arg

        by_column = model._meta.columns
        # peewee writes the SET list in the model's field order: bind the values in that order
        order = {field.column_name: i for i, field in enumerate(model._meta.sorted_fields)}
        perm = tuple(sorted(range(len(columns)), key=lambda i: order[columns[i]]))
        changed = [by_column[columns[i]] for i in perm]
        where = [by_column[column] for column in key_columns]
        statement = Statement(
            lambda: model.update({field: arg() for field in changed}).where(
                _all([field == arg() for field in where])
            )
        )
        if len(_UPDATES) >= _CACHE_SIZE:
            _UPDATES.clear()
        found = _UPDATES[cache_key] = (perm, statement)
    perm, statement = found
    bound = [params[i] for i in perm]
    bound.extend(key_params)
    return int(statement.run(store, bound).rowcount)


def _all(conditions: list[Any]) -> Any:
    """``a AND b AND ...`` of peewee expressions."""
    from functools import reduce

    return reduce(lambda a, b: a & b, conditions)


def insert_trace_rows(store: Store, batch: list[TraceRows]) -> None:
    """Insert several traces' rows, table by table (parents before children)."""
    from agent_replay.store import models as m  # deferred: see the module docstring

    insert_rows(store, m.TraceRow, m.TRACE_FIELDS, [t.trace for t in batch])
    insert_rows(store, m.TagRow, m.TAG_FIELDS, [r for t in batch for r in t.tags])
    insert_rows(store, m.StepRow, m.STEP_FIELDS, [r for t in batch for r in t.steps])
    insert_rows(store, m.DecisionRow, m.DECISION_FIELDS, [r for t in batch for r in t.decisions])
    insert_rows(store, m.SnapshotRow, m.SNAPSHOT_FIELDS, [r for t in batch for r in t.snapshots])
    insert_rows(store, m.EvalRow, m.EVAL_FIELDS, [r for t in batch for r in t.evals])
    insert_rows(
        store, m.AnnotationRow, m.ANNOTATION_FIELDS, [r for t in batch for r in t.annotations]
    )


def existing_trace_ids(store: Store, ids: Sequence[str]) -> set[str]:
    """Which of these trace ids are already in the store."""
    from peewee import chunked  # deferred: see the module docstring

    from agent_replay.store.models import TraceRow

    found: set[str] = set()
    for chunk in chunked(ids, 500):
        query = TraceRow.select(TraceRow.id).where(TraceRow.id.in_(chunk)).tuples()
        found.update(row[0] for row in query.execute(store.db))
    return found
