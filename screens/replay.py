"""Replay (time travel): play a trace back step by step, paced by its recorded durations, and see
the agent's state at the playhead.

The trace loads in a thread worker; from then on everything is arithmetic on the loaded steps
(``agent_replay.services.replay``), done on the UI thread without touching the store. Playback
chains one-shot ``set_timer`` calls, each as long as the next step's scaled duration, and pausing
cancels the pending one: nothing ever sleeps on the UI thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.cache import LRUCache
from textual.containers import Horizontal
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Input, ProgressBar, Static

from agent_replay.display import fmt_int, fmt_ms, safe, truncate
from agent_replay.errors import AgentReplayError
from agent_replay.screens.base import TraceScreen
from agent_replay.services.replay import INSTANT, Replay, faster, slower, speed_label
from agent_replay.widgets.cursor_lines import LineView
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.replay_state import ReplayState
from agent_replay.widgets.step_timeline import STEP_ICONS
from agent_replay.widgets.title_bar import TitleBar

COLUMNS = (
    ("#", "number", 3),
    ("STEP", "step", 14),
    ("NAME", "name", 18),
    ("TIME", "time", 6),
    ("TOKENS", "tokens", 6),
    ("Σ TOKENS", "running", 8),
)
"""The step table's columns: label, key and width in cells."""
TUI_SPEED = 1.0
"""The screen starts at 1×: as recorded (long steps capped), so the playhead can be watched."""


