"""Small deterministic charts on textual-plotext: horizontal bars, and stacked bars per day.

Each chart holds its data as a plain attribute and draws the plotext figure inside ``render``,
where the widget's size is known, so ticks and bar rows always fit the space they get. The
plotext theme is pinned (``textual-clear``: the canvas takes the widget's background), and every
colour is an explicit RGB value, so a snapshot never depends on the terminal or the app theme.

Producer text (agent, tool names) reaches plotext through ``safe()``: plotext output is parsed
back as ANSI, so a raw escape sequence in a name would otherwise be interpreted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import RenderResult
from textual_plotext import PlotextPlot

from agent_replay.display import safe, truncate

CHART_THEME = "textual-clear"
"""The plotext theme every chart uses."""

RGB = tuple[int, int, int]
BLUE: RGB = (0, 130, 200)
GREEN: RGB = (60, 180, 75)
RED: RGB = (230, 25, 75)
ORANGE: RGB = (245, 130, 48)
PURPLE: RGB = (160, 90, 220)


def compact(value: float) -> str:
    """A short count for a tick or a label: 950, 9.4k, 12k, 1.2M."""
    if abs(value) < 1000:
        return f"{value:.0f}"
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if abs(value) >= size:
            scaled = value / size
            return f"{scaled:.1f}{unit}" if abs(scaled) < 10 else f"{scaled:.0f}{unit}"
    return f"{value:.0f}"  # pragma: no cover - unreachable


def money(value: float) -> str:
    """A short USD amount: $0.0123, $1.23, $1.2k."""
    if value == 0:
        return "$0"
    if abs(value) < 1:
        return f"${value:.4f}"
    if abs(value) < 1000:
        return f"${value:.2f}"
    return "$" + compact(value)


class PlotChart(PlotextPlot):
    """A plotext plot with a fixed theme and an empty-state message."""

    DEFAULT_CSS = """
    PlotChart {
        width: 1fr;
        height: 1fr;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    PlotChart.-no-data {
        content-align: center middle;
        color: $text-muted;
    }
    """

    def __init__(
        self,
        empty_text: str = "no data",
        *,
        id: str | None = None,  # noqa: A002 - Textual's own parameter name
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.set_reactive(PlotextPlot.theme, CHART_THEME)  # type: ignore[misc]  # untyped var
        self.empty_text = empty_text
        """What the chart says when it has nothing to draw."""

    @property
    def has_data(self) -> bool:
        raise NotImplementedError

    def render(self) -> RenderResult:
        if not self.has_data:
            return Text(self.empty_text)
        self.plt.clear_figure()
        self.draw(self.size.width, self.size.height)
        return super().render()

    def draw(self, width: int, height: int) -> None:
        """Draw the figure for a widget of this size (plotext state is fresh)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Bar:
    """One bar: a label (producer text is fine: it is escaped) and a value."""

    label: str
    value: float


class HBarChart(PlotChart):
    """Horizontal bars, largest on top, one terminal row per bar, each labelled with its value
    (so no frame, axes or ticks).

    Bars of zero are left out, and so are the smallest when there are more bars than rows.
    """

    def __init__(
        self,
        empty_text: str = "no data",
        *,
        color: RGB = BLUE,
        fmt: Callable[[float], str] = compact,
        id: str | None = None,  # noqa: A002 - Textual's own parameter name
        classes: str | None = None,
    ) -> None:
        super().__init__(empty_text, id=id, classes=classes)
        self.color = color
        self.fmt = fmt
        self.bars: list[Bar] = []
        """The bars, in the order given (the chart sorts them)."""

    @property
    def has_data(self) -> bool:
        return any(bar.value > 0 for bar in self.bars)

    def set_bars(self, bars: Sequence[Bar]) -> None:
        """Replace the bars and redraw."""
        self.bars = list(bars)
        self.set_class(not self.has_data, "-no-data")
        self.refresh()

    def draw(self, width: int, height: int) -> None:
        rows = max(height, 1)  # no frame and no ticks: every row can hold a bar
        drawable = [bar for bar in self.bars if bar.value > 0]
        shown = sorted(drawable, key=lambda b: (-b.value, b.label))[:rows]
        label_width = max(6, min(24, width // 3))
        labels = [
            f"{truncate(safe(bar.label), label_width)} {self.fmt(bar.value)} "
            for bar in reversed(shown)  # plotext draws the first bar at the bottom
        ]
        values = [bar.value for bar in reversed(shown)]
        plt = self.plt
        plt.bar(labels, values, orientation="horizontal", width=0.4, color=self.color)
        plt.frame(False)
        plt.xaxes(False, False)
        plt.yaxes(False, False)
        plt.xticks([])
        # One row per unit of y, the largest bar on the top row: plotext maps [low, high]
        # onto the rows 0..rows-1.
        count = len(shown)
        plt.ylim(count - rows + 1, count)
        plt.xlim(0, max(values))


@dataclass(frozen=True)
class DayBar:
    """One day: its tick label (``05-19``), all traces, and the failed ones."""

    label: str
    total: int
    failed: int


class DailyChart(PlotChart):
    """Stacked bars per day: the traces that did not fail, and the failed ones on top.

    The day labels under the x axis are written by the chart, not by plotext: plotext drops and
    shifts crowded tick labels in an order that depends on the process's hash seed, so the same
    data drew different labels from run to run. plotext draws the tick marks (with blank labels,
    which keeps the label row); each label is then centred under its mark, right to left so
    today's always shows, leaving out any that would touch its neighbour.
    """

    def __init__(
        self,
        empty_text: str = "no data",
        *,
        id: str | None = None,  # noqa: A002 - Textual's own parameter name
        classes: str | None = None,
    ) -> None:
        super().__init__(empty_text, id=id, classes=classes)
        self.days: list[DayBar] = []
        """One entry per day, oldest first."""
        self._tick_labels: list[str] = []

    @property
    def has_data(self) -> bool:
        return any(day.total for day in self.days)

    def set_days(self, days: Sequence[DayBar]) -> None:
        """Replace the days and redraw."""
        self.days = list(days)
        self.set_class(not self.has_data, "-no-data")
        self.refresh()

    def render(self) -> RenderResult:
        drawn = super().render()
        if not self.has_data or not isinstance(drawn, Text):
            return drawn
        return label_ticks(drawn, self._tick_labels)

    def draw(self, width: int, height: int) -> None:
        count = len(self.days)
        positions = list(range(1, count + 1))
        ok = [day.total - day.failed for day in self.days]
        failed = [day.failed for day in self.days]
        plt = self.plt
        plt.stacked_bar(positions, [ok, failed], color=[GREEN, RED], width=0.6)  # type: ignore[arg-type]
        top = max(day.total for day in self.days)
        plt.ylim(0, top)
        plt.yticks(*_int_ticks(top))
        # A tick label is five characters; leave a space between two.
        plot_width = max(width - len(str(top)) - 3, 6)
        every = max(1, math.ceil(count * 6 / plot_width))
        ticks = positions[::-1][::every][::-1]
        self._tick_labels = [self.days[p - 1].label for p in ticks]
        plt.xticks([float(p) for p in ticks], [" "] * len(ticks))
        # Room for half a tick label past the last bar, or the label would not fit.
        pad = max(0.6, 3 * count / plot_width)
        plt.xlim(1 - pad, count + pad)


def label_ticks(drawn: Text, labels: Sequence[str]) -> Text:
    """``drawn`` (a plotext figure whose x ticks have blank labels) with ``labels`` written in
    its last row, each centred under its tick mark (``┬`` on the axis row above).

    Labels are placed right to left; one that would touch the label on its right is left out.
    When the marks can't be matched to the labels (plotext merged two), the figure is returned
    with no labels rather than wrong ones.
    """
    lines = drawn.split("\n", allow_blank=True)
    axis = next((i for i in range(len(lines) - 1, -1, -1) if "└" in lines[i].plain), None)
    if axis is None or axis + 1 >= len(lines):
        return drawn
    marks = [col for col, char in enumerate(lines[axis].plain) if char == "┬"]
    if len(marks) != len(labels):
        return drawn
    width = lines[axis + 1].cell_len
    row = [" "] * width
    limit = width  # a label placed next (further left) must end before this column
    for col, label in zip(reversed(marks), reversed(labels), strict=True):
        start = min(max(col - len(label) // 2, 0), width - len(label))
        if start < 0 or start + len(label) > limit:
            continue
        row[start : start + len(label)] = label
        limit = start - 1
    lines[axis + 1] = Text("".join(row))
    return Text("\n").join(lines)


def _int_ticks(top: int) -> tuple[list[float], list[str]]:
    """At most three integer ticks from 0 to ``top`` (plotext's own would label 2.3 traces)."""
    ticks = sorted({0, top // 2, top})
    return [float(t) for t in ticks], [compact(t) for t in ticks]
