"""The Textual app: ``AgentReplayApp`` and the ``make_app`` factory the CLI and tests share.

Only the TUI imports this module (deferred in the CLI: Textual costs ~200 ms to import).
Every store access happens in thread workers (``self.store`` queries inside
``store.db.connection_context()``); the UI thread never waits on the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from agent_replay.clock import Clock, SystemClock
from agent_replay.messages import OpenTraces
from agent_replay.store.db import Store
from agent_replay.store.live import LiveFilter

THEME = "textual-dark"


class AgentReplayApp(App[int]):
    """Browse, inspect and replay agent runs."""

    CSS_PATH = "app.tcss"
    TITLE = "agent-replay"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Leave agent-replay"),
        Binding("question_mark", "help", "Help", id="help", tooltip="Show the keys of this screen"),
        Binding(
            "D",
            "switch_mode('dashboard')",
            "Dashboard",
            id="dashboard",
            tooltip="Totals and charts",
        ),
        Binding("T", "switch_mode('traces')", "Traces", id="traces", tooltip="The trace list"),
        Binding("W", "switch_mode('watch')", "Watch", id="watch", tooltip="Running traces, live"),
        # Kept out of the footer (shown in the key panel and the command palette): one more
        # footer key would change every screen's snapshot.
        Binding(
            "G",
            "switch_mode('policies')",
            "Guards",
            id="guards",
            tooltip="Guard policies",
            show=False,
        ),
        Binding(
            "E",
            "switch_mode('evals')",
            "Evals",
            id="evals",
            tooltip="Evaluation results of every trace",
            show=False,
        ),
    ]

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        store_label: str = ".agent-replay",
        initial_trace: str | None = None,
        initial_mode: str = "traces",
        dashboard_refresh: float | None = None,
        watch_filter: LiveFilter | None = None,
        watch_interval: float = 0.5,
    ) -> None:
        super().__init__()
        self.store = store
        """The store; query it only from thread workers."""
        self.clock = clock
        """Time source for relative times ("3m ago") and the dashboard's windows."""
        self.store_label = store_label
        """What the header shows for the store (a display name, never a temp path)."""
        self.initial_trace = initial_trace
        """A trace id (or prefix) to open straight away."""
        self.initial_mode = initial_mode
        """``traces``, ``dashboard``, ``watch``, ``policies`` or ``evals``."""
        self.dashboard_refresh = dashboard_refresh
        """Seconds between dashboard refreshes (``None``: no automatic refresh)."""
        self.watch_filter = watch_filter
        """Which traces the live watch shows (``--session``, ``--agent``)."""
        self.watch_interval = watch_interval
        """Seconds between the live watch's polls of the store."""
        self.theme = THEME

    def on_mount(self) -> None:
        from agent_replay.screens.dashboard import DashboardScreen
        from agent_replay.screens.evals import EvalsScreen
        from agent_replay.screens.live_watch import LiveWatchScreen
        from agent_replay.screens.policies import PoliciesScreen
        from agent_replay.screens.trace_list import TraceListScreen

        self.sub_title = self.store_label
        self.add_mode("traces", TraceListScreen)
        self.add_mode("dashboard", lambda: DashboardScreen(refresh_seconds=self.dashboard_refresh))
        self.add_mode(
            "watch", lambda: LiveWatchScreen(self.watch_filter, interval=self.watch_interval)
        )
        self.add_mode("policies", PoliciesScreen)
        self.add_mode("evals", EvalsScreen)
        self.switch_mode(self.initial_mode)
        if self.initial_trace:
            self.open_trace(self.initial_trace)

    def open_trace(self, trace_id: str) -> None:
        """Push the step timeline of a trace (an id or unique prefix) on the current mode."""
        from agent_replay.screens.timeline import TimelineScreen

        self.push_screen(TimelineScreen(trace_id))

    def action_help(self) -> None:
        """Toggle the key help panel of the focused screen."""
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    async def on_open_traces(self, message: OpenTraces) -> None:
        """Dashboard drill-down: the trace list, filtered."""
        from agent_replay.screens.trace_list import TraceListScreen

        # Awaited: on a first visit the list must be composed before its filter bar is set.
        await self.switch_mode("traces")
        screen = self.screen
        if isinstance(screen, TraceListScreen):
            screen.apply_query(message.query)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette offers every action of the app and of the current screen."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Traces", "The trace list", lambda: self.switch_mode("traces"))
        yield SystemCommand("Dashboard", "Totals and charts", lambda: self.switch_mode("dashboard"))
        yield SystemCommand("Watch", "Running traces, live", lambda: self.switch_mode("watch"))
        yield SystemCommand(
            "Guards", "Guard policies: add, enable, remove", lambda: self.switch_mode("policies")
        )
        yield SystemCommand(
            "Evals", "Evaluation results of every trace", lambda: self.switch_mode("evals")
        )
        seen = {"quit", "help", "dashboard", "traces", "watch", "guards", "evals"}
        for binding in getattr(screen, "BINDINGS", []):
            if not isinstance(binding, Binding) or binding.id in seen or not binding.description:
                continue
            seen.add(binding.id or binding.action)
            action = binding.action
            yield SystemCommand(
                binding.description,
                binding.tooltip or binding.description,
                lambda action=action, screen=screen: self.run_action(action, screen),
            )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.report_worker_error(event.worker)

    def report_worker_error(self, worker: Worker[Any]) -> None:
        """The one place worker failures surface: a notification, never a crash.

        Screens forward their own workers' failures here (see ``screens.base.BaseScreen``).
        """
        error = worker.error
        if error is None:
            return
        message = getattr(error, "message", None) or str(error)
        self.notify(message, title="Error", severity="error", timeout=8)


def make_app(
    store: Store,
    clock: Clock | None = None,
    *,
    store_label: str = ".agent-replay",
    initial_trace: str | None = None,
    initial_mode: str = "traces",
    dashboard_refresh: float | None = None,
    watch_filter: LiveFilter | None = None,
    watch_interval: float = 0.5,
) -> AgentReplayApp:
    """Build the app (used by the CLI and by the tests).

    The store's connection in the calling thread is closed: from here on, only workers
    (each with its own connection) touch the database.
    """
    store.close()
    return AgentReplayApp(
        store,
        clock or SystemClock(),
        store_label=store_label,
        initial_trace=initial_trace,
        initial_mode=initial_mode,
        dashboard_refresh=dashboard_refresh,
        watch_filter=watch_filter,
        watch_interval=watch_interval,
    )
