"""``CursorLines``: the Line-API list both big views build on (``StepTimeline``, ``DiffView``).

A trace may have tens of thousands of steps, so a list of them is a ``ScrollView`` that renders
only the visible lines (toolong's ``LogLines`` idea): a fixed header line, then one line per row,
each built on demand by the subclass and kept in a bounded LRU cache of ``Strip``s keyed by
(row, width, cursor state). The base owns the cursor (keys, page keys, a click), keeping it in
view, repainting only the two lines a move touches, and the caches; a subclass says how many
rows there are, draws the header and a row, and says what a move means (``cursor_moved``).

A TUI module: imports Textual and Rich, never the store.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.dom import DOMNode
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

STRIP_CACHE_SIZE = 256
"""Rendered lines kept: a few screens' worth, whatever the number of rows."""

PLAIN = Style.null()
"""The style of unstyled cells (what Rich's ``Text`` gives them)."""


class Cells:
    """One line built piece by piece as Rich ``Segment``s: what ``Text.append`` and
    ``Text.truncate`` do for a row, without ``Text``'s spans and its render pass (a row is
    built for every line that scrolls into view). The pieces are escaped already."""

    __slots__ = ("segments",)

    def __init__(self) -> None:
        self.segments: list[Segment] = []

    def add(self, text: str, style: Style = PLAIN) -> None:
        """Append ``text`` in ``style`` (an empty piece is left out, as ``Text`` does)."""
        if text:
            self.segments.append(Segment(text, style))

    def extend(self, other: Cells) -> None:
        self.segments += other.segments

    @property
    def cell_len(self) -> int:
        return sum(cell_len(segment.text) for segment in self.segments)

    def truncate(self, width: int, *, pad: bool = False) -> None:
        """Cut to ``width`` cells with an ellipsis (which takes the style of the cell it
        replaces), or with ``pad`` fill up to ``width`` with plain spaces: ``Text.truncate``
        with ``overflow="ellipsis"``."""
        plain = "".join(segment.text for segment in self.segments)
        length = cell_len(plain)
        if length > width:
            cut = set_cell_size(plain, width - 1) + "…"
            pieces: list[Segment] = []
            offset = 0
            for text, style, _ in self.segments:
                piece = cut[offset : offset + len(text)]
                if piece:
                    pieces.append(Segment(piece, style))
                offset += len(text)
            if len(cut) > offset:
                pieces.append(Segment(cut[offset:], PLAIN))
            self.segments = pieces
        elif pad and length < width:
            self.segments.append(Segment(" " * (width - length), PLAIN))


def cursor_bindings(prefix: str, noun: str, *, vim: bool = False) -> list[BindingType]:
    """The navigation keys of a ``CursorLines`` (kept out of the footer), with ids
    ``{prefix}-up``, ``{prefix}-down``… and tooltips naming the ``noun`` (step, pair)."""
    up, down = ("up,k", "down,j") if vim else ("up", "down")
    return [
        Binding(up, "cursor_up", "Up", id=f"{prefix}-up", tooltip=f"Previous {noun}", show=False),
        Binding(
            down, "cursor_down", "Down", id=f"{prefix}-down", tooltip=f"Next {noun}", show=False
        ),
        Binding(
            "pageup", "page_up", "Page up", id=f"{prefix}-page-up", tooltip="A page up", show=False
        ),
        Binding(
            "pagedown",
            "page_down",
            "Page down",
            id=f"{prefix}-page-down",
            tooltip="A page down",
            show=False,
        ),
        Binding(
            "home", "first", "First", id=f"{prefix}-first", tooltip=f"First {noun}", show=False
        ),
        Binding("end", "last", "Last", id=f"{prefix}-last", tooltip=f"Last {noun}", show=False),
    ]


class LineView(ScrollView):
    """A ``ScrollView`` whose rows use ``base_style`` for their background: the widget's Rich
    style, looked up once per render pass. Each ``rich_style`` lookup walks the ancestors'
    backgrounds, which costs more than building a row; a ``render_line`` called on its own
    still looks it up."""

    _pass_style: Style | None = None

    @property
    def base_style(self) -> Style:
        """The widget's Rich style (its background)."""
        return self.rich_style if self._pass_style is None else self._pass_style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._pass_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._pass_style = None


