"""The trace list and a trace's detail: the named reads ``list`` and ``show`` run, for the
CLI, the TUI and the library alike (``get_trace``). They return the format's JSON objects
(typed: ``store/shapes``) and ``TraceSummary`` rows, never peewee rows, and page with keysets,
never ``OFFSET``.

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

from collections.abc import Callable, Iterator

from agent_replay.errors import AmbiguousIdError, NotFoundError, UsageError
from agent_replay.store.core import Store, execute
from agent_replay.store.mapping import (
    ANNOTATION_COLUMNS,
    DECISION_COLUMNS,
    EVAL_COLUMNS,
    SNAPSHOT_COLUMNS,
    STEP_COLUMNS,
    TRACE_COLUMNS,
    annotation_dict,
    decision_dict,
    eval_dict,
    quote,
    snapshot_dict,
    step_dict,
    trace_dict,
)
from agent_replay.trace.base import TRACE_STATUSES
from agent_replay.trace.io import loads

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:  # the shapes are types only: no run-time import (see the docstring)
    from typing import Any, Literal, TypeVar

    from agent_replay.store.shapes import (
        AnnotationJSON,
        DecisionJSON,
        EvalJSON,
        SnapshotJSON,
        StepJSON,
        TraceFields,
        TraceJSON,
        TraceListJSON,
    )
    from agent_replay.trace.models import Trace

    SortKey = Literal["time", "tokens", "duration", "cost"]
    _Built = TypeVar("_Built")

SORT_COLUMNS: dict[str, str] = {
    "time": "started_at_ms",
    "tokens": "total_tokens",
    "duration": "total_duration_ms",
    "cost": "total_cost_usd",
}

_TRACE_SELECT = ", ".join(f"t.{quote(c)}" for c in TRACE_COLUMNS)
_STEP_SELECT = ", ".join(quote(c) for c in STEP_COLUMNS)
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


def resolve_trace_id(store: Store, text: str) -> str:
    """Resolve a full trace id, the id its producer gave it, or a unique prefix of our id.

    ``abc`` and ``trc_abc`` are both prefixes of ``trc_abc…``. A producer id (a native
    stream's ``trace_id``, e.g. ``rec-1``) names its trace exactly; when a producer reused it,
    the running trace with it (else the latest) is the one meant.

    Raises:
        NotFoundError: nothing matches.
        AmbiguousIdError: several traces match (a usage error naming the candidates).
    """
    text = text.strip()
    if not text:
        raise UsageError("a trace id is required")
    rows = execute(store, "SELECT id FROM traces WHERE id = ?", [text]).fetchall()
    if rows:
        return str(rows[0][0])
    produced = producer_trace(store, text)
    if produced is not None:
        return produced
    candidates: list[str] = []
    for prefix in dict.fromkeys([text, f"trc_{text}"]):
        if store.is_sqlite:
            # A range scan on the primary key: id >= prefix AND id < prefix + U+FFFF.
            rows = execute(
                store,
                "SELECT id FROM traces WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
                [prefix, prefix + "\uffff"],
            ).fetchall()
        else:  # a server's collation may not order ids bytewise: compare the prefix itself
            rows = execute(
                store,
                "SELECT id FROM traces WHERE starts_with(id, ?) ORDER BY id LIMIT 6",
                [prefix],
            ).fetchall()
        candidates.extend(r[0] for r in rows if r[0] not in candidates)
    if not candidates:
        raise NotFoundError(
            f"no trace matches {text!r}", hints=["`agent-replay list` shows the trace ids"]
        )
    if len(candidates) > 1:
        raise AmbiguousIdError(text, candidates)
    return candidates[0]


def producer_trace(store: Store, producer_id: str, *, running: bool = False) -> str | None:
    """The trace a producer named ``producer_id``: the running one, else the latest
    (``running=True``: only a running one); ``None`` when there is none."""
    rows = execute(
        store,
        "SELECT id, status FROM traces WHERE producer_trace_id = ? "
        "ORDER BY started_at_ms DESC, id DESC LIMIT 50",
        [producer_id],
    ).fetchall()
    for row in rows:
        if row[1] == "running":
            return str(row[0])
    return None if running or not rows else str(rows[0][0])


def step_span(store: Store, trace_id: str) -> tuple[int, int] | None:
    """The first and last step numbers of a trace (``None``: it has no steps)."""
    row = execute(
        store,
        "SELECT MIN(step_number), MAX(step_number) FROM steps WHERE trace_id = ?",
        [trace_id],
    ).fetchone()
    return (int(row[0]), int(row[1])) if row and row[0] is not None else None


# --- whole traces -------------------------------------------------------------------------


def _tags_for(store: Store, trace_ids: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {tid: [] for tid in trace_ids}
    for start in range(0, len(trace_ids), 500):
        chunk = trace_ids[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        rows = execute(
            store,
            f"SELECT trace_id, tag FROM tags WHERE trace_id IN ({marks}) "
            "ORDER BY trace_id, position",
            chunk,
        ).fetchall()
        for trace_id, tag in rows:
            out[trace_id].append(tag)
    return out


def step_dicts(
    store: Store,
    trace_id: str,
    *,
    from_step: int | None = None,
    to_step: int | None = None,
) -> list[StepJSON]:
    """The steps of a trace (optionally a step-number range) as the format's step objects."""
    return list(iter_step_dicts(store, trace_id, from_step=from_step, to_step=to_step))


def iter_step_dicts(
    store: Store,
    trace_id: str,
    *,
    from_step: int | None = None,
    to_step: int | None = None,
    page_size: int = 500,
) -> Iterator[StepJSON]:
    """``step_dicts``, streamed a page of steps at a time (keyset on the step number), with
    each page's decisions and snapshots: memory stays flat however long the trace (``show``)."""
    low = from_step - 1 if from_step is not None else -(2**63)
    while True:
        where, params = "trace_id = ? AND step_number > ?", [trace_id, low]
        if to_step is not None:
            where += " AND step_number <= ?"
            params.append(to_step)
        sql = f"SELECT {_STEP_SELECT} FROM steps WHERE {where} ORDER BY step_number LIMIT ?"
        rows = execute(store, sql, [*params, page_size]).fetchall()
        if not rows:
            return
        ids = [r[0] for r in rows]
        decisions: dict[str, DecisionJSON] = _by_step(
            store, "decisions", DECISION_COLUMNS, ids, decision_dict
        )
        snapshots: dict[str, SnapshotJSON] = _by_step(
            store, "snapshots", SNAPSHOT_COLUMNS, ids, snapshot_dict
        )
        for r in rows:
            yield step_dict(r, decisions.get(r[0]), snapshots.get(r[0]))
        if len(rows) < page_size:
            return
        low = rows[-1][2]  # step_number


def _by_step(
    store: Store,
    table: str,
    columns: tuple[str, ...],
    step_ids: list[str],
    build: Callable[[tuple[Any, ...]], _Built],
) -> dict[str, _Built]:
    """The ``decisions`` or ``snapshots`` rows of some steps, built, by step id (the
    table's first column)."""
    marks = ", ".join("?" * len(step_ids))
    sql = f"SELECT {', '.join(columns)} FROM {table} WHERE step_id IN ({marks})"
    return {r[0]: build(r) for r in execute(store, sql, step_ids).fetchall()}


def step_metadata_with(
    store: Store,
    trace_id: str,
    keys: tuple[str, ...],
    *,
    from_step: int | None = None,
    to_step: int | None = None,
) -> list[dict[str, Any]]:
    """The metadata objects of a trace's steps that hold one of ``keys`` at the top level
    (read from the column's text in SQL, so only those few are decoded): what ``show``'s
    header sums before it streams the steps."""
    where, params = "trace_id = ?", list[object]([trace_id])
    if from_step is not None:
        where += " AND step_number >= ?"
        params.append(from_step)
    if to_step is not None:
        where += " AND step_number <= ?"
        params.append(to_step)
    # A key is written as "key" in the JSON text (no escapes in these names); the test below
    # only narrows, the decoded object decides.
    found = " OR ".join(f"metadata LIKE '%\"{k}\"%'" for k in keys)
    rows = execute(
        store,
        f"SELECT metadata FROM steps WHERE {where} AND ({found}) ORDER BY step_number",
        params,
    ).fetchall()
    metas = [loads(r[0]) for r in rows if r[0] is not None]
    return [m for m in metas if isinstance(m, dict) and any(k in m for k in keys)]


def eval_order(store: Store) -> str:
    """``ORDER BY`` of a trace's evals: by time (untimed first), then in write order."""
    if store.is_sqlite:
        return "created_at_ms, rowid"
    return "created_at_ms NULLS FIRST, seq"


def eval_dicts(store: Store, trace_id: str) -> list[EvalJSON]:
    """The stored evaluations of a trace, oldest first."""
    # The order evals were written in, when they carry no time or the same one: the rowid,
    # or PostgreSQL's arrival sequence (migration 0007).
    rows = execute(
        store,
        f"SELECT {', '.join(EVAL_COLUMNS)} FROM evals WHERE trace_id = ? "
        f"ORDER BY {eval_order(store)}",
        [trace_id],
    ).fetchall()
    return [eval_dict(r) for r in rows]


def annotation_order(store: Store) -> str:
    """``ORDER BY`` of a trace's annotations: oldest first (untimed first), then in write order
    (the rowid, or PostgreSQL's arrival sequence: migration 0008)."""
    return "created_at_ms, rowid" if store.is_sqlite else "created_at_ms NULLS FIRST, seq"


def annotation_dicts(store: Store, trace_id: str) -> list[AnnotationJSON]:
    """The annotations of a trace (the run's and its steps'), oldest first."""
    rows = execute(
        store,
        f"SELECT {', '.join(ANNOTATION_COLUMNS)} FROM annotations WHERE trace_id = ? "
        f"ORDER BY {annotation_order(store)}",
        [trace_id],
    ).fetchall()
    return [annotation_dict(tuple(r)) for r in rows]


def _trace_row(store: Store, trace_id: str) -> tuple[Any, ...]:
    rows = execute(store, f"SELECT {_TRACE_SELECT} FROM traces t WHERE t.id = ?", [trace_id])
    row = rows.fetchone()
    if row is None:
        raise NotFoundError(f"no trace {trace_id!r}")
    return tuple(row)


def trace_json(
    store: Store,
    trace_id: str,
    *,
    from_step: int | None = None,
    to_step: int | None = None,
    with_steps: bool = True,
) -> TraceJSON:
    """A full trace object (steps, decisions, snapshots, evals, annotations) as the format's
    JSON object. A step window (``from_step``/``to_step``) keeps the annotations of the steps
    in it and those of the whole run. ``with_steps=False`` leaves the ``steps`` key out (a
    reader that streams them: ``iter_step_dicts``)."""
    row = _trace_row(store, trace_id)
    tags = _tags_for(store, [trace_id])[trace_id]
    steps = (
        step_dicts(store, trace_id, from_step=from_step, to_step=to_step) if with_steps else None
    )
    annotations = annotation_dicts(store, trace_id)
    if from_step is not None or to_step is not None:
        low, high = from_step or 1, to_step if to_step is not None else float("inf")
        annotations = [
            a for a in annotations if a["step_number"] is None or low <= a["step_number"] <= high
        ]
    return trace_dict(row, tags, steps, eval_dicts(store, trace_id), annotations)


def get_trace(db: Store, id_or_prefix: str) -> Trace:
    """The trace with its steps, evals, decisions and snapshots, as a ``Trace`` model.

    Args:
        db: the store (from ``ensure_database``).
        id_or_prefix: a trace id or a unique prefix of one.

    Raises:
        NotFoundError, AmbiguousIdError: see ``resolve_trace_id``.
    """
    from agent_replay.trace.models import Trace

    trace_id = resolve_trace_id(db, id_or_prefix)
    return Trace.model_validate(trace_json(db, trace_id))


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
        f"SELECT {_TRACE_SELECT} FROM traces t WHERE {where} "
        f"ORDER BY t.{column} {direction}{nulls}, t.id {direction} LIMIT ?"
    )
    rows = [tuple(r) for r in execute(store, sql, [*params, limit]).fetchall()]
    col_index = TRACE_COLUMNS.index(column)
    next_after = (rows[-1][col_index], rows[-1][0]) if len(rows) == limit else None
    return Page(_summaries(store, rows), next_after)


def _summaries(store: Store, rows: list[tuple[Any, ...]]) -> list[TraceSummary]:
    tags = _tags_for(store, [r[0] for r in rows])
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
                store, f"SELECT {_TRACE_SELECT} FROM traces t WHERE t.id IN ({marks})", chunk
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
