"""The app on a team (PostgreSQL) store: the same screens over the same services. Runs on
SQLite and PostgreSQL (``both_backends``; see tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import DataTable, Static
from tuikit import CLOCK, SIZE, settle

from agent_replay.services.demo import load_demo
from agent_replay.services.guard.manage import add_policy, set_enabled
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store

pytestmark = pytest.mark.both_backends


def _ids(app: Any) -> list[str]:
    table = app.screen.query_one("#trace-table", DataTable)
    return [str(key.value) for key in table.rows]


async def test_the_trace_list_and_its_free_text_filter(store: Store, tui: Any) -> None:
    """The demo pushed to a team store lists the same; free text uses the search index."""
    load_demo(store, CLOCK)
    app = tui(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert len(_ids(app)) == 5
        await pilot.press("slash", *"refund", "enter")
        await settle(pilot)
        assert _ids(app) == ["trc_demo1ungrounded"]
        await pilot.press("escape")
        await settle(pilot)


async def test_a_timeline_opens(store: Store, tui: Any) -> None:
    load_demo(store, CLOCK)
    app = tui(store, initial_trace="trc_demo2toolchain")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert type(app.screen).__name__ == "TimelineScreen"


async def test_the_trace_list_refreshes_when_another_connection_writes(
    store: Store, tui: Any
) -> None:
    """Auto-refresh on both backends (SQLite's data_version; PostgreSQL's WAL position and
    table fingerprint): a trace committed by another connection is listed and marked new."""
    load_demo(store, CLOCK)
    app = tui(store, refresh_interval=None)  # the test drives the poll
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.check_store()  # the baseline
        await settle(pilot)
        app.check_store()  # nothing written since: no refresh
        await settle(pilot)
        assert app.store_version == 0
        trace = {"id": "trc_teammate", "agent_name": "teammate", "status": "running"}
        with store.db.connection_context():
            ingest_trace(store, {**trace, "started_at": "2026-06-01T11:59:00Z"}, clock=CLOCK)
        app.check_store()
        await settle(pilot)
        assert app.store_version == 1
        assert _ids(app)[0] == "trc_teammate"
        assert "1 new ↑" in str(app.screen.query_one("#list-status", Static).render())


async def test_the_policies_refresh_when_another_connection_changes_them(
    store: Store, tui: Any
) -> None:
    """``guard disable`` or ``guard add`` in another terminal shows on the open policies screen
    at the next poll, with the cursor kept on the policy it was on."""
    load_demo(store, CLOCK)
    app = tui(store, refresh_interval=None, initial_mode="policies")  # the test drives the poll
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.check_store()  # the baseline
        await pilot.press("down")  # review-production-tool-calls
        await settle(pilot)
        screen = app.screen
        assert screen.selected.name == "review-production-tool-calls"
        with store.db.connection_context():
            set_enabled(store, "block-destructive-tools", False)
            add_policy(
                store, CLOCK, name="zz-no-curl", pattern={"name_contains": "curl"}, action="warn"
            )
        app.check_store()
        await settle(pilot)
        shown = {p.name: p.enabled for p in screen.policies}
        assert shown["block-destructive-tools"] is False
        assert "zz-no-curl" in shown
        assert screen.query_one("#policies-table", DataTable).row_count == 4
        assert screen.selected.name == "review-production-tool-calls"
