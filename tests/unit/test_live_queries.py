"""The live reads behind ``agent-replay watch``: which traces are watched, and polls that read
only what changed (new steps past the rowid cursor, open steps closed since, decisions
attached since), with ``PRAGMA data_version`` making an idle poll free."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.live import (
    LiveCursor,
    LiveFilter,
    max_rowids,
    steps_after,
    steps_by_rowid,
    trace_baseline,
    trace_live_steps,
    watched_traces,
)
from agent_replay.store.live_feed import LiveFeed

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def at(seconds: float) -> str:
    """A canonical timestamp ``seconds`` after 11:59:00."""
    instant = NOW - dt.timedelta(seconds=60) + dt.timedelta(seconds=seconds)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


@pytest.fixture
def rec(store: Store) -> TraceRecorder:
    return TraceRecorder(store, clock=FixedClock(NOW))


def add_steps(rec: TraceRecorder, trace_id: str, count: int, *, start: float = 1) -> list[int]:
    """``count`` closed tool calls of 10 tokens each, one second apart."""
    numbers = []
    for i in range(count):
        n = rec.start_step(trace_id, "tool_call", f"tool-{i}", started_at=at(start + i))
        rec.end_step(trace_id, n, output="ok", tokens_used=10, ended_at=at(start + i + 0.5))
        numbers.append(n)
    return numbers


def running(rec: TraceRecorder, trace_id: str, **fields: Any) -> str:
    fields.setdefault("started_at", at(0))
    return rec.start_trace(fields.pop("agent", "bot"), trace_id=trace_id, **fields)


# --- queries ---------------------------------------------------------------------------------


def test_steps_after_returns_only_rows_past_the_cursor(store: Store, rec: TraceRecorder) -> None:
    """After N steps, a read after the cursor returns just the steps added since."""
    trace = running(rec, "trc_a")
    add_steps(rec, trace, 5)
    cursor = max_rowids(store)
    add_steps(rec, trace, 2, start=10)
    top = max_rowids(store)
    new = steps_after(store, cursor.steps, top.steps, [trace])
    assert [s.step_number for s in new] == [6, 7]
    assert steps_after(store, top.steps, top.steps, [trace]) == []


def test_steps_after_leaves_out_unwatched_traces(store: Store, rec: TraceRecorder) -> None:
    """Steps of traces not asked for are not returned (nor turned into objects)."""
    a, b = running(rec, "trc_a"), running(rec, "trc_b")
    add_steps(rec, a, 1)
    add_steps(rec, b, 3)
    new = steps_after(store, 0, max_rowids(store).steps, [a])
    assert [(s.trace_id, s.step_number) for s in new] == [(a, 1)]


@pytest.mark.sqlite_only  # a SQLite query plan / data_version signal
def test_steps_after_seeks_the_rowid_range(store: Store) -> None:
    """The new-steps read is a range seek on the rowid, not a scan of each trace's steps."""
    sql = (
        "EXPLAIN QUERY PLAN SELECT s.rowid FROM steps s "
        "WHERE s.rowid > ? AND s.rowid <= ? AND +s.trace_id IN (?, ?) ORDER BY s.rowid"
    )
    plan = " ".join(row[-1] for row in execute(store, sql, [1, 2, "a", "b"]).fetchall())
    assert "INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in plan
    assert "TEMP B-TREE" not in plan


def test_steps_by_rowid_sees_a_step_closed_since(store: Store, rec: TraceRecorder) -> None:
    """An open step read again by rowid shows its end, tokens and error."""
    trace = running(rec, "trc_a")
    n = rec.start_step(trace, "tool_call", "slow", started_at=at(1))
    (step,) = trace_live_steps(store, trace)
    assert step.is_open and step.tokens_used is None
    rec.end_step(trace, n, error="Timeout", tokens_used=7, ended_at=at(3))
    (again,) = steps_by_rowid(store, [step.rowid])
    assert not again.is_open and again.error == "Timeout" and again.tokens_used == 7
    assert again.is_error


