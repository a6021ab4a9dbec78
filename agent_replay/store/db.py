"""Opening the store: a local SQLite file (the default) or a shared PostgreSQL database, and the
``Store`` handle every service writes and reads through.

SQLite pragmas on every connection: WAL (readers never block the writer), ``busy_timeout`` 15 s
(hook processes run in parallel against one file), foreign keys on, ``synchronous=NORMAL``
(durable at each checkpoint, safe against application crashes, much faster than FULL under
WAL). A new file is created with ``auto_vacuum=INCREMENTAL``, so ``prune`` can hand freed pages
back to the file system without rewriting the whole database.

PostgreSQL (``postgresql://user@host:port/db?schema=team``): the same tables through the same
SQL, in the URL's schema (created on first use; default: the server's search path). Writers
serialize on a transaction-scoped advisory lock per store (see ``Store.write``), which is what
``BEGIN IMMEDIATE`` gives SQLite; readers never wait (MVCC). Connections are pooled per thread
(the TUI's workers open and close one per query batch).
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from peewee import (
    Database,
    ImproperlyConfigured,
    IntegrityError,
    PeeweeException,
    SqliteDatabase,
)

from agent_replay.errors import StoreError
from agent_replay.paths import DB_NAME, ENV_DB_URL, make_private_dir
from agent_replay.store.core import ReadOnlyStoreError as ReadOnlyStoreError  # re-exported
from agent_replay.store.core import Store as Store
from agent_replay.store.core import mask_url as mask_url
from agent_replay.store.handles import MEMORY, as_database, memory_database
from agent_replay.store.migrations import create_schema, has_migrations_table, run_migrations
from agent_replay.store.pragmas import BUSY_TIMEOUT_S as BUSY_TIMEOUT_S
from agent_replay.store.pragmas import PRAGMAS as PRAGMAS

# Errors a write can raise: peewee's wrappers, and the driver's own from raw cursors (SQLite's
# ``executemany`` in ``store/statements``).
DB_ERRORS: tuple[type[Exception], ...] = (PeeweeException, sqlite3.Error)

PG_CONNECT_TIMEOUT_S = 10
"""How long connecting to a PostgreSQL server may take before the command fails (libpq waits
for the TCP timeout otherwise, minutes on an unreachable host)."""
PG_LOCK_TIMEOUT = "60s"
"""The longest a writer waits for the store's write lock (SQLite's busy timeout, on a server
shared by a team and its CI)."""

_URL_SCHEME = re.compile(r"^(postgres|postgresql)://", re.IGNORECASE)
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


def is_db_url(target: object) -> bool:
    """Whether ``target`` is a database URL (``postgresql://…``) rather than a path."""
    return isinstance(target, str) and bool(_URL_SCHEME.match(target.strip()))


@dataclass(frozen=True)
class PgUrl:
    """A PostgreSQL store URL taken apart: what libpq gets, and what agent-replay reads itself."""

    dsn: str
    """The URL libpq connects with (our own ``schema`` parameter removed)."""
    schema: str | None
    """The schema holding the store (``None``: the server's search path)."""
    label: str
    """The URL with any password masked, for messages."""
    host: str
    port: int
    options: str
    """libpq ``options`` to send (the URL's own, plus our search path and lock timeout)."""
    connect_timeout: int


def parse_pg_url(url: str) -> PgUrl:
    """Split a ``postgresql://`` URL into libpq's part and agent-replay's ``schema``.

    Raises:
        StoreError: not a PostgreSQL URL, or a schema name that is not a plain identifier.
    """
    text = url.strip()
    if not is_db_url(text):
        raise StoreError(
            f"not a PostgreSQL URL: {mask_url(text)}",
            hints=["use postgresql://USER@HOST:PORT/DATABASE[?schema=NAME]"],
        )
    parts = urlsplit(text)
    params = parse_qsl(parts.query, keep_blank_values=True)
    schema = None
    kept: list[tuple[str, str]] = []
    options = ""
    timeout = PG_CONNECT_TIMEOUT_S
    for key, value in params:
        if key == "schema":
            schema = value or None
        elif key == "options":
            options = value
        elif key == "connect_timeout" and value.isdigit():
            timeout = int(value)
        else:
            kept.append((key, value))
    if schema is not None and not _SCHEMA_NAME.match(schema):
        raise StoreError(
            f"schema {schema!r} in the database URL is not a plain identifier",
            hints=["use letters, digits and underscores, e.g. ?schema=team_traces"],
        )
    extra = [f"-c lock_timeout={PG_LOCK_TIMEOUT}"]
    if schema is not None:
        extra.append(f"-c search_path={schema}")
    options = " ".join([options, *extra]).strip()
    dsn = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return PgUrl(
        dsn=dsn,
        schema=schema,
        label=mask_url(text),
        host=unquote(parts.hostname or "localhost"),
        port=_port(parts),
        options=options,
        connect_timeout=timeout,
    )


def _port(parts: Any) -> int:
    try:
        return int(parts.port or 5432)
    except ValueError:
        return 5432


READ_ONLY_PRAGMAS = {
    "busy_timeout": int(BUSY_TIMEOUT_S * 1000),
    "foreign_keys": 1,
    "query_only": 1,
    "cache_size": -64000,
}
"""A read-only connection's pragmas: no journal mode (setting one writes the header) and
``query_only``, so not even a stray statement can write."""


def open_read_only(path: str | os.PathLike[str]) -> Store:
    """Open a SQLite store file read-only (``mode=ro``): reads work, every write is refused with
    ``ReadOnlyStoreError`` (``Store.write``) and by SQLite itself. The schema must be current:
    a read-only file can't be migrated (``services/bundle.open_bundle`` migrates a copy).

    Raises:
        StoreError: no such file, not an agent-replay store, or not readable.
    """
    from urllib.parse import quote as quote_path

    file = Path(path).expanduser()
    if not file.is_file():
        raise StoreError(f"no such file: {file}")
    uri = f"file:{quote_path(str(file.resolve()))}?mode=ro"
    db = SqliteDatabase(
        uri, uri=True, pragmas=READ_ONLY_PRAGMAS, timeout=BUSY_TIMEOUT_S, autoconnect=False
    )
    store = Store(db, file, read_only=True)
    try:
        db.connect(reuse_if_open=True)
        db.get_tables()  # reads the schema: a file that is no database fails here
    except DB_ERRORS as exc:
        db.close()
        detail = _first_line(exc)
        raise StoreError(f"cannot read {file} as an agent-replay store: {detail}") from exc
    return store


def _db_file(path: str | os.PathLike[str]) -> Path:
    """Accept a database file or a store directory."""
    target = Path(path).expanduser()
    if target.is_dir() or (not target.suffix and not target.exists()):
        return target / DB_NAME
    return target


def open_store(target: StoreTarget, *, create: bool = True, migrate: bool = True) -> Store:
    """Open (and by default create and migrate) a store.

    Args:
        target: a store directory, a SQLite file, ``":memory:"``, a ``postgresql://`` URL, a
            ``sqlite3`` connection or a peewee database (see ``ensure_database``).
        create: create a missing store (a file, or the URL's schema and tables).
        migrate: bring the schema up to date.

    Raises:
        StoreError: the store is missing (``create=False``), not a database, newer than this
            build, or its server can't be reached (with a hint).
    """
    if isinstance(target, sqlite3.Connection | Database):
        return _open_handle(target, migrate=migrate)
    if target == MEMORY:
        return _open_handle(MEMORY, migrate=migrate)
    if is_db_url(target):
        return _open_postgres(str(target), create=create, migrate=migrate)
    file = _db_file(target)
    new = not file.exists() or file.stat().st_size == 0
    if not file.exists():
        if not create:
            raise StoreError(
                f"no agent-replay store at {file.parent}",
                hints=["run `agent-replay init`, `agent-replay demo` or ingest a trace first"],
            )
        make_private_dir(file.parent)
        fd = os.open(file, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    # auto_vacuum takes effect only on an empty file, before WAL mode writes its header: new
    # stores give freed pages back with `PRAGMA incremental_vacuum` (prune), no full VACUUM.
    pragmas = {"auto_vacuum": "incremental", **PRAGMAS} if new and create else PRAGMAS
    db = SqliteDatabase(str(file), pragmas=pragmas, timeout=BUSY_TIMEOUT_S, autoconnect=False)
    store = Store(db, file)
    try:
        db.connect(reuse_if_open=True)
        if migrate:
            run_migrations(store)
    except StoreError:
        db.close()
        raise
    except DB_ERRORS as exc:
        db.close()
        raise StoreError(f"cannot open the store at {file}: {exc}") from exc
    return store


def _open_handle(target: str | sqlite3.Connection | Database, *, migrate: bool) -> Store:
    """A store on ``":memory:"`` or on a handle the caller holds."""
    try:
        database = (
            memory_database(PRAGMAS) if isinstance(target, str) else as_database(target, PRAGMAS)
        )
        database.connect(reuse_if_open=True)
        store = Store(database)
        if migrate:
            run_migrations(store)
    except DB_ERRORS as exc:
        raise StoreError(f"cannot open the store on {target!r}: {_first_line(exc)}") from exc
    return store


def enable_psycopg2() -> None:
    """Give peewee the psycopg2 driver its start-up skipped (``agent_replay.store``), as its
    own import would have set it up; without psycopg2 installed, peewee still says so when it
    connects (``ImproperlyConfigured``)."""
    import peewee

    if peewee.psycopg2 is not None:  # type: ignore[attr-defined]
        return
    try:
        import psycopg2
        from psycopg2 import extensions
        from psycopg2.extras import Json, register_uuid
    except ImportError:
        return
    register_uuid()  # type: ignore[no-untyped-call]
    # The names peewee's own import binds (4.x; 3.x binds the first two), then 4.x's adapter
    # constants, which its class body read from the driver.
    for name, value in (("psycopg2", psycopg2), ("pg_extensions", extensions), ("Json_pg2", Json)):
        setattr(peewee, name, value)
    adapter = getattr(peewee, "Psycopg2Adapter", None)
    if adapter is not None:
        adapter.txn_idle = extensions.TRANSACTION_STATUS_IDLE
        adapter.txn_inerror = extensions.TRANSACTION_STATUS_INERROR
        adapter.txn_unknown = extensions.TRANSACTION_STATUS_UNKNOWN


def _pg_database(parsed: PgUrl, *, thread_safe: bool = True) -> Database:
    enable_psycopg2()
    database: Database = _pg_class()(
        parsed.dsn,
        autoconnect=False,
        max_connections=None,  # one per thread at most; idle ones are closed by Store.close
        stale_timeout=300,
        thread_safe=thread_safe,
        options=parsed.options,
        connect_timeout=parsed.connect_timeout,
        application_name="agent-replay",
    )
    return database


_PG_CLASS: type[Database] | None = None


def _pg_class() -> type[Database]:
    """The pooled PostgreSQL database, with every statement's parameters as PostgreSQL takes
    them (``pg_value``): any query, built by peewee or not, runs unchanged on both backends."""
    global _PG_CLASS
    if _PG_CLASS is None:
        # deferred: the pool module (and the driver) are only needed for server stores
        from playhouse.pool import PooledPostgresqlDatabase

        class AgentReplayPostgres(PooledPostgresqlDatabase):  # type: ignore[misc]
            def execute_sql(self, sql: str, params: Any = None) -> Any:
                if params:
                    params = [pg_value(value) for value in params]
                return super().execute_sql(sql, params)

        _PG_CLASS = AgentReplayPostgres
    return _PG_CLASS


def pg_value(value: Any) -> Any:
    """A parameter as PostgreSQL takes it: NUL characters in text become U+FFFD (PostgreSQL
    text can't hold them), and a bool becomes 0/1 (the schema's flags are integers, and
    psycopg sends ``true``)."""
    if type(value) is str:
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if type(value) is bool:
        return int(value)
    return value


def data_version(store: Store) -> int | None:
    """SQLite's ``PRAGMA data_version`` on this connection (``None`` on other databases).

    It changes when *another* connection commits, so it only means something when asked
    twice on the same connection.
    """
    if not isinstance(store.db, SqliteDatabase):
        return None
    return int(store.db.pragma("data_version"))


def shared_connection(store: Store) -> Store:
    """A second handle on an open store with one connection of its own that any thread may
    use (one at a time: the caller serializes), connected now. For a long-lived reader such
    as the live feed, whose polls run in whichever worker thread is free."""
    if store.is_sqlite:
        assert store.path is not None
        if store.read_only:
            from urllib.parse import quote as quote_path

            name, uri = f"file:{quote_path(str(store.path.resolve()))}?mode=ro", True
        else:
            name, uri = str(store.path), False
        db: Database = SqliteDatabase(
            name,
            uri=uri,
            pragmas=READ_ONLY_PRAGMAS if store.read_only else PRAGMAS,
            timeout=BUSY_TIMEOUT_S,
            autoconnect=False,
            thread_safe=False,
            check_same_thread=False,
        )
        other = Store(db, store.path, read_only=store.read_only)
    else:
        assert store.url is not None
        other = Store(_pg_database(parse_pg_url(store.url), thread_safe=False), url=store.url)
    try:
        other.db.connect()
    except DB_ERRORS as exc:
        raise StoreError(f"cannot open the store at {store.label}: {_first_line(exc)}") from exc
    return other


def _open_postgres(url: str, *, create: bool, migrate: bool) -> Store:
    parsed = parse_pg_url(url)
    db = _pg_database(parsed)
    store = Store(db, url=url.strip())
    try:
        db.connect(reuse_if_open=True)
    except ImproperlyConfigured as exc:
        raise StoreError(
            "PostgreSQL stores need the psycopg2 driver, which is not installed",
            hints=["pip install 'agent-replay[postgres]' (or: pip install psycopg2-binary)"],
        ) from exc
    except DB_ERRORS as exc:
        raise connection_error(parsed, exc) from exc
    try:
        if parsed.schema is not None and create:
            try:
                create_schema(db, parsed.schema)
            except IntegrityError:
                pass  # created by another process at this very moment (IF NOT EXISTS races)
        if not create and not has_migrations_table(db):
            raise StoreError(
                f"no agent-replay store at {parsed.label}",
                hints=[
                    f"create it: agent-replay --db-url '{parsed.label}' init",
                    "or push local traces to it: agent-replay push --to URL",
                ],
            )
        if migrate:
            run_migrations(store)
    except StoreError:
        store.close()
        raise
    except DB_ERRORS as exc:
        store.close()
        raise StoreError(f"cannot open the store at {parsed.label}: {_first_line(exc)}") from exc
    return store


def connection_error(parsed: PgUrl, exc: BaseException) -> StoreError:
    """A ``StoreError`` for a server that can't be reached or refused us, with what to try."""
    detail = _first_line(exc)
    text = str(exc).lower()
    hints: list[str] = []
    if "password" in text or "authentication" in text:
        hints.append("check the user and password in the URL (or ~/.pgpass, PGPASSWORD)")
    elif "does not exist" in text and "database" in text:
        hints.append(f"create the database first: createdb -h {parsed.host} -p {parsed.port} NAME")
    else:
        hints.append(
            f"is the server running and reachable? check: pg_isready -h {parsed.host} "
            f"-p {parsed.port}"
        )
    hints.append(
        f"the URL comes from --db-url or ${ENV_DB_URL}; without one, commands use the local "
        "store (.agent-replay/)"
    )
    return StoreError(
        f"cannot connect to the PostgreSQL store {parsed.label}: {detail}", hints=hints
    )


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


StoreTarget = str | os.PathLike[str] | sqlite3.Connection | Database
"""What a store can be opened on: a directory, a ``.db`` file, ``":memory:"``, a
``postgresql://`` URL, or a handle the caller holds (a ``sqlite3`` connection, a peewee
database)."""


def ensure_database(target: StoreTarget) -> Store:
    """Create the store at ``target`` if needed and migrate it.

    ``target`` is a directory, a ``.db`` file, ``":memory:"`` (a private in-memory store, gone
    when closed), a ``postgresql://`` URL, or a handle the caller holds: a ``sqlite3``
    connection (closing the store leaves it open) or a peewee database. This is the library
    entry point: ``db = ensure_database(".agent-replay")``.
    """
    return open_store(target, create=True, migrate=True)
