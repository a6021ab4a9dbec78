"""App-wide modals: ``HelpModal`` (``?``: what the icons and colours mean, and every key of the
screen underneath).

A TUI module: imports Textual, never the store.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

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

STATUSES: tuple[tuple[str, str, str], ...] = (
    ("completed", "$text-success", "the run finished"),
    ("failed", "$text-error", "the run ended with an error"),
    ("timeout", "$text-warning", "the run was cut off, or its writer died"),
    ("running", "$text-accent", "still being recorded"),
    ("forked", "$text-secondary", "a fork: a what-if copy, never run past its fork step"),
)
"""Trace statuses and their colours (one look each: a fork is not a failure)."""


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
    for status, colour, meaning in STATUSES:
        lines.append(Content.assemble((f"  {status:<10}", f"bold {colour}"), meaning))
    lines += [
        Content(""),
        Content.styled(
            "Esc closes the topmost thing first (a notification, this help, a panel), then "
            "the screen. ctrl+p lists every command with its key.",
            "$text-muted",
        ),
    ]
    return Content("\n").join(lines)


class HelpModal(ModalScreen[None]):
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
