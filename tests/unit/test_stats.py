"""The dashboard's aggregate queries (``store.stats``) and their composition
(``services.dashboard``), against real stores seeded through the ingest service."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.services.dashboard import (
    AgentStats,
    DayBucket,
    FailingTool,
    StatusCount,
    StepTypeCount,
    load_dashboard,
    window_bounds,
)
from agent_replay.services.demo import POLICY_COLUMNS, demo_policies, load_demo
from agent_replay.services.ingest import ingest_trace
from agent_replay.store import stats
from agent_replay.store.db import Store
from agent_replay.store.models import PolicyRow
from agent_replay.store.writes import insert_rows

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
"""The shared ``clock`` fixture's instant."""


def _step(number: int, step_type: str, name: str | None = None, **fields: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"step_number": number, "step_type": step_type, **fields}
    if name is not None:
        step["name"] = name
    return step


def _trace(
    trace_id: str, agent: str, status: str, started_at: str, steps: list[Any], **fields: Any
):
    return {
        "id": trace_id,
        "agent_name": agent,
        "status": status,
        "started_at": started_at,
        "steps": [_step(n, *spec[:2], **spec[2]) for n, spec in enumerate(steps, 1)],
        **fields,
    }


# Window of 14 days at NOW: 2026-05-19T00:00Z (inclusive) to 2026-06-02T00:00Z (exclusive).
HANDCRAFTED = [
    _trace(
        "trc_t1",
        "alpha",
        "completed",
        "2026-06-01T08:00:00Z",
        [
            ("tool_call", "search", {"error": "boom"}),
            ("tool_call", "search", {"output": {"hits": 3}}),
            ("guard_check", "pre_tool", {"output": {"verdict": "deny"}}),
            ("llm_call", "answer", {"tokens_used": 100}),
        ],
        total_cost_usd=0.01,
    ),
    _trace(
        "trc_t2",
        "alpha",
        "failed",
        "2026-05-31T10:00:00Z",
        [
            ("tool_call", "search", {"error": "timeout"}),
            ("tool_call", "fetch", {"error": "404"}),
            ("guard_check", "pre_tool", {"output": {"action": "allow"}}),
            ("guard_check", "pre_tool", {"error": "policy engine unreachable"}),
            ("llm_call", "answer", {"tokens_used": 50}),
        ],
        total_cost_usd=0.005,
        evals=[
            {"evaluator": "grounded", "score": 0.9, "passed": True},
            {"evaluator": "helpful", "score": 0.2, "passed": False},
        ],
    ),
    _trace(
        "trc_t3",
        "beta",
        "completed",
        "2026-05-19T00:00:00Z",  # the window's first instant: inside
        [
            ("thought", "plan", {"output": "think"}),
            ("guard_check", "output_guard", {"metadata": {"decision": "BLOCK"}}),
        ],
        total_tokens=10,
        evals=[{"evaluator": "grounded", "score": 0.1, "passed": False}],
    ),
    _trace(
        "trc_t4",
        "beta",
        "timeout",
        "2026-05-18T23:59:59.999Z",  # a millisecond before the window: outside
        [
            ("tool_call", "search", {"error": "outside the window"}),
            ("guard_check", "pre_tool", {"output": {"verdict": "deny"}}),
        ],
        total_tokens=1000,
        total_cost_usd=1.0,
        evals=[{"evaluator": "grounded", "score": 1.0, "passed": True}],
    ),
    _trace(
        "trc_t5",
        "gamma",
        "failed",
        "2026-06-01T23:00:00Z",  # later today: still inside
        [
            ("guard_check", "pre_tool", {"output": "blocked"}),
            ("guard_check", "pre_tool", {"output": {"verdict": "pass", "note": "would deny"}}),
            ("guard_check", "pre_tool", {"output": {"verdict": "require_review"}}),
            ("error", "crash", {"error": "RuntimeError"}),
        ],
        total_tokens=7,
        total_cost_usd=0.25,
    ),
]


@pytest.fixture
def handcrafted(store: Store, clock: FixedClock) -> Store:
    for trace in HANDCRAFTED:
        ingest_trace(store, trace, clock=clock)
    rows = demo_policies(clock)
    rows[2] = (*rows[2][:6], 0, rows[2][7])  # one disabled policy
    with store.write():
        insert_rows(store, PolicyRow, [PolicyRow._meta.columns[c] for c in POLICY_COLUMNS], rows)
    return store


