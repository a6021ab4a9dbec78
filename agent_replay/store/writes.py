"""Writing rows: the bulk path ingest uses, and the small statements the recorder uses.

Callers (the ingest and recorder services) validate first; nothing here decides what is valid.
Every function expects to run inside ``Store.write()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_replay.store.db import Store
from agent_replay.store.mapping import (
    DECISION_COLUMNS,
    EVAL_COLUMNS,
    SNAPSHOT_COLUMNS,
    STEP_COLUMNS,
    TAG_COLUMNS,
    TRACE_COLUMNS,
    TraceRows,
    quote,
)

_INSERT_CACHE: dict[tuple[str, tuple[str, ...], str], str] = {}


def insert_sql(store: Store, table: str, columns: Sequence[str]) -> str:
    """``INSERT INTO table (cols) VALUES (?, ...)`` with the store's placeholder."""
    key = (table, tuple(columns), store.param)
    sql = _INSERT_CACHE.get(key)
    if sql is None:
        names = ", ".join(quote(c) for c in columns)
        marks = ", ".join([store.param] * len(columns))
        sql = f"INSERT INTO {table} ({names}) VALUES ({marks})"
        _INSERT_CACHE[key] = sql
    return sql


def insert_many(store: Store, table: str, columns: Sequence[str], rows: list[Any]) -> None:
    """``executemany`` the rows into ``table`` (no-op for an empty list)."""
    if rows:
        store.db.cursor().executemany(insert_sql(store, table, columns), rows)


def insert_trace_rows(store: Store, batch: list[TraceRows]) -> None:
    """Insert several traces' rows, table by table (parents before children)."""
    insert_many(store, "traces", TRACE_COLUMNS, [t.trace for t in batch])
    insert_many(store, "tags", TAG_COLUMNS, [r for t in batch for r in t.tags])
    insert_many(store, "steps", STEP_COLUMNS, [r for t in batch for r in t.steps])
    insert_many(store, "decisions", DECISION_COLUMNS, [r for t in batch for r in t.decisions])
    insert_many(store, "snapshots", SNAPSHOT_COLUMNS, [r for t in batch for r in t.snapshots])
    insert_many(store, "evals", EVAL_COLUMNS, [r for t in batch for r in t.evals])


def existing_trace_ids(store: Store, ids: list[str]) -> set[str]:
    """Which of these trace ids are already in the store."""
    found: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join([store.param] * len(chunk))
        cursor = store.db.execute_sql(f"SELECT id FROM traces WHERE id IN ({marks})", chunk)
        found.update(row[0] for row in cursor.fetchall())
    return found


def execute(store: Store, sql: str, params: Sequence[Any] = ()) -> Any:
    """Run one statement with ``?`` placeholders rewritten for the store's driver."""
    if store.param != "?":
        sql = sql.replace("?", store.param)
    return store.db.execute_sql(sql, params)


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
    store.db.execute_sql(insert_sql(store, table, columns), row)
