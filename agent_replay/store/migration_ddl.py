"""The frozen DDL of every shipped migration, one function each, in the portable subset
SQLite and PostgreSQL share; where the two differ (an auto-increment key, the arrival
sequence), a migration branches on the backend (``is_sqlite``). The search index of 0006 is in
``store/search_index``.

Frozen: the schema's history must not move when ``store/models.py`` changes, so a shipped
migration's text is never edited; a change is a new migration, added here and to
``migrations.MIGRATIONS`` (the runner, which orders and records them). SQL text, not the query
builder, for that reason.
"""

from __future__ import annotations

from peewee import Database, IntegerField, SqliteDatabase, TextField

from agent_replay.store.schema import EARLY_INBOX
from agent_replay.store.search_index import postgres_search_index, sqlite_search_index

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


def m0001_initial(db: Database) -> None:
    """Schema v1: traces, steps, snapshots, evals, tags, policies."""
    for statement in _V1_TABLES:
        db.execute_sql(statement)


def m0002_sessions_causality_decisions(db: Database) -> None:
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


def m0003_hook_inbox(db: Database) -> None:
    """The hook inbox: raw harness payloads, queued by ``hook`` in a few milliseconds and
    turned into steps by the drainer through the recorder (see services/hook/inbox)."""
    key = "INTEGER PRIMARY KEY" if is_sqlite(db) else "BIGSERIAL PRIMARY KEY"
    db.execute_sql(
        f"""CREATE TABLE hook_inbox (
            id {key},
            received_ms BIGINT NOT NULL,
            payload TEXT NOT NULL,
            options TEXT NOT NULL
        )"""
    )


def m0004_otel_spans(db: Database) -> None:
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


def m0005_policy_fail_open(db: Database) -> None:
    """A guard policy may fail open: when it cannot be evaluated (a broken stored pattern, a
    regex this build cannot compile), enforcement skips it instead of applying its action
    (see services/guard/decide)."""
    db.execute_sql("ALTER TABLE policies ADD COLUMN fail_open INTEGER NOT NULL DEFAULT 0")


def m0006_search_index(db: Database) -> None:
    """Full-text search over names, inputs, outputs and errors of traces and steps: FTS5 on
    SQLite, a generated ``tsvector`` with a GIN index on PostgreSQL (see ``store/search``)."""
    if is_sqlite(db):
        sqlite_search_index(db)
    else:
        postgres_search_index(db)


def m0007_team_store(db: Database) -> None:
    """What a shared store needs: the digest of each pushed trace (``push`` updates a trace
    whose local copy changed since, and skips the rest), receipts of spooled hook payloads
    delivered (a payload is applied once even if its spool row outlives the delivery), and,
    on PostgreSQL, an arrival sequence on steps, decisions, snapshots and evals for the live
    view and for listing in write order (SQLite's rowid plays that part)."""
    db.execute_sql(
        """CREATE TABLE push_digests (
            trace_id TEXT PRIMARY KEY REFERENCES traces(id) ON DELETE CASCADE,
            digest TEXT NOT NULL,
            pushed_ms BIGINT NOT NULL
        )"""
    )
    db.execute_sql(
        """CREATE TABLE hook_receipts (
            spool_key TEXT PRIMARY KEY,
            delivered_ms BIGINT NOT NULL
        )"""
    )
    db.execute_sql("CREATE INDEX hook_receipts_delivered ON hook_receipts (delivered_ms)")
    if not is_sqlite(db):
        for table in ("steps", "decisions", "snapshots", "evals"):
            db.execute_sql(
                f"ALTER TABLE {table} ADD COLUMN seq BIGINT GENERATED BY DEFAULT AS IDENTITY"
            )
            db.execute_sql(f"CREATE INDEX {table}_seq ON {table} (seq)")


def m0008_annotations(db: Database) -> None:
    """Annotations: a person's label (with an optional note and score) on a run or one of its
    steps, indexed by label so ``list --label good`` and the golden export find the
    hand-approved runs at once. They are listed by ``created_at_ms``, then in write order
    (SQLite's rowid; on PostgreSQL an arrival sequence, as migration 0007 gave evals)."""
    db.execute_sql(
        """CREATE TABLE annotations (
            id TEXT PRIMARY KEY,
            trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
            step_number INTEGER,
            label TEXT NOT NULL,
            note TEXT,
            score DOUBLE PRECISION,
            author TEXT,
            created_at TEXT,
            created_at_ms BIGINT
        )"""
    )
    db.execute_sql("CREATE INDEX annotations_trace ON annotations (trace_id, created_at_ms)")
    db.execute_sql("CREATE INDEX annotations_label ON annotations (label, trace_id)")
    if not is_sqlite(db):
        db.execute_sql(
            "ALTER TABLE annotations ADD COLUMN seq BIGINT GENERATED BY DEFAULT AS IDENTITY"
        )