class CursorLines(LineView, can_focus=True):
    """A header line and ``line_count`` rows, rendered on demand, with a cursor.

    Subclasses implement ``line_count``, ``render_header`` and ``render_row``, call
    ``show_lines`` when their rows change, and override ``cursor_moved`` to post their message.
    """

    COMPONENT_PREFIX: ClassVar[str] = "cursor-lines"
    """The prefix of the subclass's component classes (``step-timeline``: its
    ``step-timeline--cursor`` and the rest)."""

    # repaint=False: a move repaints the two lines it touches (watch_cursor), not the view.
    cursor: reactive[int] = reactive(0, init=False, repaint=False)
    """Index of the highlighted row."""

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,  # noqa: A002 - Textual's own parameter name
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.strip_cache: LRUCache[tuple[int, int, int], Strip] = LRUCache(STRIP_CACHE_SIZE)
        """Rendered lines by (row index, width, cursor state); bounded, whatever the length."""
        self._header: tuple[int, Strip] | None = None

    # --- what a subclass provides -----------------------------------------------------

    @property
    def line_count(self) -> int:
        """How many rows there are (the header not counted)."""
        raise NotImplementedError

    def render_header(self, width: int) -> Text:
        """The fixed first line."""
        raise NotImplementedError

    def render_row(self, index: int, width: int, is_cursor: bool) -> Strip:
        """Row ``index`` (use ``to_strip``)."""
        raise NotImplementedError

    def cursor_moved(self) -> None:
        """The cursor is on a new row, or the rows changed (post a message here)."""

    # --- rows -------------------------------------------------------------------------

    def show_lines(self, cursor: int | None = None) -> None:
        """The rows changed: ``rows_changed``, then the cursor on ``cursor`` (default: where
        it is, kept in range), announced as a move."""
        self.rows_changed()
        self.set_reactive(
            CursorLines.cursor, self.validate_cursor(self.cursor if cursor is None else cursor)
        )
        self._after_cursor_moved()

    def rows_changed(self) -> None:
        """The rows changed (the cursor left alone): drop the caches, size the view, repaint."""
        self.clear_caches()
        self.virtual_size = Size(0, self.line_count + 1)  # + the fixed header line
        self.refresh()

    def refresh_header(self) -> None:
        """Draw the header line again (what it says changed)."""
        self._header = None
        self.refresh(Region(0, 0, self.size.width, 1))

    def clear_caches(self) -> None:
        """Forget every rendered line (after a change of rows or styles)."""
        self.strip_cache.clear()
        self._header = None

    # --- cursor -----------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, self.line_count - 1))

    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh_row(old)
        self.refresh_row(new)
        self._after_cursor_moved()

    def _after_cursor_moved(self) -> None:
        self.scroll_cursor_into_view()
        if self.line_count:
            self.cursor_moved()

    @property
    def page_rows(self) -> int:
        """Rows visible below the header."""
        return max(1, self.scrollable_content_region.height - 1)

    def scroll_cursor_into_view(self) -> None:
        """Scroll the least that shows the cursor's row."""
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + self.page_rows:
            self.scroll_to(y=self.cursor - self.page_rows + 1, animate=False)

    def refresh_row(self, index: int) -> None:
        """Repaint row ``index`` (if it is in view)."""
        y = index - self.scroll_offset.y + 1
        self.refresh(Region(0, y, self.size.width, 1))

    def on_resize(self) -> None:
        self.scroll_cursor_into_view()

    def on_focus(self) -> None:
        self.refresh_row(self.cursor)

    def on_blur(self) -> None:
        self.refresh_row(self.cursor)

    def action_cursor_up(self) -> None:
        self.cursor -= 1

    def action_cursor_down(self) -> None:
        self.cursor += 1

    def action_page_up(self) -> None:
        self.cursor -= self.page_rows

    def action_page_down(self) -> None:
        self.cursor += self.page_rows

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = self.line_count - 1

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
        index = self.scroll_offset.y + offset.y - 1
        if 0 <= index < self.line_count:
            self.cursor = index

    # --- component styles, resolved when drawn ----------------------------------------

    _components_stale = True

    def _get_component_classes(self) -> frozenset[str]:  # type: ignore[override]
        # Textual's stylesheet asks this at every restyle of the widget (mounted, focused,
        # blurred, its screen shown) and styles each component class there and then: a
        # virtual node and a style pass of its own, ~90% of restyling a StepTimeline (1.4 of
        # 1.6 ms), paid twice on each open (mount, then focus). Answered with none, and
        # marked stale: ``get_component_rich_style`` styles the ones a draw asks for, with
        # the same machinery (a first frame uses about half of them).
        self._components_stale = True
        self.clear_caches()
        self.refresh()
        return frozenset()

    def _style_components(self, names: tuple[str, ...]) -> None:
        """What Textual's ``Stylesheet._process_component_classes`` does, for ``names``."""
        if self._components_stale:
            self._components_stale = False
            self._component_styles.clear()
            self._rich_style_cache.clear()
        known = DOMNode._get_component_classes.__func__(type(self))  # type: ignore[attr-defined]
        for component in names:
            if component in known and component not in self._component_styles:
                virtual_node = DOMNode(classes=component)
                virtual_node._attach(self)
                self.app.stylesheet.apply(virtual_node, animate=False)
                self._component_styles[component] = virtual_node.styles

    def get_component_rich_style(
        self, *names: str, partial: bool = False, default: Style | None = None
    ) -> Style:
        if self._components_stale or not all(n in self._component_styles for n in names):
            self._style_components(names)
        return super().get_component_rich_style(*names, partial=partial, default=default)

    # --- rendering --------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.clear_caches()

    def component_style(self, name: str, *, partial: bool = True) -> Style:
        """The Rich style of the component class ``{COMPONENT_PREFIX}--{name}``."""
        return self.get_component_rich_style(
            f"{self.COMPONENT_PREFIX}--{name}", partial=partial, default=Style()
        )

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            if self._header is None or self._header[0] != width:
                self._header = (width, self.to_strip(self.render_header(width), width))
            return self._header[1]
        index = self.scroll_offset.y + y - 1
        if not 0 <= index < self.line_count:
            return Strip.blank(width, self.base_style)
        cursor_state = 0 if index != self.cursor else (2 if self.has_focus else 1)
        key = (index, width, cursor_state)
        strip = self.strip_cache.get(key)
        if strip is None:
            strip = self.render_row(index, width, cursor_state > 0)
            self.strip_cache[key] = strip
        return strip

    def to_strip(self, text: Text, width: int) -> Strip:
        """``text`` as one line of exactly ``width`` cells on the widget's background."""
        return self.cells_strip(list(text.render(self.app.console)), width)

    def cells_strip(self, segments: list[Segment], width: int) -> Strip:
        """``segments`` (``Cells.segments``) as one line of exactly ``width`` cells on the
        widget's background."""
        return Strip(segments).crop_extend(0, width, self.base_style).simplify()
