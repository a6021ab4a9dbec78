"""The ``Store`` handle and what it needs, without a database driver: opening a store is
``store.db``'s (peewee, and psycopg2 for a server), but a reader that only runs SQL on a local
file (``list``, ``show``: ``commands/fast_read``) holds a ``Store`` over a plain ``sqlite3``
connection (``SqliteReader``) and imports neither.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from agent_replay.errors import StoreError
from agent_replay.store.pragmas import pg_write_lock

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class SqliteReader:
    """A read-only stand-in for peewee's database on a local file: ``execute_sql``, ``param``,
    ``close``. Its connection refuses writes (``query_only``); a ``Store`` over it is
    read-only, so ``Store.write`` refuses before any SQL runs."""

    param = "?"

    def __init__(self, file: Path, busy_timeout_s: float) -> None:
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            str(file), timeout=busy_timeout_s, isolation_level=None
        )
        self._conn.execute("PRAGMA query_only = 1")

    def execute_sql(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        if self._conn is None:
            raise StoreError("the store is closed")
        return self._conn.execute(sql, params)

    def in_transaction(self) -> bool:
        return self._conn is not None and self._conn.in_transaction

    def is_closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _is_sqlite(db: Any) -> bool:
    if isinstance(db, SqliteReader):
        return True
    peewee = sys.modules.get("peewee")  # a peewee database means peewee is imported
    return peewee is not None and isinstance(db, peewee.SqliteDatabase)


_PG_SQL: dict[str, str] = {}


def execute(store: Store, sql: str, params: Sequence[Any] = ()) -> Any:
    """Run one statement of SQL text with ``?`` placeholders on the store's driver: for the
    modules that keep SQL text (``tests/meta/test_sql_strings.py: KEEP``), chiefly the readers
    ``list``/``show`` run over a ``SqliteReader`` (``store.queries``). Everything else builds
    its statements with peewee's query builder.

    PostgreSQL: psycopg formats every statement, so ``?`` becomes ``%s`` and a literal ``%``
    is doubled; the database class maps the parameters themselves (``store.db.pg_value``).
    """
    if store.is_sqlite:
        return store.db.execute_sql(sql, params)
    return store.db.execute_sql(pg_sql(sql), list(params))


def pg_sql(sql: str) -> str:
    """SQL text with ``?`` placeholders as psycopg takes it: ``%s``, a literal ``%`` doubled."""
    adapted = _PG_SQL.get(sql)
    if adapted is None:
        adapted = sql.replace("%", "%%").replace("?", "%s")
        if len(_PG_SQL) < 4096:
            _PG_SQL[sql] = adapted
    return adapted


def mask_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    user = quote(unquote(parts.username or ""), safe="")
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class Store:
    """A handle on one agent-replay store.

    Attributes:
        db: the peewee database (or a ``SqliteReader``); queries run on it explicitly.
        path: the database file (``None`` for a PostgreSQL store).
        url: the PostgreSQL URL (``None`` for a SQLite store).
        read_only: every write is refused (``open_read_only``: a bundle opened to look at).
    """

    def __init__(
        self,
        db: Any,
        path: Path | None = None,
        *,
        url: str | None = None,
        read_only: bool = False,
    ) -> None:
        self.db = db
        self.path = path
        self.url = url
        self.read_only = read_only
        self._sqlite = _is_sqlite(db)

    @property
    def is_sqlite(self) -> bool:
        """Whether this is a SQLite store (else PostgreSQL)."""
        return self._sqlite

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return "sqlite" if self.is_sqlite else "postgresql"

    @property
    def target(self) -> str:
        """What ``open_store`` takes to open this store again (in another process too; empty
        for a store on a handle or in memory, which no other process can open)."""
        if self.url is not None:
            return self.url
        return str(self.path) if self.path is not None else ""

    @property
    def label(self) -> str:
        """The store for messages: its file, or its URL with the password masked."""
        if self.url is not None:
            return mask_url(self.url)
        return str(self.path) if self.path is not None else "(in memory or a handle)"

    @property
    def param(self) -> str:
        """The driver's placeholder for raw SQL (``?`` for SQLite, ``%s`` for PostgreSQL)."""
        return str(self.db.param)

    @contextmanager
    def write(self) -> Iterator[None]:
        """A write transaction that takes the store's write lock up front.

        SQLite: ``BEGIN IMMEDIATE``. PostgreSQL: a transaction-scoped advisory lock per store
        (``pg_write_lock``), taken first, so every statement after it sees what the previous
        writer committed. Every read-then-write runs in one (next step number, pairing a
        result with its call, closing a trace), so concurrent writers never interleave.
        Re-entrant: nested use becomes a savepoint.

        Raises:
            ReadOnlyStoreError: the store was opened read-only.
        """
        if self.read_only:
            raise ReadOnlyStoreError(self.label)
        if self.is_sqlite:
            if not self.db.in_transaction():
                with self.db.atomic("IMMEDIATE"):
                    yield
            else:
                with self.db.atomic():
                    yield
            return
        with self.db.atomic():
            # Re-taking a lock this transaction holds is free (advisory locks stack).
            self.db.execute_sql(*pg_write_lock(self.db))
            yield

    def close(self) -> None:
        """Close this thread's connection (and, on PostgreSQL, the idle pooled ones)."""
        if not self.db.is_closed():
            self.db.close()
        close_all = getattr(self.db, "close_idle", None)
        if close_all is not None:
            close_all()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReadOnlyStoreError(StoreError):
    """A write to a store opened read-only (a bundle in ``agent-replay open``)."""

    def __init__(self, label: str) -> None:
        super().__init__(
            f"this store is open read-only ({label}): nothing can be changed here; to work on "
            "its traces, ingest the file into your store",
            hints=["to work on these traces, merge them into your store: agent-replay ingest FILE"],
        )
