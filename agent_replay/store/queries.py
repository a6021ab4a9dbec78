"""The trace list: the named reads ``list`` runs (filters, sorts, keyset pages, counts), for
the CLI, the TUI and the library alike. They return ``TraceSummary`` rows and the format's JSON
objects (typed: ``store/shapes``), never peewee rows, and page with keysets, never ``OFFSET``.
One trace's detail (``trace_json``, its steps, evals and annotations) is ``store/trace_detail``.

Why SQL text here, when the rest of the store uses peewee's query builder (issue 19): ``list``
and ``show`` on a local store are answered by ``commands/fast_read`` over a stdlib ``sqlite3``
connection (``core.SqliteReader``), because importing peewee costs ~100 ms, more than the
whole of ``list`` (issue 17: ``list`` within 2x a stdlib reader). So these readers must run
without peewee, and they are the only ones: the full CLI and the TUI call the same functions
on a peewee database (one reader, not two). The statements use the SQL subset SQLite and
PostgreSQL share, with ``?`` placeholders (``core.execute``); the two spellings that differ
(an id-prefix range, ``NULLS``/``rowid`` ordering) are chosen by backend. What the fast path
does not run lives elsewhere, built by peewee (``store/stats``, ``store/live``, the
services' own reads); what is here but off the fast path shares its statements
(``summaries``, ``count_matching``, ``step_count``).

Nothing on this module's import path imports peewee, pydantic or ``typing`` (``TYPE_CHECKING``
is spelled out), and its classes are written out rather than dataclasses (``dataclasses``
pulls ``inspect``): each is a few ms of ``list``'s start-up. ``tests/cli/test_fast_read.py``
checks the imports.
"""

from __future__ import annotations

from collections.abc import Iterator

from agent_replay.errors import UsageError
from agent_replay.store.core import Store, execute
from agent_replay.store.mapping import (
    TRACE_COLUMNS,
    trace_dict,
)
from agent_replay.store.trace_detail import (
    TRACE_SELECT,
    annotation_dicts,
    eval_dicts,
    step_dicts,
    tags_for,
)
from agent_replay.trace.base import TRACE_STATUSES

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:  # the shapes are types only: no run-time import (see the docstring)
    from typing import Any

    from agent_replay.store.shapes import (
        TraceFields,
        TraceJSON,
        TraceListJSON,
    )


SORT_COLUMNS: dict[str, str] = {
    "time": "started_at_ms",
    "tokens": "total_tokens",
    "duration": "total_duration_ms",
    "cost": "total_cost_usd",
}

_FILTER_FIELDS = ("status", "agent", "tag", "session", "since_ms", "text", "forks_of", "label")


class TraceFilter:
    """What ``list``, ``export`` and the trace list screen filter on. ``None`` means any.

    Immutable, compared and hashed by value (what a frozen dataclass would give, written out:
    see the module docstring).

    Attributes:
        status: one of the trace statuses.
        agent: the ``agent_name``, exactly.
        tag: a tag the trace carries.
        session: the ``session_id``, exactly.
        since_ms: traces started at or after this instant (epoch milliseconds).
        text: free text: words (prefixes) searched in the trace's and its steps' names,
            inputs, outputs, errors and session id, or a trace id prefix (``store/search``).
        forks_of: forks of this trace id.
        label: only traces annotated with this label (on the run or on one of its steps).

    Raises:
        UsageError: an unknown status.
    """

    __slots__ = _FILTER_FIELDS
    status: str | None
    agent: str | None
    tag: str | None
    session: str | None
    since_ms: int | None
    text: str | None
    forks_of: str | None
    label: str | None

    def __init__(
        self,
        status: str | None = None,
        agent: str | None = None,
        tag: str | None = None,
        session: str | None = None,
        since_ms: int | None = None,
        text: str | None = None,
        forks_of: str | None = None,
        label: str | None = None,
    ) -> None:
        if status is not None and status not in TRACE_STATUSES:
            raise UsageError(
                f"unknown status {status!r}; expected one of {', '.join(TRACE_STATUSES)}"
            )
        values = (status, agent, tag, session, since_ms, text, forks_of, label)
        for name, value in zip(_FILTER_FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FILTER_FIELDS)

    def replace(self, **changes: Any) -> TraceFilter:
        """A copy with some fields changed (``dataclasses.replace``)."""
        return TraceFilter(**{**dict(zip(_FILTER_FIELDS, self._values(), strict=True)), **changes})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TraceFilter is immutable: cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceFilter):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{n}={v!r}" for n, v in zip(_FILTER_FIELDS, self._values(), strict=True)
        )
        return f"TraceFilter({fields})"