def m0009_step_cost(db: Database) -> None:
    """Each step's cost as a column (``steps.cost_usd``, the step's ``metadata.cost_usd``), so
    a trace's total and the dashboard's cost by model and day are sums the database does;
    filled from the metadata of the steps already stored."""
    db.execute_sql("ALTER TABLE steps ADD COLUMN cost_usd DOUBLE PRECISION")
    if is_sqlite(db):
        value = "json_extract(metadata, '$.cost_usd')"
        number = "json_type(metadata, '$.cost_usd') IN ('integer', 'real')"
    else:
        value = "((metadata::jsonb) ->> 'cost_usd')::double precision"
        number = "jsonb_typeof((metadata::jsonb) -> 'cost_usd') = 'number'"
    # CASE, not AND: SQL promises no order of evaluation, and a cast of a non-number fails.
    db.execute_sql(
        f"UPDATE steps SET cost_usd = CASE WHEN {number} THEN {value} END "
        f"WHERE metadata LIKE {db.param}",
        ('%"cost_usd"%',),
    )
    db.execute_sql("UPDATE steps SET cost_usd = NULL WHERE cost_usd < 0")


def m0010_producer_ids(db: Database) -> None:
    """The id a producer gave its trace (a native stream's ``trace_id``, e.g. ``rec-1``) as an
    indexed column, so ``show rec-1`` finds the trace and a later stream resumes it; filled
    from the ``metadata.producer_trace_id`` of the traces already stored."""
    db.execute_sql("ALTER TABLE traces ADD COLUMN producer_trace_id TEXT")
    db.execute_sql("CREATE INDEX traces_producer ON traces (producer_trace_id)")
    if is_sqlite(db):
        value = "json_extract(metadata, '$.producer_trace_id')"
        text = "json_type(metadata, '$.producer_trace_id') = 'text'"
    else:
        value = "(metadata::jsonb) ->> 'producer_trace_id'"
        text = "jsonb_typeof((metadata::jsonb) -> 'producer_trace_id') = 'string'"
    db.execute_sql(
        f"UPDATE traces SET producer_trace_id = CASE WHEN {text} THEN {value} END "
        f"WHERE metadata LIKE {db.param}",
        ('%"producer_trace_id"%',),
    )


def m0011_writers(db: Database) -> None:
    """Writer liveness: the process (host, pid, start token) recording each running trace, so
    a reader can tell a trace whose recorder died from a live one (``store/writers``)."""
    db.execute_sql(
        """CREATE TABLE writers (
            trace_id TEXT PRIMARY KEY REFERENCES traces(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            host TEXT NOT NULL,
            pid BIGINT NOT NULL,
            token TEXT NOT NULL,
            registered_ms BIGINT NOT NULL
        )"""
    )


def m0012_hook_follow(db: Database) -> None:
    """Where the hook's drainer is in each session file it follows (Claude Code transcript,
    Codex rollout): the read offsets and the importer's state between payloads, one row per
    hook trace (see services/capture/transcript_follow). And which OTLP trace counts the
    tokens of each LLM response id (``otel_responses``), so a response two instrumentations
    report in two traces is counted once in the store (see services/otel/responses)."""
    db.execute_sql(
        """CREATE TABLE otel_responses (
            response_id TEXT PRIMARY KEY,
            trace_id TEXT NOT NULL,
            step_number INTEGER NOT NULL
        )"""
    )
    db.execute_sql(
        """CREATE TABLE hook_follow (
            trace_id TEXT PRIMARY KEY REFERENCES traces(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            state TEXT NOT NULL,
            updated_ms BIGINT NOT NULL,
            error TEXT
        )"""
    )


def m0013_early_hook_inbox(db: Database) -> None:
    """Payloads the hook's fast path queued while it created the store (stdlib only, before
    any migration ran, in ``schema.EARLY_INBOX``) move into ``hook_inbox`` in arrival order,
    in the transaction that builds the rest of the schema, so none is lost or applied twice
    and later payloads queue behind them. A no-op on every store the fast path did not make."""
    if not is_sqlite(db) or not db.table_exists(EARLY_INBOX):
        return
    db.execute_sql(
        "INSERT INTO hook_inbox (received_ms, payload, options) "
        f"SELECT received_ms, payload, options FROM {EARLY_INBOX} ORDER BY id"
    )
    db.execute_sql(f"DROP TABLE {EARLY_INBOX}")


def create_migrations_table(db: Database) -> None:
    """The record of applied migrations (``migrations.run_migrations``), made before the first."""
    db.execute_sql(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )


def create_schema(db: Database, schema: str) -> None:
    """The PostgreSQL schema a store URL names (``?schema=team``), made on first use, before
    any migration runs (``store/db``). DDL kept with the migrations' rather than in ``db``:
    the query builder has no ``CREATE SCHEMA``, and this module is where the store's DDL lives.
    ``schema`` is a plain identifier (``db.parse_pg_url`` checks it)."""
    db.execute_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')


def is_sqlite(database: Database) -> bool:
    """Whether a migration runs on SQLite (else PostgreSQL)."""
    return isinstance(database, SqliteDatabase)
