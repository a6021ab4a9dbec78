"""Retention on both backends: ``delete`` and ``prune`` remove traces with everything attached
(steps, decisions, snapshots, evals, tags, the search index, staged OTLP items), forks stay,
``--dry-run`` only counts, and SQLite gives the space back."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.errors import AmbiguousIdError, NotFoundError
from agent_replay.services.demo import load_demo
from agent_replay.services.ingest import ingest_many, ingest_trace
from agent_replay.services.otel.nodes import trace_id_for
from agent_replay.services.prune import prunable, remove, resolve_ids
from agent_replay.store.core import execute
from agent_replay.store.db import Store, ensure_database
from agent_replay.store.queries import count_traces
from agent_replay.store.retention import reclaim_space
from agent_replay.store.trace_search import search
from agent_replay.store.transfer import trace_ids

DAY_MS = 86_400_000
NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
NOW_MS = int(NOW.timestamp() * 1000)


def count(store: Store, table: str, trace_id: str | None = None) -> int:
    if trace_id is None:
        return int(execute(store, f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    return int(
        execute(store, f"SELECT COUNT(*) FROM {table} WHERE trace_id = ?", [trace_id]).fetchone()[0]
    )


def aged(days: float, **fields: Any) -> dict[str, Any]:
    """A trace started ``days`` before NOW, with a decision, a snapshot, an eval and a tag."""
    start = NOW - dt.timedelta(days=days)
    return {
        "agent_name": "bot",
        "status": "completed",
        "started_at": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "tags": ["t"],
        "steps": [
            {
                "step_number": 1,
                "step_type": "decision",
                "name": "route",
                "output": "attic word",
                "decision": {"options": [{"option": "a"}, {"option": "b"}], "chosen": "a"},
                "snapshot": {"context_window": ["m"]},
            },
            {"step_number": 2, "step_type": "output", "output": "done"},
        ],
        "evals": [{"evaluator": "exact", "score": 1.0, "passed": True}],
        **fields,
    }


@pytest.fixture
def aging(store: Store) -> Store:
    """Traces 90, 40 (tagged keep), 35 (failed), 31 (running) and 5 days old."""
    ingest_trace(store, aged(90, id="trc_d90"))
    ingest_trace(store, aged(40, id="trc_d40", tags=["keep", "t"]))
    ingest_trace(store, aged(35, id="trc_d35", status="failed"))
    ingest_trace(store, aged(31, id="trc_d31", status="running"))
    ingest_trace(store, aged(5, id="trc_d05"))
    return store


def test_delete_removes_everything_attached(store: Store, clock: FixedClock) -> None:
    load_demo(store, clock)
    victim = "trc_demo1ungrounded"
    before = {t: count(store, t, victim) for t in ("steps", "decisions", "snapshots", "tags")}
    assert all(before.values())
    ingest_trace(store, aged(1, id="trc_other"))
    report = remove(store, resolve_ids(store, [victim]))
    assert report.counts.traces == 1
    assert (report.counts.steps, report.counts.decisions) == (before["steps"], before["decisions"])
    assert (report.counts.snapshots, report.counts.tags) == (before["snapshots"], before["tags"])
    for table in ("traces", "steps", "decisions", "snapshots", "evals", "tags", "push_digests"):
        key = "id" if table == "traces" else "trace_id"
        remaining = execute(store, f"SELECT COUNT(*) FROM {table} WHERE {key} = ?", [victim])
        assert remaining.fetchone()[0] == 0, table
    assert search(store, "refund") == []  # the demo's refund trace is gone from the index
    assert count(store, "steps", "trc_other") == 2


def test_delete_keeps_forks_of_the_deleted_trace(store: Store, clock: FixedClock) -> None:
    from agent_replay.services.fork import fork_trace

    ingest_trace(store, aged(3, id="trc_parent"))
    fork = fork_trace(store, "trc_parent", 2, clock=clock)
    remove(store, ["trc_parent"])
    assert trace_ids(store) == [fork.trace_id]
    assert count(store, "steps", fork.trace_id) == 2


def test_delete_resolves_every_id_first(aging: Store) -> None:
    with pytest.raises(NotFoundError):
        resolve_ids(aging, ["trc_d90", "trc_nope"])
    with pytest.raises(AmbiguousIdError):
        resolve_ids(aging, ["d3"])
    assert resolve_ids(aging, ["d90", "trc_d90", "d05"]) == ["trc_d90", "trc_d05"]
    assert count_traces(aging) == 5


def test_prune_takes_old_traces_but_running_and_kept_ones(aging: Store) -> None:
    cutoff = NOW_MS - 30 * DAY_MS
    assert prunable(aging, before_ms=cutoff) == ["trc_d90", "trc_d40", "trc_d35"]
    assert prunable(aging, before_ms=cutoff, keep_tags=["keep"]) == ["trc_d90", "trc_d35"]
    assert prunable(aging, before_ms=cutoff, statuses=["failed"]) == ["trc_d35"]
    assert prunable(aging, before_ms=cutoff, statuses=["running"]) == ["trc_d31"]
    assert prunable(aging, before_ms=NOW_MS - 100 * DAY_MS) == []


def test_a_dry_run_counts_and_deletes_nothing(aging: Store) -> None:
    ids = prunable(aging, before_ms=NOW_MS - 30 * DAY_MS, keep_tags=["keep"])
    report = remove(aging, ids, dry_run=True)
    assert report.dry_run and report.ids == ["trc_d90", "trc_d35"]
    assert report.counts.to_json() == {
        "traces": 2,
        "steps": 4,
        "decisions": 2,
        "snapshots": 2,
        "evals": 2,
        "tags": 2,
        "annotations": 0,
    }
    assert report.reclaimed is None
    assert count_traces(aging) == 5 and count(aging, "steps") == 10


def test_prune_cascades(aging: Store) -> None:
    ids = prunable(aging, before_ms=NOW_MS - 30 * DAY_MS, keep_tags=["keep"])
    report = remove(aging, ids)
    assert report.counts.traces == 2 and report.reclaimed is not None
    assert sorted(trace_ids(aging)) == ["trc_d05", "trc_d31", "trc_d40"]
    for table in ("steps", "decisions", "snapshots", "evals"):
        assert count(aging, table) == 3 * (2 if table == "steps" else 1), table
    assert count(aging, "tags") == 4  # trc_d40 has two
    assert sorted(r.trace.id for r in search(aging, "attic")) == ["trc_d05", "trc_d31", "trc_d40"]


def test_deleting_an_otlp_trace_drops_its_staged_spans(store: Store) -> None:
    """So a late span of the same OTel trace can't rebuild it from what was staged before."""
    group = "t:0af7651916cd43dd8448eb211c80319c"
    trace_id = trace_id_for(group)
    report = ingest_many(
        store, [("otlp", {"id": trace_id, "agent_name": "otel-agent"})], source_format="otlp"
    )
    assert report.ingested == [trace_id]
    with store.write():
        for span, key in (("s1", group), ("s2", group), ("s3", "t:other")):
            execute(
                store,
                "INSERT INTO otel_spans (otel_trace_id, span_id, group_key, received_ms, data) "
                "VALUES (?, ?, ?, ?, ?)",
                [key[2:], span, key, 1, "{}"],
            )
    remove(store, [trace_id])
    rows = execute(store, "SELECT span_id FROM otel_spans ORDER BY span_id").fetchall()
    assert [r[0] for r in rows] == ["s3"]