def test_window_is_whole_utc_days_ending_today() -> None:
    """A 14-day window runs from midnight 13 days ago to the midnight after today."""
    start, end = window_bounds(NOW, 14)
    assert start == dt.datetime(2026, 5, 19, tzinfo=dt.UTC)
    assert end == dt.datetime(2026, 6, 2, tzinfo=dt.UTC)
    with pytest.raises(ValueError):
        window_bounds(NOW, 0)


def test_totals_and_failure_rate(handcrafted: Store, clock: FixedClock) -> None:
    """Totals count the traces started in the window only (t4 is a millisecond early)."""
    data = load_dashboard(handcrafted, clock)
    totals = data.totals
    assert data.all_traces == 5
    assert (totals.traces, totals.steps, totals.tokens, totals.failed) == (4, 15, 167, 2)
    assert totals.cost_usd == pytest.approx(0.265)
    assert totals.failure_rate == 0.5


def test_day_buckets_follow_the_clock(handcrafted: Store, clock: FixedClock) -> None:
    """One zero-filled bucket per UTC day, oldest first, traces, failures, cost and tokens
    per day."""
    data = load_dashboard(handcrafted, clock)
    assert len(data.per_day) == 14
    assert data.per_day[0] == DayBucket(dt.date(2026, 5, 19), 1, 0, 0.0, 10)
    assert data.per_day[-2] == DayBucket(dt.date(2026, 5, 31), 1, 1, 0.005, 50)
    assert data.per_day[-1] == DayBucket(dt.date(2026, 6, 1), 2, 1, 0.26, 107)
    assert sum(b.traces for b in data.per_day[1:-2]) == 0
    assert data.since == "2026-05-19"


def test_a_seven_day_window_drops_older_traces(handcrafted: Store, clock: FixedClock) -> None:
    """With 7 days, the trace of 2026-05-19 is out of the window."""
    data = load_dashboard(handcrafted, clock, days=7)
    assert data.per_day[0].day == dt.date(2026, 5, 26)
    assert data.totals.traces == 3
    assert [a.agent for a in data.agents] == ["alpha", "gamma"]


def test_agents_statuses_and_step_types(handcrafted: Store, clock: FixedClock) -> None:
    """Per-agent tokens and cost, status counts and step-type mix, largest first."""
    data = load_dashboard(handcrafted, clock)
    assert data.agents[0] == AgentStats("alpha", 2, 1, 150, pytest.approx(0.015))
    assert data.agents[1:] == [
        AgentStats("beta", 1, 0, 10, 0.0),
        AgentStats("gamma", 1, 1, 7, 0.25),
    ]
    assert data.statuses == [StatusCount("completed", 2), StatusCount("failed", 2)]
    assert data.step_types == [
        StepTypeCount("guard_check", 7, 1),
        StepTypeCount("tool_call", 4, 3),
        StepTypeCount("llm_call", 2, 0),
        StepTypeCount("error", 1, 1),
        StepTypeCount("thought", 1, 0),
    ]


def test_top_failing_tools(handcrafted: Store, clock: FixedClock) -> None:
    """Tool calls with an error, grouped by name, counted in errors and distinct traces."""
    data = load_dashboard(handcrafted, clock)
    assert data.failing_tools == [FailingTool("search", 2, 2), FailingTool("fetch", 1, 1)]


def test_eval_pass_rate(handcrafted: Store, clock: FixedClock) -> None:
    """Evaluations of the window's traces, per evaluator and overall."""
    evals = load_dashboard(handcrafted, clock).evals
    assert [(e.evaluator, e.passed, e.total) for e in evals.evaluators] == [
        ("grounded", 1, 2),
        ("helpful", 0, 1),
    ]
    assert (evals.passed, evals.total) == (1, 3)
    assert evals.pass_rate == pytest.approx(1 / 3)


def test_annotation_labels(handcrafted: Store, clock: FixedClock) -> None:
    """Labels on the window's traces (runs and steps), most used first; a trace outside the
    window does not count."""
    from agent_replay.services.recorder import TraceRecorder

    recorder = TraceRecorder(handcrafted, clock=clock)
    for trace_id, label, step in [
        ("trc_t1", "good", None),
        ("trc_t1", "good", 1),
        ("trc_t2", "good", None),
        ("trc_t2", "wrong-tool", 2),
        ("trc_t4", "wrong-tool", None),  # before the window
    ]:
        recorder.annotate(trace_id, label=label, step_number=step)
    labels = load_dashboard(handcrafted, clock).labels
    assert [(g.label, g.annotations, g.traces) for g in labels] == [
        ("good", 3, 2),
        ("wrong-tool", 1, 1),
    ]


