"""The live watch: running traces on the left, the selected one's steps streaming in on the
right.

A timer starts a polling thread worker every ``interval`` seconds (a tick is skipped while a
poll is still running). The worker asks ``store.live.LiveFeed`` what changed: the feed keeps a
connection of its own, so an idle poll is one ``PRAGMA data_version``, and a busy one reads
only the new steps and the steps it saw open (see ``agent_replay.store.live``). Results come
back as ``LiveWatchScreen.FeedPolled``, a message that can replace a queued one (each carries
the whole current picture), so a burst of polls while the UI is busy collapses into one repaint.

Relative times ("4s ago") come from ``app.clock``. Producer text (agent and step names,
errors, guard verdicts) is escaped (``display.safe``) and shown as plain text, never markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.timer import Timer
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker, WorkerState

from agent_replay.display import fmt_int, fmt_time, safe, truncate
from agent_replay.screens.base import BaseScreen
from agent_replay.services.liveness import finalize_orphans
from agent_replay.store.live import LiveFilter, LiveStep, LiveTrace, LiveUpdate
from agent_replay.store.live_feed import LiveFeed
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.live_steps import LiveStepRow, LiveSteps
from agent_replay.widgets.status import status_style
from agent_replay.widgets.step_timeline import StepTimeline
from agent_replay.widgets.title_bar import TitleBar

DEFAULT_INTERVAL = 0.5
"""Seconds between polls of the store."""
EMPTY_STATE = (
    "No running traces yet.\n\n"
    "Start one:              agent-replay run -- CMD\n"
    "Or register the hook:   agent-replay hook  (Claude Code, Codex CLI, Gemini CLI)\n\n"
    "Traces show up here as soon as they start."
)
NO_RUNNING = "No running traces. Start one with\nagent-replay run -- CMD, or register the hook."
STATUS_GLYPHS = {
    "running": "●",
    "completed": "✓",
    "failed": "✗",
    "timeout": "◷",
    "forked": "⑂",
}
_LINE_WIDTH = 46  # the trace list's text width (its pane is 54 cells wide)
_ID_WIDTH = 12  # "trc_" and 8 characters: a prefix every command accepts
_MUTED = "$text-muted"


def fmt_age(instant_ms: int | None, now_ms: int) -> str:
    """How long ago: ``now``, ``12s ago``, ``4m ago``, ``3h ago``, ``2d ago``."""
    if instant_ms is None:
        return "-"
    seconds = (now_ms - instant_ms) // 1000
    if seconds < 1:
        return "now"
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    if seconds < 86400:
        return f"{seconds // 3600}h ago"
    return f"{seconds // 86400}d ago"


def _issues(trace: LiveTrace) -> list[tuple[str, str]]:
    parts = []
    if trace.errors:
        parts.append((f"✗{trace.errors}", "bold $text-error"))
    if trace.blocks:
        parts.append((f"⊘{trace.blocks}", "bold $text-warning"))
    return parts


def trace_prompt(trace: LiveTrace, now_ms: int) -> Content:
    """Two lines of the trace list: agent, problems and status; id, steps, tokens and age."""
    status = trace.status
    style = status_style(status)
    issues = _issues(trace)
    issues_width = sum(len(text) + 1 for text, _ in issues)
    agent_width = max(8, _LINE_WIDTH - 2 - len(status) - 1 - issues_width)
    agent = truncate(safe(trace.agent_name), agent_width).ljust(agent_width)
    first: list[Any] = [(STATUS_GLYPHS.get(status, "·") + " ", style), (agent, "bold")]
    for text, text_style in issues:
        first += [" ", (text, text_style)]
    first += [" ", (status, style)]
    steps = f"{fmt_int(trace.step_count)} step{'s' * (trace.step_count != 1)}"
    details = [steps]
    if trace.tokens is not None:
        details.append(f"{fmt_int(trace.tokens)} tok")
    details.append(fmt_age(trace.last_activity_ms, now_ms))
    second = truncate(f"  {trace.id[:_ID_WIDTH]} · " + " · ".join(details), _LINE_WIDTH)
    # "dim", not $text-muted: OptionList doesn't resolve the contrast-aware "auto" colours.
    return Content.assemble(*first, "\n", (second, "dim"))


def trace_header(trace: LiveTrace, now_ms: int) -> Content:
    """The steps pane's header: id, agent and status; figures; times; the trace's error."""
    status = trace.status
    figures = [Content(f"{fmt_int(trace.step_count)} step{'s' * (trace.step_count != 1)}")]
    if trace.tokens is not None:
        figures.append(Content(f"{fmt_int(trace.tokens)} tokens"))
    if trace.errors:
        errors = f"✗ {trace.errors} error{'s' * (trace.errors != 1)}"
        figures.append(Content.styled(errors, "bold $text-error"))
    if trace.blocks:
        figures.append(Content.styled(f"⊘ {trace.blocks} blocked", "bold $text-warning"))
    if trace.open_steps:
        figures.append(Content.styled(f"⋯ {trace.open_steps} open", "$text-accent"))
    times = [
        Content.assemble(("started ", _MUTED), fmt_time(trace.started_at)),
        Content.assemble(("last activity ", _MUTED), fmt_age(trace.last_activity_ms, now_ms)),
    ]
    lines = [
        Content.assemble(
            (trace.id, "bold"),
            ("  ·  ", _MUTED),
            (safe(trace.agent_name), "bold $text-primary"),
            ("  ·  ", _MUTED),
            (status, status_style(status)),
        ),
        Content.styled(" · ", _MUTED).join(figures),
        Content.styled(" · ", _MUTED).join(times),
    ]
    if trace.error:
        lines.append(Content.styled("✗ " + truncate(safe(trace.error), 300), "$text-error"))
    return Content("\n").join(lines)


def live_row(step: LiveStep) -> LiveStepRow:
    """The timeline row of a live step (producer text escaped)."""
    note = ""
    if step.blocked:
        verdict = step.error or step.guard_output or ""
        note = "⊘ blocked by " + safe(step.name or "a guard check") + ": " + safe(verdict)
    elif step.is_error:
        note = "✗ " + safe(step.error or step.name or "error")
    return LiveStepRow(
        number=step.step_number,
        step_type=step.step_type,
        name=safe(step.name or ""),
        duration_ms=step.duration_ms,
        tokens=step.tokens_used,
        has_error=step.error is not None,
        has_decision=step.has_decision,
        has_snapshot=step.has_snapshot,
        is_open=step.is_open,
        blocked=step.blocked,
        note=note,
    )


class WatchTraceList(OptionList):
    """The watched traces. A click shows a trace's steps; Enter or a double click opens it."""

    async def _on_click(self, event: events.Click) -> None:
        # OptionList selects on any click; here a single click only highlights (shows steps).
        event.prevent_default()  # instead of OptionList's own handler, not as well as it
        index = event.style.meta.get("option")
        if index is None or self.get_option_at_index(index).disabled:
            return
        self.highlighted = index
        if event.chain >= 2:
            self.action_select()


