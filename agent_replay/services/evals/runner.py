"""Running a plan of evaluators over one trace and storing the results as they complete.

What runs (``make_plan``):

- the presets named (deterministic or AI), in the order given;
- the rubrics given;
- with ``ai``, every AI preset not already named;
- with no preset and no rubric named, every deterministic preset first.

So ``eval ID`` runs the three deterministic presets, ``eval ID --ai`` those and the four AI
presets, ``eval ID --rubric r.yaml`` only the rubric, ``eval ID --preset ai-root-cause`` only
that one.

Deterministic presets and rubrics run first (instant, free) and are stored together. AI presets
then run one at a time, each stored as soon as it is done. A budget stop ends the run there
(what is done is kept; the rest is listed as skipped). A rejected key, an unreachable API, or
a rate limit or server error that outlasted the SDK's retries ends the AI part too (the next
preset would meet the same). A malformed reply, or another API error, is reported and the next
preset still runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_replay.clock import Clock
from agent_replay.errors import UsageError
from agent_replay.services.evals.ai import AI_PRESETS, run_ai_preset
from agent_replay.services.evals.ask import CallStats
from agent_replay.services.evals.budget import Budget
from agent_replay.services.evals.errors import (
    AIAuthError,
    AIReplyError,
    AIRequestError,
    BudgetExceeded,
    PriceUnknownError,
)
from agent_replay.services.evals.presets import PRESETS
from agent_replay.services.evals.providers import AISettings, ProviderClient, open_client
from agent_replay.services.evals.records import save_outcomes
from agent_replay.services.evals.results import EvalFailure, EvalOutcome
from agent_replay.services.evals.rubric import CompiledRubric, run_rubric
from agent_replay.store.db import Store

ALL_PRESETS: tuple[str, ...] = (*PRESETS, *AI_PRESETS)
"""Every preset name: the deterministic ones, then the AI ones."""


@dataclass(frozen=True)
class EvalPlan:
    """Which evaluators to run, in order."""

    presets: tuple[str, ...] = ()
    """Deterministic preset names."""
    rubrics: tuple[CompiledRubric, ...] = ()
    ai: tuple[str, ...] = ()
    """AI preset names."""

    @property
    def names(self) -> list[str]:
        return [*self.presets, *(r.evaluator for r in self.rubrics), *self.ai]

    @property
    def needs_ai(self) -> bool:
        return bool(self.ai)


def make_plan(
    presets: Sequence[str] = (),
    rubrics: Sequence[CompiledRubric] = (),
    *,
    ai: bool = False,
) -> EvalPlan:
    """The evaluators to run (see the module doc).

    Raises:
        UsageError: an unknown preset name (the message lists them).
    """
    unknown = [p for p in presets if p not in ALL_PRESETS]
    if unknown:
        raise UsageError(
            f"unknown preset {unknown[0]!r}",
            hints=[f"presets: {', '.join(ALL_PRESETS)}"],
        )
    named = list(dict.fromkeys(presets))
    deterministic = [p for p in named if p in PRESETS]
    ai_names = [p for p in named if p in AI_PRESETS]
    if not named and not rubrics:
        deterministic = list(PRESETS)
    if ai:
        ai_names += [p for p in AI_PRESETS if p not in ai_names]
    return EvalPlan(tuple(deterministic), tuple(rubrics), tuple(ai_names))


@dataclass
class EvalRun:
    """What a run of ``run_evals`` did."""

    trace_id: str
    agent_name: str | None = None
    outcomes: list[EvalOutcome] = field(default_factory=list)
    """The results, stored, in the order they ran."""
    failures: list[EvalFailure] = field(default_factory=list)
    """AI presets that produced no result."""
    stopped: str | None = None
    """Why the run stopped early (the budget), if it did."""
    skipped: list[str] = field(default_factory=list)
    """Evaluators not run because of the stop or a rejected key."""
    settings: AISettings | None = None
    """The AI provider and model used (``None`` without AI presets)."""
    budget: Budget | None = None

    @property
    def passed(self) -> bool:
        """Every evaluator ran and passed."""
        return (
            all(o.passed for o in self.outcomes)
            and not self.failures
            and not self.stopped
            and not self.skipped
        )

    @property
    def cost_usd(self) -> float:
        """What the AI calls cost (including failed ones)."""
        return round(self.budget.spent_usd, 8) if self.budget else 0.0

    def to_json(self) -> dict[str, Any]:
        """The ``eval --json`` object."""
        return {
            "trace_id": self.trace_id,
            "agent_name": self.agent_name,
            "passed": self.passed,
            "results": [o.to_json() for o in self.outcomes],
            "failures": [f.to_json() for f in self.failures],
            "stopped": self.stopped,
            "skipped": self.skipped,
            "provider": self.settings.provider if self.settings else None,
            "model": self.settings.model if self.settings else None,
            "cost_usd": self.cost_usd,
            "max_cost_usd": self.budget.limit_usd if self.budget else None,
        }


Progress = Callable[[str, EvalOutcome | EvalFailure | None], None]
"""Called with an evaluator's name before it runs (``None``) and with its result after."""