class TraceSummary:
    """One row of the trace list: the trace's own fields without its steps.

    Attributes:
        data: the trace's own fields (the format's names).
        step_count: its number of steps.
        sort_ms: its ordering instant (``started_at_ms``: the start, else the ingest time).
    """

    __slots__ = ("data", "step_count", "sort_ms")

    def __init__(self, data: TraceFields, step_count: int, sort_ms: int) -> None:
        self.data = data
        self.step_count = step_count
        self.sort_ms = sort_ms

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def is_fork(self) -> bool:
        return self.data.get("parent_trace_id") is not None

    def to_json(self) -> TraceListJSON:
        """The ``list --json`` object: the format's trace fields plus id, step_count, is_fork."""
        return {**self.data, "step_count": self.step_count, "is_fork": self.is_fork}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceSummary):
            return NotImplemented
        return (self.data, self.step_count, self.sort_ms) == (
            other.data,
            other.step_count,
            other.sort_ms,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it replaces

    def __repr__(self) -> str:
        return f"TraceSummary(id={self.id!r}, step_count={self.step_count}, sort_ms={self.sort_ms})"


class Page:
    """A page of summaries and the keyset cursor of the next one (``None`` at the end).

    Attributes:
        items: the page's rows, in list order.
        after: what ``list_traces(after=...)`` takes for the next page.
    """

    __slots__ = ("items", "after")

    def __init__(
        self, items: list[TraceSummary] | None = None, after: tuple[Any, str] | None = None
    ) -> None:
        self.items = items if items is not None else []
        self.after = after

    def __repr__(self) -> str:
        return f"Page({len(self.items)} items, after={self.after!r})"


# --- id resolution ------------------------------------------------------------------------


def step_count(store: Store, trace_id: str) -> int:
    """A trace's number of steps (0 for a trace that does not exist)."""
    found = summaries(store, [trace_id])
    return found[0].step_count if found else 0


# --- lists --------------------------------------------------------------------------------


def where_sql(store: Store, filters: TraceFilter) -> tuple[str, list[Any]]:
    """The SQL condition (on ``traces t``, ``?`` placeholders) and parameters of a filter."""
    clauses: list[str] = []
    params: list[Any] = []
    if filters.status:
        clauses.append("t.status = ?")
        params.append(filters.status)
    if filters.agent:
        clauses.append("t.agent_name = ?")
        params.append(filters.agent)
    if filters.session:
        clauses.append("t.session_id = ?")
        params.append(filters.session)
    if filters.since_ms is not None:
        clauses.append("t.started_at_ms >= ?")
        params.append(filters.since_ms)
    if filters.tag:
        clauses.append("t.id IN (SELECT trace_id FROM tags WHERE tag = ?)")
        params.append(filters.tag)
    if filters.forks_of:
        clauses.append("t.parent_trace_id = ?")
        params.append(filters.forks_of)
    if filters.label:
        clauses.append("t.id IN (SELECT trace_id FROM annotations WHERE label = ?)")
        params.append(filters.label)
    if filters.text:
        # The search index: words of the trace's and its steps' names, payloads and errors
        # (each word a prefix), or a trace id prefix (see store/search).
        from agent_replay.store.search import text_filter_sql

        clause, extra = text_filter_sql(store, filters.text)
        clauses.append(clause)
        params.extend(extra)
    return (" AND ".join(clauses) or "1 = 1"), params


def _keyset(column: str, after: tuple[Any, str], descending: bool) -> tuple[str, list[Any]]:
    value, last_id = after
    op = "<" if descending else ">"
    if value is None:
        # NULLs sort last when descending, first when ascending.
        if descending:
            return f"(t.{column} IS NULL AND t.id {op} ?)", [last_id]
        return f"((t.{column} IS NULL AND t.id {op} ?) OR t.{column} IS NOT NULL)", [last_id]
    null_tail = f" OR t.{column} IS NULL" if descending else ""
    return (
        f"(t.{column} {op} ? OR (t.{column} = ? AND t.id {op} ?){null_tail})",
        [value, value, last_id],
    )


def list_traces(
    store: Store,
    filters: TraceFilter | None = None,
    *,
    sort: str = "time",
    descending: bool = True,
    limit: int = 50,
    after: tuple[Any, str] | None = None,
) -> Page:
    """One page of trace summaries, newest (or largest) first.

    Args:
        sort: time, tokens, duration or cost.
        after: the ``Page.after`` cursor of the previous page.
    """
    if sort not in SORT_COLUMNS:
        raise UsageError(f"unknown sort {sort!r}; expected one of {', '.join(SORT_COLUMNS)}")
    column = SORT_COLUMNS[sort]
    if filters is not None and filters.text:
        from agent_replay.store.search import catch_up

        catch_up(store)  # the free text reads the search index
    where, params = where_sql(store, filters or TraceFilter())
    if after is not None:
        clause, extra = _keyset(column, after, descending)
        where += f" AND {clause}"
        params.extend(extra)
    direction = "DESC" if descending else "ASC"
    # SQLite sorts NULL lowest, which _keyset assumes; other engines are told explicitly.
    nulls = ""
    if sort != "time" and not store.is_sqlite:
        nulls = " NULLS LAST" if descending else " NULLS FIRST"
    sql = (
        f"SELECT {TRACE_SELECT} FROM traces t WHERE {where} "
        f"ORDER BY t.{column} {direction}{nulls}, t.id {direction} LIMIT ?"
    )
    rows = [tuple(r) for r in execute(store, sql, [*params, limit]).fetchall()]
    col_index = TRACE_COLUMNS.index(column)
    next_after = (rows[-1][col_index], rows[-1][0]) if len(rows) == limit else None
    return Page(_summaries(store, rows), next_after)


def _summaries(store: Store, rows: list[tuple[Any, ...]]) -> list[TraceSummary]:
    tags = tags_for(store, [r[0] for r in rows])
    return [
        TraceSummary(
            data=trace_dict(r, tags[r[0]], None, None),
            step_count=int(r[TRACE_COLUMNS.index("step_count")]),
            sort_ms=int(r[TRACE_COLUMNS.index("started_at_ms")]),
        )
        for r in rows
    ]


def summaries(store: Store, trace_ids: list[str]) -> list[TraceSummary]:
    """The summaries of these traces (those that exist), in no particular order."""
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(trace_ids), 500):
        chunk = trace_ids[start : start + 500]
        marks = ", ".join(["?"] * len(chunk))
        rows += [
            tuple(r)
            for r in execute(
                store, f"SELECT {TRACE_SELECT} FROM traces t WHERE t.id IN ({marks})", chunk
            ).fetchall()
        ]
    return _summaries(store, rows)


