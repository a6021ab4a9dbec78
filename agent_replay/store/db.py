"""Opening the store: the SQLite file, its pragmas and permissions, and the ``Store`` handle.

Pragmas on every connection: WAL (readers never block the writer), ``busy_timeout`` 15 s (hook
processes run in parallel against one file), foreign keys on, ``synchronous=NORMAL`` (durable
at each checkpoint, safe against application crashes, much faster than FULL under WAL).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from peewee import Database, PeeweeException, SqliteDatabase

from agent_replay.errors import StoreError
from agent_replay.paths import DB_NAME, make_private_dir

BUSY_TIMEOUT_S = 15.0

# Errors a write can raise: peewee's wrappers, and the driver's own from raw cursors.
DB_ERRORS: tuple[type[Exception], ...] = (PeeweeException, sqlite3.Error)

PRAGMAS = {
    "journal_mode": "wal",
    "busy_timeout": int(BUSY_TIMEOUT_S * 1000),
    "foreign_keys": 1,
    "synchronous": "normal",
    "cache_size": -64000,
}


class Store:
    """A handle on one agent-replay store.

    Attributes:
        db: the peewee database; queries are bound to it explicitly.
        path: the database file (``None`` for a non-file database).
    """

    def __init__(self, db: Database, path: Path | None = None) -> None:
        self.db = db
        self.path = path

    @property
    def param(self) -> str:
        """The driver's placeholder for raw SQL (``?`` for SQLite)."""
        return str(self.db.param)

    @contextmanager
    def write(self) -> Iterator[None]:
        """A write transaction that takes the write lock up front (``BEGIN IMMEDIATE``).

        Every read-then-write runs in one, so concurrent writers never interleave.
        Re-entrant: nested use becomes a savepoint.
        """
        if isinstance(self.db, SqliteDatabase) and not self.db.in_transaction():
            with self.db.atomic("IMMEDIATE"):
                yield
        else:
            with self.db.atomic():
                yield

    def close(self) -> None:
        """Close this thread's connection."""
        if not self.db.is_closed():
            self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _db_file(path: str | os.PathLike[str]) -> Path:
    """Accept a database file or a store directory."""
    target = Path(path).expanduser()
    if target.is_dir() or (not target.suffix and not target.exists()):
        return target / DB_NAME
    return target


def open_store(path: str | os.PathLike[str], *, create: bool = True, migrate: bool = True) -> Store:
    """Open (and by default create and migrate) the store at a file or directory.

    Raises:
        StoreError: the file is missing (``create=False``), not a database, or newer than this
            build.
    """
    file = _db_file(path)
    if not file.exists():
        if not create:
            raise StoreError(
                f"no agent-replay store at {file.parent}",
                hints=["run `agent-replay init`, `agent-replay demo` or ingest a trace first"],
            )
        make_private_dir(file.parent)
        fd = os.open(file, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    db = SqliteDatabase(str(file), pragmas=PRAGMAS, timeout=BUSY_TIMEOUT_S, autoconnect=False)
    store = Store(db, file)
    try:
        db.connect(reuse_if_open=True)
        if migrate:
            from agent_replay.store.migrations import run_migrations

            run_migrations(store)
    except StoreError:
        db.close()
        raise
    except DB_ERRORS as exc:
        db.close()
        raise StoreError(f"cannot open the store at {file}: {exc}") from exc
    return store


def ensure_database(path: str | os.PathLike[str]) -> Store:
    """Create the store at ``path`` (a directory or a ``.db`` file) if needed and migrate it.

    This is the library entry point: ``db = ensure_database(".agent-replay")``.
    """
    return open_store(path, create=True, migrate=True)
