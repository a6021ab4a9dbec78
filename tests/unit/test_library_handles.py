"""The library on a store you hand it: ``ensure_database(":memory:")``, a ``sqlite3``
connection, a peewee database, and ``run_migrations`` on each (the README's Library section)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import peewee
import pytest

import agent_replay
from agent_replay import TraceRecorder, ensure_database, get_trace, ingest_trace, run_migrations

pytestmark = pytest.mark.sqlite_only

TRACE = {
    "agent_name": "bot",
    "input": {"q": "refund?"},
    "steps": [{"step_number": 1, "step_type": "tool_call", "name": "lookup", "output": "ok"}],
}


def test_an_in_memory_store_holds_traces_and_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = ensure_database(":memory:")
    written = ingest_trace(db, TRACE)
    assert get_trace(db, written.id).steps[0].output == "ok"
    rec = TraceRecorder(db)
    tid = rec.start_trace("support-bot", input={"q": "x"})
    n = rec.start_step(tid, "tool_call", "lookup_order", input={"id": 7})
    rec.end_step(tid, n, output={"status": "shipped"})
    rec.end_trace(tid, output="It shipped.")
    assert get_trace(db, tid[:8]).steps[0].output == {"status": "shipped"}
    db.close()
    assert list(tmp_path.iterdir()) == []  # no ":memory:" directory, no file


def test_two_in_memory_stores_are_separate() -> None:
    first, second = ensure_database(":memory:"), ensure_database(":memory:")
    ingest_trace(first, TRACE)
    assert first.db.execute_sql("SELECT COUNT(*) FROM traces").fetchone()[0] == 1
    assert second.db.execute_sql("SELECT COUNT(*) FROM traces").fetchone()[0] == 0


def test_run_migrations_on_a_sqlite3_connection_leaves_it_open(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "mine.db")
    applied = run_migrations(conn)
    assert applied[0] == "0001_initial" and len(applied) >= 3
    assert run_migrations(conn) == []  # idempotent
    store = ensure_database(conn)
    ingest_trace(store, TRACE)
    store.close()
    assert conn.execute("SELECT agent_name FROM traces").fetchall() == [("bot",)]  # still open
    conn.close()
    reopened = ensure_database(tmp_path / "mine.db")  # and the file is an ordinary store
    assert reopened.db.execute_sql("SELECT COUNT(*) FROM traces").fetchone()[0] == 1


def test_run_migrations_on_a_peewee_database() -> None:
    database = peewee.SqliteDatabase(":memory:")
    assert len(run_migrations(database)) >= 3
    store = ensure_database(database)
    assert get_trace(store, ingest_trace(store, TRACE).id).agent_name == "bot"


def test_the_library_names_the_handle_store() -> None:
    assert agent_replay.Store is type(ensure_database(":memory:"))
