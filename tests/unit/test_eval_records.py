"""Stored evaluations: ``save_outcomes`` writes them, ``recent_evals`` pages through every
trace's, newest first, results saved together in the reverse of the order they were written."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from agent_replay.clock import FixedClock
from agent_replay.services.evals.records import recent_evals, save_outcomes
from agent_replay.services.evals.results import EvalOutcome
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import eval_dicts


def _outcomes(*names: str) -> list[EvalOutcome]:
    return [EvalOutcome(name, 0.5, 0.4, True, summary=name) for name in names]


def test_recent_evals_pages_newest_first_with_saved_order_breaking_ties(
    store: Store, clock: FixedClock, make_trace: Callable[..., dict[str, Any]]
) -> None:
    ingest_trace(store, make_trace(1, id="trc_first", agent_name="first"))
    ingest_trace(store, make_trace(1, id="trc_second", agent_name="second"))
    save_outcomes(store, "trc_first", _outcomes("a", "b"), clock)
    later = FixedClock(clock.now() + dt.timedelta(seconds=1))
    save_outcomes(store, "trc_second", _outcomes("c", "d", "e"), later)
    seen: list[tuple[str, str, str]] = []
    after = None
    pages = 0
    while True:
        page = recent_evals(store, limit=2, after=after)
        seen += [(e["evaluator"], e["trace_id"], e["agent_name"]) for e in page.items]
        pages += 1
        if page.after is None:
            break
        after = page.after
    assert seen == [
        ("e", "trc_second", "second"),
        ("d", "trc_second", "second"),
        ("c", "trc_second", "second"),
        ("b", "trc_first", "first"),
        ("a", "trc_first", "first"),
    ]
    assert pages == 3


def test_saved_outcomes_read_back_as_the_format_writes_them(
    store: Store, clock: FixedClock, make_trace: Callable[..., dict[str, Any]]
) -> None:
    ingest_trace(store, make_trace(1, id="trc_judged"))
    outcomes = _outcomes("x")
    save_outcomes(store, "trc_judged", outcomes, clock)
    (stored,) = eval_dicts(store, "trc_judged")
    assert stored["id"] == outcomes[0].id and stored["id"].startswith("evl_")
    assert stored["passed"] is True and stored["score"] == 0.5 and stored["threshold"] == 0.4
    assert stored["details"]["summary"] == "x"
    assert stored["created_at"] == outcomes[0].created_at
