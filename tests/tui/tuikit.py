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
    """Wait until every worker has finished, every message is handled and the screen has
    caught up.

    ``pilot.pause()`` alone decides the app is idle when its process stops using CPU, which a
    loaded machine (the suite's parallel workers) fools: a snapshot was once taken between a
    worker's result arriving and the table sizing its columns for it. So this also waits
    until no message is queued anywhere in the app, twice in a row (a handled message can
    queue another), for at most ``_SETTLE_ROUNDS`` rounds: a screen with a timer is never
    quiet for long, and then this is what it always was.
    """
    app = pilot.app
    quiet = 0
    for _ in range(_SETTLE_ROUNDS):
        await app.workers.wait_for_complete()
        await pilot.pause()
        quiet = 0 if _busy(app) else quiet + 1
        if quiet == 2:
            return


_SETTLE_ROUNDS = 50


def _busy(app: Any) -> bool:
    """Whether a worker runs or a message waits in the app, its screen or any widget."""
    if any(not worker.is_finished for worker in app.workers):
        return True
    nodes = [app, app.screen, *app.screen.walk_children()]
    return any(node.message_queue_size for node in nodes)
