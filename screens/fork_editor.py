"""The fork editor: pick a step, edit its input as JSON, save the fork, land on its diff.

The trace loads in a thread worker (``TraceScreen``). Picking a step in the list puts that
step's recorded input in the editor (``services.fork.fork_point_input``; the step edit of
``fork --modify-step-input``, which the run's own input is not: that is ``--modify-input``).
Every change is validated on the spot with the
CLI's own parser (``parse_modification``): an error names its line and column and Save stays
disabled until the JSON parses. Beside the editor, the input the fork would get
(``apply_edit``, under the merge/replace toggle) and what that changes against the recorded
one. Edits are kept per step while another step is looked at.

Saving (ctrl+s) writes the fork in a thread worker (``services.fork.fork_trace``: a new trace
with the parent's steps before N and step N with the edited input, status ``forked``), posts
``ForkEditorScreen.ForkSaved``, and replaces the editor with ``DiffScreen(parent, fork)``,
which shows exactly the modification.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import (
    Button,
    OptionList,
    RadioButton,
    RadioSet,
    Static,
    TextArea,
)
from textual.widgets.option_list import Option

from agent_replay.display import safe
from agent_replay.errors import AgentReplayError, UsageError
from agent_replay.screens.base import TraceScreen
from agent_replay.services.diff import json_differences
from agent_replay.services.fork import (
    EditMode,
    ForkResult,
    InputEdit,
    apply_edit,
    fork_point_input,
    parse_modification,
)
from agent_replay.trace.io import dumps_bytes
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.pair_detail import field_diff_lines
from agent_replay.widgets.step_detail import json_text
from agent_replay.widgets.step_timeline import STEP_COLORS, STEP_ICONS
from agent_replay.widgets.title_bar import TitleBar

if TYPE_CHECKING:
    from agent_replay.store.shapes import TraceJSON

_MUTED = "$text-muted"
_JSON_ERROR = re.compile(r"not valid JSON: (?P<why>.*): line (?P<line>\d+) column (?P<column>\d+)")
# C1 controls and DEL are legal raw inside JSON strings; the editor shows them as \u escapes
# (the same value), so producer text never reaches the terminal as control codes.
_RAW_CONTROLS = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}
MODE_HELP: dict[str, str] = {
    "merge": "merge: the JSON is a merge patch (RFC 7386): keys given replace the recorded ones, "
    "null deletes a key, the rest stay",
    "replace": "replace: the input becomes exactly this JSON",
}
MAX_CHANGES_SHOWN = 8
"""Changes listed above the preview (the preview itself shows everything)."""


def editable_json(value: Any) -> str:
    """A JSON value as the editor's text: indented two spaces, control characters escaped."""
    return dumps_bytes(value, indent=True).decode().translate(_RAW_CONTROLS)


def describe_json_error(message: str) -> tuple[str, int | None, int | None]:
    """The parser's message made short, and the line and column it names (if any)."""
    found = _JSON_ERROR.search(message)
    if found is None:
        if "empty" in message:
            return 'Empty: type a JSON value, e.g. {"key": 1}', None, None
        return message, None, None
    line, column = int(found["line"]), int(found["column"])
    return f"Line {line}, column {column}: {found['why']}", line, column


@dataclass(frozen=True, slots=True)
class StepChoice:
    """One entry of the step list."""

    number: int
    step_type: str
    name: str
    """Already escaped."""


