"""The one-widget title line (``TitleBar``) on the timeline: the line Textual's ``Header``
drew, the screen's title and the trace id, kept current, and the icon's palette."""

from __future__ import annotations

from typing import Any

from textual.command import CommandPalette
from textual.widgets import Header
from tuikit import SIZE, settle

from agent_replay.screens.timeline import TimelineScreen
from agent_replay.widgets.title_bar import TitleBar

TOOLCHAIN = "trc_demo2toolchain"


def _icon_background(app: Any, widget: Any) -> Any:
    strip = app.screen._compositor.render_strips()[widget.region.y]
    return list(strip.crop(1, 2))[0].style.bgcolor


def _line(app: Any, widget: Any) -> str:
    """What the widget's first line reads on screen."""
    return "".join(s.text for s in app.screen._compositor.render_strips()[widget.region.y])


async def test_the_timeline_has_one_title_widget_reading_as_the_header(seeded_store, tui) -> None:
    """One widget, no Header (four widgets) on the timeline; it reads the screen's title and
    the trace id, centred between the icon and the clock's space, as Header did."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TimelineScreen)
        assert not screen.query(Header)
        bar = screen.query_one(TitleBar)
        assert not bar.children
        assert bar.title_text == f"Timeline — {TOOLCHAIN}"
        line = _line(app, bar)
        assert len(line) == SIZE[0]
        assert line.startswith(" ⭘      ")
        title = f"Timeline — {TOOLCHAIN}"
        left = 8 + (SIZE[0] - 18 - len(title)) // 2
        assert line[left : left + len(title)] == title


async def test_the_title_follows_the_screen_sub_title(seeded_store, tui) -> None:
    """A new sub-title (the trace id once resolved from a prefix) is drawn at once."""
    app = tui(seeded_store, initial_trace="trc_demo2tool")  # a prefix: resolved on load
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(TitleBar)
        assert bar.title_text == f"Timeline — {TOOLCHAIN}"
        app.screen.sub_title = "elsewhere"
        await pilot.pause()
        assert "Timeline — elsewhere" in _line(app, bar)


async def test_a_long_title_is_cut_with_an_ellipsis(seeded_store, tui) -> None:
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=(40, 20)) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(TitleBar)
        line = _line(app, bar)
        assert len(line) == 40
        assert "…" in line[8:30]
        assert line[30:] == " " * 10


async def test_clicking_the_icon_opens_the_command_palette(seeded_store, tui) -> None:
    """As Header's icon does (highlighted under the mouse, with its tooltip); elsewhere on
    the line a click does nothing."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(TitleBar)
        await pilot.click(TitleBar, offset=(40, 0))
        await pilot.pause()
        assert not isinstance(app.screen, CommandPalette)
        plain = _icon_background(app, bar)
        await pilot.hover(TitleBar, offset=(2, 0))
        await pilot.pause()
        assert bar.tooltip == "Open the command palette"
        assert _icon_background(app, bar) != plain  # highlighted under the mouse
        await pilot.click(TitleBar, offset=(2, 0))
        await settle(pilot)
        assert isinstance(app.screen, CommandPalette)
