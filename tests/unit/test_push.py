"""``push``: a local store copied into a team store (the ``store`` fixture: PostgreSQL, or a
second SQLite file), idempotent by trace id, identical content, growing traces updated."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.errors import UsageError
from agent_replay.services.demo import load_demo
from agent_replay.services.ingest import ingest_trace
from agent_replay.services.push import push
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.core import execute
from agent_replay.store.db import Store, ensure_database
from agent_replay.store.queries import TraceFilter, count_traces
from agent_replay.store.trace_detail import trace_json
from agent_replay.store.trace_search import search
from agent_replay.store.transfer import read_traces, trace_ids

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def local(tmp_path: Path, clock: FixedClock, make_trace: Any) -> Store:
    """A developer's local store: the demo (decisions, snapshots, forks, tags), an ingested
    trace with evals, and a trace still running with an open step."""
    store = ensure_database(tmp_path / "laptop" / ".agent-replay")
    load_demo(store, clock)
    ingest_trace(
        store,
        {
            **make_trace(4, id="trc_evals", status="failed", error="boom"),
            "evals": [
                {"evaluator": "exact", "score": 0.5, "passed": False},
                {"evaluator": "ai-review", "score": 0.9, "passed": True, "details": {"k": 1}},
            ],
        },
    )
    rec = TraceRecorder(store, clock=clock)
    trace = rec.start_trace("live-bot", trace_id="trc_live", session_id="s1", tags=["wip"])
    rec.step(trace, {"step_type": "thought", "name": "plan", "output": "go"})
    rec.start_step(trace, "tool_call", "fetch", input={"url": "https://x"}, call_id="c1")
    yield store
    store.close()


def every_trace(store: Store) -> dict[str, dict[str, Any]]:
    return {tid: trace_json(store, tid) for tid in trace_ids(store)}


def test_pushing_twice_copies_every_trace_once_with_identical_content(
    local: Store, store: Store
) -> None:
    first = push(local, store)
    expected = trace_ids(local)
    assert sorted(first.new) == sorted(expected) and first.updated == []
    assert first.steps == sum(c.steps for c in read_traces(local, expected))
    again = push(local, store)
    assert (again.new, again.updated, again.unchanged) == ([], [], len(expected))
    assert count_traces(store) == len(expected)
    rows = execute(store, "SELECT id, COUNT(*) FROM traces GROUP BY id").fetchall()
    assert all(int(count) == 1 for _, count in rows)
    assert every_trace(store) == every_trace(local)
    # row for row, down to the ingest time, source format and open step
    assert [c.digest for c in read_traces(store, expected)] == [
        c.digest for c in read_traces(local, expected)
    ]


def test_a_trace_that_grew_is_updated_and_team_evals_stay(local: Store, store: Store) -> None:
    push(local, store)
    with store.write():  # an evaluation made on the team store
        execute(
            store,
            "INSERT INTO evals (id, trace_id, evaluator, score, passed) VALUES (?, ?, ?, ?, ?)",
            ["evl_team", "trc_live", "team-review", 1.0, 1],
        )
    rec = TraceRecorder(local, clock=FixedClock(NOW))
    rec.end_step("trc_live", call_id="c1", output="fetched")
    rec.step("trc_live", {"step_type": "output", "output": "done"})
    rec.end_trace("trc_live", output="done")
    report = push(local, store)
    assert (report.new, report.updated) == ([], ["trc_live"])
    copied = trace_json(store, "trc_live")
    evaluators = [e["evaluator"] for e in copied.pop("evals")]
    original = trace_json(local, "trc_live")
    original.pop("evals")
    assert copied == original
    assert evaluators == ["team-review"]
    assert ids_of(search(store, "fetched")) == ["trc_live"]  # the search index follows
    assert push(local, store).updated == []


def ids_of(results: list[Any]) -> list[str]:
    return [r.trace.id for r in results]


def test_a_trace_deleted_from_the_team_store_is_pushed_again(local: Store, store: Store) -> None:
    push(local, store)
    with store.write():
        execute(store, "DELETE FROM traces WHERE id = ?", ["trc_evals"])
    report = push(local, store)
    assert report.new == ["trc_evals"] and report.updated == []
    assert trace_json(store, "trc_evals") == trace_json(local, "trc_evals")


def test_filters_choose_what_is_pushed(local: Store, store: Store) -> None:
    report = push(local, store, TraceFilter(status="failed"))
    failed = trace_ids(local, "t.status = ?", ["failed"])
    assert sorted(report.new) == sorted(failed) and failed
    assert sorted(trace_ids(store)) == sorted(failed)


def test_progress_is_reported_per_batch(local: Store, store: Store) -> None:
    seen: list[tuple[int, int]] = []
    push(local, store, progress=lambda done, total: seen.append((done, total)), batch=3)
    total = len(trace_ids(local))
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert len(seen) == 1 + -(-total // 3)


def test_pushing_a_store_into_itself_is_refused(local: Store) -> None:
    with pytest.raises(UsageError, match="two different stores"):
        push(local, local)
