"""Reading and writing the ``evals`` rows.

Results are validated through the trace format's ``EvalResult`` before they are written, like
every other writer's data. Writes run in one ``BEGIN IMMEDIATE`` transaction per batch.
(These queries could move to ``store/queries.py``; they live here while evals are the only
users.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from peewee import Column, fn

from agent_replay.clock import Clock
from agent_replay.services.evals.results import EvalOutcome
from agent_replay.store import ids
from agent_replay.store.db import Store
from agent_replay.store.mapping import EVAL_COLUMNS, enc, eval_dict
from agent_replay.store.models import EvalRow, TraceRow
from agent_replay.store.shapes import EvalListJSON
from agent_replay.trace.base import canonical_time, time_ms

_FIELDS = [EvalRow._meta.fields[c] for c in EVAL_COLUMNS]
"""The ``evals`` columns in ``EVAL_COLUMNS`` order (the order ``eval_dict`` reads)."""


def save_outcomes(store: Store, trace_id: str, outcomes: list[EvalOutcome], clock: Clock) -> None:
    """Store results for a trace; each gets its ``id`` and ``created_at`` set.

    Raises:
        TraceFormatError: a result is not a valid ``EvalResult`` (a bug, not user input).
    """
    if not outcomes:
        return
    from pydantic import ValidationError

    from agent_replay.errors import TraceFormatError
    from agent_replay.trace.models import EvalResult

    created = canonical_time(clock.now())
    created_ms = time_ms(created)
    rows = []
    for outcome in outcomes:
        outcome.id = outcome.id or ids.new_id(ids.EVAL)
        outcome.created_at = created
        data = outcome.to_json()
        try:
            EvalResult.model_validate(data)
        except ValidationError as exc:
            problems = [(".".join(map(str, e["loc"])), e["msg"]) for e in exc.errors()]
            raise TraceFormatError(problems, label=f"evaluation {outcome.evaluator}") from None
        rows.append(
            (
                outcome.id,
                trace_id,
                outcome.evaluator,
                outcome.score,
                1 if outcome.passed else 0,
                outcome.threshold,
                enc(data["details"]),
                outcome.model,
                outcome.cost_usd,
                created,
                created_ms,
            )
        )
    with store.write():
        EvalRow.insert_many(rows, fields=_FIELDS).execute(store.db)


@dataclass
class EvalPage:
    """A page of stored evaluations across traces, newest first."""

    items: list[EvalListJSON] = field(default_factory=list)
    """Each the format's eval object plus ``trace_id`` and ``agent_name``."""
    after: tuple[int, Any] | None = None
    """The keyset cursor of the next page (``None`` at the end)."""


def recent_evals(
    store: Store, *, limit: int = 200, after: tuple[int, Any] | None = None
) -> EvalPage:
    """Stored evaluations of every trace, newest first, a keyset page at a time."""
    # Results saved together share an instant: insertion order breaks the tie (SQLite's
    # rowid; PostgreSQL's arrival sequence, migration 0007), so pages are stable. A column of
    # the schema that differs per backend, not a spelling of the same SQL.
    arrival = Column(EvalRow, "rowid" if store.is_sqlite else "seq")
    created = fn.COALESCE(EvalRow.created_at_ms, 0)
    query = EvalRow.select(*_FIELDS, TraceRow.agent_name, arrival).join(
        TraceRow, on=(TraceRow.id == EvalRow.trace_id)
    )
    if after is not None:
        query = query.where((created < after[0]) | ((created == after[0]) & (arrival < after[1])))
    rows = list(
        query.order_by(created.desc(), arrival.desc()).limit(limit).tuples().execute(store.db)
    )
    items = []
    for row in rows:
        item: EvalListJSON = {
            **eval_dict(tuple(row[: len(EVAL_COLUMNS)])),
            "trace_id": row[1],
            "agent_name": row[len(EVAL_COLUMNS)],
        }
        items.append(item)
    next_after = None
    if len(rows) == limit:
        last = rows[-1]
        next_after = (int(last[EVAL_COLUMNS.index("created_at_ms")] or 0), last[-1])
    return EvalPage(items, next_after)
