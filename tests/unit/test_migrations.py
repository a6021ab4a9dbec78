"""Schema migrations: a v1 store upgrades with every row kept, migrations are recorded and
idempotent, a newer store is refused, and the peewee models match the migrated schema."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from peewee import Database, SqliteDatabase

from agent_replay.errors import StoreError
from agent_replay.services.ingest import ingest_trace
from agent_replay.store import migrations
from agent_replay.store.db import Store, ensure_database, open_store
from agent_replay.store.migrations import LATEST, MIGRATIONS, pending, run_migrations
from agent_replay.store.models import ALL_MODELS, BACKEND_COLUMNS, SEARCH_TABLES
from agent_replay.store.pragmas import PRAGMAS
from agent_replay.store.queries import list_traces
from agent_replay.store.trace_detail import get_trace, trace_json

ALL_NAMES = [name for name, _ in MIGRATIONS]


@pytest.fixture
def db_file(store_dir: Path) -> Path:
    store_dir.mkdir(mode=0o700, parents=True)
    return store_dir / "traces.db"


@pytest.fixture
def raw_db(db_file: Path) -> Iterator[SqliteDatabase]:
    """A bare peewee database on the store file, not migrated."""
    db = SqliteDatabase(str(db_file), pragmas=PRAGMAS)
    db.connect()
    yield db
    db.close()


@pytest.fixture
def v1_db(raw_db: SqliteDatabase) -> SqliteDatabase:
    """A store in the schema-v1 shape, with rows written by a v1 build (raw SQL)."""
    assert run_migrations(raw_db, upto=1) == ["0001_initial"]
    sql = raw_db.execute_sql
    sql(
        'INSERT INTO traces (id, agent_name, agent_version, "trigger", status, input, output, '
        "input_hash, started_at, started_at_ms, ended_at, total_duration_ms, total_tokens, "
        "total_cost_usd, error, metadata, parent_trace_id, forked_from_step, otel_trace_id, "
        "source_format, step_count, created_at_ms) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "trc_v1old",
            "legacy-bot",
            "0.9",
            "cron",
            "completed",
            '{"q": "hi"}',
            '"bye"',
            "abc123",
            "2025-06-01T10:00:00.000Z",
            1748772000000,
            "2025-06-01T10:00:05.000Z",
            5000.0,
            42,
            0.25,
            None,
            '{"env": "prod"}',
            None,
            None,
            "otel-1",
            "jsonl",
            2,
            1748772000000,
        ),
    )
    sql(
        "INSERT INTO traces (id, agent_name, status, started_at_ms, parent_trace_id, "
        "forked_from_step, step_count, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ("trc_v1fork", "legacy-bot", "forked", 1748772100000, "trc_v1old", 1, 0, 1748772100000),
    )
    step_sql = (
        "INSERT INTO steps (id, trace_id, step_number, step_type, name, input, output, error, "
        "started_at, started_at_ms, ended_at, duration_ms, tokens_used, model, metadata, "
        "call_id, is_open) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    sql(
        step_sql,
        (
            "stp_v1one",
            "trc_v1old",
            1,
            "tool_call",
            "search",
            '{"query": "x"}',
            "[1, 2]",
            None,
            "2025-06-01T10:00:01.000Z",
            1748772001000,
            "2025-06-01T10:00:02.000Z",
            1000.0,
            40,
            "gpt",
            '{"k": "v"}',
            "call-1",
            0,
        ),
    )
    sql(
        step_sql,
        (
            "stp_v1two",
            "trc_v1old",
            2,
            "output",
            None,
            None,
            '"done"',
            None,
            None,
            None,
            None,
            None,
            2,
            None,
            None,
            None,
            0,
        ),
    )
    sql(
        "INSERT INTO snapshots (step_id, trace_id, context_window, environment, tool_state) "
        "VALUES (?, ?, ?, ?, ?)",
        ("stp_v1one", "trc_v1old", '["msg"]', '{"cwd": "/"}', '{"open": 1}'),
    )
    sql(
        "INSERT INTO evals (id, trace_id, evaluator, score, passed, threshold, details, model, "
        "cost_usd, created_at, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "evl_v1",
            "trc_v1old",
            "exact",
            0.9,
            1,
            0.5,
            '{"why": "ok"}',
            None,
            None,
            "2025-06-02T00:00:00.000Z",
            1748822400000,
        ),
    )
    for position, tag in enumerate(["legacy", "prod"]):
        sql(
            "INSERT INTO tags (trace_id, tag, position) VALUES (?, ?, ?)",
            ("trc_v1old", tag, position),
        )
    return raw_db


def columns(db: Database, table: str) -> list[str]:
    return [c.name for c in db.get_columns(table)]


def rows(db: Database, table: str, order: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.execute_sql(f"SELECT * FROM {table} ORDER BY {order}").fetchall()]


def recorded(db: Database) -> list[str]:
    return [r[0] for r in db.execute_sql("SELECT name FROM _migrations ORDER BY name").fetchall()]


def user_version(db: Database) -> int:
    return int(db.execute_sql("PRAGMA user_version").fetchone()[0])


def test_v1_shape_has_no_v2_fields(v1_db: SqliteDatabase) -> None:
    assert "session_id" not in columns(v1_db, "traces")
    assert "parent_step" not in columns(v1_db, "steps")
    assert "caused_by_step" not in columns(v1_db, "steps")
    assert not v1_db.table_exists("decisions")
    assert recorded(v1_db) == ["0001_initial"]
    assert user_version(v1_db) == 1
    assert pending(v1_db) == ALL_NAMES[1:]


def test_v1_store_upgrades_with_every_row_intact(v1_db: SqliteDatabase) -> None:
    before = {
        "traces": rows(v1_db, "traces", "id"),
        "steps": rows(v1_db, "steps", "id"),
        "snapshots": rows(v1_db, "snapshots", "step_id"),
        "evals": rows(v1_db, "evals", "id"),
        "tags": rows(v1_db, "tags", "trace_id, position"),
    }
    assert run_migrations(v1_db) == ALL_NAMES[1:]
    for table, old_rows in before.items():
        old_columns = columns(v1_db, table)[: len(old_rows[0])]
        new_rows = [
            tuple(r)
            for r in v1_db.execute_sql(
                f"SELECT {', '.join(chr(34) + c + chr(34) for c in old_columns)} FROM {table}"
            ).fetchall()
        ]
        assert sorted(new_rows, key=repr) == sorted(old_rows, key=repr), table
    new_fields = v1_db.execute_sql("SELECT session_id FROM traces").fetchall()
    assert [r[0] for r in new_fields] == [None, None]
    links = v1_db.execute_sql("SELECT parent_step, caused_by_step FROM steps").fetchall()
    assert [tuple(r) for r in links] == [(None, None), (None, None)]
    assert v1_db.table_exists("decisions")
    assert columns(v1_db, "decisions") == [
        "step_id",
        "trace_id",
        "options",
        "chosen",
        "rationale",
        "confidence",
        "decided_by",
    ]
    assert v1_db.execute_sql("SELECT COUNT(*) FROM decisions").fetchone()[0] == 0


def test_upgraded_v1_store_reads_through_the_library(
    store_dir: Path, v1_db: SqliteDatabase
) -> None:
    v1_db.close()
    with open_store(store_dir) as store:
        trace = get_trace(store, "trc_v1old")
        assert trace.agent_name == "legacy-bot"
        assert trace.trigger == "cron"
        assert trace.input == {"q": "hi"}
        assert trace.output == "bye"
        assert trace.session_id is None
        assert trace.tags == ["legacy", "prod"]
        assert trace.metadata == {"env": "prod"}
        assert [s.step_number for s in trace.steps] == [1, 2]
        first = trace.steps[0]
        assert (first.parent_step, first.caused_by_step, first.decision) == (None, None, None)
        assert first.output == [1, 2]
        assert first.snapshot is not None and first.snapshot.environment == {"cwd": "/"}
        assert trace.evals[0].details == {"why": "ok"}
        fork = get_trace(store, "trc_v1fork")
        assert (fork.parent_trace_id, fork.forked_from_step) == ("trc_v1old", 1)
        assert {i.id for i in list_traces(store).items} == {"trc_v1old", "trc_v1fork"}
        # and the upgraded store takes v2 data
        ingest_trace(
            store,
            {
                "id": "trc_v2new",
                "agent_name": "new",
                "session_id": "s",
                "steps": [
                    {"step_number": 1, "step_type": "decision", "decision": {"chosen": "a"}},
                    {"step_number": 2, "step_type": "thought", "caused_by_step": 1},
                ],
            },
        )
        assert trace_json(store, "trc_v2new")["steps"][1]["caused_by_step"] == 1


def test_migrations_recorded_in_order(store: Store) -> None:
    assert recorded(store.db) == ALL_NAMES
    if store.is_sqlite:
        assert user_version(store.db) == LATEST
    applied_at = store.db.execute_sql("SELECT applied_at FROM _migrations").fetchall()
    assert all(r[0] for r in applied_at)


def schema_of(store: Store) -> list[tuple[Any, ...]]:
    """Every table, index and trigger of the store, with its definition."""
    if store.is_sqlite:
        return rows(store.db, "sqlite_master", "name")
    return [
        tuple(r)
        for r in store.db.execute_sql(
            "SELECT c.relname, c.relkind, pg_get_indexdef(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() ORDER BY c.relname"
        ).fetchall()
    ]


def test_migrations_idempotent(store: Store) -> None:
    schema = schema_of(store)
    assert run_migrations(store) == []
    assert run_migrations(store.db) == []
    store.close()
    ensure_database(store.target).close()
    with open_store(store.target) as again:
        assert schema_of(again) == schema
        assert recorded(again.db) == ALL_NAMES
        assert pending(again.db) == []


@pytest.mark.sqlite_only
def test_idempotent_without_the_user_version_fast_path(store: Store) -> None:
    """Even when user_version is lost, recorded migrations are not applied twice."""
    store.db.execute_sql("PRAGMA user_version = 0")
    assert run_migrations(store) == []
    assert user_version(store.db) == LATEST


def test_migrations_run_in_one_transaction(
    raw_db: SqliteDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing migration leaves the store exactly as it was: nothing half-applied."""
    run_migrations(raw_db, upto=1)

    def broken(db: Database) -> None:
        db.execute_sql("ALTER TABLE traces ADD COLUMN session_id TEXT")
        raise RuntimeError("boom")

    monkeypatch.setattr(migrations, "MIGRATIONS", [MIGRATIONS[0], ("0002_broken", broken)])
    with pytest.raises(RuntimeError, match="boom"):
        run_migrations(raw_db)
    assert "session_id" not in columns(raw_db, "traces")
    assert recorded(raw_db) == ["0001_initial"]
    assert user_version(raw_db) == 1


