"""Ordered, recorded, one-way schema migrations.

Each migration is a named function applied once, recorded in ``_migrations``, all pending ones
inside a single ``BEGIN IMMEDIATE`` transaction (PostgreSQL: a transaction holding the store's
write lock), so two processes opening a new store at once never both migrate. A store that
records a migration this build does not know was written by a newer agent-replay and is
refused. Never edit a shipped migration: add a new one.

The DDL is frozen SQL in the portable subset SQLite and PostgreSQL share, so the schema's history
does not move when ``models.py`` changes. Where the two differ (an auto-increment key, the search
index, the arrival sequence), a migration branches on the backend (``_is_sqlite``).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable

from peewee import Database, IntegerField, SqliteDatabase, TextField

from agent_replay.errors import StoreError
from agent_replay.store.handles import HasDatabase, as_database
from agent_replay.store.pragmas import PG_WRITE_LOCK, PRAGMAS
from agent_replay.store.schema import EARLY_INBOX, SCHEMA_VERSION

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
    turned into steps by the drainer through the recorder (see services/hook/inbox)."""
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


def _m0005_policy_fail_open(db: Database) -> None:
    """A guard policy may fail open: when it cannot be evaluated (a broken stored pattern, a
    regex this build cannot compile), enforcement skips it instead of applying its action
    (see services/guard/decide)."""
    db.execute_sql("ALTER TABLE policies ADD COLUMN fail_open INTEGER NOT NULL DEFAULT 0")


# --- 0006: the search index ------------------------------------------------------------------
#
# What is searchable: a step's name (weighted up), and its input, output and error; a trace's
# agent name and session id (weighted up), and its input, output and error. Payloads are stored
# as JSON text, so a JSON escape would glue its letter to the next word ("line1\nline2" has the
# word "nline2"): escapes are blanked before tokenizing, by the same expression on both backends.


def _searchable(*columns: str) -> str:
    joined = " || ' ' || ".join(f"COALESCE({c}, '')" for c in columns)
    return (
        f"replace(replace(replace(replace({joined}, '\\\\', ' '), '\\n', ' '), '\\t', ' '), "
        "'\\r', ' ')"
    )


_FTS_TOKENIZER = "unicode61 remove_diacritics 2"
_PG_BODY_CHARS = 100_000  # a tsvector holds at most 1 MB: index the head of huge payloads
_PG_PUNCTUATION = "[!-/:-@\\[-`{-~]+"  # ASCII punctuation: split words as FTS5's unicode61 does
_SEARCH_SOURCES = {
    # fts table: (content table, name expression, body columns, columns whose update reindexes)
    "steps_fts": ("steps", "name", ("input", "output", "error"), "name, input, output, error"),
    "traces_fts": (
        "traces",
        "agent_name || ' ' || COALESCE(session_id, '')",
        ("input", "output", "error"),
        "agent_name, session_id, input, output, error",
    ),
}


def _row_values(row: str, name: str, body: tuple[str, ...]) -> str:
    """``name, body`` of the indexed text of ``row`` (``new``, ``old`` or a table alias)."""
    named = name.replace("agent_name", f"{row}.agent_name").replace(
        "session_id", f"{row}.session_id"
    )
    if named == "name":
        named = f"COALESCE({row}.name, '')"
    return f"{named}, {_searchable(*(f'{row}.{c}' for c in body))}"


def _sqlite_search_index(db: Database) -> None:
    """Contentless FTS5 tables keyed by the row's rowid, and a queue of the rows to re-index.

    Contentless: the text is not stored twice; snippets are cut from the rows themselves
    (``store/search``). Indexing costs ~30 µs a step, several times the insert itself, so
    writers only queue: the triggers note a changed row in ``search_queue`` (its old indexed
    text with it, the first time it changes since the index was last caught up: a contentless
    table deletes by replaying what it indexed), and ``catch_up_search_index`` folds the queue
    into the index in one set-based pass before any search reads it. Hooks and ``record``
    keep their write rates; the first search after a large ingest pays for the indexing.
    """
    db.execute_sql(
        """CREATE TABLE search_queue (
            kind TEXT NOT NULL,
            ref INTEGER NOT NULL,
            old_name TEXT,
            old_body TEXT,
            PRIMARY KEY (kind, ref)
        ) WITHOUT ROWID"""
    )
    for fts, (table, name, body, watched) in _SEARCH_SOURCES.items():
        db.execute_sql(
            f"CREATE VIRTUAL TABLE {fts} USING fts5(name, body, content='', "
            f"tokenize='{_FTS_TOKENIZER}')"
        )
        kind = fts[0]  # s(teps), t(races)
        queued = f"EXISTS (SELECT 1 FROM search_queue WHERE kind = '{kind}' AND ref = old.rowid)"
        db.execute_sql(
            f"CREATE TRIGGER {fts}_insert AFTER INSERT ON {table} BEGIN "
            f"INSERT OR IGNORE INTO search_queue (kind, ref) VALUES ('{kind}', new.rowid); END"
        )
        keep_old = (
            f"BEGIN INSERT INTO search_queue (kind, ref, old_name, old_body) "
            f"VALUES ('{kind}', old.rowid, {_row_values('old', name, body)}); END"
        )
        db.execute_sql(
            f"CREATE TRIGGER {fts}_update AFTER UPDATE OF {watched} ON {table} "
            f"WHEN NOT {queued} {keep_old}"
        )
        db.execute_sql(
            f"CREATE TRIGGER {fts}_delete AFTER DELETE ON {table} WHEN NOT {queued} {keep_old}"
        )
    rebuild_search_index(db)


