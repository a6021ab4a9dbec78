"""The dashboard: totals, charts and breakdowns over the last days, with drill-down into the trace
list.

The figures come from ``services.dashboard.load_dashboard`` in a thread worker, refreshed every
``refresh_seconds`` (a tick is skipped while a load is still running, and the timer pauses while
the screen is hidden), and posted back as ``DashboardScreen.DataLoaded``. Enter on a row of the
agents, statuses or failing-tools table posts ``OpenTraces`` with the filter-bar query of that row
and the window, which the app answers by showing the trace list filtered. Every time window
comes from ``app.clock``. Producer text (agent and tool names, statuses, evaluators) is shown as
plain ``Text`` after ``safe()``.
"""

from __future__ import annotations

import datetime as dt
import shlex
from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState, get_current_worker

from agent_replay.display import fmt_int, safe, truncate
from agent_replay.messages import OpenTraces
from agent_replay.screens.base import BaseScreen, read_store
from agent_replay.services.dashboard import (
    DEFAULT_DAYS,
    WINDOWS,
    DashboardData,
    StepCache,
    load_dashboard,
)
from agent_replay.widgets.charts import (
    BLUE,
    GREEN,
    ORANGE,
    PURPLE,
    RED,
    Bar,
    DailyChart,
    DayBar,
    HBarChart,
    compact,
    money,
)
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.status import status_rich_style
from agent_replay.widgets.title_bar import TitleBar

EMPTY_STORE = (
    "No traces yet, so there is nothing to chart.\n\n"
    "Load the samples:   agent-replay demo\n"
    "Or ingest a file:   agent-replay ingest traces.jsonl\n"
    "Or record a run:    agent-replay run -- python my_agent.py\n\n"
    "The dashboard picks them up on its next refresh (or press r)."
)


def _rgb(color: tuple[int, int, int]) -> str:
    return f"rgb({color[0]},{color[1]},{color[2]})"


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def _fit(text: str, suffix: str, width: int) -> str:
    """``text`` plus ``suffix`` when both fit in ``width`` cells, else ``text`` alone."""
    return text + suffix if len(text) + len(suffix) <= width else text


def _cell(text: str, width: int = 28, style: str | Style = "") -> Text:
    """Producer text as a plain, escaped, truncated cell."""
    return Text(truncate(safe(text), width), style=style)


def _num(text: str, style: str = "") -> Text:
    return Text(text, style=style, justify="right")


class DrillTable(DataTable[Any]):
    """A table whose rows are keyed by the filter-bar query they drill down to."""

    BINDINGS = [
        Binding(
            "enter",
            "select_cursor",
            "Open traces",
            id="drill-down",
            tooltip="Open the trace list filtered to the highlighted row",
        ),
    ]

    def __init__(self, *, id: str) -> None:  # noqa: A002 - Textual's own parameter name
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)


class Card(Static):
    """One total: a big value under a title, with a note in the bottom border; on a narrow
    screen (``-inline``) the border goes and title, value and note are three centred lines,
    so an 80-column card reads "Traces", not "Tra…"."""

    def __init__(self, title: str, *, short: str = "", id: str, classes: str) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.title = title
        self.short = short or title
        """The title inside the card (at most 12 cells, the narrowest card's width)."""
        self._value = ""
        self._note = ""
        self.border_title = title

    def show(self, value: str, note: str = "", *, alert: bool = False) -> None:
        """Set the value and the note (our own text, never producer text)."""
        self._value, self._note = value, note
        self.set_class(alert, "-alert")
        self._paint()

    def set_inline(self, inline: bool) -> None:
        """Title and note inside the card (narrow screens) or in its border."""
        if inline != self.has_class("-inline"):
            self.set_class(inline, "-inline")
            self._paint()

    def _paint(self) -> None:
        if self.has_class("-inline"):
            self.border_title = self.border_subtitle = ""
            lines = Text(justify="center", no_wrap=True, overflow="ellipsis")
            lines.append(f"{self.short}\n", style="dim")
            lines.append(self._value, style="bold")
            lines.append(f"\n{self._note}", style="dim")
            self.update(lines)
        else:
            self.border_title, self.border_subtitle = self.title, self._note
            self.update(Text(self._value, style="bold"))


