"""App-wide modals: ``HelpModal`` (``?``: what the icons and colours mean, and every key of the
screen underneath).

A TUI module: imports Textual, never the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from agent_replay.screens.base import PlainToasts
from agent_replay.widgets.status import status_style
from agent_replay.widgets.step_timeline import STEP_COLORS, STEP_ICONS

MARKERS: tuple[tuple[str, str, str], ...] = (
    ("◉", "$text-muted", "the step has a state snapshot (context window, environment, tools)"),
    ("◆", "$text-accent", "a decision was recorded at the step (options, choice, rationale)"),
    ("✗", "$text-error", "the step failed (its error is in the detail)"),
    ("⊘", "$text-warning", "a guard check blocked the action (hook --enforce)"),
    ("○", "$text-warning", "not re-run: a fork's step whose recorded outcome was not copied"),
    ("⋯", "$text-accent", "still open: the step started and has not ended (live watch)"),
    ("⑂", "$text-secondary", "a fork of another trace (d diffs it against its parent)"),
    ("▾ ▸", "$text-muted", "steps nested under this one, shown or folded (z)"),
    ("A B", "$text-warning", "the traces marked for a diff (m)"),
)
"""The markers rows and cells carry: (glyph, colour, meaning)."""

STATUSES: tuple[tuple[str, str], ...] = (
    ("completed", "the run finished"),
    ("failed", "the run ended with an error"),
    ("timeout", "the run was cut off, or its writer died"),
    ("running", "still being recorded"),
    ("forked", "a fork: a what-if copy, never run past its fork step"),
)
"""Trace statuses and what they mean (drawn in their one look: ``widgets.status``)."""


def help_content(keys: Iterable[tuple[str, str]]) -> Content:
    """The modal's text: the screen's keys, then step icons, markers and statuses."""
    lines: list[Content] = [Content.styled("Keys of this screen", "bold")]
    for key, description in keys:
        lines.append(Content.assemble((f"  {key:>9}  ", "bold $text-accent"), description))
    lines += [Content(""), Content.styled("Step types", "bold")]
    for step_type, icon in STEP_ICONS.items():
        lines.append(Content.assemble((f"  {icon}  {step_type}", STEP_COLORS[step_type])))
    lines += [Content(""), Content.styled("Markers", "bold")]
    for glyph, colour, meaning in MARKERS:
        lines.append(Content.assemble((f"  {glyph:>3}  ", f"bold {colour}"), meaning))
    lines += [Content(""), Content.styled("Statuses", "bold")]
    for status, meaning in STATUSES:
        lines.append(
            Content.assemble((f"  {status:<10}", status_style(status, bold=True)), meaning)
        )
    lines += [
        Content(""),
        Content.styled(
            "Esc closes the topmost thing first (a notification, this help, a panel), then "
            "the screen. ctrl+p lists every command with its key.",
            "$text-muted",
        ),
    ]
    return Content("\n").join(lines)


class HelpModal(PlainToasts, ModalScreen[None]):
    """``?``: the keys of the screen underneath and what every icon and colour means."""

    TITLE = "Help"
    DEFAULT_CSS = """
    HelpModal {
        align: center middle;
        & > #help-dialog {
            width: 84;
            max-width: 100%;
            height: auto;
            max-height: 90%;
            padding: 0 2;
            border: round $accent;
            border-title-color: $text-accent;
            border-title-style: bold;
            background: $panel;
        }
    }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="help-close", tooltip="Close the help"),
        Binding("question_mark", "close", "Close", id="help-close-again", show=False),
        Binding("q", "close", "Close", id="help-close-q", show=False),
    ]

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        """Args:
        keys: (key, what it does) for every key of the screen underneath.
        """
        super().__init__()
        self.keys = keys
        """What the modal lists under "Keys of this screen"."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-dialog") as dialog:
            dialog.border_title = "Help · Esc closes"
            yield Static(help_content(self.keys), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)


class AnnotateModal(PlainToasts, ModalScreen[tuple[str, str | None] | None]):
    """``a``: a label (and an optional note) for a trace or a step; dismisses with
    ``(label, note)``, or ``None`` when cancelled."""

    TITLE = "Annotate"
    DEFAULT_CSS = """
    AnnotateModal {
        align: center middle;
        & > #annotate-dialog {
            width: 64;
            max-width: 100%;
            height: auto;
            padding: 1 2;
            border: round $accent;
            border-title-color: $text-accent;
            border-title-style: bold;
            background: $panel;
        }
        & #annotate-label, & #annotate-note { margin-top: 1; }
        & #annotate-hint { color: $text-muted; margin-top: 1; }
    }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="annotate-cancel", tooltip="Close unsaved"),
    ]

    def __init__(self, target: str) -> None:
        """Args:
        target: what is annotated, as the dialog names it ("step 6 of trc_…").
        """
        super().__init__()
        self.target = target
        """What the annotation is about (shown in the dialog's title)."""

    def compose(self) -> ComposeResult:
        from textual.containers import Vertical
        from textual.widgets import Input

        with Vertical(id="annotate-dialog") as dialog:
            dialog.border_title = f"Annotate {self.target}"
            yield Input(
                placeholder="label: good, bad, wrong-tool, needs-review…", id="annotate-label"
            )
            yield Input(placeholder="note (optional)", id="annotate-note")
            yield Static(
                Content("Enter: the note, Enter again: save (redacted, as every write) · Esc"),
                id="annotate-hint",
            )

    def on_input_submitted(self, event: Any) -> None:
        from textual.widgets import Input

        if event.input.id == "annotate-label" and event.input.value.strip():
            self.query_one("#annotate-note", Input).focus()  # the note next, then save
            return
        label = self.query_one("#annotate-label", Input).value.strip()
        note = self.query_one("#annotate-note", Input).value.strip() or None
        if not label:
            self.notify("A label is needed.", title="Annotate", severity="warning")
            self.query_one("#annotate-label", Input).focus()
            return
        self.dismiss((label, note))

    def action_cancel(self) -> None:
        self.dismiss(None)
