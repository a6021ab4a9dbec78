"""The live watch screen: steps recorded while the app runs appear within a second, polls stay
incremental, errors and guard blocks stand out, the session/agent filters, following the tail,
Enter to the timeline, the `watch` command, and snapshots.

Writers run in the test thread with their own connection (``make_app`` closed it; the app's
workers and the watch's feed have theirs), exactly as a recorder in another process would.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import pytest
from textual.widgets import OptionList, Static
from tuikit import CLOCK, SIZE, settle

from agent_replay.cli import main
from agent_replay.screens.live_watch import LiveWatchScreen, fmt_age
from agent_replay.screens.timeline import TimelineScreen
from agent_replay.screens.trace_list import TraceListScreen
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store
from agent_replay.store.live import LiveFilter
from agent_replay.widgets.live_steps import LiveStepRow, LiveSteps

RUNNING = "trc_livesupport01"
FINISHED = "trc_livebilling02"
FAST = 0.05  # the poll interval in behaviour tests: steps must show well within a second


def at(seconds: float) -> str:
    """A canonical timestamp ``seconds`` before the fixed clock's 12:00:00."""
    instant = CLOCK.now() - dt.timedelta(seconds=seconds)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


def recorder(store: Store) -> TraceRecorder:
    """A recorder writing from the test thread, on its own connection."""
    store.db.connect(reuse_if_open=True)
    return TraceRecorder(store, clock=CLOCK)


def record_midway(store: Store) -> TraceRecorder:
    """A finished trace, and a running one mid-way: a failed tool call, a guard that denied,
    and a tool call still in progress. Fixed ids and times (the clock says 12:00:00)."""
    rec = recorder(store)
    rec.start_trace("billing-agent", trace_id=FINISHED, session_id="sess-7", started_at=at(600))
    for i, name in enumerate(("fetch_invoice", "compute_total", "send_receipt")):
        n = rec.start_step(FINISHED, "tool_call", name, started_at=at(590 - 10 * i))
        rec.end_step(FINISHED, n, output="ok", tokens_used=120, ended_at=at(588 - 10 * i))
    rec.end_trace(FINISHED, output="sent", ended_at=at(540))

    rec.start_trace("support-bot", trace_id=RUNNING, session_id="sess-42", started_at=at(40))
    steps: list[tuple[str, str, float, float, dict[str, Any]]] = [
        ("thought", "read the ticket", 39, 38.6, {}),
        ("llm_call", "plan the reply", 38, 35.9, {"tokens_used": 412, "output": "look it up"}),
        ("retrieval", "search_kb", 35, 34.7, {"output": ["refund policy"]}),
        (
            "tool_call",
            "lookup_order",
            34,
            32.8,
            {"error": "HTTPError 503: orders-api unavailable"},
        ),
        (
            "guard_check",
            "refund_guard",
            32,
            31.99,
            {"output": {"verdict": "deny", "policy": "refunds-over-500"}},
        ),
        ("llm_call", "recover", 31, 29, {"tokens_used": 655, "output": "retry the lookup"}),
    ]
    for step_type, name, start, end, result in steps:
        n = rec.start_step(RUNNING, step_type, name, started_at=at(start))
        rec.end_step(RUNNING, n, ended_at=at(end), **result)
    rec.start_step(RUNNING, "tool_call", "lookup_order", started_at=at(8))
    return rec


def _screen(app: Any) -> LiveWatchScreen:
    assert isinstance(app.screen, LiveWatchScreen)
    return app.screen


def _steps(app: Any) -> LiveSteps:
    return app.screen.query_one("#watch-steps", LiveSteps)


def _names(app: Any) -> list[str]:
    return [row.name for row in _steps(app).rows]


def _list_ids(app: Any) -> list[str]:
    options = app.screen.query_one("#watch-traces", OptionList).options
    return [str(option.id) for option in options]


