"""Constants and helpers shared by the TUI tests (imported as ``tuikit``; conftest modules
can't be imported by name reliably)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from agent_replay.clock import FixedClock

SIZE = (120, 36)
"""Every TUI test and snapshot runs at this terminal size."""
CLOCK = FixedClock(dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC))
"""The fixed instant every relative time on screen is computed from."""


async def settle(pilot: Any) -> None:
    """Wait until every worker has finished and the screen has caught up."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