class PlayheadView(LineView, can_focus=False):
    """The revealed steps, the last one (the playhead) highlighted: a Line-API view that
    renders only the visible lines, so a move costs the same at step 5,000 as at step 1.
    Never focused: the screen owns every key.

    ``row_count``, ``cursor_row`` and ``get_row_at`` read like a ``DataTable``'s.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "playhead-view--header",
        "playhead-view--cursor",
        "playhead-view--error",
        "playhead-view--muted",
    }
    DEFAULT_CSS = """
    PlayheadView {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        & > .playhead-view--header { color: $text-muted; text-style: bold; }
        & > .playhead-view--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .playhead-view--error { color: $text-error; }
        & > .playhead-view--muted { color: $text-muted; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._cells: Callable[[int], list[Text]] = lambda index: []
        self._count = 0
        self._cache: LRUCache[tuple[int, int, bool], Strip] = LRUCache(256)
        self._styles: dict[str, Style] = {}
        self._header: tuple[int, Strip] | None = None
        self.widths = [width for _, _, width in COLUMNS]
        """Cells per column (the step number's grows with the trace: ``10000`` needs 5)."""

    @property
    def row_count(self) -> int:
        """Steps revealed."""
        return self._count

    @property
    def cursor_row(self) -> int:
        """The playhead's row (the last revealed), ``-1`` before the first step."""
        return self._count - 1

    def get_row_at(self, index: int) -> list[Text]:
        """The cells of row ``index``."""
        return self._cells(index)

    def show(self, count: int, cells: Callable[[int], list[Text]] | None = None) -> None:
        """Reveal the first ``count`` steps (``cells`` builds a row's cells on demand)."""
        if cells is not None:
            self._cells = cells
            self._cache.clear()
            self._header = None  # the column widths may have changed
        old, self._count = self._count, count
        # + the header line; and never shorter than the lines in view, so a step back at the
        # end leaves the view where it is (a scroll repaints every line) and shows a blank
        # line under the playhead instead. A playhead out of view scrolls (and may shrink it).
        height = self.scrollable_content_region.height
        top = self._top_for_playhead()
        self._grow(Size(0, max(count + 1, top + height if height > 1 else 0)))
        self._keep_playhead_in_view()
        # The rows revealed or hidden, and the old and new playhead rows.
        first, last = min(old, count) - 1, max(old, count)
        if last - first > height:
            self.refresh()
        else:
            for index in range(first, last + 1):
                self._refresh_row(index)

    def _grow(self, size: Size) -> None:
        """Set the virtual size without a layout pass while the scrollbar stays as it is: a
        pass re-arranges and re-renders the whole screen, and a step only adds a line. When
        the scrollbar appears or goes, the assignment asks for the pass it needs."""
        if size == self.virtual_size:
            return
        height = self.container_size.height
        if not height or (size.height > height) != (self.virtual_size.height > height):
            self.virtual_size = size
            return
        self.set_reactive(ScrollView.virtual_size, size)
        # What Textual runs when a layout pass changes the virtual size (Widget._size_updated):
        # the scrollbar's window and the scroll limits follow the new size.
        self._scroll_update(size)

    def _top_for_playhead(self) -> int:
        """The first row in view once the playhead is in view (scrolling the least)."""
        page = self.scrollable_content_region.height - 1
        top, count = self.scroll_offset.y, self._count
        if page >= 1 and (count - 1 < top or count > top + page):
            return max(0, count - page)
        return top

    def _keep_playhead_in_view(self) -> None:
        if self.scrollable_content_region.height < 2:
            return  # not laid out yet (the screen was loading): on_resize scrolls
        top = self._top_for_playhead()
        if top != self.scroll_offset.y:
            self.scroll_to(y=top, animate=False, immediate=True)

    def on_resize(self) -> None:
        """Opened at step N, the playhead is placed once the view has its size."""
        self._keep_playhead_in_view()

    def _refresh_row(self, index: int) -> None:
        y = index - self.scroll_offset.y + 1
        if y >= 1:
            self.refresh(Region(0, y, self.size.width, 1))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._styles.clear()
        self._header = None

    def _style(self, name: str) -> Style:
        """A component's Rich style, looked up once per style change (a lookup costs more
        than building a row)."""
        style = self._styles.get(name)
        if style is None:
            style = self.get_component_rich_style(f"playhead-view--{name}", partial=True)
            self._styles[name] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            if self._header is None or self._header[0] != width:
                header = Text(no_wrap=True, end="")
                for (label, _, _), cell_width in zip(COLUMNS, self.widths, strict=True):
                    header.append(" " + label.ljust(cell_width)[:cell_width], self._style("header"))
                self._header = (width, self._strip(header, width))
            return self._header[1]
        index = self.scroll_offset.y + y - 1
        if not 0 <= index < self._count:
            return Strip.blank(width, self.base_style)
        is_cursor = index == self._count - 1
        key = (index, width, is_cursor)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._row_strip(index, width, is_cursor)
            self._cache[key] = strip
        return strip

    def _row_strip(self, index: int, width: int, is_cursor: bool) -> Strip:
        """Row ``index`` as Segments built directly: the same Segments (text and styles) as
        rendering the row's ``Text`` through the console, at a fraction of the cost (a jump
        draws a screenful of rows)."""
        runs: list[tuple[str, str]] = []  # (text, the cell's style), in order
        for cell_width, cell in zip(self.widths, self._cells(index), strict=True):
            plain = cell.plain
            if cell_len(plain) > cell_width:
                plain = set_cell_size(plain, cell_width - 1) + "…"
            pad = " " * max(cell_width - cell_len(plain), 0)
            style = str(cell.style)
            if cell.justify == "right":
                runs += [(" " + pad, ""), (plain, style)]
            else:
                runs += [(" ", ""), (plain, style), (pad, "")]
        cursor = self._style("cursor") if is_cursor else None
        if cursor is None and not any(style for _, style in runs):
            segments = [Segment("".join(text for text, _ in runs))]  # no span: no style
        else:
            # What Text.render yields once there is a span: every run on the null style,
            # the cell's style over it, then the cursor's over both.
            null = Style.null()
            segments = []
            for text, style in runs:
                if not text:
                    continue
                parts = [null]
                if style:
                    parts.append(self.app.console.get_style(style))
                if cursor is not None:
                    parts.append(cursor)
                segments.append(Segment(text, Style.combine(parts)))
        return Strip(segments).crop_extend(0, width, self.base_style).simplify()

    def _strip(self, text: Text, width: int) -> Strip:
        segments = list(text.render(self.app.console))
        return Strip(segments).crop_extend(0, width, self.base_style).simplify()


class ReplayScreen(TraceScreen):
    """Play a trace back: the steps revealed so far, and the state at the playhead."""

    TITLE = "Replay"
    CSS_PATH = "replay.tcss"
    AUTO_FOCUS = ""  # nothing takes focus: the screen owns every key ("" not None: None inherits)
    BINDINGS = [
        Binding(
            "escape", "back", "Back", id="back", tooltip="Back (or cancel the jump)", priority=True
        ),
        Binding("space", "toggle_play", "Play/Pause", id="play", tooltip="Play or pause"),
        Binding("right,l", "step(1)", "Step", id="replay-forward", tooltip="One step forward"),
        Binding("left,h", "step(-1)", "Back a step", id="replay-back", tooltip="One step back"),
        Binding("g", "jump", "Jump", id="jump", tooltip="Jump to a step number"),
        Binding("plus,equals_sign", "faster", "Faster", id="faster", tooltip="Play faster"),
        Binding("minus,underscore", "slower", "Slower", id="slower", tooltip="Play slower"),
        Binding("home", "start", "Start", id="start", tooltip="Before the first step", show=False),
        Binding("end", "finish", "End", id="end", tooltip="The end of the run", show=False),
    ]

    # repaint=False on the three: a reactive on a screen repaints the whole screen when it
    # changes; a move repaints only the widgets it updates.
    position: reactive[int] = reactive(0, init=False, repaint=False)
    """Steps revealed: 0 is before the first step, the step count is the end."""
    playing: reactive[bool] = reactive(False, init=False, repaint=False)
    """Whether the playhead is advancing on its own."""
    speed: reactive[float] = reactive(TUI_SPEED, init=False, repaint=False)
    """Playback speed: 1, 2, 5, 10, 20, or 0 for instant."""

    def __init__(self, trace_id: str, *, at_step: int | None = None) -> None:
        """Args:
        trace_id: a trace id or unique prefix.
        at_step: open paused with this step current (default: before the first step).
        """
        super().__init__(trace_id)
        self._at_step = at_step
        self._replay = Replay([])
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="replay-bar"):
            yield Static("", id="replay-status")
            yield ProgressBar(total=1, show_eta=False, id="replay-progress")
        with Horizontal(id="replay-body"):
            yield PlayheadView(id="replay-steps")
            yield ReplayState(id="replay-state")
        jump = Input(
            placeholder="jump to step number, then Enter (Esc cancels)",
            type="integer",
            id="jump-input",
        )
        jump.can_focus = False  # the screen types into it (on_key)
        yield jump
        yield KeyBar()

    @property
    def table(self) -> PlayheadView:
        return self.query_one("#replay-steps", PlayheadView)

    @property
    def state_panel(self) -> ReplayState:
        return self.query_one("#replay-state", ReplayState)

    @property
    def replay(self) -> Replay:
        """The loaded replay (empty until the trace arrives)."""
        return self._replay

    def on_mount(self) -> None:
        self.query_one("#replay-body").loading = True
        self.load_trace()

    @on(TraceScreen.TraceLoaded)
    def start_replay(self, message: TraceScreen.TraceLoaded) -> None:
        trace = message.trace
        self.trace_id = trace["id"]
        self._replay = Replay.from_trace(trace)
        self.query_one("#replay-body").loading = False
        self.query_one("#replay-progress", ProgressBar).update(total=max(self._replay.total, 1))
        self.state_panel.end = self._replay.state_at(self._replay.total)
        last = self._replay.steps[-1]["step_number"] if self._replay.steps else 0
        self.table.widths[0] = max(COLUMNS[0][2], len(str(last)))
        running = f"{self._replay.tokens_at(self._replay.total):,}"
        self.table.widths[-1] = max(COLUMNS[-1][2], len(running))  # 2,381,325 needs 9
        self.table.show(0, self._row)
        self.sub_title = f"{trace['id']} · {truncate(safe(trace['agent_name']), 40)}"
        start = 0
        if self._at_step is not None:
            try:
                start = self._replay.position_of(self._at_step)
            except AgentReplayError:
                start = 0
        self.position = start
        self._show_position(start)

    @on(TraceScreen.TraceLoadFailed)
    def show_error(self, message: TraceScreen.TraceLoadFailed) -> None:
        self.query_one("#replay-body").loading = False
        self.query_one("#replay-status", Static).update(Text(message.error, style="red"))
        self.notify(message.error, title="Replay", severity="error")

    # --- the playhead -----------------------------------------------------------------

    def validate_position(self, position: int) -> int:
        return self._replay.clamp(position)

    def watch_position(self, position: int) -> None:
        self._show_position(position)

    def watch_playing(self, playing: bool) -> None:
        if playing and self.position >= self._replay.total:
            self.position = 0  # play at the end starts over
        self._schedule()
        self._show_status()

    def watch_speed(self, speed: float) -> None:
        self._schedule()
        self._show_status()

    def _schedule(self) -> None:
        """Arm the timer that reveals the next step (or stop at the end)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if not self.playing:
            return
        if self.position >= self._replay.total:
            self.playing = False
            return
        if self.speed == INSTANT:
            self.position = self._replay.total
            self.playing = False
            return
        delay = self._replay.delay_before(self.position, self.speed)
        self._timer = self.set_timer(delay, self._reveal_next, name="replay-playhead")

    def _reveal_next(self) -> None:
        self._timer = None
        if self.playing:
            self.position += 1
            self._schedule()

    def _show_position(self, position: int) -> None:
        self._sync_table(position)
        self.query_one("#replay-progress", ProgressBar).update(progress=position)
        self.state_panel.state = self._replay.state_at(position)
        self._show_status()

    def _sync_table(self, position: int) -> None:
        """Show exactly the first ``position`` steps, the last one as the playhead (constant
        cost: the view renders only what is visible)."""
        self.table.show(position)

    def _row(self, index: int) -> list[Text]:
        step = self._replay.steps[index]
        icon = STEP_ICONS.get(step["step_type"], "•")
        tokens = step.get("tokens_used")
        return [
            Text(str(step["step_number"]), justify="right"),
            Text(f"{icon} {step['step_type']}", style="red" if step.get("error") else ""),
            Text(truncate(safe(step.get("name") or ""), 18)),
            Text(fmt_ms(step.get("duration_ms")), justify="right"),
            Text("-" if tokens is None else f"{tokens:,}", justify="right"),
            Text(fmt_int(self._replay.tokens_at(index + 1)), justify="right"),
        ]

    def _show_status(self) -> None:
        total = self._replay.total
        text = Text()
        if self.playing:
            text.append(" ▶ playing ", style="bold reverse green")
        elif total and self.position >= total:
            text.append(" ■ end ", style="bold reverse")
        else:
            text.append(" ‖ paused ", style="bold reverse yellow")
        text.append(f"  step {self.position} of {total}", style="bold")
        text.append(f"  ·  speed {speed_label(self.speed)}")
        state = self.state_panel.state
        if state is not None:
            text.append(f"  ·  {fmt_int(state.tokens)} tokens", style="dim")
            text.append(f"  ·  {fmt_ms(state.elapsed_ms)} recorded", style="dim")
        # One line of fixed height: no layout pass (a pass re-renders the whole screen).
        self.query_one("#replay-status", Static).update(text, layout=False)

    # --- actions ----------------------------------------------------------------------

    def action_toggle_play(self) -> None:
        self.playing = not self.playing

    def action_step(self, delta: int) -> None:
        """Frame-step: one step forward or back, pausing playback."""
        self.playing = False
        self.position += delta

    def action_start(self) -> None:
        self.position = 0
        self._schedule()

    def action_finish(self) -> None:
        self.position = self._replay.total
        self.playing = False

    def action_faster(self) -> None:
        self.speed = faster(self.speed)

    def action_slower(self) -> None:
        self.speed = slower(self.speed)

    def action_jump(self) -> None:
        jump = self.query_one("#jump-input", Input)
        jump.value = ""
        jump.display = True

    @property
    def typing(self) -> bool:
        return bool(self.query_one("#jump-input").display)

    def on_key(self, event: events.Key) -> None:
        """While the jump prompt is open, the screen types into it (digits, backspace) and
        Enter jumps; every other key is swallowed, Escape (a priority binding) cancels.

        The prompt is never focused: a change of focus repaints the whole screen (and
        restyles every widget), which made ``g`` and Enter cost a full frame each.
        """
        jump = self.query_one("#jump-input", Input)
        if not jump.display:
            return
        event.stop()
        event.prevent_default()
        if event.key == "enter":
            self._close_jump()
            self.jump_to_step(jump.value)
        elif event.key == "backspace":
            jump.value = jump.value[:-1]
        elif event.character is not None and event.character.isdigit():
            jump.value += event.character

    def jump_to_step(self, value: str) -> None:
        """Put step ``value`` (a step number, as typed) under the playhead, or say there is
        no such step."""
        if not value.strip():
            return
        try:
            position = self._replay.position_of(int(value))
        except (ValueError, AgentReplayError):
            self.notify(f"no step {safe(value)} in this trace", title="Jump", severity="error")
            return
        self.position = position
        self._schedule()

    def _close_jump(self) -> None:
        self.query_one("#jump-input", Input).display = False

    def action_back(self) -> None:
        if self.query_one("#jump-input").display:
            self._close_jump()
            return
        self.playing = False
        self.app.pop_screen()
