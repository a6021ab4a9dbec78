"""``DiffView``: two traces side by side, one line per aligned step pair (Line API).

Each line shows A's step on the left and B's on the right, so the two columns can never scroll
apart: synchronized scrolling comes from there being one view. A deleted step leaves the B
side blank, an inserted one the A side; a marker between them says which kind of pair it is
(``=`` matched, ``~`` changed, ``+`` inserted, ``-`` deleted), and the token and duration
changes close the line. When the traces' own input differs, a ``trace input`` line comes first;
when their output, status or error differs, a ``trace outcome`` line comes last.

Like ``StepTimeline``, only visible lines are rendered, from small ``DiffRow``s built off the UI
thread, through a bounded LRU cache of ``Strip``s: a 10,000-step diff scrolls as fast as a
10-step one. ``PairDetail`` shows everything that differs in the highlighted row.

A TUI module: imports Textual and Rich, never the store. Producer text (step names, values) is
escaped with ``display.safe`` and appended as plain text, never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from rich.style import Style
from rich.text import Text
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.strip import Strip
from textual.widgets import Static

from agent_replay.display import fmt_cost, fmt_int, fmt_ms, preview, safe
from agent_replay.services.diff import FieldDiff, StepPair, TraceDiff
from agent_replay.services.outcome import NOT_RERUN_LABEL, is_not_rerun, outcome_note
from agent_replay.widgets.cursor_lines import CursorLines, cursor_bindings
from agent_replay.widgets.step_timeline import STEP_COLORS, STEP_ICONS, annotation_labels

RowKind = Literal["matched", "changed", "inserted", "deleted"]

MARKS: dict[str, str] = {"matched": "=", "changed": "~", "inserted": "+", "deleted": "-"}
"""The marker between the two sides, per kind of pair (the CLI's ``diff`` uses the same)."""
KIND_COLORS: dict[str, str] = {
    "matched": "$text-muted",
    "changed": "$text-warning",
    "inserted": "$text-success",
    "deleted": "$text-error",
}
"""The marker's colour per kind (Textual colours, usable in TCSS and ``Content`` styles)."""
TRACE_ICON = "◎"
"""The glyph of the trace-level lines (input, outcome)."""

_TYPE_WIDTH = 11  # len("guard_check")
_DELTA_WIDTH = 8
_MIN_NAME_WIDTH = 12


# --- rows (built in the worker) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiffSide:
    """What one side of a line shows: a step's number, type and (escaped) name."""

    number: int | None
    """The step number (``None`` on the trace-level lines)."""
    step_type: str
    name: str
    """Already escaped for the terminal."""
    failed: bool = False
    labels: tuple[str, ...] = ()
    """People's annotation labels on the step (escaped): shown, never compared."""

    @classmethod
    def of(cls, step: dict[str, Any], labels: tuple[str, ...] = ()) -> DiffSide:
        return cls(
            number=int(step["step_number"]),
            step_type=str(step.get("step_type")),
            name=safe(step.get("name") or ""),
            failed=bool(step.get("error")) or step.get("step_type") == "error",
            labels=tuple(safe(label) for label in labels),
        )


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One line of the view: a step pair, or a trace-level line (input or outcome)."""

    kind: RowKind
    a: DiffSide | None
    b: DiffSide | None
    tokens: float | None = None
    """The line's token change: B - A for a pair, +B for an insertion, -A for a deletion."""
    duration_ms: float | None = None
    """The line's duration change, the same way."""
    pair_index: int | None = None
    """Index into ``TraceDiff.pairs``; ``None`` for a trace-level line."""
    trace_part: Literal["input", "outcome"] | None = None
    """Which trace-level line this is (``None`` for a step pair)."""
    note: str = ""
    """What differs, in a few words: ``input, output``, ``moved from A#3``."""

    @property
    def is_difference(self) -> bool:
        return self.kind != "matched"

    @classmethod
    def of_pair(
        cls,
        pair: StepPair,
        index: int,
        labels: tuple[Mapping[int, tuple[str, ...]], Mapping[int, tuple[str, ...]]] = ({}, {}),
    ) -> DiffRow:
        """The line of ``pair``; ``labels``: A's and B's step labels by step number."""
        note = ""
        if pair.moved_from is not None:
            note = f"moved from A#{pair.moved_from}"
        elif pair.moved_to is not None:
            note = f"moved to B#{pair.moved_to}"
        elif pair.kind == "changed":
            note = ", ".join(pair.fields)
        for label, step in (("A", pair.a), ("B", pair.b)):
            if is_not_rerun(step):
                note = f"{note} · {label} {NOT_RERUN_LABEL}".lstrip(" ·")
        return cls(
            kind=pair.kind,
            a=_side(pair.a, labels[0]),
            b=_side(pair.b, labels[1]),
            tokens=line_change(pair.kind, pair.tokens.a, pair.tokens.b),
            duration_ms=line_change(pair.kind, pair.duration_ms.a, pair.duration_ms.b),
            pair_index=index,
            note=note,
        )

    @classmethod
    def of_trace(cls, part: Literal["input", "outcome"], fields: Sequence[str]) -> DiffRow:
        side = DiffSide(None, "trace", ", ".join(fields))
        return cls("changed", side, side, trace_part=part, note=", ".join(fields))


def _side(step: dict[str, Any] | None, labels: Mapping[int, tuple[str, ...]]) -> DiffSide | None:
    if step is None:
        return None
    return DiffSide.of(step, labels.get(int(step["step_number"]), ()))


def line_change(kind: str, a: float | None, b: float | None) -> float | None:
    """A line's metric change: B - A for a pair, the value itself (+B, -A) for a lone step."""
    if kind == "inserted":
        return b
    if kind == "deleted":
        return None if a is None else -a
    return None if a is None or b is None else b - a


def diff_rows(diff: TraceDiff) -> list[DiffRow]:
    """The lines of a diff: the trace input line (when it differs), one line per pair, then
    the trace outcome line (when output, status or error differ)."""
    rows: list[DiffRow] = []
    if diff.input_differences:
        rows.append(DiffRow.of_trace("input", ["input"]))
    labels = (
        annotation_labels(diff.a.get("annotations") or [])[1],
        annotation_labels(diff.b.get("annotations") or [])[1],
    )
    rows.extend(DiffRow.of_pair(pair, index, labels) for index, pair in enumerate(diff.pairs))
    outcome = [d.field for d in diff.trace_differences if d.field != "input"]
    if outcome:
        rows.append(DiffRow.of_trace("outcome", list(dict.fromkeys(outcome))))
    return rows


def first_divergence_row(diff: TraceDiff, rows: Sequence[DiffRow]) -> int | None:
    """The line of the first divergence (the trace input line, or its pair's line)."""
    first = diff.first_divergence
    if first is None:
        return None
    for index, row in enumerate(rows):
        if first.where == "input" and row.trace_part == "input":
            return index
        if first.where == "step" and row.pair_index == first.pair_index:
            return index
    return None


# --- formatting -------------------------------------------------------------------------------


def signed_int(value: float | None) -> str:
    """``+582``, ``-1,204``; empty for no change or unknown."""
    if value is None or value == 0:
        return ""
    return ("+" if value > 0 else "-") + fmt_int(int(abs(value)))


def signed_ms(value: float | None) -> str:
    """``+766ms``, ``-1m10s``; empty for no change or unknown."""
    if value is None or value == 0:
        return ""
    return ("+" if value > 0 else "-") + fmt_ms(abs(value))


def signed_cost(value: float | None) -> str:
    """``+$0.0022``; empty for no change (under $0.00005) or unknown."""
    if value is None or round(abs(value), 4) == 0:
        return ""
    return ("+" if value > 0 else "-") + fmt_cost(abs(value))


def change_style(value: float | None) -> str:
    """More (tokens, time, cost) is a warning, less a success."""
    if not value:
        return "$text-muted"
    return "$text-warning" if value > 0 else "$text-success"


# --- the view ---------------------------------------------------------------------------------


class DiffView(CursorLines):
    """The aligned pairs of two traces, A on the left and B on the right, with a cursor
    (``CursorLines``).

    Moving the cursor (keys or a click) posts ``DiffView.RowHighlighted``.
    """

    COMPONENT_PREFIX = "diff-view"
    BINDINGS: ClassVar[list[BindingType]] = cursor_bindings("diff", "pair", vim=True)

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "diff-view--header",
        "diff-view--muted",
        "diff-view--cursor",
        "diff-view--rule",
        "diff-view--inserted-side",
        "diff-view--deleted-side",
        "diff-view--gap",
        "diff-view--failed",
        "diff-view--trace",
        "diff-view--label",
        *(f"diff-view--mark-{kind}" for kind in MARKS),
        *(f"diff-view--{step_type}" for step_type in STEP_ICONS),
    }

    DEFAULT_CSS = (
        """
    DiffView {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        &:focus { background-tint: $foreground 5%; }
        & > .diff-view--header { color: $text-muted; text-style: bold; }
        & > .diff-view--muted { color: $text-muted; }
        & > .diff-view--rule { color: $foreground 20%; }
        & > .diff-view--inserted-side { background: $success 14%; }
        & > .diff-view--deleted-side { background: $error 14%; }
        & > .diff-view--gap { color: $foreground 12%; }
        & > .diff-view--failed { color: $text-error; }
        & > .diff-view--trace { color: $text-secondary; text-style: bold; }
        & > .diff-view--label { color: $text-accent; text-style: bold; }
        & > .diff-view--cursor { background: $block-cursor-blurred-background; }
        &:focus > .diff-view--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
"""
        + "".join(
            f"        & > .diff-view--mark-{kind} {{ color: {color}; text-style: bold; }}\n"
            for kind, color in KIND_COLORS.items()
        )
        + "".join(
            f"        & > .diff-view--{step_type} {{ color: {color}; }}\n"
            for step_type, color in STEP_COLORS.items()
        )
        + "    }\n"
    )

    @dataclass
    class RowHighlighted(Message):
        """The cursor moved to a line."""

        index: int
        """The line's index in ``DiffView.rows``."""
        row: DiffRow
        view: DiffView | None = field(default=None, repr=False, compare=False)
        """The view that posted this (for ``@on(..., selector)``)."""

        @property
        def control(self) -> DiffView | None:
            return self.view

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._rows: list[DiffRow] = []
        self._titles = ("A", "B")
        self._number_width = 1

    # --- data -------------------------------------------------------------------------

    @property
    def rows(self) -> Sequence[DiffRow]:
        """The lines shown, in order."""
        return self._rows

    @property
    def current(self) -> DiffRow | None:
        """The line under the cursor (``None`` when empty)."""
        return self._rows[self.cursor] if self._rows else None

    def set_rows(
        self, rows: Sequence[DiffRow], *, titles: tuple[str, str], select: int = 0
    ) -> None:
        """Show ``rows`` under the column titles (the two trace ids); put the cursor on
        ``select``."""
        self._rows = list(rows)
        self._titles = titles
        numbers = [
            side.number
            for row in self._rows
            for side in (row.a, row.b)
            if side is not None and side.number is not None
        ]
        self._number_width = max(1, len(str(max(numbers, default=0))))
        self.show_lines(select)
        # once laid out with its new height: the cursor a third of the way down, with the
        # lines before it in view
        self.call_after_refresh(self._show_cursor_with_context)

    def _show_cursor_with_context(self) -> None:
        if self.cursor >= self.page_rows:
            self.scroll_to(y=self.cursor - self.page_rows // 3, animate=False)

    def next_difference(self, step: int = 1) -> bool:
        """Move to the next (``step=-1``: previous) line that is not ``matched``."""
        index = self.cursor + step
        while 0 <= index < len(self._rows):
            if self._rows[index].is_difference:
                self.cursor = index
                return True
            index += step
        return False

    # --- cursor and rendering (CursorLines) --------------------------------------------

    @property
    def line_count(self) -> int:
        return len(self._rows)

    def cursor_moved(self) -> None:
        self.post_message(self.RowHighlighted(self.cursor, self._rows[self.cursor], self))

    def _style(self, name: str, *, partial: bool = True) -> Style:
        return self.component_style(name, partial=partial)

    def _widths(self, width: int) -> tuple[int, int, bool]:
        """The widths of the A side and the B side, and whether the type label fits."""
        sides = max(2, width - 3 - 2 * (_DELTA_WIDTH + 1) - 1)
        left = sides // 2
        fixed = 1 + self._number_width + 3
        with_type = left - fixed - _TYPE_WIDTH - 1 >= _MIN_NAME_WIDTH
        return left, sides - left, with_type

    def render_header(self, width: int) -> Text:
        left, right, _ = self._widths(width)
        style = self._style("header")
        text = Text(no_wrap=True, end="")
        for label, title, side_width in (
            ("A", self._titles[0], left),
            ("B", self._titles[1], right),
        ):
            cell = Text(f" {label}  ", style, no_wrap=True, end="")
            cell.append(safe(title), style)
            cell.truncate(side_width, overflow="ellipsis", pad=True)
            text.append_text(cell)
            if label == "A":
                text.append("   ", style)
        text.append(" " + "ΔTOKENS".rjust(_DELTA_WIDTH) + " " + "ΔTIME".rjust(_DELTA_WIDTH), style)
        return text

    def render_row(self, index: int, width: int, is_cursor: bool) -> Strip:
        row = self._rows[index]
        left, right, with_type = self._widths(width)
        text = Text(no_wrap=True, end="")
        text.append_text(self._side(row, row.a, left, with_type, "deleted"))
        text.append(f" {MARKS[row.kind]} ", self._style(f"mark-{row.kind}"))
        text.append_text(self._side(row, row.b, right, with_type, "inserted"))
        text.append(" ")
        text.append(signed_int(row.tokens).rjust(_DELTA_WIDTH), self._change_style(row.tokens))
        text.append(" ")
        text.append(
            signed_ms(row.duration_ms).rjust(_DELTA_WIDTH), self._change_style(row.duration_ms)
        )
        if is_cursor:
            text.stylize(self._style("cursor"))
        return self.to_strip(text, width)

    def _change_style(self, value: float | None) -> Style:
        if not value:
            return self._style("muted")
        return self._style("mark-changed" if value > 0 else "mark-inserted")

    def _side(
        self, row: DiffRow, side: DiffSide | None, width: int, with_type: bool, lone: str
    ) -> Text:
        """One side of a line: number, icon, type and name, or a blank gap."""
        if side is None:
            # not partial: the translucent colour must blend with the background
            return Text("╌" * width, self._style("gap", partial=False), no_wrap=True, end="")
        text = Text(no_wrap=True, end="")
        muted = self._style("muted")
        if side.step_type == "trace":
            type_style = self._style("trace")
            number = ""
        else:
            type_style = self._style(side.step_type) if side.step_type in STEP_ICONS else Style()
            number = str(side.number)
        text.append(" " + number.rjust(self._number_width) + " ", muted)
        icon = TRACE_ICON if side.step_type == "trace" else STEP_ICONS.get(side.step_type, "·")
        text.append(icon + " ", type_style)
        if with_type:
            text.append(side.step_type[:_TYPE_WIDTH].ljust(_TYPE_WIDTH) + " ", type_style)
        name = Text(side.name or "—", no_wrap=True, end="")
        if row.kind == "matched" or not side.name:
            name.stylize(muted)
        elif side.failed:
            name.stylize(self._style("failed"))
        chips = Text(end="")
        for label in side.labels:  # people's labels: kept, the name is cut first
            chips.append(f" #{label[:16]}", self._style("label"))
        if side is row.b and row.note and row.trace_part is None:
            name.append("  " + row.note, muted)
        name.truncate(max(1, width - text.cell_len - chips.cell_len), overflow="ellipsis")
        name.append_text(chips)
        name.truncate(max(1, width - text.cell_len), overflow="ellipsis", pad=True)
        text.append_text(name)
        if row.kind == lone:
            # the lone step's side is tinted (not partial: the translucent tint must blend)
            text.stylize(self.get_component_rich_style(f"diff-view--{lone}-side"))
        return text


# --- the detail of one line -------------------------------------------------------------------

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