def _mark_newer(db: Database) -> None:
    db.execute_sql(
        f"INSERT INTO _migrations (name, applied_at) VALUES ({db.param}, {db.param})",
        ("9999_from_the_future", "2030-01-01T00:00:00+00:00"),
    )
    if isinstance(db, SqliteDatabase):
        db.execute_sql(f"PRAGMA user_version = {LATEST + 1}")


def test_newer_store_refused_by_run_migrations(store: Store) -> None:
    _mark_newer(store.db)
    with pytest.raises(StoreError, match="newer") as info:
        run_migrations(store)
    assert "9999_from_the_future" in info.value.message
    with pytest.raises(StoreError, match="newer"):
        pending(store.db)


def test_newer_store_refused_on_open(store: Store) -> None:
    _mark_newer(store.db)
    store.close()
    with pytest.raises(StoreError, match="newer") as info:
        ensure_database(store.target)
    assert info.value.hints


def test_newer_v1_store_refused_before_upgrading(v1_db: SqliteDatabase) -> None:
    """A store with an unknown migration is never partly upgraded by this build."""
    _mark_newer(v1_db)
    with pytest.raises(StoreError, match="newer"):
        run_migrations(v1_db)
    assert "session_id" not in columns(v1_db, "traces")
    assert not v1_db.table_exists("decisions")