class DashboardScreen(BaseScreen):
    """Totals and charts over the last days of the store."""

    TITLE = "Dashboard"
    CSS_PATH = "dashboard.tcss"
    BINDINGS = [
        Binding("r", "reload", "Refresh", id="refresh", tooltip="Recompute the figures now"),
        Binding(
            "w",
            "cycle_window",
            "Window",
            id="window",
            tooltip="Show the last 7, 14, 30 or 90 days",
        ),
        Binding(
            "c",
            "cycle_cost",
            "Cost by",
            id="cost-by",
            tooltip="The cost panel by agent, by model or by day",
        ),
    ]

    cost_by: reactive[str] = reactive("agent")
    """What the cost panel breaks the cost down by: ``agent``, ``model`` or ``day``."""

    days: reactive[int] = reactive(DEFAULT_DAYS, init=False)
    """The window's length in days (today included)."""

    @dataclass
    class DataLoaded(Message):
        """Fresh figures arrived from the worker."""

        data: DashboardData

    def __init__(self, refresh_seconds: float | None = None) -> None:
        super().__init__()
        self.refresh_seconds = refresh_seconds
        """Seconds between automatic refreshes (``None``: only on ``r``)."""
        self.data: DashboardData | None = None
        """The figures on screen (``None`` until the first load)."""
        self._worker: Worker[None] | None = None
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Vertical(id="dashboard-body"):
            with Horizontal(id="totals"):
                for key, title, short, width in (
                    ("traces", "Traces", "", ""),
                    ("steps", "Steps", "", ""),
                    ("tokens", "Tokens", "", ""),
                    ("cost", "Cost", "", ""),
                    ("failure-rate", "Failure rate", "", "-wide"),
                    ("eval-pass-rate", "Eval pass rate", "Evals passed", "-wide"),
                    ("guard-blocks", "Guard blocks", "", "-wide"),
                ):
                    yield Card(title, short=short, id=f"card-{key}", classes=f"card {width}")
            yield Static("", id="window-line")
            with Horizontal(id="charts-top", classes="dashboard-row"):
                with Vertical(id="per-day-panel", classes="panel"):
                    yield DailyChart(id="per-day-chart")
                with Vertical(id="step-types-panel", classes="panel"):
                    yield HBarChart(color=PURPLE, id="step-types-chart")
            with Horizontal(id="charts-bottom", classes="dashboard-row"):
                with Vertical(id="tokens-panel", classes="panel"):
                    yield HBarChart(color=BLUE, id="tokens-chart")
                with Vertical(id="cost-panel", classes="panel"):
                    yield HBarChart(color=ORANGE, fmt=money, id="cost-chart")
                with Vertical(id="tools-panel", classes="panel"):
                    yield DrillTable(id="tools-table")
                    yield Static("", classes="panel-empty")
            with Horizontal(id="tables", classes="dashboard-row"):
                with Vertical(id="agents-panel", classes="panel"):
                    yield DrillTable(id="agents-table")
                    yield Static("", classes="panel-empty")
                with Vertical(id="statuses-panel", classes="panel"):
                    yield DrillTable(id="statuses-table")
                    yield Static("", classes="panel-empty")
                with Vertical(id="evals-panel", classes="panel"):
                    yield DataTable(id="evals-table", cursor_type="none", zebra_stripes=True)
                    yield Static("", classes="panel-empty")
        yield Static(EMPTY_STORE, id="empty-state", classes="-empty-state", markup=False)
        yield KeyBar()

    NARROW = 120
    """Below this width the totals' titles and notes move inside their cards."""

    def on_resize(self) -> None:
        for card in self.query(Card):
            card.set_inline(self.size.width < self.NARROW)

    def on_mount(self) -> None:
        titles = {
            "#per-day-panel": "Traces per day",
            "#step-types-panel": "Step types",
            "#tokens-panel": "Tokens by agent",
            "#cost-panel": "Cost by agent",
            "#tools-panel": "Top failing tools",
            "#agents-panel": "Agents",
            "#statuses-panel": "Statuses",
            "#evals-panel": "Evaluations · labels",
        }
        for selector, title in titles.items():
            self.query_one(selector).border_title = title
        self.query_one(
            "#per-day-panel"
        ).border_subtitle = f"[{_rgb(GREEN)}]■[/] ok  [{_rgb(RED)}]■[/] failed"
        for selector in ("#agents-panel", "#statuses-panel", "#tools-panel"):
            self.query_one(selector).border_subtitle = "enter: traces"
        self.agents_table.add_columns("AGENT", "TRACES", "FAILED", "TOKENS", "COST")
        self.statuses_table.add_columns("STATUS", "TRACES", "SHARE")
        self.tools_table.add_columns("TOOL", "ERRORS", "TRACES")
        evals = self.query_one("#evals-table", DataTable)
        evals.add_columns("EVALUATOR", "PASS", "N")
        evals.can_focus = False
        self.query_one("#empty-state").display = False
        self.query_one("#dashboard-body").loading = True
        # set_focus, not focus(): focus() is deferred (app.call_later) and could land after
        # an empty store's DataLoaded has hidden the tables, leaving a hidden table focused.
        self.set_focus(self.agents_table)
        if self.refresh_seconds:
            self._timer = self.set_interval(self.refresh_seconds, self._tick)
        self.reload()

    @property
    def agents_table(self) -> DataTable[Any]:
        return self.query_one("#agents-table", DataTable)

    @property
    def statuses_table(self) -> DataTable[Any]:
        return self.query_one("#statuses-table", DataTable)

    @property
    def tools_table(self) -> DataTable[Any]:
        return self.query_one("#tools-table", DataTable)

    # --- loading ----------------------------------------------------------------------

    def reload(self, *, exact: bool = True) -> None:
        """Recompute the figures in a worker (a running load is superseded).

        Args:
            exact: read every day again; otherwise unchanged past days reuse the step figures
                of the last load (automatic refreshes do, to stay cheap on a large store).
        """
        cache = None if exact or self.data is None else self.data.step_cache
        self._worker = self._load(self.days, cache)

    def _tick(self) -> None:
        # A slow store must not pile up threads: skip the tick while a load is in flight.
        if self._worker is not None and self._worker.state in (
            WorkerState.PENDING,
            WorkerState.RUNNING,
        ):
            return
        self.reload(exact=False)

    @work(
        thread=True,
        exclusive=True,
        exit_on_error=False,
        group="dashboard",
        description="dashboard figures",
    )
    def _load(self, days: int, step_cache: StepCache | None) -> None:
        clock = self.app.clock
        with read_store(self.app) as store:
            data = load_dashboard(store, clock, days=days, step_cache=step_cache)
        if not get_current_worker().is_cancelled:
            self.post_message(self.DataLoaded(data))

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def on_screen_resume(self) -> None:
        if self._timer is not None:
            self._timer.resume()
            if self.data is not None:  # back from another mode: catch up at once
                self.reload(exact=False)

    # --- showing ----------------------------------------------------------------------

    def store_changed(self) -> None:
        """Something was written: the figures again (past days reused, as a timer tick)."""
        self._tick()

    @on(DataLoaded)
    def show_data(self, message: DataLoaded) -> None:
        data = message.data
        self.data = data
        self.mark_updated()
        body = self.query_one("#dashboard-body")
        body.loading = False
        body.display = not data.is_empty
        self.query_one("#empty-state").display = data.is_empty
        if data.is_empty:
            self.set_focus(None)  # the tables are hidden: their keys would be dead
            return
        if self.focused is None:
            self.set_focus(self.agents_table)
        self._show_totals(data)
        self._show_charts(data)
        self._show_tables(data)

    def _show_totals(self, data: DashboardData) -> None:
        totals = data.totals
        older = data.all_traces - totals.traces
        self._card("traces").show(
            fmt_int(totals.traces), f"of {compact(data.all_traces)}" if older else ""
        )
        per_trace = totals.steps / totals.traces if totals.traces else 0
        self._card("steps").show(
            fmt_int(totals.steps), f"{per_trace:.1f} avg" if totals.traces else ""
        )
        self._card("tokens").show(fmt_int(totals.tokens))
        cost = totals.cost_usd
        self._card("cost").show(f"${cost:,.4f}" if cost < 1 else f"${cost:,.2f}")
        self._card("failure-rate").show(
            _pct(totals.failure_rate), f"{fmt_int(totals.failed)} failed", alert=totals.failed > 0
        )
        evals = data.evals
        self._card("eval-pass-rate").show(
            _pct(evals.pass_rate),
            f"{compact(evals.passed)} of {compact(evals.total)}" if evals.total else "no evals",
            alert=evals.passed < evals.total,
        )
        guard = data.guard
        self._card("guard-blocks").show(
            _fit(f"{fmt_int(guard.blocks)} of {compact(guard.checks)}", " checks", 16),
            f"{fmt_int(guard.policies_enabled)} policies on",
            alert=guard.blocks > 0,
        )
        start = data.start.date()
        last = data.end.date() - dt.timedelta(days=1)
        line = Text.assemble(
            (f"Last {data.days} days", "bold"),
            f" · {start:%Y-%m-%d} → {last:%Y-%m-%d} UTC · updated {data.now:%H:%M:%S} · ",
        )
        if totals.traces == 0:
            line.append(f"none of the {data.all_traces:,} traces is this recent", "yellow")
            line.append(" · w: widen")
        else:
            line.append("w: change window")
        self.query_one("#window-line", Static).update(line)

    def _card(self, key: str) -> Card:
        return self.query_one(f"#card-{key}", Card)

    def _show_charts(self, data: DashboardData) -> None:
        quiet = f"No traces in the last {data.days} days"
        per_day = self.query_one("#per-day-chart", DailyChart)
        per_day.empty_text = quiet
        per_day.set_days([DayBar(f"{b.day:%m-%d}", b.traces, b.failed) for b in data.per_day])
        steps = self.query_one("#step-types-chart", HBarChart)
        steps.empty_text = quiet
        steps.set_bars([Bar(s.step_type, s.steps) for s in data.step_types])
        tokens = self.query_one("#tokens-chart", HBarChart)
        tokens.empty_text = "No tokens recorded" if data.totals.traces else quiet
        tokens.set_bars([Bar(a.agent, a.tokens) for a in data.agents])
        self._show_cost(data)

    def _show_cost(self, data: DashboardData) -> None:
        """The cost panel, by agent, by model (llm_calls; unpriced ones counted in the
        subtitle) or by day."""
        quiet = f"No traces in the last {data.days} days"
        cost = self.query_one("#cost-chart", HBarChart)
        cost.empty_text = "No cost recorded" if data.totals.traces else quiet
        panel = self.query_one("#cost-panel")
        panel.border_title = f"Cost by {self.cost_by}"
        panel.border_subtitle = "c: agent/model/day"
        if self.cost_by == "model":
            unpriced = sum(m.calls - m.priced for m in data.cost_by_model)
            if unpriced:
                panel.border_subtitle = f"{unpriced:,} calls unpriced · c"
            cost.set_bars([Bar(m.model or "(no model)", m.cost_usd) for m in data.cost_by_model])
        elif self.cost_by == "day":
            per_day = data.cost_by_model_per_day
            cost.set_bars(
                [Bar(f"{day:%m-%d}", sum(m.cost_usd for m in per_day[day])) for day in per_day]
            )
        else:
            cost.set_bars([Bar(a.agent, a.cost_usd) for a in data.agents])

    def action_cycle_cost(self) -> None:
        order = ("agent", "model", "day")
        self.cost_by = order[(order.index(self.cost_by) + 1) % len(order)]

    def watch_cost_by(self) -> None:
        if self.data is not None and not self.data.is_empty:
            self._show_cost(self.data)

    def _show_tables(self, data: DashboardData) -> None:
        since = f"since:{data.since}"
        self._fill(
            self.agents_table,
            [
                (
                    f"{shlex.quote('agent:' + a.agent)} {since}",
                    [
                        _cell(a.agent),
                        _num(fmt_int(a.traces)),
                        _num(fmt_int(a.failed), "red" if a.failed else ""),
                        _num(compact(a.tokens)),
                        _num(money(a.cost_usd)),
                    ],
                )
                for a in data.agents
            ],
        )
        total = data.totals.traces or 1
        self._fill(
            self.statuses_table,
            [
                (
                    f"{shlex.quote('status:' + s.status)} {since}",
                    [
                        _cell(s.status, 12, status_rich_style(s.status, self.app.theme_variables)),
                        _num(fmt_int(s.traces)),
                        _num(_pct(s.traces / total)),
                    ],
                )
                for s in data.statuses
            ],
        )
        # No filter key matches a step's tool: free text finds traces whose error names it.
        self._fill(
            self.tools_table,
            [
                (
                    f"{shlex.quote(t.name)} {since}" if t.name else f"status:failed {since}",
                    [
                        _cell(t.name or "(unnamed)", 20),
                        _num(fmt_int(t.errors)),
                        _num(fmt_int(t.traces)),
                    ],
                )
                for t in data.failing_tools
            ],
        )
        evals = self.query_one("#evals-table", DataTable)
        evals.clear()
        for e in data.evals.evaluators:
            evals.add_row(
                _cell(e.evaluator, 12),
                _num(_pct(e.pass_rate), "red" if e.passed < e.total else "green"),
                _num(compact(e.total)),
            )
        # People's judgement beside the evaluators': each label and the traces carrying it.
        for label in data.labels:
            evals.add_row(
                _cell("#" + label.label, 12, "bold"),
                _num("-", "dim"),
                _num(compact(label.traces)),
            )
        quiet = f"No traces in the last {data.days} days"
        self._empty(self.agents_table, quiet)
        self._empty(self.statuses_table, quiet)
        self._empty(self.tools_table, "No failing tool calls" if data.totals.traces else quiet)
        self._empty(evals, "No evaluations or labels yet" if data.totals.traces else quiet)

    @staticmethod
    def _empty(table: DataTable[Any], text: str) -> None:
        """Show ``text`` in place of a table with no rows."""
        placeholder = table.parent.query_one(".panel-empty", Static) if table.parent else None
        if placeholder is None:
            return
        placeholder.update(Text(text))
        placeholder.display = table.row_count == 0
        table.display = table.row_count > 0

    @staticmethod
    def _fill(table: DataTable[Any], rows: list[tuple[str, list[Text]]]) -> None:
        """Replace the rows, keeping the cursor on the same key when it is still there."""
        previous = table.cursor_row
        keys = [str(key.value) for key in table.rows]
        current = keys[previous] if 0 <= previous < len(keys) else None
        table.clear()
        seen: set[str] = set()
        for key, cells in rows:
            if key in seen:  # two names that escape alike: keep the first
                continue
            seen.add(key)
            table.add_row(*cells, key=key)
        if current is not None and current in seen:
            table.move_cursor(row=table.get_row_index(current), animate=False)

    # --- actions ----------------------------------------------------------------------

    @on(DataTable.RowSelected, "DrillTable")
    def drill_down(self, event: DataTable.RowSelected) -> None:
        """Enter (or a click) on a row: the trace list, filtered to that row."""
        if event.row_key.value is not None:
            self.post_message(OpenTraces(str(event.row_key.value)))

    def action_reload(self) -> None:
        self.reload()

    def action_cycle_window(self) -> None:
        self.days = WINDOWS[(WINDOWS.index(self.days) + 1) % len(WINDOWS)]

    def watch_days(self) -> None:
        self.reload(exact=False)
