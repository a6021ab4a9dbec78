"""A trace's detail: the trace object with its steps (and their decisions and snapshots),
evals and annotations, the ids that name a trace, and a trace's step range. ``show``, the
timeline, replay, export and the library (``get_trace``) read a trace here; the trace list is
``store/queries``.

SQL text, like ``store/queries`` and for the same reason: ``show`` on a local store is answered
by ``commands/fast_read`` over a stdlib ``sqlite3`` connection (``core.SqliteReader``), which
can't run peewee (its import alone costs more than ``show``'s start-up budget, issue 17). The
full CLI and the TUI run the same readers on a peewee database: one reader, not two. The
statements use the SQL subset SQLite and PostgreSQL share, with ``?`` placeholders
(``core.execute``). Nothing on this module's import path imports peewee, pydantic or
``typing``.
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
from agent_replay.trace.io import loads

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:  # the shapes are types only: no run-time import (see the docstring)
    from typing import Any, TypeVar

    from agent_replay.store.shapes import (
        AnnotationJSON,
        DecisionJSON,
        EvalJSON,
        SnapshotJSON,
        StepJSON,
        TraceJSON,
    )
    from agent_replay.trace.models import Trace

    _Built = TypeVar("_Built")

SORT_COLUMNS: dict[str, str] = {
    "time": "started_at_ms",
    "tokens": "total_tokens",
    "duration": "total_duration_ms",
    "cost": "total_cost_usd",
}


TRACE_SELECT = ", ".join(f"t.{quote(c)}" for c in TRACE_COLUMNS)
"""The trace columns, in ``TRACE_COLUMNS`` order, of ``traces t``."""
_STEP_SELECT = ", ".join(quote(c) for c in STEP_COLUMNS)


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
    """The first and last step numbers of a trace (``None``: it has no steps).

    Two subqueries, not ``SELECT MIN(..), MAX(..)``: SQLite answers a lone MIN or MAX from the
    ``(trace_id, step_number)`` index's end in one seek, but both in one SELECT by reading the
    trace's whole range of it (1.1 ms for 10,000 steps against 0.05 ms; the timeline pays it
    on every open)."""
    row = execute(
        store,
        "SELECT (SELECT MIN(step_number) FROM steps WHERE trace_id = ?), "
        "(SELECT MAX(step_number) FROM steps WHERE trace_id = ?)",
        [trace_id, trace_id],
    ).fetchone()
    return (int(row[0]), int(row[1])) if row and row[0] is not None else None


# --- whole traces -------------------------------------------------------------------------


def tags_for(store: Store, trace_ids: list[str]) -> dict[str, list[str]]:
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


def write_order(store: Store) -> str:
    """``ORDER BY`` of a trace's evals and annotations: oldest first (untimed first), then in
    the order they were written: the rowid, or PostgreSQL's arrival sequence (migrations 0007
    and 0008)."""
    return "created_at_ms, rowid" if store.is_sqlite else "created_at_ms NULLS FIRST, seq"


def eval_dicts(store: Store, trace_id: str) -> list[EvalJSON]:
    """The stored evaluations of a trace, oldest first."""
    rows = execute(
        store,
        f"SELECT {', '.join(EVAL_COLUMNS)} FROM evals WHERE trace_id = ? "
        f"ORDER BY {write_order(store)}",
        [trace_id],
    ).fetchall()
    return [eval_dict(r) for r in rows]


def annotation_dicts(store: Store, trace_id: str) -> list[AnnotationJSON]:
    """The annotations of a trace (the run's and its steps'), oldest first."""
    rows = execute(
        store,
        f"SELECT {', '.join(ANNOTATION_COLUMNS)} FROM annotations WHERE trace_id = ? "
        f"ORDER BY {write_order(store)}",
        [trace_id],
    ).fetchall()
    return [annotation_dict(tuple(r)) for r in rows]


def _trace_row(store: Store, trace_id: str) -> tuple[Any, ...]:
    rows = execute(store, f"SELECT {TRACE_SELECT} FROM traces t WHERE t.id = ?", [trace_id])
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
    tags = tags_for(store, [trace_id])[trace_id]
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