# --- models match the migrated schema ------------------------------------------------------


def test_every_table_has_a_model(store: Store) -> None:
    """Every table but the search index's (SQLite's FTS5 tables and their shadows)."""
    tables = {
        t
        for t in store.db.get_tables()
        if t != "_migrations" and not any(t.startswith(f) for f in SEARCH_TABLES)
    }
    assert tables == {model._meta.table_name for model in ALL_MODELS}


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m._meta.table_name)
def test_model_columns_match_schema(store: Store, model: Any) -> None:
    """Every column but PostgreSQL's search vector and arrival sequence."""
    table = model._meta.table_name
    schema = {c.name: c for c in store.db.get_columns(table) if c.name not in BACKEND_COLUMNS}
    fields = {f.column_name: f for f in model._meta.sorted_fields}
    assert sorted(fields) == sorted(schema)
    primary = set(store.db.get_primary_keys(table))
    for name, field in fields.items():
        if name in primary:
            continue
        assert field.null == schema[name].null, f"{table}.{name} nullability"


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m._meta.table_name)
def test_model_primary_keys_match_schema(store: Store, model: Any) -> None:
    table = model._meta.table_name
    meta = model._meta
    if meta.composite_key:
        model_keys = list(meta.primary_key.field_names)
    else:
        model_keys = [meta.primary_key.column_name]
    assert store.db.get_primary_keys(table) == model_keys


