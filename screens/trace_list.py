"""The trace list: a virtual table of traces with a filter bar, sorting and keyset paging.

Pages of 200 rows load in a thread worker as the cursor nears the end, so a store of
100,000 traces opens at once. Producer text is shown as plain ``Text``, never as markup.

Comparing: ``m`` marks the highlighted trace (the first marked is A, the second B; a third
mark drops the oldest) and ``d`` opens the side-by-side diff of the marked pair; with one mark,
of the marked trace against the highlighted one; with none, of a highlighted fork against its
parent. Marks survive reloads, filters and sorts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Static
from textual.worker import get_current_worker

from agent_replay.display import fmt_cost, fmt_int, fmt_ms, fmt_time, safe, truncate
from agent_replay.errors import AgentReplayError
from agent_replay.screens.base import BaseScreen, read_store
from agent_replay.store.queries import (
    Page,
    TraceSummary,
    count_matching,
    count_traces,
    list_traces,
)
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.status import status_rich_style
from agent_replay.widgets.title_bar import TitleBar

PAGE_SIZE = 200
PREFETCH_MARGIN = 40
REFRESH_LIMIT = 2_000
"""A live refresh reads the rows shown again, up to this many (the rest reload as paged)."""
COLUMNS = ("ID", "AGENT", "STATUS", "STEPS", "TOKENS", "COST", "DURATION", "STARTED", "TAGS")
HIDE_ORDER: tuple[tuple[int, str], ...] = (
    (150, "TAGS"),
    (120, "COST"),
    (110, "STARTED"),
    (96, "DURATION"),
)
"""Columns dropped below a terminal width, least needed first (announced in the status line)."""


def hidden_columns(width: int) -> tuple[str, ...]:
    """The columns left out at this terminal width."""
    return tuple(name for limit, name in HIDE_ORDER if width < limit)


SORTS = ("time", "tokens", "duration", "cost")
MARK_STYLES = {"A": "bold black on #e5c07b", "B": "bold black on #56c2b6"}
"""The ID cell's badge of a marked trace (A: before, B: after)."""
EMPTY_STORE = (
    "No traces yet.\n\n"
    "Load the samples:   agent-replay demo\n"
    "Or ingest a file:   agent-replay ingest traces.jsonl\n"
    "Or record a run:    agent-replay run -- python my_agent.py"
)


def id_cell(trace_id: str, is_fork: bool, mark: str | None = None) -> Text:
    """The ID cell: the id, ``⑂`` for a fork, and the ``A``/``B`` badge of a marked trace."""
    text = Text(trace_id + (" ⑂" if is_fork else ""))
    if mark:
        text = Text.assemble((f" {mark} ", MARK_STYLES[mark]), " ", text)
    return text


def trace_row(
    item: TraceSummary, mark: str | None = None, theme: Mapping[str, str] | None = None
) -> list[Any]:
    """The table cells of one trace (producer text escaped, as plain Text); ``theme``: the
    app's ``theme_variables``, for the status colour."""
    d = item.data
    status = d["status"]
    return [
        id_cell(item.id, item.is_fork, mark),
        Text(truncate(safe(d["agent_name"]), 28)),
        Text(status, style=status_rich_style(status, theme or {})),
        Text(fmt_int(item.step_count), justify="right"),
        Text(fmt_int(d["total_tokens"]), justify="right"),
        Text(fmt_cost(d["total_cost_usd"]), justify="right"),
        Text(fmt_ms(d["total_duration_ms"]), justify="right"),
        Text(fmt_time(d["started_at"])),
        Text(truncate(safe(", ".join(d["tags"])), 24)),
    ]


