"""``StepTimeline``: the steps of a trace as a virtual, cursor-driven list (Line API).

A trace may have tens of thousands of steps, so this is a ``CursorLines`` (the Line-API base it
shares with ``DiffView``) that renders only the visible lines: each line is built on demand
from a small ``StepRow`` and cached by the base. The first line is a fixed column header.
Producer text (step names) arrives already escaped (``StepRow.from_step``) and is
appended as plain text, never parsed as markup. A guard check that blocked its action (an
attempt stopped by ``hook --enforce``, say) gets a warning tint and a ``⊘`` marker.

A TUI module: imports Textual and Rich, never the store.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.color import Color, ColorParseError
from textual.message import Message
from textual.strip import Strip

from agent_replay.display import fmt_int, fmt_ms, safe
from agent_replay.services.guard.verdict import is_blocked
from agent_replay.services.outcome import is_not_rerun
from agent_replay.services.summary import step_summary
from agent_replay.widgets.cursor_lines import PLAIN, Cells, CursorLines, cursor_bindings

STEP_ICONS: dict[str, str] = {
    "thought": "∴",
    "tool_call": "⚙",
    "llm_call": "✦",
    "retrieval": "▤",
    "output": "▶",
    "decision": "◆",
    "error": "✗",
    "guard_check": "◈",
}
"""One single-cell glyph per step type."""

STEP_COLORS: dict[str, str] = {
    "thought": "#b39ddb",
    "tool_call": "#e5c07b",
    "llm_call": "$text-primary",
    "retrieval": "#56c2b6",
    "output": "$text-success",
    "decision": "$text-accent",
    "error": "$text-error",
    "guard_check": "#e08fc8",
}
"""One colour per step type (a Textual colour, usable in TCSS and in ``Content`` styles)."""

MAX_INDENT = 6
"""Nesting levels shown as indentation (deeper steps line up with the sixth)."""

_TYPE_WIDTH = 11  # len("guard_check"), the longest step type
_BAR_WIDTH = 10
_DURATION_WIDTH = 7
_TOKENS_WIDTH = 7
_MIN_NAME_WIDTH = 16
_PARTIAL_BLOCKS = " ▏▎▍▌▋▊▉"


@dataclass(frozen=True, slots=True)
class StepRow:
    """What one timeline line shows of a step (small: a 10,000-step trace keeps 10,000)."""

    number: int
    step_type: str
    name: str
    """The step's name, already escaped for the terminal."""
    duration_ms: float | None = None
    tokens: int | None = None
    has_error: bool = False
    has_decision: bool = False
    has_snapshot: bool = False
    blocked: bool = False
    """A guard check that blocked its action (``services.guard.verdict.is_blocked``)."""
    summary: str = ""
    """What the step did in one line (``services.summary``), already escaped."""
    not_rerun: bool = False
    """A fork's step whose recorded outcome was not copied (``services.outcome``)."""
    depth: int = 0
    """How deep the step nests under ``parent_step`` links (a subagent's steps: 1 or more)."""
    children: int = 0
    """How many steps nest under this one, at any depth (what folding it hides)."""
    parent: int | None = None
    """The step it nests under (``parent_step``, when that step comes before it)."""
    labels: tuple[str, ...] = ()
    """People's annotation labels on the step (escaped)."""

    @classmethod
    def from_step(
        cls,
        step: Mapping[str, Any],
        *,
        depth: int = 0,
        children: int = 0,
        labels: tuple[str, ...] = (),
    ) -> StepRow:
        """The row of a step object of the trace format (as the store returns it)."""
        return cls(
            summary=safe(step_summary(step)),
            not_rerun=is_not_rerun(dict(step)),
            depth=depth,
            children=children,
            parent=_parent_of(step),
            labels=tuple(safe(label) for label in labels),
            number=int(step["step_number"]),
            step_type=str(step["step_type"]),
            name=safe(step.get("name") or ""),
            duration_ms=step.get("duration_ms"),
            tokens=step.get("tokens_used"),
            has_error=bool(step.get("error")),
            has_decision=bool(step.get("decision")),
            has_snapshot=bool(step.get("snapshot")),
            blocked=is_blocked(step),
        )