class LiveWatchScreen(BaseScreen):
    """Running traces, live: new steps appear as the store records them."""

    TITLE = "Live watch"
    CSS_PATH = "live_watch.tcss"
    BINDINGS = [
        Binding(
            "f",
            "toggle_follow",
            "Follow",
            id="follow",
            tooltip="Keep the newest step in view, or stop following",
        ),
        Binding(
            "enter",
            "open_timeline",
            "Timeline",
            id="open-timeline",
            tooltip="Open the selected trace's step timeline",
        ),
        Binding("r", "retry", "Refresh", id="watch-refresh", tooltip="Poll the store now"),
    ]

    @dataclass
    class FeedPolled(Message):
        """A poll saw changes (posted from the polling worker)."""

        update: LiveUpdate
        rows: tuple[LiveStepRow, ...]
        """The selected trace's steps as timeline rows (built in the worker)."""

        def can_replace(self, message: Message) -> bool:
            # Each poll carries the whole current picture, so a newer one supersedes this.
            return isinstance(message, LiveWatchScreen.FeedPolled)

    def __init__(
        self, filters: LiveFilter | None = None, *, interval: float = DEFAULT_INTERVAL
    ) -> None:
        super().__init__()
        self.filters = filters or LiveFilter()
        """Which traces are watched (``--session``, ``--agent``)."""
        self.interval = interval
        """Seconds between polls."""
        self.selected: str | None = None
        """The trace whose steps are wanted (``None``: let the feed pick the first)."""
        self.auto_select = True
        """The selection is ours, not the user's: when the selected trace is not running and
        a running one is listed, move to it (until the user picks a trace)."""
        self.shown: str | None = None
        """The trace whose steps are on screen."""
        self.latest: LiveUpdate | None = None
        """The last update applied."""
        self.feed: LiveFeed | None = None
        """The live reader (created on mount); its ``stats`` show what the polls cost."""
        self._worker: Worker[None] | None = None
        self._poll_pending = False
        self._stopped = False
        self._timer: Timer | None = None
        self._age_timer: Timer | None = None
        self._listed: list[str] = []
        self._prompt_keys: dict[str, tuple[LiveTrace, str]] = {}
        self._traces: dict[str, LiveTrace] = {}
        self._rows_trace: str | None = None
        self._rows_cache: dict[int, tuple[LiveStep, LiveStepRow]] = {}

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="watch-body"):
            with Vertical(id="watch-traces-pane"):
                yield WatchTraceList(id="watch-traces")
                yield Static("", id="watch-list-status")
            with Vertical(id="watch-steps-pane"):
                yield Static("", id="watch-trace-header")
                yield LiveSteps(id="watch-steps")
                yield Static("", id="watch-step-note")
        yield Static(self._empty_text(), id="watch-empty", classes="-empty-state", markup=False)
        yield KeyBar()

    @property
    def trace_list(self) -> WatchTraceList:
        return self.query_one("#watch-traces", WatchTraceList)

    @property
    def steps(self) -> LiveSteps:
        return self.query_one("#watch-steps", LiveSteps)

    def on_mount(self) -> None:
        traces_pane = self.query_one("#watch-traces-pane")
        traces_pane.border_title = "Live traces"
        traces_pane.border_subtitle = safe(self.filters.describe())
        self.query_one("#watch-steps-pane").border_title = "Steps"
        self._show_follow(self.steps.follow)
        self.query_one("#watch-empty").display = False
        self.query_one("#watch-step-note").display = False
        self.query_one("#watch-body").loading = True
        self.trace_list.focus()
        self.feed = LiveFeed(
            self.app.store,
            self.filters,
            reaper=finalize_orphans,
        )
        self._timer = self.set_interval(self.interval, self._tick)
        self._age_timer = self.set_interval(1.0, self._refresh_ages)
        self._request_poll(force=True)

    def on_unmount(self) -> None:
        if self.feed is not None:
            self.feed.close()

    def on_screen_suspend(self) -> None:
        for timer in (self._timer, self._age_timer):
            if timer is not None:
                timer.pause()

    def on_screen_resume(self) -> None:
        for timer in (self._timer, self._age_timer):
            if timer is not None:
                timer.resume()
        if self.latest is not None:  # back from the timeline or another mode: catch up now
            self._request_poll()

    def _empty_text(self) -> str:
        if not (self.filters.session or self.filters.agent):
            return EMPTY_STATE
        rest = EMPTY_STATE.split("\n\n", 1)[1]
        return f"No traces for {safe(self.filters.describe())} yet.\n\n{rest}"

    # --- polling ----------------------------------------------------------------------

    def _polling(self) -> bool:
        return self._worker is not None and self._worker.state in (
            WorkerState.PENDING,
            WorkerState.RUNNING,
        )

    def _failed(self) -> bool:
        # Read off the worker, not set by the StateChanged handler: a tick may come first.
        return self._worker is not None and self._worker.state == WorkerState.ERROR

    def _tick(self) -> None:
        # A slow store must not pile up threads: skip the tick while a poll is in flight.
        # After a failure, stop rather than report the same error twice a second.
        if not (self._polling() or self._failed()):
            self._worker = self._poll(self.selected, False)

    def _request_poll(self, *, force: bool = False, retry: bool = False) -> None:
        """Poll now, or right after the poll in flight (the selection changed meanwhile)."""
        if self._polling():
            self._poll_pending = True
        elif retry or not self._failed():
            self._worker = self._poll(self.selected, force)

    @work(thread=True, exclusive=True, exit_on_error=False, group="watch", description="watch")
    def _poll(self, selected: str | None, force: bool) -> None:
        assert self.feed is not None
        update = self.feed.poll(selected, force=force)
        if update is None:
            return
        # Posted even if the worker was cancelled: the feed has moved past these changes, so
        # they must reach the screen (posting to a screen being removed does nothing).
        self.post_message(self.FeedPolled(update, self._rows_for(update)))

    def _rows_for(self, update: LiveUpdate) -> tuple[LiveStepRow, ...]:
        """Timeline rows for the update's steps, reusing the rows of unchanged steps.

        Runs in the polling worker (one at a time), so a long trace costs only its new rows.
        """
        if update.selected != self._rows_trace:
            self._rows_trace = update.selected
            self._rows_cache = {}
        cache = self._rows_cache
        fresh: dict[int, tuple[LiveStep, LiveStepRow]] = {}
        rows = []
        for step in update.steps:
            hit = cache.get(step.rowid)
            if hit is None or hit[0] is not step:
                hit = (step, live_row(step))
            fresh[step.rowid] = hit
            rows.append(hit[1])
        self._rows_cache = fresh
        return tuple(rows)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # BaseScreen's handler (reporting failures) runs too: Textual calls each class's own.
        if event.worker is not self._worker:
            return
        if event.state == WorkerState.ERROR:
            self._stopped = True  # no more polls (see _tick) until `r` tries again
            self._set_status(
                Content.styled("Polling stopped after an error. r retries.", "$text-error")
            )
        elif event.state in (WorkerState.SUCCESS, WorkerState.CANCELLED) and self._poll_pending:
            self._poll_pending = False
            self._worker = self._poll(self.selected, False)

    # --- showing ----------------------------------------------------------------------

    @on(FeedPolled)
    def show_update(self, message: FeedPolled) -> None:
        update = message.update
        self.latest = update
        self._stopped = False
        self.query_one("#watch-body").loading = False
        empty = not update.traces and update.selected is None
        self.query_one("#watch-body").display = not empty
        self.query_one("#watch-empty").display = empty
        if self.selected is None:
            self.selected = update.selected
        self._traces = {trace.id: trace for trace in update.traces}
        self._move_to_running(update.traces)
        self._show_traces(update.traces)
        if update.selected is not None and update.selected == self.selected:
            new_trace = update.selected != self.shown
            self.shown = update.selected
            self.steps.show_rows(message.rows, new_trace=new_trace)
            self._show_header()
        # else: the selection changed while this was read; the next poll brings its steps

    def _move_to_running(self, traces: tuple[LiveTrace, ...]) -> None:
        """Automatic selection: from a trace that is no longer running to the newest running
        one (a new session started, the next run of the agent began)."""
        if not self.auto_select or not traces or not traces[0].is_running:
            return
        current = self._traces.get(self.selected or "")
        if current is None or not current.is_running:
            self.selected = traces[0].id
            self._request_poll()

    def _now_ms(self) -> int:
        return int(self.app.clock.now().timestamp() * 1000)

    def _show_traces(self, traces: tuple[LiveTrace, ...]) -> None:
        now_ms = self._now_ms()
        ids = [trace.id for trace in traces]
        keys = {t.id: (t, fmt_age(t.last_activity_ms, now_ms)) for t in traces}
        option_list = self.trace_list
        if ids == self._listed:
            for trace in traces:
                if self._prompt_keys.get(trace.id) != keys[trace.id]:
                    option_list.replace_option_prompt(trace.id, trace_prompt(trace, now_ms))
        else:
            options: list[Option | None] = []
            for trace in traces:
                options += [Option(trace_prompt(trace, now_ms), id=trace.id), None]
            option_list.set_options(options[:-1])
        if self.selected in ids and option_list.highlighted != ids.index(self.selected):
            option_list.highlighted = ids.index(self.selected)
        self._listed = ids
        self._prompt_keys = keys
        running = sum(1 for trace in traces if trace.is_running)
        if self._stopped:
            return  # the status line says polling stopped, until `r` brings it back
        if running:
            finished = len(traces) - running
            status = Content(f"{running} running · {finished} recently finished")
        else:
            status = Content.styled(NO_RUNNING, _MUTED)
        self._set_status(status)

    def _set_status(self, content: Content) -> None:
        self.query_one("#watch-list-status", Static).update(content)

    def _show_header(self) -> None:
        header = self.query_one("#watch-trace-header", Static)
        trace = self._traces.get(self.shown or "")
        if trace is not None:
            header.update(trace_header(trace, self._now_ms()))
            self.query_one("#watch-steps-pane").border_title = f"Steps · {trace.id}"

    def _refresh_ages(self) -> None:
        """Relative times move on with the clock, data or not (no store access)."""
        if self.latest is not None:
            self._show_traces(self.latest.traces)
            self._show_header()

    @on(StepTimeline.StepSelected, "#watch-steps")
    def show_step_note(self, message: StepTimeline.StepSelected) -> None:
        note = self.query_one("#watch-step-note", Static)
        rows = self.steps.rows
        row = rows[self.steps.cursor] if rows else None
        text = row.note if isinstance(row, LiveStepRow) else ""
        note.display = bool(text)
        if isinstance(row, LiveStepRow) and text:
            note.update(Content(f"step {row.number}  {text}"))
            note.set_class(row.blocked, "-blocked")
            note.set_class(not row.blocked, "-error")

    @on(LiveSteps.FollowChanged, "#watch-steps")
    def follow_changed(self, message: LiveSteps.FollowChanged) -> None:
        self._show_follow(message.follow)

    def _show_follow(self, follow: bool) -> None:
        pane = self.query_one("#watch-steps-pane")
        pane.border_subtitle = "● following · f" if follow else "○ paused · f follows"
        pane.set_class(not follow, "-paused")

    # --- selection and actions --------------------------------------------------------

    @on(OptionList.OptionHighlighted, "#watch-traces")
    def select_trace(self, event: OptionList.OptionHighlighted) -> None:
        trace_id = event.option.id
        if trace_id is not None and trace_id != self.selected:
            # Highlights we set ourselves always name self.selected: this one is the user's.
            self.auto_select = False
            self.selected = trace_id
            self._request_poll()

    @on(OptionList.OptionSelected, "#watch-traces")
    def open_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.app.open_trace(event.option.id)

    def action_open_timeline(self) -> None:
        if self.selected is not None:
            self.app.open_trace(self.selected)

    def action_toggle_follow(self) -> None:
        self.steps.follow = not self.steps.follow

    def action_retry(self) -> None:
        self._request_poll(force=True, retry=True)