class TraceListScreen(BaseScreen):
    """Every trace in the store, newest first; Enter opens one."""

    TITLE = "Traces"
    CSS_PATH = "trace_list.tcss"
    AUTO_FOCUS = "#trace-table"
    BINDINGS = [
        Binding("slash", "focus_filter", "Filter", id="filter", tooltip="Filter the traces"),
        Binding("s", "cycle_sort", "Sort", id="sort", tooltip="Sort by time/tokens/duration/cost"),
        Binding(
            "S",
            "reverse_sort",
            "Reverse",
            id="reverse-sort",
            tooltip="Sort the other way round (newest or largest first, or last)",
        ),
        Binding("r", "reload", "Reload", id="reload", tooltip="Reload from the store"),
        Binding(
            "m",
            "toggle_mark",
            "Mark",
            id="mark",
            tooltip="Mark the trace for a diff (the first is A, the second B)",
        ),
        Binding(
            "d",
            "diff",
            "Diff",
            id="diff",
            tooltip="Diff the two marked traces (or a fork against its parent)",
        ),
        # In the key panel and the palette; the footer stays as it is at 80 columns.
        Binding(
            "a",
            "annotate",
            "Annotate",
            id="annotate-trace",
            tooltip="Label the highlighted run (good, bad, wrong-tool…), with a note",
            show=False,
        ),
        Binding(
            "escape",
            "clear_filter",
            "Clear filter",
            id="clear-filter",
            tooltip="In the filter bar: back to the table; else clear the filter (or the marks)",
            show=False,
        ),
    ]

    sort: reactive[str] = reactive("time")
    """The sort key: time, tokens, duration or cost."""
    query_text: reactive[str] = reactive("")
    """The filter bar's query (``status:failed agent:bot text``)."""
    descending: reactive[bool] = reactive(True)
    """Newest (or largest) first; ``S`` turns it round."""

    @dataclass
    class PageLoaded(Message):
        """A page of traces arrived from the worker."""

        page: Page
        append: bool
        total: int | None
        """Traces in the store (``None`` on an appended page)."""
        matching: int | None = None
        """Traces the filter matches (``None`` on an appended page)."""
        refresh: bool = False
        """A live refresh: keep the cursor and the scroll position."""

    def __init__(self) -> None:
        super().__init__()
        self._after: tuple[Any, str] | None = None
        self._loading = False
        self._ids: list[str] = []
        self._parents: dict[str, str] = {}
        self._forks: set[str] = set()
        self._items: dict[str, TraceSummary] = {}
        self._total = 0
        self._matching = 0
        self._new_above = 0
        self._hidden: tuple[str, ...] = ()
        self._typing = False
        self.marks: list[str] = []
        """The marked trace ids, oldest first: ``marks[0]`` is A, ``marks[1]`` is B."""

    def compose(self) -> ComposeResult:
        yield TitleBar()
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
        yield KeyBar()

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#trace-table", DataTable)

    def on_mount(self) -> None:
        self._hidden = hidden_columns(self.app.size.width)
        self.table.add_columns(*(c for c in COLUMNS if c not in self._hidden))
        self.query_one("#empty-state").display = False
        self.table.focus()
        self.watch(self.table, "virtual_size", self._warm_up_once_shown, init=False)
        self.reload()

    def on_resize(self) -> None:
        hidden = hidden_columns(self.app.size.width)
        if hidden == self._hidden:
            return
        self._hidden = hidden
        table = self.table
        cursor = table.cursor_row
        table.clear(columns=True)
        table.add_columns(*(c for c in COLUMNS if c not in hidden))
        for trace_id in self._ids:
            table.add_row(*self._cells(self._items[trace_id]), key=trace_id)
        if self._ids:
            table.move_cursor(row=min(cursor, len(self._ids) - 1), animate=False)
        self._show_status()

    def _cells(self, item: TraceSummary) -> list[Any]:
        cells = trace_row(item, self._mark_of(item.id), self.app.theme_variables)
        return [c for c, name in zip(cells, COLUMNS, strict=True) if name not in self._hidden]

    def store_changed(self) -> None:
        """Another process (or this app) wrote: read the rows shown again, in place."""
        if self._loading:
            return
        self._loading = True
        limit = min(max(PAGE_SIZE, len(self._ids)), REFRESH_LIMIT)
        self._load_page(self.query_text, self.sort, None, append=False, limit=limit, refresh=True)

    # --- loading ----------------------------------------------------------------------

    def reload(self) -> None:
        """Start over from the first page with the current query and sort."""
        self._after = None
        self._loading = True
        self._new_above = 0
        self._load_page(self.query_text, self.sort, None, append=False)

    @work(thread=True, exclusive=True, exit_on_error=False, group="traces", description="traces")
    def _load_page(
        self,
        query: str,
        sort: str,
        after: tuple[Any, str] | None,
        append: bool,
        *,
        limit: int = PAGE_SIZE,
        refresh: bool = False,
    ) -> None:
        from agent_replay.services.filter_language import parse_query

        parsed = parse_query(query, self.app.clock.now())
        descending = self.descending
        with read_store(self.app) as store:
            page = list_traces(
                store,
                parsed.filters,
                sort=sort,
                descending=descending,
                limit=limit,
                after=after,
            )
            total = matching = None
            if not append:
                total = count_traces(store)
                matching = count_matching(store, parsed.filters) if query.strip() else total
        if not get_current_worker().is_cancelled:
            self.post_message(self.PageLoaded(page, append, total, matching, refresh))

    @on(PageLoaded)
    def show_page(self, message: PageLoaded) -> None:
        table = self.table
        kept_id = self._highlighted_id() if message.refresh else None
        kept_row = table.cursor_row
        kept_scroll = table.scroll_y
        old_ids = set(self._ids)
        if not message.append:
            table.clear()
            self._ids = []
            self._items = {}
        for item in message.page.items:
            table.add_row(*self._cells(item), key=item.id)
            self._ids.append(item.id)
            self._items[item.id] = item
            if item.is_fork:
                self._forks.add(item.id)
                self._parents[item.id] = str(item.data["parent_trace_id"])
        self._after = message.page.after
        self._loading = False
        if message.total is not None:
            self._total = message.total
            self._matching = message.matching if message.matching is not None else message.total
        if message.refresh and old_ids:
            self._keep_place(kept_id, kept_row, kept_scroll, old_ids)
        if not message.append:
            self.mark_updated()
        empty_store = message.total == 0
        self.query_one("#empty-state").display = empty_store
        table.display = not empty_store
        if empty_store and not self._typing:
            # Hiding the table would hand focus to the filter bar, where q types "q".
            self.set_focus(None)
        elif not empty_store and self.focused is None:
            table.focus()
        self._show_status(empty_store=empty_store)

    def _warm_up_once_shown(self) -> None:
        """The table has measured rows (its ``virtual_size`` changed): once the frame that
        shows them is painted, warm the app up (``AgentReplayApp.warm_up``, once per app).
        Not earlier, as ``show_page`` did: the table measures new rows when it is next
        idle, which the screen's after-refresh callbacks may come before, and then the
        warm-up's imports (a thread sharing the interpreter) and CSS parse delayed the
        first paint by 70-190 ms in about half the runs of ``bench/tui.py``."""
        if self._ids:
            self.call_after_refresh(self.app.warm_up)

    def _keep_place(
        self, kept_id: str | None, kept_row: int, kept_scroll: float, old_ids: set[str]
    ) -> None:
        """After a live refresh: the cursor on the trace it was on, the view where it was
        (shifted by the rows that arrived above), and the newcomers counted."""
        table = self.table
        index = self._ids.index(kept_id) if kept_id in self._ids else None
        new_above = sum(1 for i in self._ids[: index or 0] if i not in old_ids)
        self._new_above += new_above
        if index is not None:
            table.move_cursor(row=index, animate=False, scroll=False)
            table.scroll_to(y=kept_scroll + new_above, animate=False, immediate=True)
        elif self._ids:
            table.move_cursor(row=min(kept_row, len(self._ids) - 1), animate=False)

    def _show_status(self, *, empty_store: bool = False) -> None:
        status = self.query_one("#list-status", Static)
        if empty_store:
            status.update("")
        elif not self._ids:
            status.update(Text("No traces match the filter. Esc clears it."))
        else:
            shown = len(self._ids)
            of = self._matching if self.query_text.strip() else self._total
            noun = "trace" if of == 1 else "traces"
            counted = f"{shown:,} of {of:,} {noun}" if of > shown else f"{shown:,} {noun}"
            filtered = f" matching (of {self._total:,})" if self.query_text.strip() else ""
            arrow = "↓" if self.descending else "↑"
            line = Text(f"{counted}{filtered} · by {self.sort} {arrow}")
            if self._new_above:
                line.append(f"  {self._new_above:,} new ↑", "bold")
            if self._hidden:
                names = ", ".join(c.lower() for c in self._hidden)
                line.append(f" · hidden: {names}", "dim")
            for mark, trace_id in zip("AB", self.marks, strict=False):
                line.append("  ")
                line.append(f" {mark} ", MARK_STYLES[mark])
                line.append(f" {trace_id}")
            if self.marks:
                line.append(
                    "  · d diffs them" if len(self.marks) == 2 else "  · mark another, or d"
                )
            status.update(line)

    @on(DataTable.RowHighlighted, "#trace-table")
    def load_more_near_end(self, event: DataTable.RowHighlighted) -> None:
        if self._new_above and event.cursor_row == 0 == self.table.cursor_row:
            self._new_above = 0  # seen: the newcomers are at the top
            self._show_status()
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
            self.app.open_trace(event.row_key.value)

    @on(Input.Submitted, "#filter-bar")
    def apply_filter(self, event: Input.Submitted) -> None:
        self.apply_query(event.value)

    def apply_query(self, text: str) -> None:
        """Filter the list with a filter-bar query (also used by dashboard drill-down)."""
        from agent_replay.services.filter_language import parse_query

        try:
            parsed = parse_query(text, self.app.clock.now())
        except AgentReplayError as exc:
            self.notify(exc.message, title="Filter", severity="error")
            return
        self.query_one("#filter-bar", Input).value = text
        self.query_text = text
        self.sort = parsed.sort
        self.reload()
        self._focus_list()

    def action_focus_filter(self) -> None:
        self._typing = True
        self.query_one("#filter-bar", Input).focus()

    @on(events.DescendantFocus, "#filter-bar")
    def keep_keys_in_an_empty_store(self) -> None:
        """In an empty store the hidden table's focus falls to the filter bar (and a deferred
        focus may land after the first page): unless / asked for it, the keys stay keys."""
        if not self.table.display and not self._typing:
            self.set_focus(None)

    def _focus_list(self) -> None:
        """Focus the table (or nothing, in an empty store: the keys then reach the app)."""
        self._typing = False
        if self.table.display:
            self.table.focus()
        else:
            self.set_focus(None)

    def action_clear_filter(self) -> None:
        filter_bar = self.query_one("#filter-bar", Input)
        if filter_bar.has_focus:
            # Esc leaves the bar as Enter does, dropping what was typed but not applied.
            filter_bar.value = self.query_text
            self._focus_list()
            return
        if self.query_text or self.query_one("#filter-bar", Input).value:
            self.apply_query("")
        elif self.marks:
            marked, self.marks = self.marks, []
            self._redraw_id_cells(marked)
            self._show_status()

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.reload()

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    # --- marking and diffing ----------------------------------------------------------

    def _mark_of(self, trace_id: str) -> str | None:
        return "AB"[self.marks.index(trace_id)] if trace_id in self.marks else None

    def _highlighted_id(self) -> str | None:
        table = self.table
        if not self._ids or not table.is_valid_row_index(table.cursor_row):
            return None
        return self._ids[table.cursor_row]

    def _redraw_id_cells(self, trace_ids: list[str]) -> None:
        table = self.table
        id_column = table.ordered_columns[0].key
        for trace_id in trace_ids:
            if trace_id in table.rows:
                cell = id_cell(trace_id, trace_id in self._forks, self._mark_of(trace_id))
                table.update_cell(trace_id, id_column, cell, update_width=True)

    def action_toggle_mark(self) -> None:
        """Mark the highlighted trace, or unmark it; a third mark drops the oldest."""
        trace_id = self._highlighted_id()
        if trace_id is None:
            return
        touched = list(self.marks)
        if trace_id in self.marks:
            self.marks.remove(trace_id)
        else:
            self.marks.append(trace_id)
            del self.marks[:-2]
            touched.append(trace_id)
        self._redraw_id_cells(touched)
        self._show_status()

    def action_annotate(self) -> None:
        """Ask for a label (and a note) for the highlighted trace, then write it; the list
        refreshes through the store watcher."""
        trace_id = self._highlighted_id()
        if trace_id is not None:
            self.ask_annotation(trace_id)

    def action_diff(self) -> None:
        """Open the diff: the two marks; one mark against the highlighted trace; or a
        highlighted fork against its parent."""
        from agent_replay.screens.diff import DiffScreen

        highlighted = self._highlighted_id()
        if len(self.marks) == 2:
            a_id, b_id = self.marks
        elif len(self.marks) == 1 and highlighted not in (None, self.marks[0]):
            a_id, b_id = self.marks[0], str(highlighted)
        elif not self.marks and highlighted in self._parents:
            a_id, b_id = self._parents[str(highlighted)], str(highlighted)
        else:
            self.notify(
                "Mark two traces with m (or highlight a fork) to compare them.",
                title="Diff",
                severity="warning",
            )
            return
        self.app.push_screen(DiffScreen(a_id, b_id))