def catch_up_search_index(db: Database, limit: int | None = None) -> int:
    """Fold ``search_queue`` into the FTS5 tables (SQLite; run inside a write transaction):
    remove what each queued row had indexed, index what it holds now. Returns the rows
    re-indexed (0, after one cheap read, when the index is current). ``limit``: fold at most
    that many queued rows (a bounded step of upkeep inside a writer's own transaction: see
    ``services/ingest``); the rest stay queued."""
    if db.execute_sql("SELECT 1 FROM search_queue LIMIT 1").fetchone() is None:
        return 0
    picked = ""
    if limit is not None:
        db.execute_sql(
            "CREATE TEMP TABLE IF NOT EXISTS search_pick "
            "(kind TEXT NOT NULL, ref INTEGER NOT NULL, PRIMARY KEY (kind, ref)) WITHOUT ROWID"
        )
        db.execute_sql("DELETE FROM temp.search_pick")
        db.execute_sql(
            "INSERT INTO temp.search_pick SELECT kind, ref FROM search_queue LIMIT ?",
            (max(0, int(limit)),),
        )
        picked = " AND (q.kind, q.ref) IN (SELECT kind, ref FROM temp.search_pick)"
    done = 0
    for fts, (table, name, body, _) in _SEARCH_SOURCES.items():
        kind = fts[0]
        db.execute_sql(
            f"INSERT INTO {fts} ({fts}, rowid, name, body) "
            f"SELECT 'delete', q.ref, q.old_name, q.old_body FROM search_queue q "
            f"WHERE q.kind = '{kind}' AND q.old_body IS NOT NULL{picked}"
        )
        cursor = db.execute_sql(
            f"INSERT INTO {fts} (rowid, name, body) "
            f"SELECT r.rowid, {_row_values('r', name, body)} FROM search_queue q "
            f"JOIN {table} r ON r.rowid = q.ref WHERE q.kind = '{kind}'{picked}"
        )
        done += max(0, int(cursor.rowcount or 0))
    if limit is None:
        db.execute_sql("DELETE FROM search_queue")
    else:
        db.execute_sql(
            "DELETE FROM search_queue WHERE (kind, ref) IN (SELECT kind, ref FROM temp.search_pick)"
        )
        db.execute_sql("DELETE FROM temp.search_pick")
    return done


def rebuild_search_index(db: Database) -> None:
    """Re-index every row (SQLite): after the migration, and after a ``VACUUM``, which may
    renumber the rowids the index is keyed by (the queue is then moot: emptied)."""
    for fts, (table, name, body, _) in _SEARCH_SOURCES.items():
        db.execute_sql(f"INSERT INTO {fts} ({fts}) VALUES ('delete-all')")
        db.execute_sql(
            f"INSERT INTO {fts} (rowid, name, body) "
            f"SELECT r.rowid, {_row_values('r', name, body)} FROM {table} r"
        )
    db.execute_sql("DELETE FROM search_queue")


def _postgres_search_index(db: Database) -> None:
    """A stored, generated ``tsvector`` per row with a GIN index (the database keeps it)."""
    for table, name, body, _ in _SEARCH_SOURCES.values():
        head = f"left({_searchable(*body)}, {_PG_BODY_CHARS})"
        db.execute_sql(
            f"ALTER TABLE {table} ADD COLUMN search_vec tsvector GENERATED ALWAYS AS ("
            f"setweight(to_tsvector('simple', regexp_replace(COALESCE({name}, ''), "
            f"'{_PG_PUNCTUATION}', ' ', 'g')), 'A') || "
            f"setweight(to_tsvector('simple', regexp_replace({head}, "
            f"'{_PG_PUNCTUATION}', ' ', 'g')), 'D')) STORED"
        )
        db.execute_sql(f"CREATE INDEX {table}_search ON {table} USING GIN (search_vec)")


