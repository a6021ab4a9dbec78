"""The demo data set: loaded through the real ingest service, idempotent, rich and valid."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from agent_replay.clock import FixedClock
from agent_replay.services.demo import (
    ANCHOR,
    DANGEROUS_ID,
    DATA,
    DEMO_TRACE_IDS,
    GOOD_RUN_ID,
    REGRESSED_ID,
    TOOL_CHAIN_ID,
    UNGROUNDED_ID,
    DemoResult,
    demo_traces,
    load_demo,
)
from agent_replay.services.derive import derive_trace
from agent_replay.services.guard.policy import PATTERN_KEYS
from agent_replay.store.core import execute
from agent_replay.store.db import Store, ensure_database
from agent_replay.store.trace_detail import get_trace
from agent_replay.trace.io import input_hash, loads
from agent_replay.trace.models import Trace
from agent_replay.trace.validate import validate_trace

CLOCK = FixedClock(dt.datetime(2025, 3, 12, 15, 30, tzinfo=dt.UTC))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return ensure_database(tmp_path / ".agent-replay")


@pytest.fixture
def loaded(store: Store) -> tuple[Store, DemoResult]:
    return store, load_demo(store, CLOCK)


def _traces(store: Store) -> dict[str, Trace]:
    return {tid: get_trace(store, tid) for tid in DEMO_TRACE_IDS}


def test_load_demo_adds_five_traces_and_three_policies(loaded: tuple[Store, DemoResult]) -> None:
    """An empty store receives every demo trace and policy."""
    store, result = loaded
    assert result.traces_added == list(DEMO_TRACE_IDS)
    assert result.traces_present == []
    assert len(result.policies_added) == 3
    assert execute(store, "SELECT COUNT(*) FROM traces").fetchone()[0] == 5
    rows = execute(store, "SELECT name, pattern, action, enabled FROM policies").fetchall()
    assert sorted(r[0] for r in rows) == sorted(result.policies_added)
    assert {r[2] for r in rows} == {"deny", "require_review", "warn"}
    for _, pattern, _, enabled in rows:
        assert set(loads(pattern)) <= set(PATTERN_KEYS)
        assert enabled == 1


def test_load_demo_twice_adds_nothing(loaded: tuple[Store, DemoResult]) -> None:
    """The second load finds everything already there."""
    store, _ = loaded
    again = load_demo(store, CLOCK)
    assert again.traces_added == []
    assert again.traces_present == list(DEMO_TRACE_IDS)
    assert again.policies_added == []
    assert execute(store, "SELECT COUNT(*) FROM traces").fetchone()[0] == 5
    assert execute(store, "SELECT COUNT(*) FROM policies").fetchone()[0] == 3


def test_demo_traces_pass_strict_validation_and_are_deterministic() -> None:
    """Every trace is strictly valid, and a fixed clock gives identical data."""
    first, second = demo_traces(CLOCK), demo_traces(CLOCK)
    assert first == second
    assert [t["id"] for t in first] == list(DEMO_TRACE_IDS)
    for data in first:
        validate_trace(data)


def test_demo_traces_round_trip_through_the_store(loaded: tuple[Store, DemoResult]) -> None:
    """What get_trace returns is the trace as it was built, plus what the write path derives
    (the llm_calls' costs from the price table)."""
    store, _ = loaded
    for data in demo_traces(CLOCK):
        built = validate_trace(data).trace
        derive_trace(built)
        stored = get_trace(store, str(data["id"]))
        assert stored.model_dump(exclude={"evals"}) == built.model_dump(exclude={"evals"})


def test_demo_runs_happen_before_the_clock(loaded: tuple[Store, DemoResult]) -> None:
    """Runs are placed in the hours before now, in order, with consistent step times."""
    store, _ = loaded
    now = CLOCK.now()
    starts = []
    for trace in _traces(store).values():
        assert trace.started_at is not None and trace.ended_at is not None
        started, ended = dt.datetime.fromisoformat(trace.started_at), trace.ended_at
        assert now - dt.timedelta(hours=6) < started < dt.datetime.fromisoformat(ended) <= now
        starts.append(started)
        for step in trace.steps:
            assert step.started_at and step.ended_at and step.duration_ms is not None
            assert trace.started_at <= step.started_at <= step.ended_at <= trace.ended_at
        assert trace.total_tokens == sum(s.tokens_used or 0 for s in trace.steps)
        assert trace.total_cost_usd is not None and trace.total_cost_usd > 0
        assert "demo" in trace.tags and trace.session_id and trace.agent_version
    assert starts == sorted(starts)


def test_good_and_regressed_runs_share_agent_and_input(loaded: tuple[Store, DemoResult]) -> None:
    """The regressed run pairs with the good one by agent and input hash, and is worse."""
    store, _ = loaded
    traces = _traces(store)
    good, bad = traces[GOOD_RUN_ID], traces[REGRESSED_ID]
    assert good.agent_name == bad.agent_name
    assert good.input == bad.input
    assert input_hash(good.input) == input_hash(bad.input)
    hashes = execute(
        store, "SELECT input_hash FROM traces WHERE id IN (?, ?)", [GOOD_RUN_ID, REGRESSED_ID]
    ).fetchall()
    assert hashes[0][0] == hashes[1][0]
    assert len(bad.steps) == len(good.steps) + 1
    assert (bad.total_tokens or 0) > (good.total_tokens or 0)
    assert bad.output != good.output
    good_sql = [s.input for s in good.steps if s.name == "run_sql"]
    bad_sql = [s.input for s in bad.steps if s.name == "run_sql"]
    assert good_sql[0] not in bad_sql


def test_dangerous_trace_deletes_in_production(loaded: tuple[Store, DemoResult]) -> None:
    """The ops trace calls a delete tool with a wildcard on production."""
    store, _ = loaded
    calls = [s for s in get_trace(store, DANGEROUS_ID).steps if s.step_type == "tool_call"]
    deletes = [s for s in calls if s.name and "delete" in s.name]
    assert deletes and deletes[0].input == {"user_id": "*", "env": "production"}


def test_ungrounded_trace_retrieves_then_contradicts(loaded: tuple[Store, DemoResult]) -> None:
    """The RAG trace retrieves '5-7 business days' and answers 'within 1 hour'."""
    store, _ = loaded
    trace = get_trace(store, UNGROUNDED_ID)
    retrievals = [s for s in trace.steps if s.step_type == "retrieval"]
    assert retrievals and "5-7 business days" in str(retrievals[0].output)
    assert "1 hour" in str(trace.output) and "5-7" not in str(trace.output)


def test_tool_chain_trace_fails_with_errors(loaded: tuple[Store, DemoResult]) -> None:
    """The failing chain has two erroring tool calls and ends failed with error text."""
    store, _ = loaded
    trace = get_trace(store, TOOL_CHAIN_ID)
    assert trace.status == "failed" and trace.error
    failed_calls = [s for s in trace.steps if s.step_type == "tool_call" and s.error]
    assert len(failed_calls) == 2
    assert failed_calls[0].input != failed_calls[1].input
    assert any(s.step_type == "error" for s in trace.steps)


def test_demo_has_decisions_links_nesting_and_snapshots(loaded: tuple[Store, DemoResult]) -> None:
    """Every trace carries decisions, causal links, nested steps and snapshots."""
    store, _ = loaded
    for trace in _traces(store).values():
        steps = trace.steps
        assert len({s.step_type for s in steps}) >= 4
        decisions = [s.decision for s in steps if s.decision is not None]
        assert decisions, trace.id
        for decision in decisions:
            assert decision.chosen in {o.option for o in decision.options}
            assert decision.confidence is not None and 0 <= decision.confidence <= 1
        assert any(s.caused_by_step for s in steps), trace.id
        assert any(s.parent_step for s in steps), trace.id
        assert any(s.snapshot is not None for s in steps), trace.id
        assert all(s.id and s.id.startswith(f"stp_{trace.id[4:9]}") for s in steps)


def test_demo_data_is_written_at_the_anchor() -> None:
    """At the anchor the loaded traces are the files as shipped, placeholders filled in."""
    raw = [loads(line) for line in DATA.joinpath("traces.jsonl").read_text().splitlines()]
    loaded = demo_traces(FixedClock(ANCHOR))
    assert [t["id"] for t in raw] == list(DEMO_TRACE_IDS)
    assert [(t["started_at"], t["ended_at"]) for t in raw] == [
        (t["started_at"], t["ended_at"]) for t in loaded
    ]
    assert "{{" in str(raw) and "{{" not in str(loaded)


def test_loading_moves_every_time_by_the_clock_distance() -> None:
    """Times are relative to the clock: a clock 1 day and 1 ms later moves every one by that."""
    later = FixedClock(CLOCK.now() + dt.timedelta(days=1, milliseconds=1))
    shift = dt.timedelta(days=1, milliseconds=1)
    for first, second in zip(demo_traces(CLOCK), demo_traces(later), strict=True):
        items = [(first, second), *zip(_steps(first), _steps(second), strict=True)]
        for a, b in items:
            for key in ("started_at", "ended_at"):
                moved = dt.datetime.fromisoformat(str(b[key])) - dt.datetime.fromisoformat(
                    str(a[key])
                )
                assert moved == shift


def _steps(trace: dict[str, object]) -> list[dict[str, object]]:
    steps = trace["steps"]
    assert isinstance(steps, list)
    return steps


def test_dates_in_the_text_follow_the_run_date() -> None:
    """'Next Friday' and 'last quarter' are worked out from the day each run starts on."""
    traces = {str(t["id"]): str(t) for t in demo_traces(CLOCK)}  # Wednesday 12 March 2025
    assert "Friday 14 March 2025" in traces[TOOL_CHAIN_ID]
    assert "got '14/03/2025'" in traces[TOOL_CHAIN_ID]
    assert "Q4 2024 (Oct 01 to Dec 31)" in traces[GOOD_RUN_ID]
    assert ">= '2024-10-01' AND o.created_at < '2025-01-01'" in traces[GOOD_RUN_ID]
    assert "Q4 2024" in traces[REGRESSED_ID]