def _parent_of(step: Mapping[str, Any]) -> int | None:
    parent = step.get("parent_step")
    if isinstance(parent, int) and 0 < parent < int(step["step_number"]):
        return parent  # a parent after its child (a producer's mistake) does not nest
    return None


def annotation_labels(
    annotations: Sequence[Mapping[str, Any]],
) -> tuple[tuple[str, ...], dict[int, tuple[str, ...]]]:
    """People's labels of a trace (its ``annotations``, oldest first): the run's, and each
    step's by step number. Producer-free but person-written text: escape before showing."""
    run: list[str] = []
    steps: dict[int, tuple[str, ...]] = {}
    for annotation in annotations:
        label = str(annotation.get("label") or "")
        number = annotation.get("step_number")
        if isinstance(number, int):
            steps[number] = (*steps.get(number, ()), label)
        elif number is None:
            run.append(label)
    return tuple(run), steps


def step_rows(
    steps: Sequence[Mapping[str, Any]],
    annotations: Sequence[Mapping[str, Any]] = (),
) -> list[StepRow]:
    """The timeline's rows of a trace's steps (in step order), with nesting depth, the
    number of nested steps under each and the steps' annotation labels. Linear in the steps
    times their depth."""
    labels = annotation_labels(annotations)[1]
    depth: dict[int, int] = {}
    parents: dict[int, int | None] = {}
    children: dict[int, int] = {}
    for step in steps:
        number = int(step["step_number"])
        parent = _parent_of(step)
        parents[number] = parent if parent in depth else None
        depth[number] = depth[parent] + 1 if parent in depth else 0
        ancestor = parents[number]
        while ancestor is not None:
            children[ancestor] = children.get(ancestor, 0) + 1
            ancestor = parents.get(ancestor)
    return [
        StepRow.from_step(
            step,
            depth=depth[int(step["step_number"])],
            children=children.get(int(step["step_number"]), 0),
            labels=labels.get(int(step["step_number"]), ()),
        )
        for step in steps
    ]


def duration_bar(duration_ms: float | None, longest_ms: float, width: int) -> str:
    """A bar of ``width`` cells filled in proportion to ``duration_ms / longest_ms``.

    Eighth blocks give sub-cell precision; any non-zero duration shows at least a sliver.
    """
    if not duration_ms or duration_ms <= 0 or longest_ms <= 0:
        return " " * width
    eighths = max(1, round(min(duration_ms / longest_ms, 1.0) * width * 8))
    full, rest = divmod(eighths, 8)
    bar = "█" * full + (_PARTIAL_BLOCKS[rest] if rest else "")
    return bar.ljust(width)