class ForkEditorScreen(TraceScreen):
    """Fork a trace at a step with an edited input, then compare the fork with its parent."""

    TITLE = "Fork editor"
    CSS_PATH = "fork_editor.tcss"
    BINDINGS = [
        Binding(
            "escape",
            "app.pop_screen",
            "Back",
            id="back",
            tooltip="Leave without forking",
            priority=True,
        ),
        Binding(
            "ctrl+n",
            "next_field",
            "Next field",
            id="next-field",
            tooltip="Leave the editor for the next control (Tab indents inside the editor)",
            priority=True,
        ),
        Binding(
            "ctrl+s",
            "save",
            "Save fork",
            id="save-fork",
            tooltip="Write the fork and show its diff against the parent",
        ),
        Binding(
            "ctrl+t",
            "toggle_mode",
            "Merge/replace",
            id="edit-mode",
            tooltip="Merge the JSON into the recorded input, or replace it",
        ),
        Binding(
            "ctrl+r",
            "reset_input",
            "Reset",
            id="reset-input",
            tooltip="Put the step's recorded input back in the editor",
        ),
    ]

    step: reactive[int | None] = reactive(None, init=False)
    """The step the fork is made at (N)."""
    mode: reactive[EditMode] = reactive("merge", init=False)
    """How the edit applies: ``merge`` (JSON Merge Patch) or ``replace``."""
    valid: reactive[bool] = reactive(False, init=False)
    """Whether the editor holds valid JSON (Save is disabled otherwise)."""

    @dataclass
    class ForkSaved(Message):
        """The fork was written."""

        result: ForkResult
        """The fork as written (its full id in ``result.trace_id``)."""

    @dataclass
    class ForkFailed(Message):
        """The fork could not be written."""

        error: str

    def __init__(self, trace_id: str, step: int | None = None) -> None:
        """Args:
        trace_id: the trace to fork (an id or unique prefix).
        step: the step to fork at (default: the first step).
        """
        super().__init__(trace_id)
        self._initial_step = step
        self._trace: TraceJSON | None = None
        self._original: Any = None
        self._drafts: dict[int, str] = {}
        self._edit: InputEdit | None = None
        self._saving = False
        self.error_position: tuple[int, int] | None = None
        """Where the JSON error is (line, column), when the editor holds invalid JSON."""

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static(Content(f"Fork {safe(self.trace_id)}"), id="fork-header")
        with Horizontal(id="fork-body"):
            yield OptionList(id="fork-steps")
            with Vertical(id="fork-edit"):
                yield TextArea(
                    id="fork-input",
                    language="json",
                    soft_wrap=True,
                    show_line_numbers=True,
                    tab_behavior="indent",  # Tab indents JSON; ctrl+n moves on
                )
                yield Static("", id="fork-validation")
            with Vertical(id="fork-result"):
                yield Static("", id="fork-changes")
                with VerticalScroll(id="fork-preview"):
                    yield Static("", id="fork-preview-text")
        with Horizontal(id="fork-actions"):
            with RadioSet(id="fork-mode"):
                yield RadioButton("merge", value=True, id="mode-merge")
                yield RadioButton("replace", id="mode-replace")
            yield Static(Content(MODE_HELP["merge"]), id="fork-mode-help")
            yield Button("Save fork", id="fork-save", variant="primary", disabled=True)
        yield KeyBar()

    @property
    def editor(self) -> TextArea:
        return self.query_one("#fork-input", TextArea)

    @property
    def steps_list(self) -> OptionList:
        return self.query_one("#fork-steps", OptionList)

    @property
    def save_button(self) -> Button:
        return self.query_one("#fork-save", Button)

    def action_next_field(self) -> None:
        """Move focus on: Tab belongs to the editor (it indents), so this is the way out."""
        self.focus_next()

    def on_mount(self) -> None:
        self.steps_list.border_title = "Fork at step"
        self.query_one("#fork-preview").border_title = "The fork's input"
        self.query_one("#fork-changes").border_title = "Changes"
        self.query_one("#fork-body").loading = True
        self.load_trace()

    # --- loading ----------------------------------------------------------------------

    def prepare_trace(self, trace: TraceJSON) -> list[StepChoice]:
        """The step list's entries, built in the worker."""
        return [
            StepChoice(int(s["step_number"]), str(s["step_type"]), safe(s.get("name") or ""))
            for s in trace["steps"]
        ]

    @on(TraceScreen.TraceLoaded)
    def show_trace(self, message: TraceScreen.TraceLoaded) -> None:
        trace = message.trace
        self._trace = trace
        self.trace_id = str(trace["id"])
        choices: list[StepChoice] = message.prepared
        self.query_one("#fork-body").loading = False
        if not choices:
            self._show_header(None)
            self._show_validation(Content.styled("This trace has no steps to fork.", _MUTED))
            return
        width = len(str(choices[-1].number))
        self.steps_list.add_options(
            Option(
                Content.assemble(
                    (f"{c.number:>{width}} ", _MUTED),
                    (f"{STEP_ICONS.get(c.step_type, '·')} ", STEP_COLORS.get(c.step_type, "")),
                    c.name or "—",
                ),
                id=f"step-{c.number}",
            )
            for c in choices
        )
        numbers = [c.number for c in choices]
        wanted = self._initial_step if self._initial_step is not None else numbers[0]
        if wanted not in numbers:
            self.notify(
                f"This trace has no step {wanted}; forking at step {numbers[0]}.",
                title="Fork",
                severity="warning",
            )
            wanted = numbers[0]
        self.steps_list.highlighted = numbers.index(wanted)
        self._select_step(wanted)
        self.editor.focus()

    @on(TraceScreen.TraceLoadFailed)
    def leave_after_failure(self, message: TraceScreen.TraceLoadFailed) -> None:
        """Say why the trace can't be forked, then go back."""
        self.query_one("#fork-body").loading = False
        self.notify(message.error, title="Cannot fork", severity="error", timeout=8)
        if self.is_current and len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    # --- the step ---------------------------------------------------------------------

    @on(OptionList.OptionHighlighted, "#fork-steps")
    def pick_step(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id is not None:
            self._select_step(int(event.option.id.removeprefix("step-")))

    def _select_step(self, number: int) -> None:
        """Fork at ``number``: put its input (or the draft made for it) in the editor."""
        if self._trace is None or number == self.step:
            return
        if self.step is not None:
            self._drafts[self.step] = self.editor.text
        self._original = fork_point_input(self._trace, number)
        self.step = number
        self.editor.load_text(self._drafts.get(number) or editable_json(self._original))
        self.editor.border_title = f"Step {number}'s input (JSON)"
        self._show_header(number)
        self.validate_input()

    def _show_header(self, number: int | None) -> None:
        trace: Mapping[str, Any] = self._trace or {}
        agent = safe(trace.get("agent_name") or "")
        first = Content.assemble(
            ("Fork ", "bold"),
            (self.trace_id, "bold"),
            ("  ·  ", _MUTED),
            (agent, "bold $text-primary"),
        )
        if number is None:
            self.query_one("#fork-header", Static).update(first)
            return
        step = next(s for s in trace["steps"] if s["step_number"] == number)
        step_type = str(step["step_type"])
        first = Content.assemble(
            first,
            ("  ·  at step ", _MUTED),
            (str(number), "bold"),
            "  ",
            (f"{STEP_ICONS.get(step_type, '·')} {step_type} ", STEP_COLORS.get(step_type, "")),
            (safe(step.get("name") or "—"), "bold"),
        )
        kept = f"steps 1–{number - 1} as recorded and " if number > 1 else ""
        what = (
            f"The fork keeps {kept}step {number} with the edited input but not its "
            "recorded outcome (not re-run), and stops there (status forked)."
        )
        self.query_one("#fork-header", Static).update(
            Content("\n").join([first, Content.styled(what, _MUTED)])
        )

    # --- validation and preview -------------------------------------------------------

    @on(TextArea.Changed, "#fork-input")
    def input_changed(self) -> None:
        self.validate_input()

    def validate_input(self) -> None:
        """Parse the editor's JSON; show the error or the resulting input and its changes."""
        if self.step is None:
            return
        try:
            value = parse_modification(self.editor.text, allow_file=False)
        except UsageError as exc:
            why, line, column = describe_json_error(exc.message)
            self.error_position = (line, column) if line and column else None
            self._edit = None
            self.valid = False
            self._show_validation(
                Content.assemble(("✗ ", "bold $text-error"), (why, "$text-error"))
            )
            self.editor.add_class("-invalid")
            self.query_one("#fork-changes", Static).update(
                Content.styled("Waiting for valid JSON: below, the last valid input.", _MUTED)
            )
            return
        self.error_position = None
        self._edit = InputEdit(value, self.mode)
        self.valid = True
        self.editor.remove_class("-invalid")
        self._show_validation(Content.assemble(("✓ ", "bold $text-success"), ("Valid JSON", "")))
        self._show_result(apply_edit(self._original, self._edit))

    def _show_validation(self, content: Content) -> None:
        self.query_one("#fork-validation", Static).update(content)

    def _show_result(self, new_input: Any) -> None:
        changes, more = json_differences(self._original, new_input, "input", "input")
        width = max(20, self.query_one("#fork-changes").content_region.width or 40)
        if not changes:
            summary = Content.styled(
                f"No change yet: step {self.step}'s input stays as recorded.", _MUTED
            )
        else:
            total = len(changes) + more
            lines = [
                Content.styled(f"{total:,} change{'s' * (total != 1)} to the input", "bold"),
                *field_diff_lines(changes[:MAX_CHANGES_SHOWN], width, ("was", "now")),
            ]
            if total > MAX_CHANGES_SHOWN:
                lines.append(Content.styled(f"… {total - MAX_CHANGES_SHOWN:,} more", _MUTED))
            summary = Content("\n").join(lines)
        self.query_one("#fork-changes", Static).update(summary)
        if isinstance(new_input, str):
            preview = Content(safe(new_input, multiline=True))
        else:
            preview = highlight(json_text(new_input), language="json")
        self.query_one("#fork-preview-text", Static).update(preview)

    def watch_valid(self, valid: bool) -> None:
        self.save_button.disabled = not valid or self._saving
        self.refresh_bindings()

    def watch_mode(self, mode: EditMode) -> None:
        self.query_one(f"#mode-{mode}", RadioButton).value = True
        self.query_one("#fork-mode-help", Static).update(Content(MODE_HELP[mode]))
        self.validate_input()

    @on(RadioSet.Changed, "#fork-mode")
    def change_mode(self, event: RadioSet.Changed) -> None:
        self.mode = "replace" if event.pressed.id == "mode-replace" else "merge"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "save":
            return True if self.valid and not self._saving else None
        return True

    # --- actions ----------------------------------------------------------------------

    def action_toggle_mode(self) -> None:
        self.mode = "replace" if self.mode == "merge" else "merge"

    def action_reset_input(self) -> None:
        if self.step is not None:
            self._drafts.pop(self.step, None)
            self.editor.load_text(editable_json(self._original))

    @on(Button.Pressed, "#fork-save")
    def save_pressed(self) -> None:
        self.action_save()

    def action_save(self) -> None:
        """Write the fork (in a worker); ``ForkSaved`` follows."""
        if not self.valid or self._saving or self.step is None or self._edit is None:
            return
        self._saving = True
        self.save_button.disabled = True
        self.save_button.label = "Saving…"
        self.refresh_bindings()
        self._save_fork(self.trace_id, self.step, self._edit)

    @work(thread=True, exclusive=True, exit_on_error=False, group="fork", description="fork")
    def _save_fork(self, trace_id: str, step: int, edit: InputEdit) -> None:
        from agent_replay.services.fork import fork_trace

        app: Any = self.app
        try:
            with app.store.db.connection_context():
                result = fork_trace(app.store, trace_id, step, edit, clock=app.clock)
        except AgentReplayError as exc:
            self.post_message(self.ForkFailed(exc.message))
            return
        self.post_message(self.ForkSaved(result))

    @on(ForkSaved)
    def show_fork_diff(self, message: ForkSaved) -> None:
        """Replace the editor with the diff of the fork against its parent."""
        from agent_replay.screens.diff import DiffScreen

        result = message.result
        self.notify(f"Forked as {result.trace_id}", title="Fork saved", timeout=4)
        self.app.switch_screen(DiffScreen(result.parent_trace_id, result.trace_id))

    @on(ForkFailed)
    def show_fork_failure(self, message: ForkFailed) -> None:
        self._saving = False
        self.save_button.label = "Save fork"
        self.save_button.disabled = not self.valid
        self.refresh_bindings()
        self.notify(message.error, title="Cannot fork", severity="error", timeout=8)
