"""The trace list screen: loading, filtering, sorting, opening, paging, empty state."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable, Input, Static
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


async def test_a_trace_written_by_another_process_appears(seeded_store, tui, tmp_path) -> None:
    """The list refreshes on its own when another process writes (the data_version poll):
    the newcomer is listed and counted, the cursor stays on its trace."""
    import json
    import subprocess
    import sys

    app = tui(seeded_store, refresh_interval=None)  # the test drives the poll
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.check_store()  # the baseline version
        await settle(pilot)
        table = app.screen.query_one("#trace-table", DataTable)
        table.move_cursor(row=2)
        await pilot.pause()
        trace = {"id": "trc_fromelsewhere", "agent_name": "other-terminal", "status": "running"}
        trace["started_at"] = "2026-06-01T11:59:00Z"  # newer than every demo trace
        path = tmp_path / "new.json"
        path.write_text(json.dumps(trace), encoding="utf-8")
        store_dir = str(seeded_store.path.parent)
        done = subprocess.run(
            [sys.executable, "-m", "agent_replay", "ingest", str(path), "--dir", store_dir],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        app.check_store()
        await settle(pilot)
        assert _ids(app)[0] == "trc_fromelsewhere"
        assert _ids(app)[table.cursor_row] == "trc_demo3dangerous"  # still where it was
        status = str(app.screen.query_one("#list-status", Static).render())
        assert "6 traces" in status and "1 new ↑" in status
        assert "updated 12:00:00" in str(app.screen.query_one("KeyBar").render())


async def test_a_trace_written_right_after_start_appears(seeded_store, tui) -> None:
    """A commit between the list's first read and the poll's first check is seen: the
    watcher's baseline is taken before that read (it was taken by the first poll, a second
    later, and hid the commit until something else was written)."""
    from agent_replay.services.ingest import ingest_trace
    from agent_replay.store.db import ensure_database

    app = tui(seeded_store, refresh_interval=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "trc_justafter" not in _ids(app)
        other = ensure_database(seeded_store.path.parent)  # another connection
        try:
            ingest_trace(other, {"id": "trc_justafter", "agent_name": "a"})
        finally:
            other.close()
        for _ in range(60):  # the poll runs every second
            await pilot.pause(0.1)
            if "trc_justafter" in _ids(app):
                break
        assert "trc_justafter" in _ids(app)


async def test_q_quits_in_an_empty_store(empty_store, tui) -> None:
    """With no traces the table is hidden, yet q quits (it does not type into the filter)."""
    app = tui(empty_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert not isinstance(app.focused, Input)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 0


async def test_slash_focuses_the_filter_and_esc_returns_to_the_table(seeded_store, tui) -> None:
    """/ focuses the filter bar; Esc drops the unapplied text and gives the table focus back,
    so a typed letter is a key again."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#trace-table", DataTable)
        assert app.focused is table
        await pilot.press("slash", *"status:failed")
        assert isinstance(app.focused, Input)
        await pilot.press("escape")
        await settle(pilot)
        assert app.focused is table and len(_ids(app)) == 5
        assert app.screen.query_one("#filter-bar", Input).value == ""
        await pilot.press("slash", *"agent:ops-assistant", "enter")
        await settle(pilot)
        assert app.focused is table and _ids(app) == ["trc_demo3dangerous"]


async def test_esc_closes_a_notification_before_the_screen(seeded_store, tui) -> None:
    """Esc with a toast showing dismisses the toast; the next Esc leaves the screen."""
    from agent_replay.screens.timeline import TimelineScreen

    app = tui(seeded_store, initial_trace="trc_demo2toolchain")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        app.notify("hello")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen) and not app._notifications
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, TraceListScreen)


async def test_reverse_sort_lists_oldest_first(seeded_store, tui) -> None:
    """S turns the sort round: oldest first, said in the status line."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("S")
        await settle(pilot)
        assert _ids(app)[0] == "trc_demo1ungrounded"
        assert "by time ↑" in str(app.screen.query_one("#list-status", Static).render())


async def test_narrow_terminals_hide_columns_and_say_so(seeded_store, tui) -> None:
    """At 80 columns the least needed columns go, the status line names them, and the footer
    keeps whole words."""
    app = tui(seeded_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#trace-table", DataTable)
        assert [str(c.label) for c in table.ordered_columns][-1] == "TOKENS"
        status = str(app.screen.query_one("#list-status", Static).render())
        assert "hidden: tags, cost, started, duration" in status
        footer = str(app.screen.query_one("KeyBar").render())
        assert "d Diff" in footer and "Dashb" not in footer


async def test_a_annotates_the_highlighted_trace(seeded_store, tui) -> None:
    """a, a label, a note: written through the recorder for the highlighted trace."""
    from agent_replay.store.trace_detail import annotation_dicts

    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down")  # the second trace
        trace_id = _ids(app)[1]
        await pilot.press("a", *"good", "enter", *"as expected", "enter")
        await settle(pilot)
        assert isinstance(app.screen, TraceListScreen)
        assert any(n.message == f"{trace_id}: good" for n in app._notifications)
    with seeded_store.db.connection_context():
        (annotation,) = annotation_dicts(seeded_store, trace_id)
    assert (annotation["label"], annotation["note"], annotation["step_number"]) == (
        "good",
        "as expected",
        None,
    )


async def test_outside_text_in_a_toast_is_shown_as_is(seeded_store, tui) -> None:
    """Markup is off in toasts: an unknown id carrying ``[/]`` (which would raise
    MarkupError) and a label carrying ``[b]`` are shown literally."""
    app = tui(seeded_store, initial_trace="trc_[/]nothing")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await settle(pilot)
        assert app.is_running and isinstance(app.screen, TraceListScreen)
        (failure,) = [n for n in app._notifications if n.severity == "error"]
        assert "trc_[/]nothing" in failure.message and not failure.markup
        await pilot.press("a", *"[b]odd[/b]", "enter", "enter")
        await settle(pilot)
        assert app.is_running
        assert any(n.message.endswith(": [b]odd[/b]") for n in app._notifications)
        await pilot.pause()  # the toasts are drawn (a MarkupError would surface here)