class StepTimeline(CursorLines):
    """The steps of one trace, one per line, with a cursor (``CursorLines``).

    Moving the cursor (keys or a click) posts ``StepTimeline.StepSelected``.
    """

    COMPONENT_PREFIX = "step-timeline"
    BINDINGS: ClassVar[list[BindingType]] = [
        *cursor_bindings("step", "step"),
        Binding(
            "z",
            "toggle_nest",
            "Nesting",
            id="fold-nested",
            tooltip="Fold or unfold the steps nested under this one (a subagent's steps)",
        ),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "step-timeline--header",
        "step-timeline--number",
        "step-timeline--cursor",
        "step-timeline--muted",
        "step-timeline--bar-track",
        "step-timeline--blocked",
        "step-timeline--blocked-row",
        "step-timeline--summary",
        "step-timeline--not-rerun",
        "step-timeline--label",
        "step-timeline--new",
    }
    """The step types' colours are not component classes (``_type_style``): each component
    class costs a style pass of its own every time the widget is restyled (mounted,
    focused, its screen shown), and these eight doubled that cost."""

    DEFAULT_CSS = """
    StepTimeline {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        &:focus {
            background-tint: $foreground 5%;
        }
        & > .step-timeline--header { color: $text-muted; text-style: bold; }
        & > .step-timeline--number { color: $text-muted; }
        & > .step-timeline--muted { color: $text-muted; }
        & > .step-timeline--bar-track { background: $foreground 6%; }
        & > .step-timeline--blocked { color: $text-warning; text-style: bold; }
        & > .step-timeline--blocked-row { background: $warning 18%; }
        & > .step-timeline--summary { color: $text-muted; }
        & > .step-timeline--not-rerun { color: $text-warning; text-style: italic; }
        & > .step-timeline--label { color: $text-accent; text-style: bold; }
        & > .step-timeline--new { color: $text-accent; text-style: bold; }
        & > .step-timeline--cursor { background: $block-cursor-blurred-background; }
        &:focus > .step-timeline--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
    }
    """

    @dataclass
    class StepSelected(Message):
        """The cursor moved to a step."""

        step_number: int
        """The selected step's ``step_number``."""
        timeline: StepTimeline | None = field(default=None, repr=False, compare=False)
        """The timeline that posted this (for ``@on(..., selector)``)."""

        @property
        def control(self) -> StepTimeline | None:
            return self.timeline

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._all_rows: list[StepRow] = []
        self._rows: list[StepRow] = []
        self._numbers: list[int] = []
        self.folded_steps: set[int] = set()
        """Steps whose nested steps are folded away."""
        self._longest_ms = 0.0
        self._number_width = 1
        self._new_after: int | None = None
        self._new_below = 0
        self._type_styles: tuple[object, dict[str, Style]] | None = None

    # --- data -------------------------------------------------------------------------

    @property
    def rows(self) -> Sequence[StepRow]:
        """The rows shown, in step order."""
        return self._rows

    @property
    def new_below(self) -> int:
        """How many steps arrived since the trace was first shown that are still below the
        view (the header's "3 new ↓")."""
        return self._new_below

    @property
    def selected_step(self) -> int | None:
        """The step number under the cursor (``None`` when empty)."""
        return self._rows[self.cursor].number if self._rows else None

    def set_steps(
        self, rows: Sequence[StepRow], *, select: int | None = None, grown: bool = False
    ) -> None:
        """Show ``rows`` (in step order) and select step ``select`` (default: the first).

        Args:
            grown: the same trace read again while it runs: steps past the last one shown
                before are new, and until they are scrolled into view the header counts them
                ("3 new ↓") and their numbers stand out.
        """
        if grown and self._all_rows and self._new_after is None:
            self._new_after = self._all_rows[-1].number
        elif not grown:
            self._new_after = None
        self._all_rows = list(rows)
        self._show_visible()
        index = self._index_of(select) if select is not None else None
        self.show_lines(index or 0)

    def _show_visible(self) -> None:
        """Recompute the visible rows: those with no folded step above them (the caller
        then tells the base: ``show_lines`` or ``rows_changed``)."""
        if self.folded_steps:
            hidden: set[int] = set()
            rows = []
            for row in self._all_rows:
                if row.parent is not None and (
                    row.parent in hidden or row.parent in self.folded_steps
                ):
                    hidden.add(row.number)
                else:
                    rows.append(row)
            self._rows = rows
        else:
            self._rows = self._all_rows
        self._numbers = [row.number for row in self._rows]
        durations = [row.duration_ms or 0.0 for row in self._rows]
        self._longest_ms = max(durations, default=0.0)
        self._number_width = max(1, len(str(max(self._numbers, default=0))))

    def action_toggle_nest(self) -> None:
        """Fold the selected step's nested steps (or the fold it sits in), or unfold them."""
        if not self._rows:
            return
        row = self._rows[self.cursor]
        target = row.number if (row.children or row.number in self.folded_steps) else row.parent
        if target is None:
            return
        self.folded_steps ^= {target}
        self._show_visible()
        self.show_lines(self._index_of(target) or 0)

    def select_step(self, number: int) -> bool:
        """Move the cursor to step ``number`` (unfolding what hides it); ``False`` if the
        trace has no such step."""
        index = self._index_of(number)
        if index is None and self.folded_steps:
            self.folded_steps.clear()
            self._show_visible()
            self.rows_changed()
            index = self._index_of(number)
        if index is None:
            return False
        self.cursor = index
        return True

    def _index_of(self, number: int) -> int | None:
        index = bisect_left(self._numbers, number)
        if index < len(self._numbers) and self._numbers[index] == number:
            return index
        return None

    # --- cursor and rendering (CursorLines) --------------------------------------------

    @property
    def line_count(self) -> int:
        return len(self._rows)

    def cursor_moved(self) -> None:
        self._count_new()
        self.post_message(self.StepSelected(self._rows[self.cursor].number, self))

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._count_new()

    def _count_new(self) -> None:
        """Count the new steps below the view; once none is left, nothing is new."""
        if self._new_after is None:
            return
        bottom = int(self.scroll_offset.y) + self.page_rows  # the first index out of view
        below = sum(1 for row in self._rows[bottom:] if row.number > self._new_after)
        if below == 0:
            self._new_after = None
            self.strip_cache.clear()  # the new rows' numbers go back to normal
            self.refresh()
        if below != self._new_below:
            self._new_below = below
            self.refresh_header()

    def _style(self, name: str) -> Style:
        if name in STEP_COLORS:
            return self._type_style(name)
        return self.component_style(name)

    def _type_style(self, step_type: str) -> Style:
        """A step type's colour (``STEP_COLORS``: a colour or a theme variable) as the Rich
        style a ``color:`` rule of a component class would give, for the app's theme."""
        variables = self.app.theme_variables
        if self._type_styles is None or self._type_styles[0] is not variables:
            styles: dict[str, Style] = {}
            for name, spec in STEP_COLORS.items():
                value = variables.get(spec[1:], "") if spec.startswith("$") else spec
                try:
                    color = Color.parse(value)
                except ColorParseError:
                    color = Color(0, 0, 0, 0)
                styles[name] = Style(color=color.rich_color) if color.a > 0 else Style()
            self._type_styles = (variables, styles)
        return self._type_styles[1][step_type]

    def _name_width(self, width: int, with_type: bool, with_bar: bool = True) -> int:
        # " 12 ⚙ tool_call   NAME… █████▌     218ms   1,186 ": one space between columns
        fixed = 1 + self._number_width + 3 + _DURATION_WIDTH + _TOKENS_WIDTH + 3
        if with_bar:
            fixed += _BAR_WIDTH + 1
        if with_type:
            fixed += _TYPE_WIDTH + 1
        return max(1, width - fixed)

    def _layout(self, width: int) -> tuple[bool, bool, int]:
        """Whether the type label and the duration bar fit, and the name column's width
        (the type goes first, then the bar, so the name keeps room to be read)."""
        with_type = self._name_width(width, True) >= _MIN_NAME_WIDTH
        with_bar = with_type or self._name_width(width, False) >= _MIN_NAME_WIDTH
        return with_type, with_bar, self._name_width(width, with_type, with_bar)

    def render_header(self, width: int) -> Text:
        with_type, with_bar, name_width = self._layout(width)
        style = self._style("header")
        text = Text(no_wrap=True, end="")
        text.append(" " + "#".rjust(self._number_width) + "   ", style)
        if with_type:
            text.append("TYPE".ljust(_TYPE_WIDTH + 1), style)
        # At narrow widths the type (then the bar) goes; the header says so.
        hidden = "" if with_type else " (type: icon" + (")" if with_bar else ", no bar)")
        text.append(("NAME" + hidden)[:name_width].ljust(name_width + 1), style)
        bar = _BAR_WIDTH + 1 if with_bar else 0
        if self._new_below:
            # In place of the duration and token titles, so no title is cut mid-word.
            note = f"{self._new_below:,} new ↓"
            text.append(note.rjust(bar + _DURATION_WIDTH + _TOKENS_WIDTH + 1) + " ", style)
            text.stylize(self._style("new"), len(text) - len(note) - 1, len(text) - 1)
            return text
        text.append("DURATION".rjust(bar + _DURATION_WIDTH) + " ", style)
        text.append("TOKENS".rjust(_TOKENS_WIDTH) + " ", style)
        return text

    def render_row(self, index: int, width: int, is_cursor: bool) -> Strip:
        # Built as Segments (``Cells``), not Rich ``Text``: a row is built for every line
        # that scrolls into view, and Text's spans and render pass cost most of a row.
        row = self._rows[index]
        with_type, with_bar, name_width = self._layout(width)
        style = self._style
        type_style = style(row.step_type)
        line = Cells()
        is_new = self._new_after is not None and row.number > self._new_after
        line.add(
            " " + str(row.number).rjust(self._number_width) + " ",
            style("new" if is_new else "number"),
        )
        line.add(STEP_ICONS.get(row.step_type, "·") + " ", type_style)
        if with_type:
            line.add(row.step_type[:_TYPE_WIDTH].ljust(_TYPE_WIDTH) + " ", type_style)
        line.extend(self._name_cell(row, name_width))
        line.add(" ")
        if with_bar:
            bar = duration_bar(row.duration_ms, self._longest_ms, _BAR_WIDTH)
            filled = bar.rstrip()
            line.add(filled, type_style)
            # not partial: the track's translucent background must blend with the widget's
            track = self.get_component_rich_style("step-timeline--bar-track")
            line.add(" " * (_BAR_WIDTH - len(filled)), track)
        if row.not_rerun:
            line.add(" " + "not run".rjust(_DURATION_WIDTH) + " ", style("not-rerun"))
        else:
            line.add(" " + fmt_ms(row.duration_ms).rjust(_DURATION_WIDTH) + " ")
        tokens = fmt_int(row.tokens) if row.tokens is not None else ""
        line.add(tokens.rjust(_TOKENS_WIDTH) + " ")
        segments = line.segments
        if is_cursor:
            cursor = style("cursor")
            segments = [Segment(text, (piece or PLAIN) + cursor) for text, piece, _ in segments]
        strip = self.cells_strip(segments, width)
        if row.blocked and not is_cursor:
            # A base style: cells with a background of their own (the bar track) keep it.
            tint = self.get_component_rich_style("step-timeline--blocked-row").bgcolor
            strip = strip.apply_style(Style(bgcolor=tint))
        return strip

    def _name_cell(self, row: StepRow, width: int) -> Cells:
        """The name, truncated to fit, then markers: snapshot ◉, decision ◆, error ✗,
        blocked ⊘."""
        style = self._style
        markers = Cells()
        if row.has_snapshot:
            markers.add(" ◉", style("muted"))
        if row.has_decision and row.step_type != "decision":
            markers.add(" ◆", style("decision"))
        if row.blocked:
            markers.add(" ⊘", style("blocked"))
        elif row.has_error and row.step_type != "error":
            markers.add(" ✗", style("error"))
        if row.not_rerun:
            markers.add(" ○", style("not-rerun"))
        for label in row.labels:  # people's labels: kept, the name is cut first
            markers.add(f" #{label[:16]}", style("label"))
        if not row.name:
            name_style = style("muted")
        elif row.blocked:
            name_style = style("blocked")
        elif row.has_error:
            name_style = style("error")
        else:
            name_style = PLAIN
        name = Cells()
        name.add(" " * min(row.depth, MAX_INDENT))
        if row.children:
            name.add("▸ " if row.number in self.folded_steps else "▾ ", style("muted"))
        name.add(row.name or "—", name_style)
        name.truncate(max(1, width - markers.cell_len))
        name.extend(markers)
        if row.number in self.folded_steps:
            name.add(f" +{row.children}", style("muted"))
        if row.not_rerun:
            name.add(" not re-run", style("not-rerun"))
        elif row.summary and name.cell_len + 3 < width:
            name.add("  " + row.summary, style("summary"))
        name.truncate(width, pad=True)
        return name
