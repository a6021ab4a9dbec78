"""The trace list screen: loading, filtering, sorting, opening, paging, empty state."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable, Static
from tuikit import SIZE, settle

from agent_replay.screens.trace_list import PAGE_SIZE, TraceListScreen
from agent_replay.services.ingest import ingest_many


def _ids(app: Any) -> list[str]:
    table = app.screen.query_one("#trace-table", DataTable)
    return [str(key.value) for key in table.rows]


async def test_lists_demo_traces_newest_first(seeded_store, tui) -> None:
    """The five demo traces are listed, newest first."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert _ids(app) == [
            "trc_demo5regressed",
            "trc_demo4goodrun",
            "trc_demo3dangerous",
            "trc_demo2toolchain",
            "trc_demo1ungrounded",
        ]


async def test_filter_bar_filters_by_status(seeded_store, tui) -> None:
    """`status:failed` in the filter bar leaves only the failed trace."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"status:failed", "enter")
        await settle(pilot)
        assert _ids(app) == ["trc_demo2toolchain"]


async def test_free_text_filter_matches_agent_names(seeded_store, tui) -> None:
    """Free text matches agent names."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"analytics", "enter")
        await settle(pilot)
        assert _ids(app) == ["trc_demo5regressed", "trc_demo4goodrun"]


async def test_bad_filter_notifies_and_keeps_list(seeded_store, tui) -> None:
    """An unknown status is reported and the list is left as it was."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"status:nope", "enter")
        await settle(pilot)
        assert len(_ids(app)) == 5
        assert any("unknown status" in n.message for n in app._notifications)


async def test_sort_key_cycles_to_tokens(seeded_store, tui) -> None:
    """`s` sorts by tokens, largest first."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        assert app.screen.sort == "tokens"
        assert _ids(app)[0] == "trc_demo5regressed"  # 2,362 tokens, the most


async def test_enter_opens_the_timeline(seeded_store, tui) -> None:
    """Enter on a row pushes the step timeline of that trace."""
    from agent_replay.screens.timeline import TimelineScreen

    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.trace_id == "trc_demo4goodrun"


async def test_empty_store_explains_how_to_load_data(empty_store, tui) -> None:
    """An empty store shows how to load the demo or ingest traces."""
    app = tui(empty_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        empty = app.screen.query_one("#empty-state", Static)
        assert empty.display
        assert "agent-replay demo" in str(empty.render())


async def test_pages_load_as_the_cursor_nears_the_end(empty_store, tui) -> None:
    """Keyset pages load on demand: 450 traces arrive in 200-row pages, none twice."""
    items = [
        (
            f"t{i}",
            {"agent_name": "bulk", "started_at": f"2026-05-01T00:{i // 60:02d}:{i % 60:02d}Z"},
        )
        for i in range(450)
    ]
    ingest_many(empty_store, items)
    app = tui(empty_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert len(_ids(app)) == PAGE_SIZE
        await pilot.press("ctrl+end")
        await settle(pilot)
        await pilot.press("ctrl+end")
        await settle(pilot)
        ids = _ids(app)
        assert len(ids) == 450 and len(set(ids)) == 450
        assert isinstance(app.screen, TraceListScreen)


def test_snapshot_trace_list(seeded_store, tui, snap_compare) -> None:
    """The trace list on the demo data."""

    async def run_before(pilot: Any) -> None:
        await settle(pilot)

    assert snap_compare(tui(seeded_store), terminal_size=SIZE, run_before=run_before)


def test_snapshot_empty_store(empty_store, tui, snap_compare) -> None:
    """The empty state of a store with no traces."""

    async def run_before(pilot: Any) -> None:
        await settle(pilot)

    assert snap_compare(tui(empty_store), terminal_size=SIZE, run_before=run_before)


async def test_a_failing_query_is_reported_not_crashed(seeded_store, tui) -> None:
    """A worker failure on a screen surfaces as an error notification; the app keeps running."""
    seeded_store.db.connect(reuse_if_open=True)
    seeded_store.db.execute_sql("ALTER TABLE traces RENAME TO traces_gone")
    seeded_store.close()
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        for _ in range(3):
            try:
                await app.workers.wait_for_complete()
            except Exception:  # wait_for_complete re-raises the worker's error
                pass
            await pilot.pause()
        assert any(n.severity == "error" and "traces" in n.message for n in app._notifications)
        assert app.is_running