def _text(app: Any, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def wait_until(pilot: Any, condition: Callable[[], bool], timeout: float = 1.0) -> float:
    """Let the app run until ``condition`` holds; returns the seconds it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout}s")
        await pilot.pause(0.02)
    return time.monotonic() - start


@pytest.fixture
def midway(empty_store: Store) -> Store:
    record_midway(empty_store)
    return empty_store


# --- what it shows ---------------------------------------------------------------------------


async def test_running_trace_is_listed_first_and_selected(midway, tui) -> None:
    """The running trace comes first and is selected; its steps are shown, the open one last."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = _screen(app)
        assert _list_ids(app) == [RUNNING, FINISHED]
        assert screen.selected == RUNNING and screen.shown == RUNNING
        assert _names(app)[-2:] == ["recover", "lookup_order"]
        last = _steps(app).rows[-1]
        assert isinstance(last, LiveStepRow) and last.is_open
        header = _text(app, "#watch-trace-header")
        for part in ("support-bot", "running", "7 steps", "1,067 tokens", "8s ago"):
            assert part in header
        assert "1 running · 1 recently finished" in _text(app, "#watch-list-status")


async def test_new_steps_appear_within_a_second(midway, tui) -> None:
    """Steps recorded while the app runs are on screen within a second, in order."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rec = recorder(midway)
        for i in range(3):
            rec.step(RUNNING, {"step_type": "thought", "name": f"live-{i}", "started_at": at(5)})
            took = await wait_until(pilot, lambda i=i: _names(app)[-1] == f"live-{i}")
            # Generous: a loaded CI machine is slow; the speed itself is a benchmark, not a test.
            assert took < 5.0
        assert _names(app)[-4:] == ["lookup_order", "live-0", "live-1", "live-2"]
        assert "10 steps" in _text(app, "#watch-trace-header")


async def test_polls_read_only_what_changed(midway, tui) -> None:
    """After the first full read, each poll reads the new steps (and the open one), no more."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        stats = _screen(app).feed.stats  # type: ignore[union-attr]
        assert stats.full_loads == 1
        await pilot.pause(0.3)  # idle polls: data_version unchanged, nothing read
        read = stats.steps_read
        assert stats.idle > 0
        rec = recorder(midway)
        rec.step(RUNNING, {"step_type": "thought", "name": "one more", "started_at": at(5)})
        rec.step(RUNNING, {"step_type": "thought", "name": "and one", "started_at": at(4)})
        await wait_until(pilot, lambda: _names(app)[-1] == "and one")
        # two new rows, plus the open step read again to see whether it closed
        assert stats.steps_read - read <= 2 + 1
        assert stats.full_loads == 1


async def test_a_step_closing_with_an_error_turns_red(midway, tui) -> None:
    """The open step, closed with an error, is updated in place and shown as an error."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rec = recorder(midway)
        rec.end_step(RUNNING, 7, error="HTTPError 503 again", ended_at=at(2))

        def closed() -> bool:
            row = _steps(app).rows[-1]
            return isinstance(row, LiveStepRow) and not row.is_open

        await wait_until(pilot, closed)
        await pilot.pause()
        row = _steps(app).rows[-1]
        assert isinstance(row, LiveStepRow) and row.is_error and len(_steps(app).rows) == 7
        note = app.screen.query_one("#watch-step-note", Static)
        assert note.display and note.has_class("-error")
        assert "HTTPError 503 again" in _text(app, "#watch-step-note")
        assert "✗ 2 errors" in _text(app, "#watch-trace-header")


async def test_errors_and_guard_blocks_are_highlighted(midway, tui) -> None:
    """The failed tool call is an error row (red), the denying guard check a block (warning)."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        steps = _steps(app)
        rows = {row.number: row for row in steps.rows if isinstance(row, LiveStepRow)}
        assert rows[4].is_error and not rows[4].blocked
        assert rows[5].blocked and not rows[5].is_error
        assert not any(rows[n].is_error or rows[n].blocked for n in (1, 2, 3, 6, 7))
        # rows tinted: the error row with the error colour, the block with the warning colour
        error_bg = steps.get_component_rich_style("live-steps--error-row").bgcolor
        block_bg = steps.get_component_rich_style("live-steps--blocked-row").bgcolor
        lines = {n: steps.render_line(n) for n in (3, 4, 5)}  # line 0 is the column header
        assert any(seg.style and seg.style.bgcolor == error_bg for seg in lines[4])
        assert any(seg.style and seg.style.bgcolor == block_bg for seg in lines[5])
        assert not any(seg.style and seg.style.bgcolor in (error_bg, block_bg) for seg in lines[3])
        assert "✗" in lines[4].text and "⊘" in lines[5].text
        prompt = str(app.screen.query_one("#watch-traces", OptionList).options[0].prompt)
        assert "✗1" in prompt and "⊘1" in prompt
        steps.select_step(5)
        await pilot.pause()
        note = app.screen.query_one("#watch-step-note", Static)
        assert note.has_class("-blocked")
        assert '"verdict":"deny"' in _text(app, "#watch-step-note")


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (LiveFilter(session="sess-7"), [FINISHED]),
        (LiveFilter(agent="support-bot"), [RUNNING]),
        (LiveFilter(session="sess-42", agent="billing-agent"), []),
    ],
)
async def test_session_and_agent_filters(midway, tui, filters, expected) -> None:
    """``--session``/``--agent`` keep only matching traces; the pane says what is filtered."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST, watch_filter=filters)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert _list_ids(app) == expected
        pane = app.screen.query_one("#watch-traces-pane")
        assert pane.border_subtitle == filters.describe()
        empty = app.screen.query_one("#watch-empty")
        assert empty.display == (not expected)
        if not expected:
            assert filters.describe() in _text(app, "#watch-empty")


async def test_a_new_trace_joins_the_list_live(midway, tui) -> None:
    """A trace started while watching appears, running traces first."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rec = recorder(midway)
        rec.start_trace("triage-bot", trace_id="trc_livenew03", started_at=at(1))
        await wait_until(pilot, lambda: "trc_livenew03" in _list_ids(app))
        assert _list_ids(app) == ["trc_livenew03", RUNNING, FINISHED]
        assert _screen(app).selected == RUNNING  # the selection stays put


