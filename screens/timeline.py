"""The step timeline of one trace: its steps in order, and the selected step in full.

The trace loads in a thread worker (one query for the trace and its steps: ~60 ms for 10,000
steps) and arrives as ``TraceScreen.TraceLoaded``; the steps are shown by ``StepTimeline``, a
Line-API view that renders only what is visible, and the selected step by ``StepDetail``.
Producer text is escaped (``display.safe``) and shown as plain text, never as markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Input, Label, Static

from agent_replay.display import fmt_cost, fmt_int, fmt_ms, fmt_time, safe
from agent_replay.screens.base import PlainToasts, TraceScreen
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.status import status_style
from agent_replay.widgets.step_detail import StepDetail, json_text
from agent_replay.widgets.step_timeline import (
    StepRow,
    StepTimeline,
    annotation_labels,
    step_rows,
)
from agent_replay.widgets.title_bar import TitleBar

if TYPE_CHECKING:
    from agent_replay.store.shapes import StepJSON, TraceJSON


def trace_header(trace: Mapping[str, Any], step_count: int) -> Content:
    """The header lines: id, agent and status; totals; the trace's error if it has one."""
    muted = "$text-muted"
    agent = safe(trace.get("agent_name") or "")
    if trace.get("agent_version"):
        agent += f" {safe(trace['agent_version'])}"
    status = str(trace.get("status") or "")
    totals = [Content(f"{step_count:,} step{'s' * (step_count != 1)}")]
    if trace.get("total_tokens") is not None:
        totals.append(Content(f"{fmt_int(trace['total_tokens'])} tokens"))
    if trace.get("total_cost_usd") is not None:
        totals.append(Content(fmt_cost(trace["total_cost_usd"])))
    if trace.get("total_duration_ms") is not None:
        totals.append(Content(fmt_ms(trace["total_duration_ms"])))
    if trace.get("started_at"):
        totals.append(Content.assemble(("started ", muted), fmt_time(trace["started_at"])))
    lines = [
        Content.assemble(
            (str(trace["id"]), "bold"),
            ("  ·  ", muted),
            (agent, "bold $text-primary"),
            ("  ·  ", muted),
            (status, status_style(status, bold=True)),
        ),
        Content.styled(" · ", muted).join(totals),
    ]
    if trace.get("error"):
        lines.append(Content.styled("✗ " + safe(trace["error"]), "$text-error"))
    run_labels = annotation_labels(trace.get("annotations") or [])[0]
    if run_labels:
        chips = " ".join(f"#{safe(label)}" for label in run_labels)
        lines.append(Content.assemble(("labels ", muted), (chips, "bold $text-accent")))
    return Content("\n").join(lines)


FIRST_STEPS = 100
"""Steps a long trace shows before the rest has loaded: a few screens' worth, read in a few
milliseconds whatever the trace's length."""

SHOW_WAIT = 0.25
"""Seconds ``TimelineScreen.open`` waits for the first steps before showing the screen
anyway, with a loading indicator (a slow store); they usually take a few milliseconds."""


