"""Connection settings that opening a store (``store.db``) and migrating one
(``store.migrations``) both need: SQLite's pragmas and busy timeout, and the PostgreSQL write
lock. A leaf module, so ``db`` can import ``migrations`` without ``migrations`` importing it back.

Imports nothing at load time, not the project and not peewee: ``store/core`` (the ``Store``
handle, on list/show's peewee-free fast path) imports it. The write lock's statement is built
by peewee's query builder the first time a PostgreSQL store takes the lock.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself stays off list's start-up (issue 17), as in store.core
if TYPE_CHECKING:
    from typing import Any

BUSY_TIMEOUT_S = 15.0
"""How long a SQLite writer waits for the lock (hook processes run in parallel on one file)."""

PRAGMAS = {
    "journal_mode": "wal",
    "busy_timeout": int(BUSY_TIMEOUT_S * 1000),
    "foreign_keys": 1,
    "synchronous": "normal",
    "cache_size": -64000,
}
"""Set on every SQLite connection a store opens (see ``store.db`` for why each)."""

PG_WRITE_LOCK_KEY = "agent-replay:"
"""The write lock is the advisory lock on ``hashtextextended(PG_WRITE_LOCK_KEY ||
current_schema(), 0)``: one lock per store (per schema)."""

_LOCKS: dict[str, tuple[str, list[Any]]] = {}


def pg_write_lock(database: Any) -> tuple[str, list[Any]]:
    """The PostgreSQL write lock as ``(sql, params)`` for ``database.execute_sql``: one
    advisory lock per store (per schema), held to the end of the transaction; what ``BEGIN
    IMMEDIATE`` gives SQLite. Built once per placeholder style (``database.param``)."""
    found = _LOCKS.get(database.param)
    if found is None:
        from peewee import Select, Value, fn  # deferred: only a PostgreSQL store takes it

        key = Value(PG_WRITE_LOCK_KEY).concat(fn.current_schema())
        query = Select(columns=[fn.pg_advisory_xact_lock(fn.hashtextextended(key, 0))])
        found = _LOCKS[database.param] = database.get_sql_context().sql(query).query()
    return found
