"""The dashboard screen: totals, refresh (key and timer), drill-down, window, empty state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.widgets import DataTable, Static
from tuikit import CLOCK, SIZE, settle

from agent_replay.messages import OpenTraces
from agent_replay.screens.dashboard import DashboardScreen
from agent_replay.screens.trace_list import TraceListScreen
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store

NEW_TRACE = {
    "id": "trc_fresh",
    "agent_name": "late-agent",
    "status": "failed",
    "started_at": "2026-06-01T11:30:00Z",
    "steps": [{"step_number": 1, "step_type": "tool_call", "name": "lookup", "error": "boom"}],
}


def _ingest(store: Store, trace: dict[str, Any]) -> None:
    """Write from the test thread (the app's workers have their own connections)."""
    with store.db.connection_context():
        ingest_trace(store, trace, clock=CLOCK)


def _card(app: Any, key: str) -> str:
    return str(app.screen.query_one(f"#card-{key}", Static).render())


def _keys(app: Any, selector: str) -> list[str]:
    return [str(key.value) for key in app.screen.query_one(selector, DataTable).rows]


async def _visit_trace_list(pilot: Any) -> None:
    # The app applies a drill-down query to the trace list right after switching modes, which
    # fails before that screen was ever mounted (see test_drill_down_on_first_visit).
    await pilot.press("T")
    await settle(pilot)
    await pilot.press("D")
    await settle(pilot)


async def test_shows_demo_totals(seeded_store, tui) -> None:
    """The cards show the demo data's totals; the agents table lists every agent."""
    app = tui(seeded_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
        assert app.screen.data is not None and app.screen.data.totals.traces == 5
        assert _card(app, "traces") == "5"
        assert _card(app, "steps") == "39"
        assert _card(app, "tokens") == "7,361"
        assert _card(app, "failure-rate") == "20.0%"
        assert _card(app, "guard-blocks") == "0 of 3 checks"
        assert _keys(app, "#agents-table") == [
            "agent:analytics-sql-agent since:2026-05-19",
            "agent:support-rag-agent since:2026-05-19",
            "agent:travel-booking-agent since:2026-05-19",
            "agent:ops-assistant since:2026-05-19",
        ]
        assert _keys(app, "#tools-table") == [
            "search_flights since:2026-05-19",
            "run_sql since:2026-05-19",
        ]


async def test_refresh_key_picks_up_a_new_trace(seeded_store, tui) -> None:
    """`r` recomputes the figures: a trace ingested meanwhile is counted."""
    app = tui(seeded_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _ingest(seeded_store, NEW_TRACE)
        await pilot.press("r")
        await settle(pilot)
        assert _card(app, "traces") == "6"
        assert _card(app, "failure-rate") == "33.3%"
        assert "lookup since:2026-05-19" in _keys(app, "#tools-table")


async def _until(pilot: Any, done: Callable[[], bool], *, rounds: int) -> None:
    """Poll, 50 ms at a time and each load finished, until ``done()`` or ``rounds`` polls."""
    for _ in range(rounds):
        await pilot.pause(0.05)
        await pilot.app.workers.wait_for_complete()
        if done():
            return


async def test_timer_refresh_picks_up_a_new_trace(seeded_store, tui) -> None:
    """With a refresh interval, a new trace shows up without a key press."""
    app = tui(seeded_store, initial_mode="dashboard", dashboard_refresh=0.05)
    async with app.run_test(size=SIZE) as pilot:
        # Not settle(): a screen refreshing every 50 ms is never quiet, and settle would wait
        # out all its rounds (~50 s on a loaded machine). The first figures are enough.
        await _until(pilot, lambda: app.screen.data is not None, rounds=100)
        assert _card(app, "traces") == "5"
        _ingest(seeded_store, NEW_TRACE)
        await _until(pilot, lambda: app.screen.data.totals.traces == 6, rounds=20)
        await pilot.pause()
        assert _card(app, "traces") == "6"
        assert "agent:late-agent since:2026-05-19" in _keys(app, "#agents-table")


async def test_a_trace_recorded_right_after_the_dashboard_opens_appears(seeded_store, tui) -> None:
    """Opened straight on the dashboard, without a refresh timer: a trace written between the
    first read and the change watcher's first check is counted (the watcher's baseline is
    taken before that read)."""
    app = tui(seeded_store, initial_mode="dashboard", refresh_interval=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert _card(app, "traces") == "5"
        _ingest(seeded_store, NEW_TRACE)
        for _ in range(60):  # the watcher checks every second
            await pilot.pause(0.1)
            if _card(app, "traces") == "6":
                break
        assert _card(app, "traces") == "6"


async def test_agent_row_drills_down_to_the_filtered_trace_list(seeded_store, tui) -> None:
    """Enter on an agent posts OpenTraces; the trace list shows only that agent's traces."""
    seen: list[Any] = []
    app = tui(seeded_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        await _visit_trace_list(pilot)
        await pilot.press("down", "down", "enter")  # travel-booking-agent
        await settle(pilot)
        # The hook sees the message at each stop as it bubbles from the screen to the app.
        opened = [m.query for m in {id(m): m for m in seen if isinstance(m, OpenTraces)}.values()]
        assert opened == ["agent:travel-booking-agent since:2026-05-19"]
        assert isinstance(app.screen, TraceListScreen)
        assert _keys(app, "#trace-table") == ["trc_demo2toolchain"]


async def test_status_row_drills_down_to_failed_traces(seeded_store, tui) -> None:
    """Enter on the failed status opens the trace list filtered to failed traces."""
    app = tui(seeded_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _visit_trace_list(pilot)
        await pilot.press("tab", "down", "enter")  # the statuses table, its second row
        await settle(pilot)
        assert isinstance(app.screen, TraceListScreen)
        assert app.screen.query_text == "status:failed since:2026-05-19"
        assert _keys(app, "#trace-table") == ["trc_demo2toolchain"]


async def test_drill_down_on_first_visit(seeded_store, tui) -> None:
    """Drill-down works even when the trace list was never shown before."""
    app = tui(seeded_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, TraceListScreen)
        assert _keys(app, "#trace-table") == ["trc_demo2toolchain"]


async def test_drill_down_after_a_detour_lands_on_the_list(seeded_store, tui) -> None:
    """Timeline → e → D → Enter: the filtered trace list, not the evaluations left on the
    traces stack; and T from the dashboard lands on the list too."""
    app = tui(seeded_store, initial_trace="trc_demo5regressed")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        await pilot.press("D")
        await settle(pilot)
        await pilot.press("tab", "down", "enter")  # the statuses table: failed
        await settle(pilot)
        assert isinstance(app.screen, TraceListScreen) and len(app.screen_stack) == 1
        assert app.screen.query_text == "status:failed since:2026-05-19"
        assert _keys(app, "#trace-table") == ["trc_demo2toolchain"]
        await pilot.press("enter")  # the timeline again, then D and T
        await settle(pilot)
        await pilot.press("D")
        await settle(pilot)
        await pilot.press("T")
        await settle(pilot)
        assert isinstance(app.screen, TraceListScreen)


async def test_window_key_cycles_the_window(seeded_store, tui) -> None:
    """`w` widens the window from 14 to 30 days."""
    app = tui(seeded_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        assert app.screen.days == 30
        assert app.screen.data.days == 30 and app.screen.data.since == "2026-05-03"
        assert app.screen.data.totals.traces == 5


async def test_empty_store_explains_how_to_load_data(empty_store, tui) -> None:
    """An empty store shows how to load the demo instead of empty charts."""
    app = tui(empty_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        empty = app.screen.query_one("#empty-state", Static)
        assert empty.display
        assert not app.screen.query_one("#dashboard-body").display
        assert "agent-replay demo" in str(empty.render())


async def test_empty_store_fills_in_after_a_refresh(empty_store, tui) -> None:
    """Once a trace lands, `r` replaces the empty state with the figures."""
    app = tui(empty_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _ingest(empty_store, NEW_TRACE)
        await pilot.press("r")
        await settle(pilot)
        assert not app.screen.query_one("#empty-state").display
        assert app.screen.query_one("#dashboard-body").display
        assert _card(app, "traces") == "1"
        assert app.screen.focused is app.screen.query_one("#agents-table")


async def test_producer_text_is_escaped(empty_store, tui) -> None:
    """An agent name with an escape sequence is shown escaped, in the table and the chart."""
    from agent_replay.widgets.charts import HBarChart

    _ingest(empty_store, {**NEW_TRACE, "agent_name": "evil\x1b[2Jname", "total_tokens": 5})
    app = tui(empty_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#agents-table", DataTable)
        assert table.get_row_at(0)[0].plain == "evil\\x1b[2Jname"
        chart = app.screen.query_one("#tokens-chart", HBarChart)
        rendered = chart.render()
        assert "\x1b" not in rendered.plain
        assert "evil\\x1b[2J" in rendered.plain  # escaped, then cut to the label width


def test_snapshot_empty_store(empty_store, tui, snap_compare) -> None:
    """The dashboard of a store with no traces: the empty state, and no table keys (the
    tables are hidden, so focus leaves them)."""

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        for _ in range(200):  # the figures arrive as a message after the worker ends
            if pilot.app.screen.query_one("#empty-state").display:
                break
            await pilot.pause(0.01)
        await pilot.pause()
        assert pilot.app.screen.focused is None

    app = tui(empty_store, initial_mode="dashboard")
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


async def test_c_breaks_the_cost_down_by_model_then_by_day(seeded_store, tui) -> None:
    """c cycles the cost panel: by agent, by model (llm_calls' costs), by day."""
    from agent_replay.widgets.charts import HBarChart

    app = tui(seeded_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = app.screen.query_one("#cost-panel")
        chart = app.screen.query_one("#cost-chart", HBarChart)
        assert panel.border_title == "Cost by agent"
        await pilot.press("c")
        data = app.screen.data
        assert panel.border_title == "Cost by model" and data is not None
        assert [b.label for b in chart.bars] == [m.model for m in data.cost_by_model]
        assert data.cost_by_model and chart.has_data
        await pilot.press("c")
        assert panel.border_title == "Cost by day"
        assert len(chart.bars) == data.days


def test_day_labels_sit_under_their_tick_marks() -> None:
    """The per-day chart writes its own x labels, centred under plotext's tick marks, keeping
    the rightmost (today) and leaving out one that would touch its neighbour."""
    from rich.text import Text

    from agent_replay.widgets.charts import label_ticks

    axis = " └──┬────┬──┬──────┬┘"
    drawn = Text(f"5┤ █\n{axis}\n" + " " * len(axis))
    out = label_ticks(drawn, ["05-28", "05-29", "05-30", "05-31"]).plain.splitlines()
    assert out[1] == axis
    # 05-31 is pushed left to fit; 05-29 would touch 05-30.
    assert out[2] == "  05-28   05-30 05-31"


async def test_annotation_labels_are_counted_beside_the_evaluations(seeded_store, tui) -> None:
    """People's labels on the window's traces: one row each, with the traces carrying it."""
    from agent_replay.services.recorder import TraceRecorder

    recorder = TraceRecorder(seeded_store, clock=CLOCK)
    with seeded_store.db.connection_context():
        recorder.annotate("trc_demo4goodrun", label="good")
        recorder.annotate("trc_demo4goodrun", label="good", step_number=2)
        recorder.annotate("trc_demo1ungrounded", label="good")
    app = tui(seeded_store, initial_mode="dashboard")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        data = app.screen.data
        assert data is not None
        assert [(g.label, g.annotations, g.traces) for g in data.labels] == [("good", 3, 2)]
        table = app.screen.query_one("#evals-table", DataTable)
        cells = [table.get_row_at(i) for i in range(table.row_count)]
        assert [c[0].plain for c in cells][-1] == "#good"
        assert cells[-1][2].plain == "2"