async def test_a_new_running_trace_takes_over_a_finished_selection(empty_store, tui) -> None:
    """Watching a finished trace (chosen by default), a trace that starts is selected."""
    rec = recorder(empty_store)
    rec.start_trace("bot", trace_id="trc_liveold", started_at=at(100))
    rec.end_trace("trc_liveold", ended_at=at(90))
    app = tui(empty_store, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert _screen(app).shown == "trc_liveold"
        rec = recorder(empty_store)
        rec.start_trace("bot", trace_id="trc_livenext", started_at=at(2))
        rec.step("trc_livenext", {"step_type": "thought", "name": "hello", "started_at": at(1)})
        await wait_until(pilot, lambda: _screen(app).shown == "trc_livenext")
        assert _names(app) == ["hello"]
        options = app.screen.query_one("#watch-traces", OptionList)
        assert options.highlighted == 0


async def test_a_trace_the_user_picked_stays_selected(midway, tui) -> None:
    """Once the user picked a trace, a new running trace doesn't take the selection."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down")
        await wait_until(pilot, lambda: _screen(app).shown == FINISHED)
        recorder(midway).start_trace("bot", trace_id="trc_livenew04", started_at=at(1))
        await wait_until(pilot, lambda: "trc_livenew04" in _list_ids(app))
        await pilot.pause(0.2)
        assert _screen(app).shown == FINISHED and _screen(app).selected == FINISHED


async def test_selecting_another_trace_shows_its_steps(midway, tui) -> None:
    """Down in the list shows the finished trace's steps."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down")
        await wait_until(pilot, lambda: _screen(app).shown == FINISHED)
        assert _names(app) == ["fetch_invoice", "compute_total", "send_receipt"]
        assert "completed" in _text(app, "#watch-trace-header")


async def test_a_click_shows_a_trace_without_opening_it(midway, tui) -> None:
    """A single click on a trace shows its steps; a double click opens its timeline."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.click("#watch-traces", offset=(4, 3))  # the second trace's first line
        await wait_until(pilot, lambda: _screen(app).shown == FINISHED)
        assert isinstance(app.screen, LiveWatchScreen)
        await pilot.click("#watch-traces", offset=(4, 3), times=2)
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen) and app.screen.trace_id == FINISHED


async def test_enter_opens_the_timeline_and_escape_comes_back(midway, tui) -> None:
    """Enter on the selected trace pushes its timeline; Escape returns to the watch."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen) and app.screen.trace_id == RUNNING
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, LiveWatchScreen)
        await pilot.press("tab", "enter")  # from the steps pane too
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen) and app.screen.trace_id == RUNNING