def test_guard_checks_that_deny_are_blocks(store: Store, rec: TraceRecorder) -> None:
    """A guard check whose output denies is a block (not an error); one that allows is not."""
    trace = running(rec, "trc_a")
    rec.step(trace, {"step_type": "guard_check", "name": "g1", "output": {"verdict": "deny"}})
    rec.step(trace, {"step_type": "guard_check", "name": "g2", "output": {"verdict": "allow"}})
    rec.step(trace, {"step_type": "guard_check", "name": "g3", "output": "blocked"})
    deny, allow, blocked = trace_live_steps(store, trace)
    assert deny.blocked and not deny.is_error and deny.guard_output == '{"verdict":"deny"}'
    assert not allow.blocked
    assert blocked.blocked


def test_watched_traces_lists_running_first_then_latest_finished(
    store: Store, rec: TraceRecorder
) -> None:
    """Running traces (newest start first), then finished ones by their end, latest first."""
    running(rec, "trc_run_old", started_at=at(0))
    running(rec, "trc_run_new", started_at=at(5))
    for trace_id, start, end in (("trc_done_a", 1, 40), ("trc_done_b", 2, 20)):
        running(rec, trace_id, started_at=at(start))
        rec.end_trace(trace_id, ended_at=at(end))
    ids = [h.id for h in watched_traces(store)]
    assert ids == ["trc_run_new", "trc_run_old", "trc_done_a", "trc_done_b"]
    assert [h.id for h in watched_traces(store, finished_limit=1)][-1] == "trc_done_b"


def test_watched_traces_filters_by_session_and_agent(store: Store, rec: TraceRecorder) -> None:
    """``--session`` and ``--agent`` keep only matching traces."""
    running(rec, "trc_a", session_id="s1", agent="alpha")
    running(rec, "trc_b", session_id="s2", agent="alpha")
    running(rec, "trc_c", session_id="s1", agent="beta")
    ids = lambda f: sorted(h.id for h in watched_traces(store, f))  # noqa: E731
    assert ids(LiveFilter(session="s1")) == ["trc_a", "trc_c"]
    assert ids(LiveFilter(agent="alpha")) == ["trc_a", "trc_b"]
    assert ids(LiveFilter(session="s1", agent="beta")) == ["trc_c"]
    assert ids(LiveFilter(session="nope")) == []


def test_baseline_sums_tokens_errors_blocks_and_open_steps(
    store: Store, rec: TraceRecorder
) -> None:
    """A trace's first-sight figures: tokens, errors, blocks, last activity, open steps."""
    trace = running(rec, "trc_a")
    add_steps(rec, trace, 2)
    n = rec.start_step(trace, "tool_call", "bad", started_at=at(5))
    rec.end_step(trace, n, error="boom", ended_at=at(6))
    rec.step(
        trace, {"step_type": "guard_check", "output": {"verdict": "deny"}, "started_at": at(7)}
    )
    rec.start_step(trace, "llm_call", "thinking", started_at=at(8))
    base = trace_baseline(store, trace)
    assert (base.tokens, base.errors, base.blocks) == (20, 1, 1)
    assert [s.name for s in base.open_steps] == ["thinking"]
    assert base.last_activity_ms == int((NOW - dt.timedelta(seconds=52)).timestamp() * 1000)


# --- the feed --------------------------------------------------------------------------------


@pytest.fixture
def feed(store: Store) -> Any:
    live = LiveFeed(store)
    yield live
    live.close()


def test_first_poll_selects_the_first_running_trace(feed: LiveFeed, rec: TraceRecorder) -> None:
    """With no selection, the first listed trace is selected and all its steps read once."""
    trace = running(rec, "trc_a")
    add_steps(rec, trace, 4)
    update = feed.poll(None)
    assert update is not None and update.selected == trace
    assert [s.step_number for s in update.steps] == [1, 2, 3, 4]
    (live,) = update.traces
    assert (live.step_count, live.tokens, live.errors, live.open_steps) == (4, 40, 0, 0)
    assert feed.stats.full_loads == 1


@pytest.mark.sqlite_only  # a SQLite query plan / data_version signal
def test_an_idle_poll_reads_nothing(feed: LiveFeed, rec: TraceRecorder) -> None:
    """With nothing committed since, a poll is answered by data_version alone."""
    add_steps(rec, running(rec, "trc_a"), 3)
    assert feed.poll(None) is not None
    read = feed.stats.steps_read
    assert feed.poll(None) is None
    assert feed.poll("trc_a") is None
    assert feed.stats.idle == 2 and feed.stats.steps_read == read


