"""``TitleBar``: the app's title line as one widget, drawn as Textual's ``Header`` draws it.

Textual's ``Header`` is four widgets (the header, its icon, its title and the clock's space),
each composed, mounted, styled, laid out and painted whenever a screen that has one is
pushed: on the step timeline that was about a fifth of opening a trace (issue 17). This is
one Line-API widget drawing the same line: the icon (which opens the command palette when
clicked, and is highlighted under the mouse), the screen's title and sub-title centred
between it and the clock's space, cut with an ellipsis when they do not fit.

Textual's header grows three lines tall when clicked; this one stays one line.

A TUI module: imports Textual and Rich, never the store.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.color import Color
from textual.content import Content
from textual.strip import Strip
from textual.widget import Widget

ICON = "⭘"
"""The icon at the left (Textual's ``Header`` default)."""
ICON_WIDTH = 8
"""Cells of the icon's box (``HeaderIcon``: 8 wide, one cell of padding each side)."""
CLOCK_WIDTH = 10
"""Cells kept free at the right, where Textual's header keeps its clock's space."""


def _at(style: Style | None, offset: int) -> Style:
    return (style or Style.null()) + Style.from_meta({"offset": (offset, 0)})


class TitleBar(Widget):
    """The screen's title and sub-title (else the app's) on one line, with the icon."""

    DEFAULT_CSS = """
    TitleBar {
        dock: top;
        width: 100%;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    """

    _icon_hover = False

    def on_mount(self) -> None:
        for node in (self.app, self.screen):
            self.watch(node, "title", self._title_changed, init=False)
            self.watch(node, "sub_title", self._title_changed, init=False)

    def _title_changed(self) -> None:
        self.refresh()

    @property
    def title_text(self) -> str:
        """The line's title as plain text (``title — sub_title``), what a test reads."""
        return self._title().plain

    def _title(self) -> Content:
        screen, app = self.screen, self.app
        title = screen.title if screen.title is not None else app.title
        sub_title = screen.sub_title if screen.sub_title is not None else app.sub_title
        return app.format_title(title, sub_title)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if y != 0:
            return Strip.blank(width, base)
        # The pieces (and their styles) are the ones Textual's four widgets leave on the
        # line, so a screen looks the same, to the cell and in its snapshots, with this bar:
        # paddings carry the background alone, filled space the widget's style, and text
        # its offset in its widget's content (what Textual's text selection reads).
        back = Style(bgcolor=base.bgcolor)
        fill = base + Style(reverse=False)
        icon_base, icon_back, icon_fill = base, back, fill
        if self._icon_hover:
            # ``HeaderIcon:hover``: ``$foreground 10%`` over the bar's background
            foreground = Color.parse(self.app.theme_variables["foreground"])
            hover = Style(
                bgcolor=(self.background_colors[1] + foreground.with_alpha(0.1)).rich_color
            )
            icon_base, icon_back, icon_fill = base + hover, back + hover, fill + hover
        title_width = max(width - ICON_WIDTH - CLOCK_WIDTH, 0)
        title = self._title().truncate(title_width, ellipsis=True)
        left = (title_width - title.cell_length) // 2
        right = title_width - left - title.cell_length
        pieces: list[Segment] = []
        offset = 0
        for text, style, _ in title.render_segments(self.visual_style):
            pieces.append(Segment(text, _at(style, offset)))
            offset += len(text)
        segments = [
            Segment(" ", icon_back),
            Segment(ICON, _at(icon_base, 0)),
            Segment(" " * (ICON_WIDTH - 3), icon_fill),
            Segment(" ", icon_back),
            Segment(" " * left, fill),
            *pieces,
            Segment(" " * right, fill),
            Segment(" ", back),
            Segment("", _at(base, 0)),
            Segment(" " * (CLOCK_WIDTH - 2), back),
            Segment(" ", back),
        ]
        return Strip(segments).crop_extend(0, width, back)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._hover_icon(event.x < ICON_WIDTH)

    def on_leave(self) -> None:
        self._hover_icon(False)

    def _hover_icon(self, hover: bool) -> None:
        if hover != self._icon_hover:
            self._icon_hover = hover
            self.tooltip = "Open the command palette" if hover else None
            self.refresh()

    async def on_click(self, event: events.Click) -> None:
        if event.x < ICON_WIDTH and self.app.ENABLE_COMMAND_PALETTE:
            event.stop()
            await self.run_action("app.command_palette")