def iter_trace_json(
    store: Store,
    filters: TraceFilter | None = None,
    *,
    sort: str = "time",
    descending: bool = True,
    limit: int | None = None,
    page_size: int = 200,
) -> Iterator[TraceJSON]:
    """Stream full trace objects matching ``filters``, page by page (flat memory)."""
    after: tuple[Any, str] | None = None
    emitted = 0
    while True:
        size = page_size if limit is None else min(page_size, limit - emitted)
        if size <= 0:
            return
        page = list_traces(
            store, filters, sort=sort, descending=descending, limit=size, after=after
        )
        for summary in page.items:
            steps = step_dicts(store, summary.id)
            yield {
                **summary.data,
                "steps": steps,
                "evals": eval_dicts(store, summary.id),
                "annotations": annotation_dicts(store, summary.id),
            }
            emitted += 1
        if page.after is None:
            return
        after = page.after


def iter_trace_ids(
    store: Store,
    filters: TraceFilter | None = None,
    *,
    sort: str = "time",
    limit: int | None = None,
    page_size: int = 500,
) -> Iterator[str]:
    """The ids of the traces matching ``filters``, in list order, page by page."""
    after: tuple[Any, str] | None = None
    emitted = 0
    while True:
        size = page_size if limit is None else min(page_size, limit - emitted)
        if size <= 0:
            return
        page = list_traces(store, filters, sort=sort, limit=size, after=after)
        for summary in page.items:
            yield summary.id
            emitted += 1
        if page.after is None:
            return
        after = page.after


def count_traces(store: Store) -> int:
    """Every trace in the store (the trace list's total)."""
    return count_matching(store, TraceFilter())


def count_matching(store: Store, filters: TraceFilter) -> int:
    """How many traces a filter matches (the trace list's "200 of 1,234")."""
    where, params = where_sql(store, filters)
    sql = f"SELECT COUNT(*) FROM traces t WHERE {where}"
    return int(execute(store, sql, params).fetchone()[0])