def evaluate_trace(trace: Mapping[str, Any], plan: EvalPlan) -> list[EvalOutcome]:
    """The deterministic part of a plan (presets and rubrics) on a trace object; no I/O."""
    outcomes = [PRESETS[name].run(trace) for name in plan.presets]
    outcomes += [run_rubric(rubric, trace) for rubric in plan.rubrics]
    return outcomes


def run_evals(
    store: Store,
    trace_id: str,
    plan: EvalPlan,
    *,
    clock: Clock,
    settings: AISettings | None = None,
    budget: Budget | None = None,
    progress: Progress | None = None,
    client: ProviderClient | None = None,
) -> EvalRun:
    """Evaluate a stored trace and store the results (see the module doc).

    Args:
        store: the store (connection open in this thread).
        trace_id: a full trace id or a unique prefix.
        plan: what to run (``make_plan``).
        clock: stamps the results and dates the prices.
        settings: the AI provider (required when the plan has AI presets; ``resolve_ai``).
        budget: the spending cap (default: none).
        progress: told about each evaluator as it starts and ends.
        client: an open provider client to use (default: one opened from ``settings``).

    Raises:
        NotFoundError, AmbiguousIdError: the id names no single trace.
        UsageError: AI presets without settings.
    """
    from agent_replay.store.trace_detail import resolve_trace_id, trace_json

    full_id = resolve_trace_id(store, trace_id)
    trace = trace_json(store, full_id)
    if plan.needs_ai and settings is None and client is None:
        raise UsageError("AI presets need an AI provider (see `agent-replay config`)")
    budget = budget or Budget()
    run = EvalRun(full_id, trace.get("agent_name"), budget=budget)
    tell = progress or (lambda name, result: None)

    quick = evaluate_trace(trace, plan)
    save_outcomes(store, full_id, quick, clock)
    for outcome in quick:
        run.outcomes.append(outcome)
        tell(outcome.evaluator, outcome)
    if not plan.ai:
        return run

    own = client is None
    if client is None:
        assert settings is not None
        client = open_client(settings)
    run.settings = client.settings
    try:
        for index, name in enumerate(plan.ai):
            tell(name, None)
            stats = CallStats()
            try:
                outcome = run_ai_preset(
                    AI_PRESETS[name], trace, client, budget=budget, clock=clock, stats=stats
                )
            except (BudgetExceeded, PriceUnknownError) as exc:
                run.stopped = exc.message
                run.skipped = list(plan.ai[index:])
                if stats.calls:  # the retry didn't fit: the first call was paid for
                    run.failures.append(_failure(name, exc, stats))
                    run.skipped = list(plan.ai[index + 1 :])
                break
            except AIAuthError as exc:
                failure = _failure(name, exc, stats)
                run.failures.append(failure)
                tell(name, failure)
                run.skipped = list(plan.ai[index + 1 :])
                break
            except AIRequestError as exc:
                failure = _failure(name, exc, stats)
                run.failures.append(failure)
                tell(name, failure)
                if exc.status is None or exc.status == 429 or exc.status >= 500:
                    # Unreachable, rate-limited or failing even after the SDK's retries: the
                    # next preset would meet the same; don't spend the user's time on it.
                    run.skipped = list(plan.ai[index + 1 :])
                    break
                continue
            except AIReplyError as exc:
                failure = _failure(name, exc, stats)
                run.failures.append(failure)
                tell(name, failure)
                continue
            save_outcomes(store, full_id, [outcome], clock)
            run.outcomes.append(outcome)
            tell(name, outcome)
    finally:
        if own:
            client.close()
    return run


def _failure(name: str, exc: Any, stats: CallStats) -> EvalFailure:
    return EvalFailure(name, exc.message, list(exc.hints), round(stats.cost_usd or 0.0, 8))