async def test_follow_keeps_the_newest_step_until_the_user_moves_up(midway, tui) -> None:
    """Following, the cursor tracks the tail; after Up it stays put; `f` follows again."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        steps = _steps(app)
        assert steps.follow and steps.selected_step == 7
        rec = recorder(midway)
        rec.step(RUNNING, {"step_type": "thought", "name": "eight", "started_at": at(5)})
        await wait_until(pilot, lambda: steps.selected_step == 8)

        await pilot.press("tab", "up", "up")
        assert not steps.follow and steps.selected_step == 6
        pane = app.screen.query_one("#watch-steps-pane")
        await pilot.pause()
        assert "paused" in str(pane.border_subtitle)
        rec.step(RUNNING, {"step_type": "thought", "name": "nine", "started_at": at(4)})
        await wait_until(pilot, lambda: len(steps.rows) == 9)
        assert steps.selected_step == 6  # not yanked to the tail

        await pilot.press("f")
        assert steps.follow and steps.selected_step == 9
        rec.step(RUNNING, {"step_type": "thought", "name": "ten", "started_at": at(3)})
        await wait_until(pilot, lambda: steps.selected_step == 10)
        await pilot.press("up", "end")  # End: back at the tail, following again
        assert steps.follow
        await pilot.pause()
        assert "following" in str(pane.border_subtitle)


async def test_relative_times_come_from_the_app_clock(midway, tui) -> None:
    """ "Last activity" is measured from app.clock, not the wall clock."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        options = app.screen.query_one("#watch-traces", OptionList).options
        prompts = [str(option.prompt) for option in options]
        assert "8s ago" in prompts[0] and "9m ago" in prompts[1]


def test_fmt_age() -> None:
    """Ages read as now, seconds, minutes, hours, days."""
    now = 10_000_000
    assert [fmt_age(now - ms, now) for ms in (0, 8_000, 125_000, 7_300_000, 90_000_000)] == [
        "now",
        "8s ago",
        "2m ago",
        "2h ago",
        "1d ago",
    ]
    assert fmt_age(None, now) == "-"


async def test_w_switches_to_the_watch_from_the_trace_list(midway, tui) -> None:
    """`W` opens the watch mode; `T` goes back to the trace list."""
    app = tui(midway)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TraceListScreen)
        await pilot.press("W")
        await settle(pilot)
        assert isinstance(app.screen, LiveWatchScreen)
        await pilot.press("T")
        await settle(pilot)
        assert isinstance(app.screen, TraceListScreen)


async def test_empty_store_says_how_to_start_a_trace(empty_store, tui) -> None:
    """With no traces, the empty state says how to record one."""
    app = tui(empty_store, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.screen.query_one("#watch-empty").display
        text = _text(app, "#watch-empty")
        assert "agent-replay run -- CMD" in text and "hook" in text
        rec = recorder(empty_store)
        rec.start_trace("first-bot", trace_id="trc_livefirst", started_at=at(1))
        await wait_until(pilot, lambda: _list_ids(app) == ["trc_livefirst"])
        assert not app.screen.query_one("#watch-empty").display


async def test_a_failing_poll_is_reported_once_and_r_retries(midway, tui) -> None:
    """A poll that fails is reported once and stops the polling; `r` polls again."""
    app = tui(midway, initial_mode="watch", watch_interval=FAST)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        store = recorder(midway).db
        store.db.execute_sql("ALTER TABLE steps RENAME TO steps_gone")
        status = lambda: _text(app, "#watch-list-status")  # noqa: E731
        await wait_until(pilot, lambda: "Polling stopped" in status(), timeout=2.0)
        await pilot.pause(0.3)  # several intervals: no further polls, no further reports
        errors = [n for n in app._notifications if n.severity == "error"]
        assert len(errors) == 1 and "steps" in errors[0].message
        assert app.is_running and "Polling stopped" in status()
        store.db.execute_sql("ALTER TABLE steps_gone RENAME TO steps")
        await pilot.press("r")
        await wait_until(pilot, lambda: "1 running" in status(), timeout=2.0)


def test_watch_without_a_terminal_prints_help_and_exits_2(capsys, store_dir) -> None:
    """``agent-replay watch`` with no terminal prints help, says why, exits 2, creates nothing."""
    assert main(["watch", "--session", "s"]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("Usage: agent-replay") and "needs a terminal" in err
    assert not store_dir.exists()


# --- snapshots -------------------------------------------------------------------------------


def test_snapshot_watch_midway(midway, tui, snap_compare) -> None:
    """One running trace mid-way (an error, a denied guard check, a step in progress)."""
    midway.close()

    async def run_before(pilot: Any) -> None:
        await settle(pilot)

    app = tui(midway, initial_mode="watch")
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_watch_error_step_selected(midway, tui, snap_compare) -> None:
    """Following paused on the failed tool call: its error in the note line."""
    midway.close()

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("tab", "up", "up", "up")
        await settle(pilot)

    app = tui(midway, initial_mode="watch")
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_watch_empty(empty_store, tui, snap_compare) -> None:
    """No traces: how to start one."""

    async def run_before(pilot: Any) -> None:
        await settle(pilot)

    app = tui(empty_store, initial_mode="watch")
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