class JumpToStepModal(PlainToasts, ModalScreen[int | None]):
    """Ask for a step number to jump to; dismisses with it, or ``None`` when cancelled."""

    DEFAULT_CSS = """
    JumpToStepModal {
        align: center middle;
        & > #jump-dialog {
            width: 40;
            height: auto;
            padding: 1 2;
            border: round $accent;
            background: $panel;
        }
        & #jump-input { margin-top: 1; }
    }
    """
    BINDINGS = [
        Binding(
            "escape",
            "cancel",
            "Cancel",
            id="jump-cancel",
            tooltip="Close without jumping",
            priority=True,
        ),
    ]

    def __init__(self, first: int, last: int) -> None:
        super().__init__()
        self.first = first
        """The trace's first step number (for the prompt)."""
        self.last = last
        """The trace's last step number (for the prompt)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="jump-dialog"):
            yield Label(Content(f"Jump to step ({self.first:,}–{self.last:,})"))
            yield Input(placeholder="step number", type="integer", id="jump-input")

    @on(Input.Submitted, "#jump-input")
    def jump(self, event: Input.Submitted) -> None:
        try:
            number = int(event.value)
        except ValueError:
            self.notify("Type a step number.", title="Jump", severity="warning")
            return
        self.dismiss(number)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TimelineScreen(TraceScreen):
    """The steps of one trace in order, with the selected step's detail beside them."""

    TITLE = "Timeline"
    CSS_PATH = "timeline.tcss"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="back", tooltip="Back to the trace list"),
        Binding(
            "f",
            "toggle_fold",
            "Fold",
            id="fold",
            tooltip="Show long payloads in full, or fold them again",
        ),
        Binding("g", "jump", "Go to step", id="jump", tooltip="Jump to a step number"),
        Binding(
            "a",
            "annotate('step')",
            "Annotate",
            id="annotate-step",
            tooltip="Label the selected step (good, bad, wrong-tool…), with a note",
        ),
        Binding(
            "A",
            "annotate('trace')",
            "Annotate run",
            id="annotate-trace",
            tooltip="Label the whole run",
            show=False,
        ),
        Binding(
            "y", "copy('input')", "Copy input", id="copy-input", tooltip="Copy the step's input"
        ),
        Binding(
            "Y",
            "copy('output')",
            "Copy output",
            id="copy-output",
            tooltip="Copy the step's output (or its error)",
            show=False,
        ),
        Binding(
            "o",
            "open_pager",
            "Pager",
            id="pager",
            tooltip="The whole step in $PAGER (else $EDITOR, else less)",
            show=False,
        ),
        Binding("t", "open_tree", "Tree/why", id="tree-why", tooltip="The step tree and why-chain"),
        Binding(
            "p", "open_replay", "Replay", id="replay", tooltip="Replay this trace step by step"
        ),
        Binding(
            "F",
            "open_fork_editor",
            "Fork",
            id="fork",
            tooltip="Fork the trace at the selected step, with an edited input",
        ),
        Binding(
            "d",
            "diff_parent",
            "Diff parent",
            id="diff-parent",
            tooltip="Diff this fork against its parent",
        ),
        Binding(
            "R",
            "rerun_command",
            "Re-run",
            id="rerun-from-step",
            tooltip="Print and copy the command that re-runs the session from this model call "
            "(agent-replay proxy --replay)",
            show=False,  # in the key panel and the command palette: the footer stays as it is
        ),
        Binding(
            "e",
            "open_evals",
            "Evals",
            id="evals-of-trace",
            tooltip="This trace's evaluations, on the selected step (r runs the presets)",
        ),
    ]

    folded: reactive[bool] = reactive(True)
    """Whether long payloads in the detail pane are folded to their first lines."""

    def __init__(self, trace_id: str, *, step: int | None = None) -> None:
        """Args:
        trace_id: a trace id or unique prefix.
        step: the step to select first (default: the first step).
        """
        super().__init__(trace_id)
        self._initial_step = step
        self._trace_running = False
        self._reloading = False
        self._steps: dict[int, StepJSON] = {}
        self._parent_id: str | None = None
        self._partial = False
        """Only the first steps are loaded so far; the whole trace is on its way."""
        self._pending_jump: int | None = None
        """A step asked for (``g``) before the whole trace arrived: selected when it does."""
        self._opening = False
        """``open`` reads the first steps (else the screen does, once mounted)."""
        self._first_arrived = False
        """The first steps (or why there are none) are in the screen's queue."""
        self._show_pending: Timer | None = None
        """``open`` is waiting for the first steps before pushing the screen."""
        self._detail_shown = False
        """The detail has shown a step (the first one's sections follow the first frame)."""
        self._styled = False
        """Pushed with its CSS already in the app's stylesheet: the push's ScreenResume
        need not restyle it (``post_message``)."""

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static(Content(safe(self.trace_id)), id="timeline-header")
        # The two panes sit side by side in the screen itself (``layout: horizontal``), not
        # in a container: one widget fewer to compose, style, lay out and paint on every open.
        yield StepTimeline(id="step-timeline")
        yield StepDetail(id="step-detail")
        yield KeyBar()

    @property
    def timeline(self) -> StepTimeline:
        return self.query_one("#step-timeline", StepTimeline)

    @property
    def detail(self) -> StepDetail:
        return self.query_one("#step-detail", StepDetail)

    def open(self) -> None:
        """Read the trace's first steps, then push the screen (``AgentReplayApp.open_trace``):
        it handles them before its first paint, so it paints once, with them, instead of
        once empty and again a moment later. Pushed after ``SHOW_WAIT`` anyway when the read
        takes longer (then with a loading indicator until they arrive).

        The read is the app's worker: a screen not pushed yet has no app to post to from a
        thread.
        """
        app = self.app
        self._opening = True

        def read_first() -> None:
            try:
                message = self.read_trace(app, FIRST_STEPS, self._initial_step)
            except BaseException:
                app.call_later(self._push)  # the app reports the failure; show the screen
                raise
            app.call_later(self._first_read, message)

        app.run_worker(read_first, thread=True, exit_on_error=False, group="open-trace")
        self._show_pending = app.set_timer(SHOW_WAIT, self._push)

    @property
    def waiting(self) -> bool:
        """``open`` is reading the first steps; the screen is not pushed yet."""
        return self._show_pending is not None

    def _first_read(self, message: TraceScreen.TraceLoaded | TraceScreen.TraceLoadFailed) -> None:
        self._first_arrived = True
        self.post_message(message)  # handled before the screen's first paint, if not shown yet
        self._push()

    def _push(self) -> None:
        if self._show_pending is not None:
            self._show_pending.stop()
            self._show_pending = None
            stylesheet = self.app.stylesheet
            self._styled = all(stylesheet.has_source(str(p), "") for p in self.css_path)
            self.app.push_screen(self)

    def post_message(self, message: Message) -> bool:
        # The ScreenResume of a push restyles every node of the screen (Textual's
        # ``refresh_styles``), each styled a moment before as it was mounted: 2-4 ms of every
        # open (issue 17). Left out when the app had this screen's CSS before the push (the
        # warm-up loads it), so nothing the nodes were styled with has changed since; on a
        # first push that loads it, the screen's own node was styled without it.
        if isinstance(message, events.ScreenResume) and self._styled:
            self._styled = False
            message = events.ScreenResume(refresh_styles=False)
        return super().post_message(message)

    def on_mount(self) -> None:
        self.timeline.focus()
        if not self._opening:  # pushed without ``open``
            # A long trace: its first steps paint at once, the rest follows (``show_trace``).
            self.load_trace(first_steps=FIRST_STEPS, around=self._initial_step)
        if not self._first_arrived:
            self._show_loading(True)

    def _show_loading(self, loading: bool) -> None:
        """A loading indicator over both panes while the first steps are on their way."""
        self.timeline.loading = loading
        self.detail.loading = loading

    def prepare_trace(self, trace: TraceJSON) -> list[StepRow]:
        """The timeline's rows, built in the worker."""
        return step_rows(trace["steps"], trace.get("annotations") or [])

    @on(TraceScreen.TraceLoaded)
    def show_trace(self, message: TraceScreen.TraceLoaded) -> None:
        trace = message.trace
        self.trace_id = str(trace["id"])
        self._steps = {step["step_number"]: step for step in trace["steps"]}
        self._parent_id = trace.get("parent_trace_id")
        self.refresh_bindings()  # `d` (diff against the parent) shows only for a fork
        header = self.query_one("#timeline-header", Static)
        header.update(trace_header(trace, message.step_count or len(message.prepared)))
        if not message.prepared:
            self.detail.empty_message = "This trace has no steps."
        self.sub_title = self.trace_id
        self._trace_running = trace.get("status") == "running"
        grown, self._reloading = self._reloading, False
        select = self._initial_step
        if self._partial:  # the whole trace after its first steps: the cursor stays
            pending, self._pending_jump = self._pending_jump, None
            select = pending if pending is not None else self.timeline.selected_step
        self._partial = not message.complete
        self.timeline.set_steps(message.prepared, select=select, grown=grown)
        # The selected step's detail now, not when StepSelected arrives: that message is
        # handled after the screen's first paint, which would show an empty detail pane.
        selected = self.timeline.selected_step
        if selected is not None:
            if self._detail_shown:
                self.detail.step = self._steps.get(selected)
            else:  # the screen's first frame, usually: the step's title paints with it
                self._detail_shown = True
                self.detail.show_title_first(self._steps.get(selected))
        self.mark_updated()
        self._show_loading(False)
        if self._partial:
            # Read the rest once the first steps are on screen (a worker reading 10,000 steps
            # beside the first paint would share the interpreter with it).
            self.call_after_refresh(self.load_whole_trace)

    def store_changed(self) -> None:
        """A running trace grows while it is open: read it again, the cursor kept."""
        if self._trace_running:
            self._initial_step = self.timeline.selected_step
            self._reloading = True
            self.load_trace()

    @on(TraceScreen.TraceLoadFailed)
    def leave_after_failure(self, message: TraceScreen.TraceLoadFailed) -> None:
        """Say why the trace can't be shown, then go back: there is nothing to show."""
        self._show_loading(False)
        self.notify(message.error, title="Cannot open the trace", severity="error", timeout=8)
        if self.is_current and len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    # --- selection --------------------------------------------------------------------

    @on(StepTimeline.StepSelected, "#step-timeline")
    def show_selected_step(self, message: StepTimeline.StepSelected) -> None:
        self.detail.step = self._steps.get(message.step_number)

    def watch_folded(self, folded: bool) -> None:
        self.detail.folded = folded

    # --- actions ----------------------------------------------------------------------

    def action_toggle_fold(self) -> None:
        self.folded = not self.folded

    def _selected(self) -> StepJSON | None:
        number = self.timeline.selected_step
        return None if number is None else self._steps.get(number)

    def action_copy(self, part: str) -> None:
        """Copy the selected step's input, or its output (its error when it has no output),
        to the clipboard (Textual's: OSC 52, so it works over SSH too)."""
        step = self._selected()
        if step is None:
            return
        value = step.get(part)
        if part == "output" and value is None and step.get("error"):
            part, value = "error", step["error"]
        if value is None:
            self.notify(f"Step {step['step_number']} has no {part}.", title="Copy", timeout=3)
            return
        text = value if isinstance(value, str) else json_text(value)
        self.app.copy_to_clipboard(text)
        self.notify(
            f"Step {step['step_number']} {part}: {len(text):,} characters",
            title="Copied",
            timeout=3,
        )

    def action_open_pager(self) -> None:
        """The selected step in full (JSON) in ``$PAGER``, else ``$EDITOR``, else ``less``."""
        import os
        import shlex
        import subprocess
        import tempfile

        from textual.app import SuspendNotSupported

        step = self._selected()
        if step is None:
            return
        command = os.environ.get("PAGER") or os.environ.get("EDITOR") or "less"
        with tempfile.NamedTemporaryFile(
            "w", suffix=".json", prefix=f"step-{step['step_number']}-", delete=False
        ) as handle:
            handle.write(json_text(step) + "\n")
        try:
            with self.app.suspend():
                subprocess.run([*shlex.split(command), handle.name], check=False)
        except (SuspendNotSupported, OSError) as exc:  # the web driver, tests; a missing pager
            self.notify(f"Cannot open {command}: {exc}", title="Pager", severity="warning")
        finally:
            os.unlink(handle.name)

    def action_annotate(self, scope: str) -> None:
        """Ask for a label (and a note) for the selected step or the run, then write it."""
        step = self.timeline.selected_step if scope == "step" else None
        if scope == "step" and step is None:
            return
        self.ask_annotation(self.trace_id, step)

    def annotated(self, trace_id: str, step: int | None, label: str) -> None:
        super().annotated(trace_id, step, label)
        self._initial_step = self.timeline.selected_step
        self.load_trace()

    def action_jump(self) -> None:
        if not self._steps:
            return
        numbers = list(self._steps)
        self.app.push_screen(JumpToStepModal(numbers[0], numbers[-1]), self._jump_to)

    def _jump_to(self, number: int | None) -> None:
        if number is None:
            return
        if not self.timeline.select_step(number):
            if self._partial:  # not loaded yet: selected when the rest arrives
                self._pending_jump = number
            else:
                self.notify(f"This trace has no step {number}.", title="Jump", severity="warning")
        self.timeline.focus()

    def action_open_tree(self) -> None:
        from agent_replay.screens.tree_why import TreeWhyScreen

        self.app.push_screen(TreeWhyScreen(self.trace_id, step=self.timeline.selected_step))

    def action_open_replay(self) -> None:
        from agent_replay.screens.replay import ReplayScreen

        self.app.push_screen(ReplayScreen(self.trace_id, at_step=self.timeline.selected_step))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "diff_parent":
            return self._parent_id is not None
        return True

    def action_open_fork_editor(self) -> None:
        from agent_replay.screens.fork_editor import ForkEditorScreen

        self.app.push_screen(ForkEditorScreen(self.trace_id, step=self.timeline.selected_step))

    def action_diff_parent(self) -> None:
        from agent_replay.screens.diff import DiffScreen

        if self._parent_id is not None:
            self.app.push_screen(DiffScreen(self._parent_id, self.trace_id))

    def action_rerun_command(self) -> None:
        """Print (notify) and copy the ``agent-replay proxy --replay`` command that re-runs
        the session from the selected llm_call step."""
        from agent_replay.errors import UsageError
        from agent_replay.services.proxy.rerun import rerun_command

        number = self.timeline.selected_step
        if number is None:
            return
        path = self.app.store.path
        trace = {"id": self.trace_id, "steps": list(self._steps.values())}
        try:
            command = rerun_command(trace, number, store_dir=str(path.parent) if path else None)
        except UsageError as exc:
            self.notify(str(exc), title="Re-run", severity="warning")
            return
        self.app.copy_to_clipboard(command)
        self.notify(
            f"{command}\nthen point the agent at http://127.0.0.1:8787 (copied)",
            title=f"Re-run from step {number}",
            timeout=15,
        )

    def action_open_evals(self) -> None:
        from agent_replay.screens.evals import EvalsScreen

        self.app.push_screen(EvalsScreen(self.trace_id, step=self.timeline.selected_step))