def test_a_poll_reads_only_the_new_steps(feed: LiveFeed, rec: TraceRecorder) -> None:
    """After N steps, the next poll reads the 2 new steps, not the N old ones."""
    trace = running(rec, "trc_a")
    add_steps(rec, trace, 50)
    feed.poll(None)
    read = feed.stats.steps_read
    add_steps(rec, trace, 2, start=60)
    update = feed.poll(trace)
    assert update is not None
    assert feed.stats.steps_read - read == 2
    assert [s.step_number for s in update.steps] == list(range(1, 53))
    assert update.traces[0].tokens == 520 and update.traces[0].step_count == 52
    assert feed.stats.full_loads == 1 and feed.stats.baselines == 1


def test_a_step_closed_since_the_last_poll_is_updated(feed: LiveFeed, rec: TraceRecorder) -> None:
    """An open step is re-read by rowid until it closes; its tokens and error then count."""
    trace = running(rec, "trc_a")
    add_steps(rec, trace, 3)
    n = rec.start_step(trace, "tool_call", "slow", started_at=at(10))
    update = feed.poll(None)
    assert update is not None and update.steps[-1].is_open
    assert update.traces[0].open_steps == 1
    read = feed.stats.steps_read
    rec.end_step(trace, n, error="Timeout", tokens_used=5, ended_at=at(12))
    update = feed.poll(trace)
    assert update is not None
    assert feed.stats.steps_read - read == 1  # the one open step, read again
    last = update.steps[-1]
    assert not last.is_open and last.error == "Timeout"
    live = update.traces[0]
    assert (live.tokens, live.errors, live.open_steps) == (35, 1, 0)
    assert live.last_activity_ms == int((NOW - dt.timedelta(seconds=48)).timestamp() * 1000)


def test_open_steps_of_other_traces_keep_their_tallies(feed: LiveFeed, rec: TraceRecorder) -> None:
    """Steps of a trace that isn't selected still move its figures (tokens, errors, blocks)."""
    a, b = running(rec, "trc_a", started_at=at(1)), running(rec, "trc_b", started_at=at(0))
    feed.poll(None)
    n = rec.start_step(b, "tool_call", "call", started_at=at(3))
    feed.poll(a)
    rec.end_step(b, n, tokens_used=9, error="oops", ended_at=at(4))
    rec.step(b, {"step_type": "guard_check", "output": {"action": "block"}, "started_at": at(5)})
    update = feed.poll(a)
    assert update is not None and update.selected == a and update.steps == ()
    other = next(t for t in update.traces if t.id == b)
    assert (other.tokens, other.errors, other.blocks, other.step_count) == (9, 1, 1, 2)


def test_a_decision_attached_later_marks_its_step(feed: LiveFeed, rec: TraceRecorder) -> None:
    """A decision recorded onto an existing step shows up on that step at the next poll."""
    trace = running(rec, "trc_a")
    n = rec.start_step(trace, "decision", "choose", started_at=at(1))
    assert feed.poll(None) is not None
    decision = {"options": [{"option": "a"}, {"option": "b"}], "chosen": "a"}
    rec.decision(trace, decision, step_number=n)
    update = feed.poll(trace)
    assert update is not None and update.steps[0].has_decision


def test_switching_the_selection_loads_that_trace_once(feed: LiveFeed, rec: TraceRecorder) -> None:
    """A newly selected trace is read in full once, then incrementally."""
    a, b = running(rec, "trc_a", started_at=at(1)), running(rec, "trc_b", started_at=at(0))
    add_steps(rec, a, 2)
    add_steps(rec, b, 3)
    assert feed.poll(None).selected == a  # type: ignore[union-attr]
    update = feed.poll(b)
    assert update is not None and update.selected == b and len(update.steps) == 3
    assert feed.stats.full_loads == 2
    add_steps(rec, b, 1, start=20)
    update = feed.poll(b)
    assert update is not None and len(update.steps) == 4 and feed.stats.full_loads == 2