def _m0006_search_index(db: Database) -> None:
    """Full-text search over names, inputs, outputs and errors of traces and steps: FTS5 on
    SQLite, a generated ``tsvector`` with a GIN index on PostgreSQL (see ``store/search``)."""
    if _is_sqlite(db):
        _sqlite_search_index(db)
    else:
        _postgres_search_index(db)


def _m0007_team_store(db: Database) -> None:
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
    if not _is_sqlite(db):
        for table in ("steps", "decisions", "snapshots", "evals"):
            db.execute_sql(
                f"ALTER TABLE {table} ADD COLUMN seq BIGINT GENERATED BY DEFAULT AS IDENTITY"
            )
            db.execute_sql(f"CREATE INDEX {table}_seq ON {table} (seq)")


def _m0008_annotations(db: Database) -> None:
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
    if not _is_sqlite(db):
        db.execute_sql(
            "ALTER TABLE annotations ADD COLUMN seq BIGINT GENERATED BY DEFAULT AS IDENTITY"
        )


def _m0009_step_cost(db: Database) -> None:
    """Each step's cost as a column (``steps.cost_usd``, the step's ``metadata.cost_usd``), so
    a trace's total and the dashboard's cost by model and day are sums the database does;
    filled from the metadata of the steps already stored."""
    db.execute_sql("ALTER TABLE steps ADD COLUMN cost_usd DOUBLE PRECISION")
    if _is_sqlite(db):
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


def _m0010_producer_ids(db: Database) -> None:
    """The id a producer gave its trace (a native stream's ``trace_id``, e.g. ``rec-1``) as an
    indexed column, so ``show rec-1`` finds the trace and a later stream resumes it; filled
    from the ``metadata.producer_trace_id`` of the traces already stored."""
    db.execute_sql("ALTER TABLE traces ADD COLUMN producer_trace_id TEXT")
    db.execute_sql("CREATE INDEX traces_producer ON traces (producer_trace_id)")
    if _is_sqlite(db):
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


def _m0011_writers(db: Database) -> None:
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


def _m0012_hook_follow(db: Database) -> None:
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


def _m0013_early_hook_inbox(db: Database) -> None:
    """Payloads the hook's fast path queued while it created the store (stdlib only, before
    any migration ran, in ``schema.EARLY_INBOX``) move into ``hook_inbox`` in arrival order,
    in the transaction that builds the rest of the schema, so none is lost or applied twice
    and later payloads queue behind them. A no-op on every store the fast path did not make."""
    if not _is_sqlite(db) or not db.table_exists(EARLY_INBOX):
        return
    db.execute_sql(
        "INSERT INTO hook_inbox (received_ms, payload, options) "
        f"SELECT received_ms, payload, options FROM {EARLY_INBOX} ORDER BY id"
    )
    db.execute_sql(f"DROP TABLE {EARLY_INBOX}")


MIGRATIONS: list[tuple[str, Callable[[Database], None]]] = [
    ("0001_initial", _m0001_initial),
    ("0002_sessions_causality_decisions", _m0002_sessions_causality_decisions),
    ("0003_hook_inbox", _m0003_hook_inbox),
    ("0004_otel_spans", _m0004_otel_spans),
    ("0005_policy_fail_open", _m0005_policy_fail_open),
    ("0006_search_index", _m0006_search_index),
    ("0007_team_store", _m0007_team_store),
    ("0008_annotations", _m0008_annotations),
    ("0009_step_cost", _m0009_step_cost),
    ("0010_producer_ids", _m0010_producer_ids),
    ("0011_writers", _m0011_writers),
    ("0012_hook_follow", _m0012_hook_follow),
    ("0013_early_hook_inbox", _m0013_early_hook_inbox),
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
            database.execute_sql(PG_WRITE_LOCK)
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


def _current(database: Database) -> bool:
    """Whether a (PostgreSQL) store has every migration of this build and none other."""
    if database.execute_sql("SELECT to_regclass('_migrations')").fetchone()[0] is None:
        return False
    applied = _applied(database)
    _check_not_newer(applied)
    return len(applied) == LATEST


def _is_sqlite(database: Database) -> bool:
    return isinstance(database, SqliteDatabase)


def _user_version(database: Database) -> int:
    return int(database.execute_sql("PRAGMA user_version").fetchone()[0])