def test_models_query_a_migrated_store(store: Store) -> None:
    """The models bind to a store's database and read what ingest wrote."""
    from agent_replay.store.models import StepRow, TraceRow

    ingest_trace(
        store,
        {"id": "trc_m", "agent_name": "a", "steps": [{"step_number": 1, "step_type": "thought"}]},
    )
    with store.db.bind_ctx([TraceRow, StepRow]):
        assert TraceRow.get_by_id("trc_m").step_count == 1
        assert StepRow.select().where(StepRow.trace_id == "trc_m").count() == 1


# --- concurrent first opens -----------------------------------------------------------------


def _open_new_store(path: str, start: Any, out: Any) -> None:
    start.wait()
    try:
        store = ensure_database(path)
        store.close()
        out.put("ok")
    except Exception as exc:  # reported to the parent
        out.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.fresh_pg_schema
def test_concurrent_first_opens_migrate_once(store_dir: Path, store_url: str | None) -> None:
    """Processes creating the same new store at once all succeed; each migration runs once."""
    target = store_url or str(store_dir)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=_open_new_store, args=(target, start, out)) for _ in range(4)]
    for proc in procs:
        proc.start()
    start.set()
    outcomes = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert outcomes == ["ok"] * len(procs)
    with open_store(target) as store:
        names = store.db.execute_sql("SELECT name FROM _migrations").fetchall()
        assert sorted(r[0] for r in names) == ALL_NAMES
        if store.is_sqlite:
            assert user_version(store.db) == LATEST


def test_step_costs_are_filled_from_metadata_on_upgrade(raw_db: SqliteDatabase) -> None:
    """0009: ``steps.cost_usd`` takes each stored step's ``metadata.cost_usd`` when it is a
    non-negative number; other steps stay NULL."""
    names = [name for name, _ in MIGRATIONS]
    run_migrations(raw_db, upto=names.index("0009_step_cost"))
    sql = raw_db.execute_sql
    sql(
        "INSERT INTO traces (id, agent_name, status, started_at_ms, step_count, created_at_ms) "
        "VALUES ('trc_c', 'a', 'completed', 0, 4, 0)"
    )
    for number, meta in enumerate(
        ['{"cost_usd": 0.25}', '{"cost_usd": "0.3"}', '{"cost_usd": -1}', None], start=1
    ):
        sql(
            "INSERT INTO steps (id, trace_id, step_number, step_type, metadata, is_open) "
            "VALUES (?, 'trc_c', ?, 'llm_call', ?, 0)",
            (f"stp_{number}", number, meta),
        )
    assert run_migrations(raw_db)[:1] == ["0009_step_cost"]
    costs = sql("SELECT cost_usd FROM steps ORDER BY step_number").fetchall()
    assert [r[0] for r in costs] == [0.25, None, None, None]


def test_producer_ids_are_filled_from_metadata_on_upgrade(raw_db: SqliteDatabase) -> None:
    """0010: ``traces.producer_trace_id`` takes each stored trace's
    ``metadata.producer_trace_id`` when it is text, so ``show rec-1`` finds traces recorded
    before the upgrade."""
    names = [name for name, _ in MIGRATIONS]
    run_migrations(raw_db, upto=names.index("0010_producer_ids"))
    for number, meta in enumerate(['{"producer_trace_id": "rec-1"}', '{"producer_trace_id": 7}']):
        raw_db.execute_sql(
            "INSERT INTO traces (id, agent_name, status, started_at_ms, step_count, "
            "created_at_ms, metadata) VALUES (?, 'a', 'completed', 0, 0, 0, ?)",
            (f"trc_{number}", meta),
        )
    assert run_migrations(raw_db)[:1] == ["0010_producer_ids"]
    rows = raw_db.execute_sql("SELECT producer_trace_id FROM traces ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["rec-1", None]
