"""The base of every full screen: surfaces its workers' failures through the app.

``Worker.StateChanged`` does not bubble, so the app never sees failures of workers that run on
a screen; each screen forwards them to ``AgentReplayApp.report_worker_error``, the one place
that turns them into notifications.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual import work
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from agent_replay.errors import AgentReplayError
from agent_replay.messages import StoreChanged


class BaseScreen(Screen[None]):
    """A screen whose worker errors are reported by the app (a notification, never a crash),
    and that stays current: ``store_changed`` runs when the store changes while it is shown,
    or when it comes back into view after a change (``StoreChanged``)."""

    _seen_version = 0

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_worker_error(event.worker)  # type: ignore[attr-defined]

    def on_store_changed(self, message: StoreChanged) -> None:
        self._catch_up()

    def on_screen_resume(self) -> None:
        if self._seen_version != getattr(self.app, "store_version", 0):
            self._catch_up()

    def _catch_up(self) -> None:
        version = getattr(self.app, "store_version", 0)
        if version != self._seen_version:
            self._seen_version = version
            self.store_changed()

    def store_changed(self) -> None:
        """Refresh what the screen shows, keeping the cursor (override; runs on the UI
        thread, so start a worker)."""

    def mark_updated(self) -> None:
        """Say in the footer when the view last read the store (the app's clock)."""
        from agent_replay.widgets.key_bar import KeyBar

        now = self.app.clock.now()  # type: ignore[attr-defined]
        self._seen_version = getattr(self.app, "store_version", 0)
        for bar in self.query(KeyBar):
            bar.note = f"updated {now:%H:%M:%S}"


class TraceScreen(BaseScreen):
    """A screen about one trace, loaded by id or unique prefix in a thread worker.

    The worker posts ``TraceLoaded`` (with whatever ``prepare_trace`` built off the UI thread)
    or ``TraceLoadFailed`` (unknown id, ambiguous prefix, store error); subclasses handle them.
    """

    @dataclass
    class TraceLoaded(Message):
        """The trace arrived from the worker."""

        trace: dict[str, Any]
        """The trace object (with ``steps``, ``evals`` and the resolved ``id``)."""
        prepared: Any = None
        """What ``prepare_trace`` returned for it."""

    @dataclass
    class TraceLoadFailed(Message):
        """The trace could not be loaded."""

        error: str

    def __init__(self, trace_id: str) -> None:
        super().__init__()
        self.trace_id = trace_id
        """The trace shown: the id (or unique prefix) given, the full id once loaded."""

    def prepare_trace(self, trace: dict[str, Any]) -> Any:
        """Work on the loaded trace that should stay off the UI thread (runs in the worker)."""
        return None

    @work(thread=True, exclusive=True, exit_on_error=False, group="trace", description="trace")
    def load_trace(self) -> None:
        """Load ``self.trace_id``; the result arrives as a message."""
        from agent_replay.store.queries import resolve_trace_id, trace_json

        store = self.app.store  # type: ignore[attr-defined]
        try:
            with store.db.connection_context():
                trace = trace_json(store, resolve_trace_id(store, self.trace_id))
        except AgentReplayError as exc:
            self.post_message(self.TraceLoadFailed(exc.message))
            return
        prepared = self.prepare_trace(trace)
        if not get_current_worker().is_cancelled:
            self.post_message(self.TraceLoaded(trace, prepared))
