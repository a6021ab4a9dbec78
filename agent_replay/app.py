"""The Textual app: ``AgentReplayApp`` and the ``make_app`` factory the CLI and tests share.

Only the TUI imports this module (deferred in the CLI: Textual costs ~200 ms to import).
Every store access happens in thread workers (``self.store`` queries inside
``store.db.connection_context()``); the UI thread never waits on the database.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.actions import SkipAction
from textual.app import App, SystemCommand, UnknownModeError
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from agent_replay.clock import Clock, SystemClock
from agent_replay.messages import OpenTraces, StoreChanged

# The change watcher (peewee's models, the live queries) is imported by its worker, not here:
# the trace list's first paint reads through the peewee-free queries (issue 17).
if TYPE_CHECKING:
    from types import ModuleType

    from agent_replay.screens.timeline import TimelineScreen
    from agent_replay.store.changes import ChangeSignal
    from agent_replay.store.db import Store
    from agent_replay.store.live import LiveFilter

THEME = "textual-dark"


def key_label(key: str) -> str:
    """A binding's key as the footer and the palette show it: ``ctrl+s`` → ``^s``,
    ``slash`` → ``/``, ``question_mark`` → ``?``."""
    first = key.split(",")[0]
    names = {
        "slash": "/",
        "question_mark": "?",
        "escape": "esc",
        "enter": "⏎",
        "space": "␣",
        "left": "←",
        "right": "→",
        "up": "↑",
        "down": "↓",
        "plus": "+",
        "minus": "-",
    }
    first = names.get(first, first)
    return "^" + first[5:] if first.startswith("ctrl+") else first


class AgentReplayApp(App[int]):
    """Browse, inspect and replay agent runs."""

    CSS_PATH = "app.tcss"
    TITLE = "agent-replay"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        # First in line for Esc (priority): a toast or the key panel closes before the screen
        # underneath sees the key (``SkipAction`` hands it on when neither is showing).
        Binding(
            "escape",
            "dismiss_topmost",
            "Close",
            id="dismiss",
            tooltip="Close the topmost thing: a notification, the key panel, then the screen",
            show=False,
            priority=True,
        ),
        Binding("q", "quit", "Quit", id="quit", tooltip="Leave agent-replay"),
        Binding("question_mark", "help", "Help", id="help", tooltip="Show the keys of this screen"),
        Binding(
            "D",
            "show_mode('dashboard')",
            "Dashboard",
            id="dashboard",
            tooltip="Totals and charts",
        ),
        Binding("T", "show_mode('traces')", "Traces", id="traces", tooltip="The trace list"),
        Binding("W", "show_mode('watch')", "Watch", id="watch", tooltip="Running traces, live"),
        # Kept out of the footer (shown in the key panel and the command palette): one more
        # footer key would change every screen's snapshot.
        Binding(
            "G",
            "show_mode('policies')",
            "Guards",
            id="guards",
            tooltip="Guard policies",
            show=False,
        ),
        Binding(
            "E",
            "show_mode('evals')",
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
        refresh_interval: float | None = 1.0,
    ) -> None:
        # The trace list's CSS is read with the app's own, not when its screen is first
        # shown: Textual parses every source of the app again each time a screen brings a
        # new file (``App._load_screen_css``), ~20-35 ms before the first paint (issue 17).
        from agent_replay.screens.trace_list import TraceListScreen

        list_css = Path(inspect.getfile(TraceListScreen)).parent / str(TraceListScreen.CSS_PATH)
        # The other modes' screens are imported when first shown: importing them all before
        # the first paint cost it tens of milliseconds (plotext for the dashboard alone).
        modes: dict[str, Callable[[], Screen[None]]] = {
            "traces": self._trace_list_screen,
            "dashboard": self._dashboard_screen,
            "watch": self._watch_screen,
            "policies": self._policies_screen,
            "evals": self._evals_screen,
        }
        if initial_mode not in modes:
            raise UnknownModeError(f"No known mode {initial_mode!r}")
        # The first mode is this app's default mode (``DEFAULT_MODE``, chosen per app, read by
        # ``App.__init__``): Textual composes its screen first, where switching to it from
        # ``on_mount`` also made, mounted and suspended Textual's own default screen and
        # parsed the whole stylesheet again twice on the way (issue 17).
        self.DEFAULT_MODE = initial_mode  # type: ignore[misc]  # (a ClassVar, set per app)
        super().__init__(css_path=[str(self.CSS_PATH), list_css.resolve()])
        self.store = store
        """The store; query it only from thread workers."""
        self.clock = clock
        """Time source for relative times ("3m ago") and the dashboard's windows."""
        self.store_label = store_label
        """What the header shows for the store (a display name, never a temp path)."""
        self.sub_title = store_label  # set before the first screen composes, not on mount
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
        self.refresh_interval = refresh_interval
        """Seconds between checks for changes made by other processes (``None``: never)."""
        self.store_version = 0
        """How many changes to the store the app has seen (``StoreChanged``)."""
        self._watcher: ChangeSignal | None = None
        self._watcher_lock = threading.Lock()
        self._watcher_closed = False
        self._watching = bool(refresh_interval) and (store.path is not None or not store.is_sqlite)
        """The app polls the store for other connections' commits (``check_store``)."""
        self._warmed = False
        self._opening: weakref.ref[TimelineScreen] | None = None
        """The last timeline ``open_trace`` opened, while it lives (it may still be reading
        its first steps); weak: a closed timeline holds its whole trace."""
        self.theme = THEME
        for mode, screen in modes.items():
            self.add_mode(mode, screen)

    def on_mount(self) -> None:
        if self.initial_trace:
            self.open_trace(self.initial_trace)
        if self._watching and self.refresh_interval:
            self.set_interval(self.refresh_interval, self.check_store)

    def _trace_list_screen(self) -> Screen[None]:
        from agent_replay.screens.trace_list import TraceListScreen

        screen = TraceListScreen()
        # Its CSS is read with the app's (``__init__``), so the stylesheet it will be styled
        # with as it mounts is the current one: marked so, Textual does not parse every
        # source again and restyle the app (``refresh_css``) when the mode first shows it,
        # ~7 ms before the first paint. A theme change later still counts as a change.
        screen._css_update_count = self._css_update_count
        return screen

    def _dashboard_screen(self) -> Screen[None]:
        from agent_replay.screens.dashboard import DashboardScreen

        return DashboardScreen(refresh_seconds=self.dashboard_refresh)

    def _watch_screen(self) -> Screen[None]:
        from agent_replay.screens.live_watch import LiveWatchScreen

        return LiveWatchScreen(self.watch_filter, interval=self.watch_interval)

    def _policies_screen(self) -> Screen[None]:
        from agent_replay.screens.policies import PoliciesScreen

        return PoliciesScreen()

    def _evals_screen(self) -> Screen[None]:
        from agent_replay.screens.evals import EvalsScreen

        return EvalsScreen()

    def warm_up(self) -> None:
        """Once the trace list has painted: import the timeline screen in a worker and load
        its CSS, while the user reads the list, so that opening a trace (the next thing a
        user does) does not pay for either (a screen's CSS is parsed, and every node of the
        app restyled, the first time a screen of its kind is pushed). Once per app; not
        when a trace was given on the command line: opening it loads both, and the list can
        paint before the app's ``on_mount`` opens it, so a warm-up would race that open."""
        if not self._warmed:
            self._warmed = True
            if not self.initial_trace:
                self._import_timeline()

    @work(thread=True, exit_on_error=False, group="warm-up", description="warm up")
    def _import_timeline(self) -> None:
        from agent_replay.screens import timeline
        from agent_replay.store import trace_detail  # noqa: F401 - what its first read imports

        self.call_from_thread(self._load_timeline_css, timeline)

    def _load_timeline_css(self, timeline: ModuleType) -> None:
        # What pushing the first timeline would do to the stylesheet: add its widgets'
        # DEFAULT_CSS (Textual adds a widget's when one is first registered) and read the
        # screen's CSS file; then parse only what is new (``Stylesheet.parse`` keeps the rules
        # it parsed before, cleared when the theme's variables change), where Textual's
        # loader (``App._load_screen_css``: ``reparse``) parses every source of the app
        # again, ~35 ms on the UI thread.
        from textual.widgets import LoadingIndicator

        widgets = (
            timeline.TitleBar(),
            timeline.StepTimeline(),
            timeline.StepDetail(),
            LoadingIndicator(),
        )
        for widget in widgets:
            for read_from, css, tie_breaker, scope in widget._get_default_css():
                self.stylesheet.add_source(
                    css,
                    read_from=read_from,
                    is_default_css=True,
                    tie_breaker=tie_breaker,
                    scope=scope,
                )
        read = False
        for path in timeline.TimelineScreen("").css_path:
            if not self.stylesheet.has_source(str(path), ""):
                self.stylesheet.read(path)
                read = True
        if read:
            self.stylesheet.parse()
            self.stylesheet.update(self)

    def check_store(self) -> None:
        """Ask whether another connection committed since the last check, in a worker
        (cheap: ``store.changes.ChangeSignal``, one pragma on SQLite, one WAL position on
        PostgreSQL when idle); the first check takes the baseline."""
        if not any(w.group == "store-watch" and not w.is_finished for w in self.workers):
            self._check_store()

    @work(thread=True, exclusive=True, exit_on_error=False, group="store-watch")
    def _check_store(self) -> None:
        watcher = self._change_watcher()
        if watcher is not None and watcher.changed():
            self.call_from_thread(self._store_changed)

    def baseline_changes(self) -> None:
        """Take the change watcher's baseline now, if it has none (any thread; every
        screen's read calls it first, through ``screens.base.read_store``). Its first check
        is a baseline: taken after that read, by the poll a second later, it hid every commit
        in between (a trace recorded just after the app started never appeared, until
        something else was written). A no-op when the app does not watch the store."""
        if self._watching:
            self._change_watcher()

    def _change_watcher(self) -> ChangeSignal | None:
        """The change watcher, made (and its baseline taken) on first use; ``None`` once the
        app has closed it."""
        with self._watcher_lock:
            if self._watcher is None and not self._watcher_closed:
                from agent_replay.store.changes import ChangeSignal

                self._watcher = ChangeSignal(self.store)
                self._watcher.changed()  # the baseline
                return None  # nothing to compare with yet
            return self._watcher

    def _store_changed(self) -> None:
        self.store_version += 1
        self.screen.post_message(StoreChanged(self.store_version))

    def on_unmount(self) -> None:
        with self._watcher_lock:
            self._watcher_closed = True
            if self._watcher is not None:
                self._watcher.close()
                self._watcher = None

    def open_trace(self, trace_id: str, step: int | None = None) -> None:
        """Push the step timeline of a trace (an id or unique prefix) on the current mode,
        with ``step`` selected (default: the first), once its first steps are read
        (``TimelineScreen.open``)."""
        from agent_replay.screens.timeline import TimelineScreen

        opening = self._opening() if self._opening is not None else None
        if opening is not None and opening.waiting:
            return  # a second Enter while the first trace is read: it would reach that screen
        screen = TimelineScreen(trace_id, step=step)
        self._opening = weakref.ref(screen)
        screen.open()

    async def show_mode_home(self, mode: str) -> None:
        """Switch to ``mode`` and leave it on its own screen (the trace list, the dashboard…),
        not on whatever detail was last pushed there: T, D, W, G and E land the same way
        every time."""
        await self.switch_mode(mode)
        while len(self.screen_stack) > 1:
            await self.pop_screen()

    async def action_show_mode(self, mode: str) -> None:
        """The T/D/W/G/E keys (``show_mode_home``)."""
        await self.show_mode_home(mode)

    def action_dismiss_topmost(self) -> None:
        """Esc: close a notification, else the key panel, else let the screen have the key.
        While the user types in a field (a filter, a jump prompt), Esc is the field's."""
        from textual.widgets import Input, TextArea

        if isinstance(self.focused, Input | TextArea) or getattr(self.screen, "typing", False):
            raise SkipAction()
        if self._notifications:
            self.clear_notifications()
            return
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
            return
        raise SkipAction()

    def action_help(self) -> None:
        """``?``: the help modal (the screen's keys, icons, colours); ``?`` again closes it."""
        from agent_replay.screens.modals import HelpModal

        if isinstance(self.screen, HelpModal):
            self.screen.dismiss(None)
            return
        from agent_replay.widgets.key_bar import own_escape

        keys: list[tuple[str, str]] = []
        seen: set[str] = set()
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            if binding.action == "dismiss_topmost":
                binding = own_escape(self.screen) or binding
            # Ours all have ids; Textual's own (scrolling, tab, ^c) are left out.
            if binding.id is None or not binding.description or not active.enabled:
                continue
            if binding.description in seen or binding.id.startswith(("step-", "hop-")):
                continue
            seen.add(binding.description)
            keys.append((key_label(key), binding.tooltip or binding.description))
        self.push_screen(HelpModal(keys))

    async def on_open_traces(self, message: OpenTraces) -> None:
        """Dashboard drill-down: the trace list, filtered."""
        from agent_replay.screens.trace_list import TraceListScreen

        # Awaited: on a first visit the list must be composed before its filter bar is set;
        # and the list itself, not a timeline or evals screen left on its stack.
        await self.show_mode_home("traces")
        screen = self.screen
        if isinstance(screen, TraceListScreen):
            screen.apply_query(message.query)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette offers every action of the app and of the current screen."""
        yield from super().get_system_commands(screen)
        modes = (
            ("Traces", "The trace list", "traces", "T"),
            ("Dashboard", "Totals and charts", "dashboard", "D"),
            ("Watch", "Running traces, live", "watch", "W"),
            ("Guards", "Guard policies: add, enable, remove", "policies", "G"),
            ("Evals", "Evaluation results of every trace", "evals", "E"),
        )
        for title, help_text, mode, key in modes:
            yield SystemCommand(
                f"{title}  [{key}]",
                help_text,
                lambda mode=mode: self.run_action(f"show_mode({mode!r})"),
            )
        seen = {"quit", "help", "dashboard", "traces", "watch", "guards", "evals", "dismiss"}
        # The screen's own bindings, and its focused widget's (the timeline's z, …).
        bindings: list[Binding] = list(getattr(screen, "BINDINGS", []))
        focused = screen.focused
        if focused is not None:
            bindings += [b for b in getattr(focused, "BINDINGS", []) if isinstance(b, Binding)]
        for binding in bindings:
            if not isinstance(binding, Binding) or binding.id in seen or not binding.description:
                continue
            if not binding.show:
                # navigation keys stay out, but not the actions kept off the footer
                if binding.id is None or binding.id.startswith(("step-", "cursor")):
                    continue
            seen.add(binding.id or binding.action)
            action = binding.action
            target = screen if binding in getattr(screen, "BINDINGS", []) else focused
            yield SystemCommand(
                f"{binding.description}  [{key_label(binding.key)}]",
                binding.tooltip or binding.description,
                lambda action=action, target=target: self.run_action(action, target),
            )

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast, with markup off unless asked for (``screens.base.PlainToasts``): errors
        and ids carry outside text, and ``[/]`` in one would raise ``MarkupError``."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

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


GC_THRESHOLDS = (10_000, 10, 10)
"""The cyclic collector's thresholds while the app runs (CPython's: 700, 10, 10)."""


def calm_collector() -> None:
    """Freeze what is loaded (Textual, Rich, the app's modules: never garbage) and collect
    the young generation every 10,000 allocations, not 700: a screen's compose, styling and
    paint allocate tens of thousands of short-lived objects, and the default thresholds ran
    ~20 collections (one or two of the middle generation, 1-2 ms) inside opening a trace
    (issue 17). Objects are mostly acyclic, so little waits longer to be freed. Once per
    process: a second freeze would keep the cyclic garbage of an earlier app (a test's)
    forever."""
    import gc

    global _collector_calmed
    if not _collector_calmed:
        _collector_calmed = True
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)


_collector_calmed = False


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
    refresh_interval: float | None = 1.0,
) -> AgentReplayApp:
    """Build the app (used by the CLI and by the tests).

    The store's connection in the calling thread is closed: from here on, only workers
    (each with its own connection) touch the database.
    """
    store.close()
    calm_collector()
    return AgentReplayApp(
        store,
        clock or SystemClock(),
        store_label=store_label,
        initial_trace=initial_trace,
        initial_mode=initial_mode,
        dashboard_refresh=dashboard_refresh,
        watch_filter=watch_filter,
        watch_interval=watch_interval,
        refresh_interval=refresh_interval,
    )
