"""Values derived from a trace when the producer left them out, computed the same way by
ingest (all at once) and the recorder (at ``end_step`` / ``end_trace``): durations, token
totals, and costs (``services.costs``: an llm_call's price from the genai-prices table, a
trace's total from its steps)."""

from __future__ import annotations

from collections.abc import Iterable

from agent_replay.services import costs
from agent_replay.trace.base import parse_time
from agent_replay.trace.models import Step, Trace


def duration_between(started_at: str | None, ended_at: str | None) -> float | None:
    """Milliseconds from start to end, or ``None`` when either is unknown."""
    if started_at is None or ended_at is None:
        return None
    delta = parse_time(ended_at) - parse_time(started_at)
    return delta.total_seconds() * 1000.0


def derive_step(step: Step) -> None:
    """Fill ``duration_ms`` from the step's timestamps when missing, and an llm_call's cost
    from the price table when its producer gave none (``costs.price_step``)."""
    if step.duration_ms is None:
        step.duration_ms = duration_between(step.started_at, step.ended_at)
    if costs.needs_price(step):
        costs.price_step(step)


def total_tokens(tokens: Iterable[int | None]) -> int | None:
    """The sum of the known token counts, or ``None`` when no step reported any."""
    known = [t for t in tokens if t is not None]
    return sum(known) if known else None


def derive_trace(trace: Trace) -> None:
    """Fill step durations and costs, ``total_tokens``, ``total_cost_usd`` (the sum of the
    steps' costs) and ``total_duration_ms`` when missing."""
    for step in trace.steps:
        derive_step(step)
    if trace.total_tokens is None:
        trace.total_tokens = total_tokens(s.tokens_used for s in trace.steps)
    costs.derive_total(trace)
    if trace.total_duration_ms is None:
        trace.total_duration_ms = duration_between(trace.started_at, trace.ended_at)
