"""The trace list: a virtual table of traces with a filter bar, sorting and keyset paging.

Pages of 200 rows load in a thread worker as the cursor nears the end, so a store of
100,000 traces opens at once. Producer text is shown as plain ``Text``, never as markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Footer, Header, Input, Static
from textual.worker import get_current_worker

from agent_replay.display import fmt_cost, fmt_int, fmt_ms, fmt_time, safe, truncate
from agent_replay.errors import AgentReplayError
from agent_replay.screens.base import BaseScreen
from agent_replay.store.queries import Page, TraceSummary, count_traces, list_traces

PAGE_SIZE = 200
PREFETCH_MARGIN = 40
SORTS = ("time", "tokens", "duration", "cost")
STATUS_STYLES = {
    "completed": "green",
    "failed": "bold red",
    "timeout": "yellow",
    "running": "cyan",
    "forked": "magenta",
}
EMPTY_STORE = (
    "No traces yet.\n\n"
    "Load the samples:   agent-replay demo\n"
    "Or ingest a file:   agent-replay ingest traces.jsonl\n"
    "Or record a run:    agent-replay run -- python my_agent.py"
)


def trace_row(item: TraceSummary) -> list[Any]:
    """The table cells of one trace (producer text escaped, as plain Text)."""
    d = item.data
    status = d["status"]
    return [
        Text(item.id + (" ⑂" if item.is_fork else "")),
        Text(truncate(safe(d["agent_name"]), 28)),
        Text(status, style=STATUS_STYLES.get(status, "")),
        Text(fmt_int(item.step_count), justify="right"),
        Text(fmt_int(d["total_tokens"]), justify="right"),
        Text(fmt_cost(d["total_cost_usd"]), justify="right"),
        Text(fmt_ms(d["total_duration_ms"]), justify="right"),
        Text(fmt_time(d["started_at"])),
        Text(truncate(safe(", ".join(d["tags"])), 24)),
    ]


class TraceListScreen(BaseScreen):
    """Every trace in the store, newest first; Enter opens one."""

    CSS_PATH = "trace_list.tcss"
    BINDINGS = [
        Binding("slash", "focus_filter", "Filter", id="filter", tooltip="Filter the traces"),
        Binding("s", "cycle_sort", "Sort", id="sort", tooltip="Sort by time/tokens/duration/cost"),
        Binding("r", "reload", "Reload", id="reload", tooltip="Reload from the store"),
        Binding(
            "escape",
            "clear_filter",
            "Clear filter",
            id="clear-filter",
            tooltip="Clear the filter bar",
            show=False,
        ),
    ]

    sort: reactive[str] = reactive("time")
    """The sort key: time, tokens, duration or cost."""
    query_text: reactive[str] = reactive("")
    """The filter bar's query (``status:failed agent:bot text``)."""

    @dataclass
    class PageLoaded(Message):
        """A page of traces arrived from the worker."""

        page: Page
        append: bool
        total: int | None

    def __init__(self) -> None:
        super().__init__()
        self._after: tuple[Any, str] | None = None
        self._loading = False
        self._ids: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="trace-list-body"):
            yield Input(
                placeholder=(
                    "filter: status:failed agent:NAME tag:T session:S since:7d sort:tokens text"
                ),
                id="filter-bar",
            )
            yield DataTable(id="trace-table", cursor_type="row", zebra_stripes=True)
            yield Static(EMPTY_STORE, id="empty-state", classes="-empty-state", markup=False)
            yield Static("", id="list-status")
        yield Footer()

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#trace-table", DataTable)

    def on_mount(self) -> None:
        self.table.add_columns(
            "ID", "AGENT", "STATUS", "STEPS", "TOKENS", "COST", "DURATION", "STARTED", "TAGS"
        )
        self.query_one("#empty-state").display = False
        self.table.focus()
        self.reload()

    # --- loading ----------------------------------------------------------------------

    def reload(self) -> None:
        """Start over from the first page with the current query and sort."""
        self._after = None
        self._loading = True
        self._load_page(self.query_text, self.sort, None, append=False)

    @work(thread=True, exclusive=True, exit_on_error=False, group="traces", description="traces")
    def _load_page(
        self, query: str, sort: str, after: tuple[Any, str] | None, append: bool
    ) -> None:
        from agent_replay.services.query import parse_query

        parsed = parse_query(query, self.app.clock.now())  # type: ignore[attr-defined]
        store = self.app.store  # type: ignore[attr-defined]
        with store.db.connection_context():
            page = list_traces(store, parsed.filters, sort=sort, limit=PAGE_SIZE, after=after)
            total = None if append else count_traces(store)
        if not get_current_worker().is_cancelled:
            self.post_message(self.PageLoaded(page, append, total))

    @on(PageLoaded)
    def show_page(self, message: PageLoaded) -> None:
        table = self.table
        if not message.append:
            table.clear()
            self._ids = []
        for item in message.page.items:
            table.add_row(*trace_row(item), key=item.id)
            self._ids.append(item.id)
        self._after = message.page.after
        self._loading = False
        empty_store = message.total == 0
        self.query_one("#empty-state").display = empty_store
        table.display = not empty_store
        status = self.query_one("#list-status", Static)
        if empty_store:
            status.update("")
        elif not self._ids:
            status.update(Text("No traces match the filter. Esc clears it."))
        else:
            more = " (more below)" if self._after else ""
            status.update(Text(f"{len(self._ids):,} shown{more} · sorted by {self.sort}"))

    @on(DataTable.RowHighlighted, "#trace-table")
    def load_more_near_end(self, event: DataTable.RowHighlighted) -> None:
        if (
            self._after is not None
            and not self._loading
            and event.cursor_row >= len(self._ids) - PREFETCH_MARGIN
        ):
            self._loading = True
            self._load_page(self.query_text, self.sort, self._after, append=True)

    # --- actions ----------------------------------------------------------------------

    @on(DataTable.RowSelected, "#trace-table")
    def open_selected_trace(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.open_trace(event.row_key.value)  # type: ignore[attr-defined]

    @on(Input.Submitted, "#filter-bar")
    def apply_filter(self, event: Input.Submitted) -> None:
        self.apply_query(event.value)

    def apply_query(self, text: str) -> None:
        """Filter the list with a filter-bar query (also used by dashboard drill-down)."""
        from agent_replay.services.query import parse_query

        try:
            parsed = parse_query(text, self.app.clock.now())  # type: ignore[attr-defined]
        except AgentReplayError as exc:
            self.notify(exc.message, title="Filter", severity="error")
            return
        self.query_one("#filter-bar", Input).value = text
        self.query_text = text
        self.sort = parsed.sort
        self.reload()
        self.table.focus()

    def action_focus_filter(self) -> None:
        self.query_one("#filter-bar", Input).focus()

    def action_clear_filter(self) -> None:
        if self.query_text or self.query_one("#filter-bar", Input).value:
            self.apply_query("")

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.reload()

    def action_reload(self) -> None:
        self.reload()
