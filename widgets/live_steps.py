"""``LiveSteps``: a ``StepTimeline`` that grows while a trace runs and follows its tail.

Rows are ``LiveStepRow``s: a ``StepRow`` that also knows whether the step is still open and
whether it is a guard check that blocked. Errors (error steps, failed tool calls) get a red
tint across the row, blocked guard checks a warning tint, open steps a ``⋯`` marker.

Following: while ``follow`` is on, every update puts the cursor on the newest step. Moving up
(keys, a click, the mouse wheel) turns it off, so new steps don't yank the view away from what
the user is reading; reaching the last step again (End, or Down onto it) turns it back on. The
user's moves set ``follow`` synchronously, before any queued update is applied.

A TUI module: imports Textual and Rich, never the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from rich.style import Style
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip

from agent_replay.widgets.cursor_lines import PLAIN, Cells
from agent_replay.widgets.step_timeline import StepRow, StepTimeline


@dataclass(frozen=True, slots=True)
class LiveStepRow(StepRow):
    """A timeline row of a step that may still be running."""

    is_open: bool = False
    """Started and not yet ended."""
    blocked: bool = False
    """A guard check that blocked its action."""
    note: str = field(default="", compare=False)
    """One line for the note under the list: the error, or the guard's verdict (escaped)."""

    @property
    def is_error(self) -> bool:
        """Shown as an error: an error step, or a step that failed (blocks are apart)."""
        return not self.blocked and (self.step_type == "error" or self.has_error)


class LiveSteps(StepTimeline):
    """The steps of a running trace; follows the newest step unless the user moved away."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *StepTimeline.COMPONENT_CLASSES,
        "live-steps--error-row",
        "live-steps--blocked-row",
        "live-steps--blocked",
        "live-steps--open",
    }

    DEFAULT_CSS = """
    LiveSteps {
        & > .live-steps--error-row { background: $error 18%; }
        & > .live-steps--blocked-row { background: $warning 18%; }
        & > .live-steps--blocked { color: $text-warning; text-style: bold; }
        & > .live-steps--open { color: $text-accent; text-style: bold; }
    }
    """

    follow: reactive[bool] = reactive(True, init=False)
    """Keep the cursor on the newest step as steps arrive."""

    @dataclass
    class FollowChanged(Message):
        """``follow`` was turned on or off (by the user or by ``toggle_follow``)."""

        follow: bool
        live_steps: LiveSteps | None = field(default=None, repr=False, compare=False)

        @property
        def control(self) -> LiveSteps | None:
            return self.live_steps

    # --- data -------------------------------------------------------------------------

    def show_rows(self, rows: Sequence[LiveStepRow], *, new_trace: bool = False) -> None:
        """Show the steps as they are now.

        Args:
            rows: every step of the trace, in step order.
            new_trace: these are another trace's steps: start following its tail.
        """
        if new_trace:
            self.follow = True
        if self.follow:
            self.set_steps(rows, select=rows[-1].number if rows else None)
            return
        # Not following: the cursor stays on its step and the view where the user left it.
        y = self.scroll_offset.y
        self.set_steps(rows, select=self.selected_step)
        self.scroll_to(y=y, animate=False, immediate=True)

    @property
    def at_end(self) -> bool:
        """The cursor is on the newest step (or there are none)."""
        return self.cursor >= len(self.rows) - 1

    def watch_follow(self, follow: bool) -> None:
        if follow and self.rows:
            self.cursor = len(self.rows) - 1
        self.post_message(self.FollowChanged(follow, self))

    # --- the user's moves decide whether to follow ------------------------------------

    def _user_moved(self) -> None:
        self.follow = self.at_end

    def action_cursor_up(self) -> None:
        super().action_cursor_up()
        self._user_moved()

    def action_cursor_down(self) -> None:
        super().action_cursor_down()
        self._user_moved()

    def action_page_up(self) -> None:
        super().action_page_up()
        self._user_moved()

    def action_page_down(self) -> None:
        super().action_page_down()
        self._user_moved()

    def action_first(self) -> None:
        super().action_first()
        self._user_moved()

    def action_last(self) -> None:
        super().action_last()
        self._user_moved()

    def on_click(self, event: events.Click) -> None:
        event.prevent_default()  # the timeline's handler runs here, once, before the check
        super().on_click(event)
        self._user_moved()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        if self.max_scroll_y > 0:
            self.follow = False

    # --- rendering --------------------------------------------------------------------

    def render_row(self, index: int, width: int, is_cursor: bool) -> Strip:
        strip = super().render_row(index, width, is_cursor)
        row = self.rows[index]
        if is_cursor or not isinstance(row, LiveStepRow):
            return strip
        tint = None
        if row.blocked:
            tint = "blocked-row"
        elif row.is_error:
            tint = "error-row"
        if tint is None:
            return strip
        background = self.get_component_rich_style(f"live-steps--{tint}").bgcolor
        # A base style: cells with a background of their own (the bar track) keep it.
        return strip.apply_style(Style(bgcolor=background))

    def _name_cell(self, row: StepRow, width: int) -> Cells:
        """The name, then markers: open ⋯, snapshot ◉, decision ◆, error ✗, blocked ⊘."""
        if not isinstance(row, LiveStepRow):
            return super()._name_cell(row, width)
        markers = Cells()
        if row.is_open:
            markers.add(" ⋯", self._live_style("open"))
        if row.has_snapshot:
            markers.add(" ◉", self._style("muted"))
        if row.has_decision and row.step_type != "decision":
            markers.add(" ◆", self._style("decision"))
        if row.blocked:
            markers.add(" ⊘", self._live_style("blocked"))
        elif row.is_error and row.step_type != "error":
            markers.add(" ✗", self._style("error"))
        if not row.name:
            name_style = self._style("muted")
        elif row.blocked:
            name_style = self._live_style("blocked")
        elif row.is_error:
            name_style = self._style("error")
        else:
            name_style = PLAIN
        name = Cells()
        name.add(row.name or "—", name_style)
        name.truncate(max(1, width - markers.cell_len))
        name.extend(markers)
        name.truncate(width, pad=True)
        return name

    def _live_style(self, name: str) -> Style:
        return self.get_component_rich_style(f"live-steps--{name}", partial=True)