def test_guard_blocks_and_policies(handcrafted: Store, clock: FixedClock) -> None:
    """Blocks: deny verdict, error, BLOCK decision in metadata, a plain "blocked" output.

    Not blocks: allow, pass (even with "deny" in another field), require_review.
    """
    guard = load_dashboard(handcrafted, clock).guard
    assert (guard.checks, guard.blocks) == (7, 4)
    assert (guard.policies, guard.policies_enabled) == (3, 2)


def test_demo_figures(store: Store, clock: FixedClock) -> None:
    """The demo data: five traces, one failed, two failing tools, three guard checks."""
    load_demo(store, clock)
    data = load_dashboard(store, clock)
    assert (data.totals.traces, data.totals.steps, data.totals.tokens) == (5, 39, 7361)
    assert data.totals.failure_rate == 0.2
    assert data.failing_tools == [
        FailingTool("search_flights", 2, 1),
        FailingTool("run_sql", 1, 1),
    ]
    assert (data.guard.checks, data.guard.blocks, data.guard.policies_enabled) == (3, 0, 3)
    assert data.agents[0].agent == "analytics-sql-agent"
    assert data.agents[0].tokens == 3708


def test_empty_store(store: Store, clock: FixedClock) -> None:
    """An empty store is flagged empty, with zero-filled days."""
    data = load_dashboard(store, clock)
    assert data.is_empty
    assert data.totals.traces == 0 and data.totals.failure_rate is None
    assert len(data.per_day) == 14 and not any(b.traces for b in data.per_day)


def test_quiet_window_is_not_an_empty_store(store: Store, clock: FixedClock) -> None:
    """Traces older than the window: not empty, but nothing in the window."""
    ingest_trace(store, HANDCRAFTED[3], clock=clock)
    data = load_dashboard(store, clock)
    assert not data.is_empty
    assert data.totals.traces == 0 and data.step_types == [] and data.guard.checks == 0


def test_step_cache_reuses_unchanged_days(store: Store, clock: FixedClock) -> None:
    """With a cache, unchanged past days are not read again; changed ones and today are."""
    ingest_trace(store, HANDCRAFTED[1], clock=clock)  # 2026-05-31
    first = load_dashboard(store, clock)
    assert first.failing_tools == [FailingTool("fetch", 1, 1), FailingTool("search", 1, 1)]

    calls: list[stats.Window] = []
    real = stats.step_groups

    def spy(store: Store, window: stats.Window, bucket_ms: int = stats.DAY_MS) -> Any:
        calls.append(window)
        return real(store, window, bucket_ms)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stats, "step_groups", spy)
        again = load_dashboard(store, clock, step_cache=first.step_cache)
        assert calls == []  # no steps today, 2026-05-31 unchanged
        assert again.failing_tools == first.failing_tools

        ingest_trace(store, HANDCRAFTED[0], clock=clock)  # today
        ingest_trace(store, HANDCRAFTED[2], clock=clock)  # 2026-05-19
        fresh = load_dashboard(store, clock, step_cache=again.step_cache)
    start = int(dt.datetime(2026, 5, 19, tzinfo=dt.UTC).timestamp() * 1000)
    today = int(dt.datetime(2026, 6, 1, tzinfo=dt.UTC).timestamp() * 1000)
    assert calls == [
        stats.Window(start, start + stats.DAY_MS),
        stats.Window(today, today + stats.DAY_MS),
    ]
    exact = load_dashboard(store, clock)
    for figure in ("totals", "per_day", "agents", "step_types", "failing_tools", "guard"):
        assert getattr(fresh, figure) == getattr(exact, figure)


def test_step_groups_split_failing_tools_per_bucket(handcrafted: Store) -> None:
    """The raw step groups: failing tool calls get groups of their own, per day bucket."""
    start = int(dt.datetime(2026, 5, 31, tzinfo=dt.UTC).timestamp() * 1000)
    window = stats.Window(start, start + 2 * stats.DAY_MS)
    failing = [g for g in stats.step_groups(handcrafted, window) if g.tool is not None]
    assert [(g.bucket, g.tool, g.steps, g.errors, g.error_traces) for g in failing] == [
        (0, "fetch", 1, 1, 1),
        (0, "search", 1, 1, 1),
        (1, "search", 1, 1, 1),
    ]
