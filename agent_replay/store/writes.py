"""Writing rows: the bulk path ingest uses, and the small statements the recorder uses.

Callers (the ingest and recorder services) validate first; nothing here decides what is valid.
Every function expects to run inside ``Store.write()``.

Services write raw SQL with ``?`` placeholders in the subset SQLite and PostgreSQL share;
``execute`` adapts it to the store's driver (``%s``, a literal ``%`` doubled), and the forms
the two dialects spell differently live here: ``insert_ignore_many`` (``INSERT OR IGNORE``
vs ``ON CONFLICT DO NOTHING``; SQLite has spelled the latter too since 3.24) and ``upsert_row``.
PostgreSQL text can't hold NUL characters, so they are stored as U+FFFD there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_replay.store.core import Store
from agent_replay.store.core import execute as execute  # moved to core; services import it here
from agent_replay.store.mapping import (
    ANNOTATION_COLUMNS,
    DECISION_COLUMNS,
    EVAL_COLUMNS,
    SNAPSHOT_COLUMNS,
    STEP_COLUMNS,
    TAG_COLUMNS,
    TRACE_COLUMNS,
    TraceRows,
    quote,
)

_INSERT_CACHE: dict[tuple[str, tuple[str, ...], str, str], str] = {}
_PG_MAX_PARAMS = 30_000  # rows per multi-row INSERT: well under the protocol's 65,535
_PG_MAX_ROWS = 500


def insert_sql(store: Store, table: str, columns: Sequence[str], *, ignore: bool = False) -> str:
    """``INSERT INTO table (cols) VALUES (?, ...)`` with the store's placeholder.

    ``ignore``: skip a row whose key is already there (``ON CONFLICT DO NOTHING``).
    """
    suffix = " ON CONFLICT DO NOTHING" if ignore else ""
    key = (table, tuple(columns), store.param, suffix)
    sql = _INSERT_CACHE.get(key)
    if sql is None:
        names = ", ".join(quote(c) for c in columns)
        marks = ", ".join([store.param] * len(columns))
        sql = f"INSERT INTO {table} ({names}) VALUES ({marks}){suffix}"
        _INSERT_CACHE[key] = sql
    return sql


def insert_many(store: Store, table: str, columns: Sequence[str], rows: list[Any]) -> None:
    """``executemany`` the rows into ``table`` (no-op for an empty list).

    On PostgreSQL the rows go as multi-row ``INSERT``s (one round trip per few hundred rows,
    not one per row), which is what makes ``push`` to a remote server fast.
    """
    if not rows:
        return
    if store.is_sqlite:
        store.db.cursor().executemany(insert_sql(store, table, columns), rows)
        return
    _pg_insert_values(store, table, columns, rows, "")


def insert_ignore_many(store: Store, table: str, columns: Sequence[str], rows: list[Any]) -> None:
    """Insert the rows, skipping those whose primary key (or a unique key) is already stored."""
    if not rows:
        return
    if store.is_sqlite:
        store.db.cursor().executemany(insert_sql(store, table, columns, ignore=True), rows)
        return
    _pg_insert_values(store, table, columns, rows, " ON CONFLICT DO NOTHING")


def _pg_insert_values(
    store: Store, table: str, columns: Sequence[str], rows: list[Any], suffix: str
) -> None:
    import peewee  # deferred: a local reader (list, show) imports no driver

    names = ", ".join(quote(c) for c in columns)
    group = "(" + ", ".join(["%s"] * len(columns)) + ")"
    per = max(1, min(_PG_MAX_ROWS, _PG_MAX_PARAMS // max(1, len(columns))))
    cursor = store.db.cursor()
    for start in range(0, len(rows), per):
        chunk = rows[start : start + per]
        sql = f"INSERT INTO {table} ({names}) VALUES {', '.join([group] * len(chunk))}{suffix}"
        params = [pg_value(v) for row in chunk for v in row]
        with peewee.__exception_wrapper__:  # type: ignore[attr-defined]  # driver errors as peewee's
            cursor.execute(sql, params)


def pg_value(value: Any) -> Any:
    """A parameter as PostgreSQL takes it: NUL characters in text become U+FFFD, and a bool
    becomes 0/1 (the schema's flags are integers, and psycopg sends ``true``)."""
    if type(value) is str:
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if type(value) is bool:
        return int(value)
    return value


def insert_trace_rows(store: Store, batch: list[TraceRows]) -> None:
    """Insert several traces' rows, table by table (parents before children)."""
    insert_many(store, "traces", TRACE_COLUMNS, [t.trace for t in batch])
    insert_many(store, "tags", TAG_COLUMNS, [r for t in batch for r in t.tags])
    insert_many(store, "steps", STEP_COLUMNS, [r for t in batch for r in t.steps])
    insert_many(store, "decisions", DECISION_COLUMNS, [r for t in batch for r in t.decisions])
    insert_many(store, "snapshots", SNAPSHOT_COLUMNS, [r for t in batch for r in t.snapshots])
    insert_many(store, "evals", EVAL_COLUMNS, [r for t in batch for r in t.evals])
    insert_many(store, "annotations", ANNOTATION_COLUMNS, [r for t in batch for r in t.annotations])


def existing_trace_ids(store: Store, ids: list[str]) -> set[str]:
    """Which of these trace ids are already in the store."""
    found: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join(["?"] * len(chunk))
        cursor = execute(store, f"SELECT id FROM traces WHERE id IN ({marks})", chunk)
        found.update(row[0] for row in cursor.fetchall())
    return found


def update_columns(store: Store, table: str, key: dict[str, Any], values: dict[str, Any]) -> int:
    """``UPDATE table SET values WHERE key``; returns the number of rows changed."""
    if not values:
        return 0
    sets = ", ".join(f"{quote(c)} = ?" for c in values)
    where = " AND ".join(f"{quote(c)} = ?" for c in key)
    cursor = execute(
        store, f"UPDATE {table} SET {sets} WHERE {where}", [*values.values(), *key.values()]
    )
    return int(cursor.rowcount)


def upsert_row(store: Store, table: str, columns: Sequence[str], row: tuple[Any, ...]) -> None:
    """Replace the row with the same primary key (decisions and snapshots, keyed by step)."""
    execute(store, f"DELETE FROM {table} WHERE {quote(columns[0])} = ?", [row[0]])
    insert_many(store, table, columns, [row])
