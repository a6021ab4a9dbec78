"""``PolicyForm``: the fields of a new guard policy, validated as they are typed, with a
preview of the steps of a chosen trace the pattern matches.

Validation is ``services.guard.policy`` (what ``guard add`` applies), run on every change: it
is pure and fast (a JSON parse, at most one cached RE2 compile), so it runs on the UI thread.
Anything that needs the store (the traces to preview on, their steps) or may be slow (matching
thousands of steps) is the owning screen's job, in thread workers: the form posts
``PolicyForm.Changed`` and ``PolicyForm.TraceChosen`` and is handed results with
``set_traces`` and ``show_preview``.

A TUI module: imports Textual, never the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Checkbox, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from agent_replay.display import safe, truncate
from agent_replay.services.guard.policy import (
    ACTIONS,
    PolicyError,
    parse_pattern,
    validate_action,
    validate_name,
)
from agent_replay.widgets.step_timeline import STEP_ICONS

PREVIEW_LIMIT = 500
"""Matching steps listed in the preview (the count covers them all)."""


@dataclass(frozen=True)
class PolicyDraft:
    """A policy as typed into the form, validated."""

    name: str
    pattern: dict[str, str]
    action: str
    priority: int
    description: str | None
    fail_open: bool


@dataclass(frozen=True)
class PreviewStep:
    """One step of the preview trace that the pattern matches."""

    number: int
    step_type: str
    name: str
    """Escaped for the terminal."""


class PolicyForm(Vertical):
    """Name, action, priority, fail mode, pattern, description; live validation; preview."""

    DEFAULT_CSS = """
    PolicyForm {
        height: auto;
        & .form-row { height: auto; }
        & .form-label { width: 13; padding: 1 1 0 0; color: $text-muted; }
        & Input { width: 1fr; }
        & #form-action { width: 24; }
        & #form-priority-label { width: auto; padding: 1 1 0 2; }
        & #form-priority { width: 12; }
        & #form-fail-open { margin-left: 2; }
        & #form-trace { width: 1fr; }
        & #form-validation { height: auto; padding: 0 1 0 14; }
        & #form-validation.-invalid { color: $text-error; }
        & #form-validation.-valid { color: $text-success; }
        & #form-preview-title { height: 1; padding: 0 1 0 14; color: $text-muted; }
        & #form-preview { height: 7; margin-left: 13; border: round $foreground 20%; }
    }
    """

    @dataclass
    class Changed(Message):
        """A field changed: ``draft`` is the valid policy, or ``None`` with ``error``."""

        draft: PolicyDraft | None
        error: str | None
        form: PolicyForm | None = field(default=None, repr=False, compare=False)

        @property
        def control(self) -> PolicyForm | None:
            return self.form

    @dataclass
    class TraceChosen(Message):
        """The trace to preview on was chosen (``None``: no preview)."""

        trace_id: str | None
        form: PolicyForm | None = field(default=None, repr=False, compare=False)

        @property
        def control(self) -> PolicyForm | None:
            return self.form

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.draft: PolicyDraft | None = None
        """The valid policy typed so far (``None`` while something is invalid)."""
        self.error: str | None = "give the policy a name"
        """Why the form is not valid yet."""

    def compose(self) -> ComposeResult:
        with Horizontal(classes="form-row"):
            yield Label("Name", classes="form-label")
            yield Input(placeholder="block-destructive-tools", id="form-name")
        with Horizontal(classes="form-row"):
            yield Label("Action", classes="form-label")
            yield Select(
                [(action, action) for action in reversed(ACTIONS)],
                value="deny",
                allow_blank=False,
                id="form-action",
            )
            yield Label("Priority", id="form-priority-label")
            yield Input("0", type="integer", id="form-priority")
            yield Checkbox("fail open", id="form-fail-open")
        with Horizontal(classes="form-row"):
            yield Label("Pattern", classes="form-label")
            yield Input(
                placeholder='{"step_type": "tool_call", "name_regex": "(?i)delete|drop"}',
                id="form-pattern",
            )
        with Horizontal(classes="form-row"):
            yield Label("Description", classes="form-label")
            yield Input(placeholder="why this policy exists (optional)", id="form-description")
        yield Static("", id="form-validation", markup=False)
        with Horizontal(classes="form-row"):
            yield Label("Preview on", classes="form-label")
            yield Select([], prompt="no trace", id="form-trace")
        yield Static("", id="form-preview-title", markup=False)
        yield OptionList(id="form-preview")

    def on_mount(self) -> None:
        self.validate_now()

    # --- validation -------------------------------------------------------------------

    def _value(self, selector: str) -> str:
        return self.query_one(selector, Input).value

    def validate_now(self) -> None:
        """Validate every field and post ``Changed``."""
        draft, error = None, None
        try:
            draft = self._draft()
        except PolicyError as exc:
            error = str(exc)
        self.draft, self.error = draft, error
        label = self.query_one("#form-validation", Static)
        label.set_class(error is not None, "-invalid")
        label.set_class(error is None, "-valid")
        label.update(Content("✗ " + safe(error)) if error else Content("✓ ready to save"))
        self.post_message(self.Changed(draft, error, self))

    def _draft(self) -> PolicyDraft:
        name = validate_name(self._value("#form-name"))
        text = self._value("#form-pattern")
        if not text.strip():
            raise PolicyError("type a pattern, a JSON object")
        pattern = parse_pattern(text)
        action = validate_action(self.query_one("#form-action", Select).value)
        priority_text = self._value("#form-priority").strip() or "0"
        try:
            priority = int(priority_text)
        except ValueError:
            raise PolicyError(
                f"the priority must be a whole number (got {priority_text!r})"
            ) from None
        description = self._value("#form-description").strip() or None
        fail_open = self.query_one("#form-fail-open", Checkbox).value
        return PolicyDraft(name, pattern, action, priority, description, fail_open)

    @on(Input.Changed)
    @on(Select.Changed, "#form-action")
    @on(Checkbox.Changed)
    def _field_changed(self, event: Message) -> None:
        event.stop()
        self.validate_now()

    @on(Select.Changed, "#form-trace")
    def _trace_changed(self, event: Select.Changed) -> None:
        event.stop()
        value = event.value
        self.post_message(self.TraceChosen(value if isinstance(value, str) else None, self))

    # --- data from the owner ----------------------------------------------------------

    def set_traces(self, traces: Sequence[tuple[str, str]], *, select: str | None = None) -> None:
        """The traces to preview on, as ``(label, trace id)`` (newest first)."""
        chooser = self.query_one("#form-trace", Select)
        chooser.set_options([(Content(label), trace_id) for label, trace_id in traces])
        if select is not None and any(trace_id == select for _, trace_id in traces):
            chooser.value = select

    def show_preview(self, matches: Sequence[PreviewStep] | None, total: int = 0) -> None:
        """The steps of the preview trace that match (``None``: nothing to preview)."""
        title = self.query_one("#form-preview-title", Static)
        listing = self.query_one("#form-preview", OptionList)
        listing.clear_options()
        if matches is None:
            title.update(Content("Choose a trace and type a valid pattern to preview it."))
            return
        noun = "step" if total == 1 else "steps"
        title.update(Content(f"{len(matches):,} of {total:,} {noun} match"))
        listing.add_options(
            [_preview_option(step) for step in matches[:PREVIEW_LIMIT]]
            + (
                [Option(Content(f"… and {len(matches) - PREVIEW_LIMIT:,} more"), disabled=True)]
                if len(matches) > PREVIEW_LIMIT
                else []
            )
        )

    @property
    def preview_lines(self) -> list[str]:
        """The preview as plain text lines (for tests)."""
        listing = self.query_one("#form-preview", OptionList)
        return [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]


def _preview_option(step: PreviewStep) -> Option:
    icon = STEP_ICONS.get(step.step_type, "·")
    prompt = Content.assemble(
        (f"#{step.number:<5}", "$text-muted"),
        f"{icon} {step.step_type:<12}",
        truncate(step.name or "—", 60),
    )
    return Option(prompt, id=f"step-{step.number}")


def preview_steps(pattern: dict[str, str], steps: Sequence[dict[str, Any]]) -> list[PreviewStep]:
    """The steps ``pattern`` matches (runs in the owner's worker)."""
    from agent_replay.services.guard.match import StepText, pattern_matches

    found = []
    for step in steps:
        if pattern_matches(pattern, StepText.from_step(step)):
            found.append(
                PreviewStep(
                    int(step["step_number"]), str(step["step_type"]), safe(step.get("name") or "")
                )
            )
    return found
