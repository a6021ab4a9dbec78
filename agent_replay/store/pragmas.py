"""Connection settings that opening a store (``store.db``) and migrating one
(``store.migrations``) both need: SQLite's pragmas and busy timeout, and the PostgreSQL write
lock. A leaf module, so ``db`` can import ``migrations`` without ``migrations`` importing it back.

Imports nothing: not the project, not peewee.
"""

from __future__ import annotations

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

PG_WRITE_LOCK = (
    "SELECT pg_advisory_xact_lock(hashtextextended('agent-replay:' || current_schema(), 0))"
)
"""The PostgreSQL write lock: one advisory lock per store (per schema), held to the end of the
transaction; what ``BEGIN IMMEDIATE`` gives SQLite."""
