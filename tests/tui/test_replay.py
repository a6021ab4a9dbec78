"""The replay screen: play/pause, stepping, jumping, speeds, and the state at the playhead."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.widgets import Static
from tuikit import SIZE, settle

from agent_replay.screens.replay import ReplayScreen

TOOLCHAIN = "trc_demo2toolchain"


async def _open(app: Any, pilot: Any, trace_id: str = TOOLCHAIN, **options: Any) -> Any:
    await settle(pilot)
    app.push_screen(ReplayScreen(trace_id, **options))
    await settle(pilot)
    return app.screen


def _text(screen: Any, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def _rows(screen: Any) -> list[str]:
    table = screen.query_one("#replay-steps")
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def _wait_until_stopped(pilot: Any, screen: Any, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while screen.playing and loop.time() < deadline:
        await pilot.pause(0.05)
    await pilot.pause()


async def test_opens_paused_before_the_first_step(seeded_store, tui) -> None:
    """The replay starts paused at position 0 with nothing revealed."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        assert (screen.position, screen.playing, screen.speed) == (0, False, 1.0)
        assert _rows(screen) == []
        assert "paused" in _text(screen, "#replay-status")
        assert "step 0 of 8" in _text(screen, "#replay-status")


async def test_right_and_left_step_through_the_trace(seeded_store, tui) -> None:
    """Right/l reveal one step each, left/h hide one; the table follows the playhead."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("right", "right", "l")
        assert screen.position == 3
        assert _rows(screen) == ["1", "2", "3"]
        assert screen.query_one("#replay-steps").cursor_row == 2
        await pilot.press("left", "h")
        assert screen.position == 1
        assert _rows(screen) == ["1"]


async def test_stepping_stops_at_both_ends(seeded_store, tui) -> None:
    """Left at the start and right at the end leave the playhead where it is."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("left")
        assert screen.position == 0
        await pilot.press("end", "right")
        assert screen.position == 8
        await pilot.press("home")
        assert screen.position == 0 and _rows(screen) == []


async def test_space_plays_and_pauses(seeded_store, tui) -> None:
    """Space starts playback (a timer is armed), space again pauses it (the timer is gone)."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("space")
        assert screen.playing
        assert screen._timer is not None
        assert "playing" in _text(screen, "#replay-status")
        await pilot.press("space")
        assert not screen.playing
        assert screen._timer is None


async def test_each_timer_tick_reveals_the_next_step(seeded_store, tui) -> None:
    """While playing, each tick of the playhead timer reveals one step and re-arms it."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        screen.playing = True
        screen._reveal_next()  # what the timer does when it fires
        screen._reveal_next()
        assert screen.position == 2
        assert screen.playing and screen._timer is not None
        screen.playing = False


async def test_playing_reaches_the_end_and_stops(seeded_store, tui) -> None:
    """At 20× the demo plays out in a fraction of a second; at the end playback stops."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("plus", "plus", "plus", "plus")
        assert screen.speed == 20
        await pilot.press("space")
        await _wait_until_stopped(pilot, screen)
        assert not screen.playing
        assert screen.position == 8
        assert _rows(screen) == [str(n) for n in range(1, 9)]
        assert "end" in _text(screen, "#replay-status")


async def test_instant_speed_reveals_everything_at_once(seeded_store, tui) -> None:
    """At instant speed, play jumps straight to the end."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        screen.speed = 0
        await pilot.press("space")
        await pilot.pause()
        assert (screen.position, screen.playing) == (8, False)


async def test_play_at_the_end_starts_over(seeded_store, tui) -> None:
    """Space at the end rewinds to the start and plays."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("end")
        screen.action_toggle_play()  # what space does; no await, so no timer can fire yet
        assert screen.playing and screen.position == 0
        assert _rows(screen) == []
        screen.playing = False


async def test_plus_and_minus_cycle_the_speeds(seeded_store, tui) -> None:
    """+ steps 1×, 2×, 5×, 10×, 20×, instant (and stays there); - steps back down."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        seen = []
        for _ in range(6):
            await pilot.press("plus")
            seen.append(screen.speed)
        assert seen == [2, 5, 10, 20, 0, 0]
        assert "speed instant" in _text(screen, "#replay-status")
        await pilot.press("minus")
        assert screen.speed == 20
        for _ in range(5):
            await pilot.press("minus")
        assert screen.speed == 1


