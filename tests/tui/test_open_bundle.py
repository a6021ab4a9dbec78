"""``agent-replay open FILE``: the app on a bundle, read-only — the trace list shows the
bundle's traces, and a write (running the eval presets) is refused with a clear message."""

from __future__ import annotations

import hashlib
from pathlib import Path

from textual.widgets import DataTable
from tuikit import CLOCK, SIZE, settle

from agent_replay.screens.evals import EvalsScreen
from agent_replay.services.bundle import export_bundle, open_bundle


async def test_open_shows_the_bundle_read_only(seeded_store, tui, tmp_path: Path) -> None:
    """Two bundled traces listed; pressing r on an evaluation notifies, writes nothing."""
    path = tmp_path / "handoff.bundle"
    export_bundle(seeded_store, ["trc_demo2toolchain", "trc_demo4goodrun"], path, clock=CLOCK)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    app = tui(open_bundle(path))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#trace-table", DataTable)
        assert [str(key.value) for key in table.rows] == [
            "trc_demo4goodrun",
            "trc_demo2toolchain",
        ]
        app.push_screen(EvalsScreen("trc_demo2toolchain"))
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        messages = [n.message for n in app._notifications]
        assert any("read-only" in m and "nothing can be changed" in m for m in messages), messages
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