# --- space (SQLite) ------------------------------------------------------------------------


def bulk(store: Store, n: int, days: float) -> list[str]:
    big = "lorem ipsum dolor sit amet " * 400
    items = [
        (f"line {i}", {**aged(days, id=f"trc_bulk{i:04d}"), "input": big, "output": big})
        for i in range(n)
    ]
    return ingest_many(store, items).ingested


@pytest.mark.sqlite_only
def test_a_new_store_gives_pages_back_incrementally(store: Store) -> None:
    assert store.db.execute_sql("PRAGMA auto_vacuum").fetchone()[0] == 2
    ids = bulk(store, 300, 60)
    store.db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    report = remove(store, ids)
    assert report.reclaimed is not None and report.reclaimed.method == "incremental_vacuum"
    assert report.reclaimed.freed and report.reclaimed.freed > 1_000_000
    assert store.db.execute_sql("PRAGMA freelist_count").fetchone()[0] == 0


@pytest.mark.sqlite_only
def test_an_old_store_is_vacuumed_once_and_its_index_rebuilt(tmp_path: Path) -> None:
    """A store made before incremental auto-vacuum is rewritten when much is free, converted,
    and its search index (keyed by rowids a VACUUM may renumber) rebuilt."""
    store = ensure_database(tmp_path / "old.db")
    store.db.execute_sql("PRAGMA auto_vacuum = NONE")
    store.db.execute_sql("VACUUM")
    assert store.db.execute_sql("PRAGMA auto_vacuum").fetchone()[0] == 0
    ids = bulk(store, 300, 60)
    ingest_trace(store, aged(1, id="trc_keep", output="survivor"))
    remove(store, ids[:-10], reclaim=False)
    reclaimed = reclaim_space(store)
    assert reclaimed.method == "vacuum" and (reclaimed.freed or 0) > 1_000_000
    assert store.db.execute_sql("PRAGMA auto_vacuum").fetchone()[0] == 2
    assert [r.trace.id for r in search(store, "survivor")] == ["trc_keep"]
    assert len(search(store, "lorem", limit=50)) == 10
    integrity = "INSERT INTO steps_fts (steps_fts, rank) VALUES ('integrity-check', 0)"
    store.db.execute_sql(integrity)  # raises if the index and the rows disagree
    store.close()


def test_postgres_is_vacuumed(store: Store, backend: str) -> None:
    ids = bulk(store, 5, 60)
    report = remove(store, ids)
    assert report.reclaimed is not None
    expected = "vacuum_analyze" if backend == "postgresql" else "incremental_vacuum"
    assert report.reclaimed.method in (expected, "none")
