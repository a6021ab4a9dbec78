"""``PairDetail``: everything that differs in the highlighted line of a ``DiffView`` (both
steps, the metric changes, then each differing field as excerpts around the first differing
character), and ``field_diff_lines``, which the fork editor's preview shares.

A TUI module: imports Textual, never the store. Producer text is escaped with
``display.safe`` and shown as plain ``Content``, never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from agent_replay.display import fmt_cost, fmt_int, fmt_ms, preview, safe
from agent_replay.services.diff import FieldDiff, StepPair, TraceDiff
from agent_replay.services.outcome import outcome_note
from agent_replay.widgets.diff_view import (
    KIND_COLORS,
    MARKS,
    DiffRow,
    change_style,
    line_change,
    signed_cost,
    signed_int,
    signed_ms,
)
from agent_replay.widgets.step_timeline import STEP_COLORS, STEP_ICONS

_MUTED = "$text-muted"
_KIND_WORDS = {
    "matched": "matched",
    "changed": "changed",
    "inserted": "inserted (only in B)",
    "deleted": "deleted (only in A)",
}


def _step_label(step: dict[str, Any] | None, side: str) -> Content:
    if step is None:
        return Content.styled(f"{side} —", _MUTED)
    step_type = str(step.get("step_type"))
    return Content.assemble(
        (f"{side}#{step['step_number']} ", "bold"),
        (f"{STEP_ICONS.get(step_type, '·')} {step_type} ", STEP_COLORS.get(step_type, "")),
        (safe(step.get("name") or "—"), "bold"),
    )


def _metric(label: str, a: str, b: str, change: str, change_value: float | None) -> Content:
    parts: list[tuple[str, str] | str] = [(label + " ", _MUTED), a, (" → ", _MUTED), b]
    if change:
        parts.append((f" ({change})", change_style(change_value)))
    return Content.assemble(*parts)


def field_diff_lines(
    differences: Sequence[FieldDiff], width: int, labels: tuple[str, str] = ("A", "B")
) -> list[Content]:
    """Each difference as its path and kind, then A's and B's values (one-line excerpts cut
    around the first differing character, escaped). ``labels`` name the two sides."""
    lines: list[Content] = []
    size = max(len(label) for label in labels)
    a_label, b_label = (f" {label.ljust(size)}  " for label in labels)
    room = max(10, width - len(a_label))
    for diff in differences:
        a_text, b_text = diff.context(room)
        kind_style = {"changed": "$text-warning", "added": "$text-success"}.get(
            diff.kind, "$text-error"
        )
        lines.append(Content.assemble((safe(diff.path), "bold"), "  ", (diff.kind, kind_style)))
        if diff.kind != "added":
            lines.append(Content.assemble((a_label, "bold $text-error"), safe(a_text)))
        if diff.kind != "removed":
            lines.append(Content.assemble((b_label, "bold $text-success"), safe(b_text)))
    return lines


def _lone_step_lines(step: dict[str, Any], width: int) -> list[Content]:
    lines: list[Content] = []
    room = max(10, width - 8)
    for key in ("error", "input", "output"):
        value = step.get(key)
        if value is None:
            continue
        style = "$text-error" if key == "error" else ""
        lines.append(Content.assemble((f"{key:<7} ", _MUTED), (preview(value, room), style)))
    return lines


def pair_content(pair: StepPair, width: int) -> Content:
    """Everything about one pair: both steps, the metric changes, then each difference."""
    lines: list[Content] = [
        Content.assemble(
            (f"{MARKS[pair.kind]} {_KIND_WORDS[pair.kind]}", f"bold {KIND_COLORS[pair.kind]}"),
            "   ",
            _step_label(pair.a, "A"),
            ("  ↔  ", _MUTED),
            _step_label(pair.b, "B"),
        )
    ]
    metrics: list[Content] = []
    tokens = line_change(pair.kind, pair.tokens.a, pair.tokens.b)
    if pair.tokens.a is not None or pair.tokens.b is not None:
        metrics.append(
            _metric(
                "tokens",
                fmt_int(_as_int(pair.tokens.a)),
                fmt_int(_as_int(pair.tokens.b)),
                signed_int(tokens),
                tokens,
            )
        )
    duration = line_change(pair.kind, pair.duration_ms.a, pair.duration_ms.b)
    if pair.duration_ms.a is not None or pair.duration_ms.b is not None:
        metrics.append(
            _metric(
                "time",
                fmt_ms(pair.duration_ms.a),
                fmt_ms(pair.duration_ms.b),
                signed_ms(duration),
                duration,
            )
        )
    cost = line_change(pair.kind, pair.cost_usd.a, pair.cost_usd.b)
    if pair.cost_usd.a is not None or pair.cost_usd.b is not None:
        metrics.append(
            _metric(
                "cost",
                fmt_cost(pair.cost_usd.a),
                fmt_cost(pair.cost_usd.b),
                signed_cost(cost),
                cost,
            )
        )
    if metrics:
        lines.append(Content.styled(" · ", _MUTED).join(metrics))
    for label, step in (("A", pair.a), ("B", pair.b)):
        note = outcome_note(step)
        if note:
            lines.append(
                Content.styled(
                    f"○ {label}#{step['step_number'] if step else ''} {note}: its recorded "
                    "outcome is not a result of the fork",
                    "italic $text-warning",
                )
            )
    lines.append(Content(""))
    if pair.kind == "changed":
        lines.extend(field_diff_lines(pair.differences, width))
        if pair.truncated:
            lines.append(Content.styled(f"… {pair.truncated:,} more difference(s)", _MUTED))
    elif pair.kind == "matched":
        lines.append(Content.styled("Same name, input, output, error, model and decision.", _MUTED))
    else:
        if pair.moved_from is not None:
            lines.append(Content.styled(f"The same step is A#{pair.moved_from}: moved.", _MUTED))
        elif pair.moved_to is not None:
            lines.append(Content.styled(f"The same step is B#{pair.moved_to}: moved.", _MUTED))
        lines.extend(_lone_step_lines(pair.step, width))
    return Content("\n").join(lines)


def trace_content(diff: TraceDiff, part: Literal["input", "outcome"], width: int) -> Content:
    """The differences of the traces themselves: their input, or their output/status/error."""
    found = [d for d in diff.trace_differences if (d.field == "input") == (part == "input")]
    title = "The trace input differs" if part == "input" else "The trace outcome differs"
    lines = [Content.styled(f"~ {title}", "bold $text-warning"), Content("")]
    lines.extend(field_diff_lines(found, width))
    return Content("\n").join(lines)


def _as_int(value: float | None) -> int | None:
    return None if value is None else int(value)


class PairDetail(VerticalScroll):
    """What differs in the highlighted line of a ``DiffView``. The owner calls ``show``."""

    DEFAULT_CSS = """
    PairDetail {
        background: $surface;
        padding: 0 1;
        &:focus { background-tint: $foreground 5%; }
        & > #pair-detail-body { width: 1fr; height: auto; }
    }
    """

    def compose(self) -> Any:
        yield Static(Content(""), id="pair-detail-body")

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: tuple[TraceDiff, DiffRow] | None = None

    @property
    def text(self) -> str:
        """The plain text shown (what a test or a copy reads)."""
        content = self.query_one("#pair-detail-body", Static).content
        return content.plain if isinstance(content, Content) else str(content)

    def show(self, diff: TraceDiff, row: DiffRow) -> None:
        """Show the line ``row`` of ``diff``."""
        self._shown = (diff, row)
        self._render_shown()
        self.scroll_home(animate=False)

    def on_resize(self) -> None:
        self._render_shown()

    def _render_shown(self) -> None:
        if self._shown is None or not self.is_mounted:
            return
        diff, row = self._shown
        width = max(20, self.scrollable_content_region.width)
        if row.trace_part is not None:
            content = trace_content(diff, row.trace_part, width)
        else:
            assert row.pair_index is not None
            content = pair_content(diff.pairs[row.pair_index], width)
        self.query_one("#pair-detail-body", Static).update(content)
