"""Stores over a handle the caller already holds: an in-memory SQLite database, a ``sqlite3``
connection, or a peewee database.

The library promises ``ensure_database(...)`` and ``run_migrations(...)`` on whatever a program
has at hand, not only on a directory or a URL. Both ``store.db`` (opening) and
``store.migrations`` (migrating a bare handle) turn a handle into a peewee database here: a leaf
module, so neither imports the other for it.

A handed ``sqlite3`` connection stays the caller's: closing the store leaves it open. It is put
in autocommit mode (``isolation_level = None``), which peewee's explicit transactions need (the
``sqlite3`` default begins a transaction implicitly before each write).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Protocol

from peewee import Database, SqliteDatabase

MEMORY = ":memory:"
"""The name SQLite gives an in-memory database; ``ensure_database(":memory:")`` opens one."""


class HasDatabase(Protocol):
    """A ``store.db.Store`` as ``store.migrations`` (which ``db`` imports) sees it: its database."""

    @property
    def db(self) -> Database: ...


class HandedSqlite(SqliteDatabase):
    """A peewee database over a ``sqlite3`` connection the caller opened (and will close)."""

    def __init__(self, conn: sqlite3.Connection, pragmas: dict[str, Any]) -> None:
        super().__init__(MEMORY, pragmas=pragmas, autoconnect=False, thread_safe=False)
        self._handed = conn

    def _connect(self) -> sqlite3.Connection:
        self._handed.isolation_level = None  # peewee runs its own BEGIN ... COMMIT
        self._add_conn_hooks(self._handed)  # type: ignore[attr-defined]  # peewee's, untyped
        return self._handed

    def _close(self, conn: sqlite3.Connection) -> None:
        """The connection is the caller's: the store lets go of it without closing it."""


def memory_database(pragmas: dict[str, Any]) -> SqliteDatabase:
    """A private in-memory database, one connection shared by every thread (a new connection
    to ``:memory:`` would be a new, empty database)."""
    return SqliteDatabase(
        MEMORY,
        pragmas=pragmas,
        autoconnect=False,
        thread_safe=False,
        check_same_thread=False,
    )


def as_database(handle: Database | sqlite3.Connection, pragmas: dict[str, Any]) -> Database:
    """A connected peewee database for a handle (a peewee database is used as it is)."""
    database = handle if isinstance(handle, Database) else HandedSqlite(handle, pragmas)
    if database.is_closed():
        database.connect(reuse_if_open=True)
    return database
