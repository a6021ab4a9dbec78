"""The base of every full screen: surfaces its workers' failures through the app.

``Worker.StateChanged`` does not bubble, so the app never sees failures of workers that run on
a screen; each screen forwards them to ``AgentReplayApp.report_worker_error``, the one place
that turns them into notifications.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.worker import Worker, WorkerState


class BaseScreen(Screen[None]):
    """A screen whose worker errors are reported by the app (a notification, never a crash)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_worker_error(event.worker)  # type: ignore[attr-defined]