async def test_g_jumps_to_a_step_number(seeded_store, tui) -> None:
    """``g 6 Enter`` puts step 6 under the playhead."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("g", "6", "enter")
        await pilot.pause()
        assert screen.position == 6
        assert not screen.query_one("#jump-input").display


async def test_jumping_to_a_missing_step_is_reported(seeded_store, tui) -> None:
    """``g 99`` notifies and leaves the playhead alone; Esc closes the jump without leaving."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("right", "g", "9", "9", "enter")
        await pilot.pause()
        assert screen.position == 1
        assert any("no step 99" in n.message for n in app._notifications)
        await pilot.press("g", "escape")
        assert app.screen is screen
        assert not screen.query_one("#jump-input").display


async def test_state_panel_shows_totals_and_snapshot_at_the_playhead(seeded_store, tui) -> None:
    """At step 4: 642 of 1,348 tokens, an estimated cost, and the step-1 context window."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, at_step=4)
        assert screen.position == 4
        totals = _text(screen, "#replay-totals")
        assert "Tokens so far  642 / 1,348" in totals
        assert "~$0.0058 / $0.0121" in totals
        assert "Elapsed        1.6s / 3.1s recorded" in totals
        assert "#4 thought recover" in _text(screen, "#replay-current")
        pane = screen.query_one("#pane-context-window")
        assert pane.border_title == "Context window · as of step 1"
        assert "system: You book flights" in _text(screen, "#snapshot-context-window")


async def test_snapshot_pane_follows_the_latest_recorded_state(seeded_store, tui) -> None:
    """At step 7 the tool state is the one step 7 recorded; the environment still step 1's."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, at_step=7)
        tool = screen.query_one("#pane-tool-state")
        assert tool.border_title == "Tool state · recorded at this step"
        assert tool.has_class("-fresh")
        assert '"attempts":2' in _text(screen, "#snapshot-tool-state")
        env = screen.query_one("#pane-environment")
        assert env.border_title == "Environment · as of step 1"
        await pilot.press("left")
        assert "available_tools" in _text(screen, "#snapshot-tool-state")


async def test_escape_stops_playback_and_goes_back(seeded_store, tui) -> None:
    """Escape pauses and pops the screen."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("space", "escape")
        await settle(pilot)
        assert not screen.playing
        assert app.screen is not screen


async def test_an_unknown_trace_is_reported(seeded_store, tui) -> None:
    """An unknown id shows the error in the status line and a notification."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await _open(app, pilot, "nope")
        assert "no trace matches 'nope'" in _text(screen, "#replay-status")
        assert any("no trace matches" in n.message for n in app._notifications)


def test_snapshot_paused_mid_way(seeded_store, tui, snap_compare) -> None:
    """The tool-chain trace paused at step 4 of 8."""

    async def run_before(pilot: Any) -> None:
        await _open(pilot.app, pilot, at_step=4)

    assert snap_compare(tui(seeded_store), terminal_size=SIZE, run_before=run_before)


def test_snapshot_at_the_end(seeded_store, tui, snap_compare) -> None:
    """The tool-chain trace replayed to the end: the failing step current."""

    async def run_before(pilot: Any) -> None:
        await _open(pilot.app, pilot)
        await pilot.press("end")
        await pilot.pause()

    assert snap_compare(tui(seeded_store), terminal_size=SIZE, run_before=run_before)


async def test_opened_at_a_late_step_the_playhead_row_is_in_view(
    seeded_store, tui, make_trace
) -> None:
    """Replay opened on step 150 of 200 (from the timeline's cursor) shows that row at once,
    not the first page; the running total's column is as wide as the trace's total."""
    from agent_replay.services.ingest import ingest_trace

    trace = make_trace(200)
    for step in trace["steps"]:
        step["tokens_used"] = 12_345
    trace.pop("total_tokens", None)
    stored = ingest_trace(seeded_store, trace).id
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, stored, at_step=150)
        table = screen.query_one("#replay-steps")
        assert table.cursor_row == 149
        top = table.scroll_offset.y
        page = table.scrollable_content_region.height - 1
        assert top <= 149 < top + page, (top, page)
        assert table.widths[-1] >= len(f"{200 * 12_345:,}")