def test_a_trace_that_ends_shows_its_final_totals(feed: LiveFeed, rec: TraceRecorder) -> None:
    """When the trace ends, its status and totals come from the trace row."""
    trace = running(rec, "trc_a")
    add_steps(rec, trace, 2)
    feed.poll(None)
    rec.end_trace(trace, status="failed", error="gave up", total_tokens=99, ended_at=at(30))
    update = feed.poll(trace)
    assert update is not None
    (live,) = update.traces
    assert (live.status, live.tokens, live.error) == ("failed", 99, "gave up")


def test_the_filter_applies_to_the_feed(store: Store, rec: TraceRecorder) -> None:
    """A feed filtered by agent lists and selects only that agent's traces."""
    running(rec, "trc_a", agent="alpha", started_at=at(2))
    running(rec, "trc_b", agent="beta", started_at=at(1))
    feed = LiveFeed(store, LiveFilter(agent="beta"))
    try:
        update = feed.poll(None)
        assert update is not None and [t.id for t in update.traces] == ["trc_b"]
        assert update.selected == "trc_b"
    finally:
        feed.close()


@pytest.mark.sqlite_only  # a SQLite query plan / data_version signal
def test_an_empty_store_polls_empty_then_idles(feed: LiveFeed) -> None:
    """No traces: an empty update, then idle polls."""
    update = feed.poll(None)
    assert update is not None and update.traces == () and update.selected is None
    assert feed.poll(None) is None


def test_a_closed_feed_returns_nothing(feed: LiveFeed, rec: TraceRecorder) -> None:
    """After ``close`` a poll does nothing (a worker still running meets a closed feed)."""
    running(rec, "trc_a")
    feed.close()
    assert feed.poll(None, force=True) is None


def test_cursor_starts_at_the_end_of_the_store(store: Store, rec: TraceRecorder) -> None:
    """A new feed reads no history of traces it doesn't list (the cursor starts at the end)."""
    for i in range(3):
        trace = running(rec, f"trc_old{i}", started_at=at(i))
        add_steps(rec, trace, 5)
        rec.end_trace(trace, ended_at=at(30 + i))
    feed = LiveFeed(store, finished_limit=1)
    try:
        update = feed.poll(None)
        assert update is not None and [t.id for t in update.traces] == ["trc_old2"]
        assert feed.stats.steps_read == 5  # the selected trace's steps, nothing else
        assert max_rowids(store) == LiveCursor(15, 0, 0)
    finally:
        feed.close()


def test_steps_deleted_behind_the_feed_are_read_afresh(
    store: Store, feed: LiveFeed, rec: TraceRecorder
) -> None:
    """If a trace's step count stops matching what the feed tallied, it re-reads that trace."""
    trace = running(rec, "trc_a")
    add_steps(rec, trace, 3)
    feed.poll(None)
    with store.write():
        execute(store, "DELETE FROM steps WHERE trace_id = ? AND step_number = 2", [trace])
        execute(store, "UPDATE traces SET step_count = 2 WHERE id = ?", [trace])
    update = feed.poll(trace)
    assert update is not None
    assert [s.step_number for s in update.steps] == [1, 3]
    assert update.traces[0].tokens == 20 and feed.stats.full_loads == 2


def test_a_feed_with_a_reaper_shows_a_trace_whose_recorder_died_as_ended(
    store: Store, rec: TraceRecorder
) -> None:
    """Nothing is committed when a recorder dies: the watch's reaper finalizes its trace."""
    import subprocess

    from agent_replay.services.liveness import finalize_orphans

    trace_id = rec.start_trace("bot")
    rec.claim(trace_id, "record")
    gone = subprocess.Popen(["true"])
    gone.wait()
    with store.write():
        execute(
            store, "UPDATE writers SET pid = ?, token = '' WHERE trace_id = ?", [gone.pid, trace_id]
        )
    feed = LiveFeed(store, reaper=finalize_orphans)
    try:
        update = feed.poll(None)
    finally:
        feed.close()
    assert update is not None
    assert [(t.id, t.status) for t in update.traces] == [(trace_id, "timeout")]
