"""Ordered, recorded, one-way schema migrations: the runner.

Each migration is a named function applied once, recorded in ``_migrations``, all pending ones
inside a single ``BEGIN IMMEDIATE`` transaction (PostgreSQL: a transaction holding the store's
write lock), so two processes opening a new store at once never both migrate. A store that
records a migration this build does not know was written by a newer agent-replay and is
refused. Never edit a shipped migration: add a new one.

The migrations themselves are frozen DDL in ``store/migration_ddl`` (and the search index's in
``store/search_index``), so the schema's history does not move when ``models.py`` changes. This
module orders them (``MIGRATIONS``) and records them.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable
from typing import cast

from peewee import Database, Select, SqliteDatabase, Table, fn

from agent_replay.errors import StoreError
from agent_replay.store.handles import HasDatabase, as_database
from agent_replay.store.migration_ddl import (
    create_migrations_table,
    m0001_initial,
    m0002_sessions_causality_decisions,
    m0003_hook_inbox,
    m0004_otel_spans,
    m0005_policy_fail_open,
    m0006_search_index,
    m0007_team_store,
    m0008_annotations,
    m0009_step_cost,
    m0010_producer_ids,
    m0011_writers,
    m0012_hook_follow,
    m0013_early_hook_inbox,
)
from agent_replay.store.migration_ddl import create_schema as create_schema
from agent_replay.store.migration_ddl import is_sqlite as _is_sqlite
from agent_replay.store.pragmas import PRAGMAS, pg_write_lock
from agent_replay.store.schema import SCHEMA_VERSION
from agent_replay.store.search_index import catch_up_search_index as catch_up_search_index
from agent_replay.store.search_index import rebuild_search_index as rebuild_search_index

MIGRATIONS: list[tuple[str, Callable[[Database], None]]] = [
    ("0001_initial", m0001_initial),
    ("0002_sessions_causality_decisions", m0002_sessions_causality_decisions),
    ("0003_hook_inbox", m0003_hook_inbox),
    ("0004_otel_spans", m0004_otel_spans),
    ("0005_policy_fail_open", m0005_policy_fail_open),
    ("0006_search_index", m0006_search_index),
    ("0007_team_store", m0007_team_store),
    ("0008_annotations", m0008_annotations),
    ("0009_step_cost", m0009_step_cost),
    ("0010_producer_ids", m0010_producer_ids),
    ("0011_writers", m0011_writers),
    ("0012_hook_follow", m0012_hook_follow),
    ("0013_early_hook_inbox", m0013_early_hook_inbox),
]
LATEST = len(MIGRATIONS)
assert LATEST == SCHEMA_VERSION, "update store/schema.py with the new migration count"


_RECORD = Table("_migrations")
"""What has been applied: one row per migration (``migration_ddl.create_migrations_table``)."""


def _applied(db: Database) -> list[str]:
    if not db.table_exists(_RECORD.__name__):
        return []
    query = _RECORD.select(_RECORD.c.name).order_by(_RECORD.c.name).tuples()
    return [str(row[0]) for row in query.execute(db)]


def _check_not_newer(applied: list[str]) -> None:
    known = {name for name, _ in MIGRATIONS}
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise StoreError(
            f"the store was written by a newer agent-replay (unknown migrations: "
            f"{', '.join(unknown)}); this build knows {LATEST}",
            hints=["upgrade agent-replay: pip install -U agent-replay"],
        )


def pending(db: Database) -> list[str]:
    """Names of the migrations this store still needs (refuses a newer store)."""
    applied = _applied(db)
    _check_not_newer(applied)
    return [name for name, _ in MIGRATIONS if name not in set(applied)]


def run_migrations(
    db: Database | HasDatabase | sqlite3.Connection, *, upto: int | None = None
) -> list[str]:
    """Apply every pending migration (or those up to number ``upto``) in one transaction.

    Args:
        db: a ``Store``, a peewee database or a ``sqlite3`` connection (left open).
        upto: stop after this many migrations in total (tests build old-shaped stores with it).

    Returns:
        The names applied now (empty when the store was current).

    Raises:
        StoreError: the store is newer than this build.
    """
    if isinstance(db, Database | sqlite3.Connection):
        database = as_database(db, PRAGMAS)
    else:
        database = db.db  # a Store wraps its database
    wanted = MIGRATIONS[: upto if upto is not None else LATEST]
    if _is_sqlite(database) and _user_version(database) == len(wanted) and upto is None:
        return []  # fast path on every open: one pragma read
    if not _is_sqlite(database) and upto is None and _current(database):
        return []  # PostgreSQL's fast path: one read of _migrations
    with database.atomic("IMMEDIATE") if _is_sqlite(database) else database.atomic():
        if not _is_sqlite(database):
            # Two processes migrating one new server store wait for each other, as SQLite's
            # BEGIN IMMEDIATE makes them: the store's write lock (see db.Store.write).
            database.execute_sql(*pg_write_lock(database))
        create_migrations_table(database)
        applied = set(_applied(database))
        _check_not_newer(sorted(applied))
        done = []
        for name, function in wanted:
            if name in applied:
                continue
            function(database)
            applied_at = dt.datetime.now(dt.UTC).isoformat()
            _RECORD.insert({_RECORD.c.name: name, _RECORD.c.applied_at: applied_at}).execute(
                database
            )
            done.append(name)
        if _is_sqlite(database):
            cast(SqliteDatabase, database).pragma("user_version", len(applied) + len(done))
    return done


def _current(database: Database) -> bool:
    """Whether a (PostgreSQL) store has every migration of this build and none other."""
    if not has_migrations_table(database):
        return False
    applied = _applied(database)
    _check_not_newer(applied)
    return len(applied) == LATEST


def has_migrations_table(database: Database) -> bool:
    """Whether a PostgreSQL store's schema (the search path's first) has ``_migrations``:
    ``to_regclass`` resolves the name as a query would (``table_exists`` looks in one schema
    given by name)."""
    return Select(columns=[fn.to_regclass(_RECORD.__name__)]).scalar(database) is not None


def _user_version(database: Database) -> int:
    return int(cast(SqliteDatabase, database).pragma("user_version"))
