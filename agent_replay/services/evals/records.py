"""Reading and writing the ``evals`` rows.

Results are validated through the trace format's ``EvalResult`` before they are written, like
every other writer's data. Writes run in one ``BEGIN IMMEDIATE`` transaction per batch.
(These queries could move to ``store/queries.py``; they live here while evals are the only
users.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_replay.clock import Clock
from agent_replay.services.evals.results import EvalOutcome
from agent_replay.store import ids
from agent_replay.store.db import Store
from agent_replay.store.mapping import EVAL_COLUMNS, enc, eval_dict
from agent_replay.store.writes import execute, insert_many
from agent_replay.trace.base import canonical_time, time_ms


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
        insert_many(store, "evals", EVAL_COLUMNS, rows)


_SELECT = ", ".join(f"e.{c}" for c in EVAL_COLUMNS)


@dataclass
class EvalPage:
    """A page of stored evaluations across traces, newest first."""

    items: list[dict[str, Any]] = field(default_factory=list)
    """Each the format's eval object plus ``trace_id`` and ``agent_name``."""
    after: tuple[int, Any] | None = None
    """The keyset cursor of the next page (``None`` at the end)."""


def recent_evals(
    store: Store, *, limit: int = 200, after: tuple[int, Any] | None = None
) -> EvalPage:
    """Stored evaluations of every trace, newest first, a keyset page at a time."""
    # Results saved together share an instant: insertion order breaks the tie (rowid on
    # SQLite, as ``store.queries.eval_dicts`` does), so pages are stable.
    tiebreak = "e.rowid" if store.param == "?" else "e.id"
    where = "1 = 1"
    params: list[Any] = []
    if after is not None:
        where = (
            f"(COALESCE(e.created_at_ms, 0) < ? "
            f"OR (COALESCE(e.created_at_ms, 0) = ? AND {tiebreak} < ?))"
        )
        params = [after[0], after[0], after[1]]
    rows = execute(
        store,
        f"SELECT {_SELECT}, t.agent_name, {tiebreak} FROM evals e "
        f"JOIN traces t ON t.id = e.trace_id WHERE {where} "
        f"ORDER BY COALESCE(e.created_at_ms, 0) DESC, {tiebreak} DESC LIMIT ?",
        [*params, limit],
    ).fetchall()
    items = []
    for row in rows:
        item = eval_dict(tuple(row[: len(EVAL_COLUMNS)]))
        item["trace_id"] = row[1]
        item["agent_name"] = row[len(EVAL_COLUMNS)]
        items.append(item)
    next_after = None
    if len(rows) == limit:
        last = rows[-1]
        next_after = (int(last[EVAL_COLUMNS.index("created_at_ms")] or 0), last[-1])
    return EvalPage(items, next_after)
