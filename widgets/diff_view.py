"""``DiffView``: two traces side by side, one line per aligned step pair (Line API).

Each line shows A's step on the left and B's on the right, so the two columns can never scroll
apart: synchronized scrolling comes from there being one view. A deleted step leaves the B
side blank, an inserted one the A side; a marker between them says which kind of pair it is
(``=`` matched, ``~`` changed, ``+`` inserted, ``-`` deleted), and the token and duration
changes close the line. When the traces' own input differs, a ``trace input`` line comes first;
when their output, status or error differs, a ``trace outcome`` line comes last.

Like ``StepTimeline``, only visible lines are rendered (both are ``CursorLines``), from small
``DiffRow``s built off the UI thread, through a bounded LRU cache of ``Strip``s: a 10,000-step
diff scrolls as fast as a 10-step one. ``widgets.pair_detail.PairDetail`` shows everything that
differs in the highlighted row.

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
from textual.message import Message
from textual.strip import Strip

from agent_replay.display import fmt_cost, fmt_int, fmt_ms, safe
from agent_replay.services.diff import StepPair, TraceDiff
from agent_replay.services.outcome import NOT_RERUN_LABEL, is_not_rerun
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
