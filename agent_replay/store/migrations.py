"""Ordered, recorded, one-way schema migrations.

Each migration is a named function applied once, recorded in ``_migrations``, all pending ones
inside a single ``BEGIN IMMEDIATE`` transaction (so two processes opening a new store at once
never both migrate). A store that records a migration this build does not know was written by a
newer agent-replay and is refused. Never edit a shipped migration: add a new one.

The DDL is frozen SQL in the portable subset SQLite and PostgreSQL share, so the schema's history
does not move when ``models.py`` changes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from peewee import Database, IntegerField, TextField

from agent_replay.errors import StoreError
from agent_replay.store.schema import SCHEMA_VERSION

_V1_TABLES = [
    """CREATE TABLE traces (
        id TEXT PRIMARY KEY,
        agent_name TEXT NOT NULL,
        agent_version TEXT,
        "trigger" TEXT,
        status TEXT NOT NULL,
        input TEXT,
        output TEXT,
        input_hash TEXT,
        started_at TEXT,
        started_at_ms BIGINT NOT NULL,
        ended_at TEXT,
        total_duration_ms DOUBLE PRECISION,
        total_tokens BIGINT,
        total_cost_usd DOUBLE PRECISION,
        error TEXT,
        metadata TEXT,
        parent_trace_id TEXT,
        forked_from_step INTEGER,
        otel_trace_id TEXT,
        source_format TEXT,
        step_count INTEGER NOT NULL DEFAULT 0,
        created_at_ms BIGINT NOT NULL
    )""",
    """CREATE TABLE steps (
        id TEXT PRIMARY KEY,
        trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
        step_number INTEGER NOT NULL,
        step_type TEXT NOT NULL,
        name TEXT,
        input TEXT,
        output TEXT,
        error TEXT,
        started_at TEXT,
        started_at_ms BIGINT,
        ended_at TEXT,
        duration_ms DOUBLE PRECISION,
        tokens_used BIGINT,
        model TEXT,
        metadata TEXT,
        call_id TEXT,
        is_open INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE snapshots (
        step_id TEXT PRIMARY KEY REFERENCES steps(id) ON DELETE CASCADE,
        trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
        context_window TEXT,
        environment TEXT,
        tool_state TEXT
    )""",
    """CREATE TABLE evals (
        id TEXT PRIMARY KEY,
        trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
        evaluator TEXT NOT NULL,
        score DOUBLE PRECISION NOT NULL,
        passed INTEGER NOT NULL,
        threshold DOUBLE PRECISION,
        details TEXT,
        model TEXT,
        cost_usd DOUBLE PRECISION,
        created_at TEXT,
        created_at_ms BIGINT
    )""",
    """CREATE TABLE tags (
        trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
        tag TEXT NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (trace_id, tag)
    )""",
    """CREATE TABLE policies (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        description TEXT,
        pattern TEXT NOT NULL,
        action TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        enabled INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL
    )""",
    # Every column a list, filter, sort or pairing uses is indexed; (key, id) pairs serve
    # keyset pagination.
    "CREATE INDEX traces_started ON traces (started_at_ms, id)",
    "CREATE INDEX traces_status_started ON traces (status, started_at_ms)",
    "CREATE INDEX traces_agent_started ON traces (agent_name, started_at_ms)",
    "CREATE INDEX traces_tokens ON traces (total_tokens, id)",
    "CREATE INDEX traces_duration ON traces (total_duration_ms, id)",
    "CREATE INDEX traces_cost ON traces (total_cost_usd, id)",
    "CREATE INDEX traces_input_hash ON traces (input_hash)",
    "CREATE INDEX traces_parent ON traces (parent_trace_id)",
    "CREATE INDEX traces_otel ON traces (otel_trace_id)",
    "CREATE INDEX traces_source ON traces (source_format)",
    "CREATE UNIQUE INDEX steps_trace_number ON steps (trace_id, step_number)",
    "CREATE INDEX steps_open_call ON steps (trace_id, call_id) WHERE is_open = 1",
    "CREATE INDEX snapshots_trace ON snapshots (trace_id)",
    "CREATE INDEX evals_trace ON evals (trace_id)",
    "CREATE INDEX tags_tag ON tags (tag, trace_id)",
]


def _m0001_initial(db: Database) -> None:
    """Schema v1: traces, steps, snapshots, evals, tags, policies."""
    for statement in _V1_TABLES:
        db.execute_sql(statement)


def _m0002_sessions_causality_decisions(db: Database) -> None:
    """Schema v2: session ids, step hierarchy and causal links, decision records."""
    # deferred: playhouse.migrate costs ~5 ms and every open of a current store skips it
    from playhouse.migrate import SchemaMigrator, migrate

    migrator = SchemaMigrator.from_database(db)
    migrate(
        migrator.add_column("traces", "session_id", TextField(null=True)),
        migrator.add_column("steps", "parent_step", IntegerField(null=True)),
        migrator.add_column("steps", "caused_by_step", IntegerField(null=True)),
    )
    db.execute_sql("CREATE INDEX traces_session_started ON traces (session_id, started_at_ms)")
    db.execute_sql(
        """CREATE TABLE decisions (
            step_id TEXT PRIMARY KEY REFERENCES steps(id) ON DELETE CASCADE,
            trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
            options TEXT NOT NULL,
            chosen TEXT NOT NULL,
            rationale TEXT,
            confidence DOUBLE PRECISION,
            decided_by TEXT NOT NULL
        )"""
    )
    db.execute_sql("CREATE INDEX decisions_trace ON decisions (trace_id)")


def _m0003_hook_inbox(db: Database) -> None:
    """The hook inbox: raw harness payloads, queued by ``hook`` in a few milliseconds and
    turned into steps by the drainer through the recorder (see services/capture/hook_inbox)."""
    key = "INTEGER PRIMARY KEY" if _is_sqlite(db) else "BIGSERIAL PRIMARY KEY"
    db.execute_sql(
        f"""CREATE TABLE hook_inbox (
            id {key},
            received_ms BIGINT NOT NULL,
            payload TEXT NOT NULL,
            options TEXT NOT NULL
        )"""
    )


def _m0004_otel_spans(db: Database) -> None:
    """The OTLP receiver's staging: raw spans keyed by (OTel trace id, span id) and log records
    keyed by a digest of their content, so a redelivered batch adds nothing; ``group_key`` names
    the agent-replay trace each one is built into (see services/otel)."""
    db.execute_sql(
        """CREATE TABLE otel_spans (
            otel_trace_id TEXT NOT NULL,
            span_id TEXT NOT NULL,
            group_key TEXT NOT NULL,
            received_ms BIGINT NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (otel_trace_id, span_id)
        )"""
    )
    db.execute_sql("CREATE INDEX otel_spans_group ON otel_spans (group_key)")
    db.execute_sql(
        """CREATE TABLE otel_logs (
            record_key TEXT PRIMARY KEY,
            otel_trace_id TEXT,
            session_key TEXT,
            group_key TEXT,
            received_ms BIGINT NOT NULL,
            data TEXT NOT NULL
        )"""
    )
    db.execute_sql("CREATE INDEX otel_logs_trace ON otel_logs (otel_trace_id)")
    db.execute_sql("CREATE INDEX otel_logs_group ON otel_logs (group_key)")


MIGRATIONS: list[tuple[str, Callable[[Database], None]]] = [
    ("0001_initial", _m0001_initial),
    ("0002_sessions_causality_decisions", _m0002_sessions_causality_decisions),
    ("0003_hook_inbox", _m0003_hook_inbox),
    ("0004_otel_spans", _m0004_otel_spans),
]
LATEST = len(MIGRATIONS)
assert LATEST == SCHEMA_VERSION, "update store/schema.py with the new migration count"


def _applied(db: Database) -> list[str]:
    if not db.table_exists("_migrations"):
        return []
    cursor = db.execute_sql("SELECT name FROM _migrations ORDER BY name")
    return [row[0] for row in cursor.fetchall()]


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


def run_migrations(db: Database | object, *, upto: int | None = None) -> list[str]:
    """Apply every pending migration (or those up to number ``upto``) in one transaction.

    Args:
        db: a peewee database or a ``Store``.
        upto: stop after this many migrations in total (tests build old-shaped stores with it).

    Returns:
        The names applied now (empty when the store was current).

    Raises:
        StoreError: the store is newer than this build.
    """
    database: Database = getattr(db, "db", db)  # a Store wraps its peewee database
    wanted = MIGRATIONS[: upto if upto is not None else LATEST]
    if _is_sqlite(database) and _user_version(database) == len(wanted) and upto is None:
        return []  # fast path on every open: one pragma read
    with database.atomic("IMMEDIATE") if _is_sqlite(database) else database.atomic():
        database.execute_sql(
            "CREATE TABLE IF NOT EXISTS _migrations "
            "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        applied = set(_applied(database))
        _check_not_newer(sorted(applied))
        done = []
        for name, function in wanted:
            if name in applied:
                continue
            function(database)
            database.execute_sql(
                f"INSERT INTO _migrations (name, applied_at) "
                f"VALUES ({database.param}, {database.param})",
                (name, dt.datetime.now(dt.UTC).isoformat()),
            )
            done.append(name)
        if _is_sqlite(database):
            database.execute_sql(f"PRAGMA user_version = {len(applied) + len(done)}")
    return done


def _is_sqlite(database: Database) -> bool:
    from peewee import SqliteDatabase

    return isinstance(database, SqliteDatabase)


def _user_version(database: Database) -> int:
    return int(database.execute_sql("PRAGMA user_version").fetchone()[0])
