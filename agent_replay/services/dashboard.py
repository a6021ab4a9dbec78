"""The dashboard's figures: ``load_dashboard(store, clock)`` folds the store's aggregate queries
(``agent_replay.store.stats``) over a window of whole UTC days ending today into one
``DashboardData``.

Cost: per day (``per_day[].cost_usd``, the sum of the traces' totals) and per model
(``cost_by_model``, ``cost_by_model_per_day``: the sum of the llm_call steps' own costs, the
producer's or the genai-prices table's, with the calls left unpriced counted).

The window is ``days`` UTC days: from the midnight ``days - 1`` days before the clock's today up
to the next midnight. Every figure covers the traces *started* in the window
(``started_at_ms``); only ``all_traces`` and the policy counts cover the whole store.

Step-level figures are the expensive part (they read step rows), so they are computed per day
and can be reused: pass the previous result's ``step_cache`` and only today, and the days whose
trace count or step total changed since, are read again. Without a cache everything is exact
as of now; with one, a past day's step figures lag only if its steps change without its traces'
step counts changing (an old trace's open tool call closing with an error).

A service module: imports the store only; never Textual, Rich or the CLI. The TUI calls it from a
thread worker, inside ``store.db.connection_context()``.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from agent_replay.clock import Clock
from agent_replay.store import stats
from agent_replay.store.db import Store

DEFAULT_DAYS = 14
"""The window the dashboard opens with."""
WINDOWS: tuple[int, ...] = (7, 14, 30, 90)
"""The windows (in days) the dashboard cycles through."""
MAX_AGENTS = 100
"""Agents listed (most tokens first); the totals still count every agent."""
MAX_TOOLS = 20
"""Failing tools listed (most errors first)."""
MAX_MODELS = 20
"""Models listed in the cost breakdown (most expensive first)."""
MAX_LABELS = 20
"""Annotation labels listed (most used first)."""


@dataclass(frozen=True)
class Totals:
    """Trace-level totals over the window."""

    traces: int = 0
    steps: int = 0
    """The sum of the traces' step counts."""
    tokens: int = 0
    cost_usd: float = 0.0
    failed: int = 0
    """Traces whose status is ``failed``."""

    @property
    def failure_rate(self) -> float | None:
        """``failed / traces``; ``None`` with no traces."""
        return self.failed / self.traces if self.traces else None


@dataclass(frozen=True)
class DayBucket:
    """Traces started on one UTC day, how many of them failed, and what they cost."""

    day: dt.date
    traces: int
    failed: int
    cost_usd: float = 0.0
    """The sum of the day's trace totals (a producer's own, else the sum of its steps')."""
    tokens: int = 0


@dataclass(frozen=True)
class ModelCost:
    """One model's llm_calls over the window: how many, how many priced, tokens and cost.

    The cost is the sum of the calls' own costs (the producer's, else the genai-prices
    table's, see ``services.costs``); ``unpriced`` calls (an unknown model, no token split)
    are not in it.
    """

    model: str
    """The model name as recorded (``""`` for calls that name none)."""
    calls: int
    priced: int
    tokens: int
    cost_usd: float

    @property
    def unpriced(self) -> int:
        """Calls without a cost."""
        return self.calls - self.priced


@dataclass(frozen=True)
class AgentStats:
    """One agent's traces, failures, tokens and cost over the window."""

    agent: str
    traces: int
    failed: int
    tokens: int
    cost_usd: float


@dataclass(frozen=True)
class StatusCount:
    """How many of the window's traces have one status."""

    status: str
    traces: int


@dataclass(frozen=True)
class StepTypeCount:
    """How many steps of one type the window's traces have, and how many carry an error."""

    step_type: str
    steps: int
    errors: int


@dataclass(frozen=True)
class FailingTool:
    """A tool whose ``tool_call`` steps have an error: how many, and in how many traces."""

    name: str
    """The step's name (``""`` for unnamed tool calls)."""
    errors: int
    traces: int


@dataclass(frozen=True)
class EvaluatorStats:
    """Pass counts of one evaluator."""

    evaluator: str
    total: int
    passed: int

    @property
    def pass_rate(self) -> float | None:
        """``passed / total``; ``None`` with no evaluations."""
        return self.passed / self.total if self.total else None


@dataclass(frozen=True)
class EvalStats:
    """Evaluations of the window's traces, overall and per evaluator."""

    evaluators: list[EvaluatorStats] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(e.total for e in self.evaluators)

    @property
    def passed(self) -> int:
        return sum(e.passed for e in self.evaluators)

    @property
    def pass_rate(self) -> float | None:
        """``passed / total`` over every evaluator; ``None`` with no evaluations."""
        return self.passed / self.total if self.total else None


@dataclass(frozen=True)
class GuardStats:
    """Guard checks and blocks over the window, and the policies configured (whole store).

    A block is a ``guard_check`` step with an error, or whose output or metadata says
    ``deny``/``block`` (``agent_replay.store.stats.guard_blocked`` has the exact rule).
    """

    checks: int = 0
    blocks: int = 0
    policies: int = 0
    policies_enabled: int = 0


@dataclass(frozen=True)
class StepCache:
    """Step-level groups per day, with the day's (traces, steps) they were computed for.

    A group's ``bucket`` counts from the start of the read that produced it; only the date key
    places it.
    """

    days: dict[dt.date, tuple[tuple[int, int], list[stats.StepGroup]]] = field(default_factory=dict)
    models: dict[dt.date, list[stats.ModelGroup]] = field(default_factory=dict)
    """The day's llm_calls per model (computed with the step groups, same signature)."""


@dataclass(frozen=True)
class DashboardData:
    """Everything the dashboard shows, computed in one go."""

    now: dt.datetime
    """The clock's time when the figures were computed (UTC)."""
    days: int
    """The window's length in days."""
    start: dt.datetime
    """The window's first instant (a UTC midnight)."""
    end: dt.datetime
    """The window's end, exclusive (the UTC midnight after today)."""
    all_traces: int
    """Every trace in the store, whatever its time."""
    totals: Totals = field(default_factory=Totals)
    per_day: list[DayBucket] = field(default_factory=list)
    """One bucket per day of the window, oldest first, zero-filled."""
    agents: list[AgentStats] = field(default_factory=list)
    """Most tokens first, at most ``MAX_AGENTS``."""
    statuses: list[StatusCount] = field(default_factory=list)
    """Most traces first."""
    step_types: list[StepTypeCount] = field(default_factory=list)
    """Most steps first."""
    failing_tools: list[FailingTool] = field(default_factory=list)
    """Most errors first, at most ``MAX_TOOLS``."""
    cost_by_model: list[ModelCost] = field(default_factory=list)
    """The window's llm_calls per model, most expensive first, at most ``MAX_MODELS``."""
    cost_by_model_per_day: dict[dt.date, list[ModelCost]] = field(default_factory=dict)
    """Each day of the window (oldest first, zero-filled): its models, most expensive first."""
    evals: EvalStats = field(default_factory=EvalStats)
    labels: list[stats.LabelGroup] = field(default_factory=list)
    """People's annotation labels on the window's traces, most used first."""
    guard: GuardStats = field(default_factory=GuardStats)
    step_cache: StepCache = field(default_factory=StepCache)
    """Pass it to the next ``load_dashboard`` to reuse unchanged days."""

    @property
    def is_empty(self) -> bool:
        """The store holds no traces at all (not just none in the window)."""
        return self.all_traces == 0

    @property
    def since(self) -> str:
        """The window's first day as a filter-bar ``since:`` value (``2026-05-19``)."""
        return self.start.date().isoformat()


def window_bounds(now: dt.datetime, days: int) -> tuple[dt.datetime, dt.datetime]:
    """The first instant and the exclusive end of a window of ``days`` UTC days ending today.

    Raises:
        ValueError: ``days`` is less than one.
    """
    if days < 1:
        raise ValueError(f"a window needs at least one day, not {days}")
    today = now.astimezone(dt.UTC).date()
    start = dt.datetime.combine(today - dt.timedelta(days=days - 1), dt.time(), dt.UTC)
    return start, start + dt.timedelta(days=days)


def _ms(instant: dt.datetime) -> int:
    return int(instant.timestamp() * 1000)


def load_dashboard(
    store: Store,
    clock: Clock,
    *,
    days: int = DEFAULT_DAYS,
    step_cache: StepCache | None = None,
) -> DashboardData:
    """Compute the dashboard's figures over the last ``days`` UTC days.

    Args:
        store: an open store (its connection open in the calling thread).
        clock: decides "today".
        days: the window's length in days, today included.
        step_cache: the ``step_cache`` of an earlier result; its unchanged past days are reused.

    Returns:
        The totals, day buckets, breakdowns, evaluation and guard figures.
    """
    now = clock.now().astimezone(dt.UTC)
    start, end = window_bounds(now, days)
    dates = [start.date() + dt.timedelta(days=i) for i in range(days)]
    window = stats.Window(_ms(start), _ms(end))
    policies = stats.policy_counts(store)
    all_traces = stats.count_all_traces(store)
    if all_traces == 0:
        return DashboardData(
            now,
            days,
            start,
            end,
            0,
            per_day=[DayBucket(day, 0, 0) for day in dates],
            cost_by_model_per_day={day: [] for day in dates},
            guard=GuardStats(policies=policies.total, policies_enabled=policies.enabled),
        )
    trace_groups = stats.trace_groups(store, window)
    cache = _step_groups(store, window, dates, trace_groups, step_cache, today=now.date())
    step_groups = [group for day in dates for group in cache.days[day][1]]
    per_model_day = {day: _models(cache.models.get(day, []), limit=None) for day in dates}
    evals = EvalStats(
        [EvaluatorStats(g.evaluator, g.total, g.passed) for g in stats.eval_groups(store, window)]
    )
    return DashboardData(
        now=now,
        days=days,
        start=start,
        end=end,
        all_traces=all_traces,
        totals=_totals(trace_groups),
        per_day=_per_day(trace_groups, dates),
        agents=_agents(trace_groups),
        statuses=_statuses(trace_groups),
        step_types=_step_types(step_groups),
        failing_tools=_failing_tools(step_groups),
        cost_by_model=_models([g for day in dates for g in cache.models.get(day, [])]),
        cost_by_model_per_day=per_model_day,
        evals=evals,
        labels=stats.label_groups(store, window, limit=MAX_LABELS),
        guard=GuardStats(
            checks=sum(g.steps for g in step_groups if g.step_type == "guard_check"),
            blocks=sum(g.blocks for g in step_groups),
            policies=policies.total,
            policies_enabled=policies.enabled,
        ),
        step_cache=cache,
    )


def _step_groups(
    store: Store,
    window: stats.Window,
    dates: list[dt.date],
    trace_groups: list[stats.TraceGroup],
    previous: StepCache | None,
    *,
    today: dt.date,
) -> StepCache:
    """Step groups for every day of the window, reading only the days the cache can't serve."""
    signature: dict[int, tuple[int, int]] = defaultdict(lambda: (0, 0))
    for g in trace_groups:
        traces, steps = signature[g.bucket]
        signature[g.bucket] = (traces + g.traces, steps + g.steps)
    cached = previous.days if previous is not None else {}
    cached_models = previous.models if previous is not None else {}
    fresh: dict[dt.date, tuple[tuple[int, int], list[stats.StepGroup]]] = {}
    models: dict[dt.date, list[stats.ModelGroup]] = {}
    stale: list[int] = []
    for index, day in enumerate(dates):
        sig = signature[index]
        if sig[1] == 0:
            fresh[day] = (sig, [])  # no steps that day: nothing to read
            models[day] = []
        elif day != today and day in cached and cached[day][0] == sig and day in cached_models:
            fresh[day] = cached[day]
            models[day] = cached_models[day]
        else:
            stale.append(index)
    for first, last in _runs(stale):
        sub = stats.Window(
            window.start_ms + first * stats.DAY_MS, window.start_ms + (last + 1) * stats.DAY_MS
        )
        by_day: dict[int, list[stats.StepGroup]] = defaultdict(list)
        for step_group in stats.step_groups(store, sub):
            by_day[first + step_group.bucket].append(step_group)
        model_day: dict[int, list[stats.ModelGroup]] = defaultdict(list)
        for model_group in stats.model_groups(store, sub):
            model_day[first + model_group.bucket].append(model_group)
        for index in range(first, last + 1):
            fresh[dates[index]] = (signature[index], by_day[index])
            models[dates[index]] = model_day[index]
    return StepCache(fresh, models)


def _runs(indices: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted indices as inclusive runs of consecutive values: [1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    runs: list[tuple[int, int]] = []
    for i in sorted(indices):
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def _totals(groups: list[stats.TraceGroup]) -> Totals:
    return Totals(
        traces=sum(g.traces for g in groups),
        steps=sum(g.steps for g in groups),
        tokens=sum(g.tokens for g in groups),
        cost_usd=sum(g.cost_usd for g in groups),
        failed=sum(g.traces for g in groups if g.status == stats.FAILED),
    )


def _per_day(groups: list[stats.TraceGroup], dates: list[dt.date]) -> list[DayBucket]:
    traces = [0] * len(dates)
    failed = [0] * len(dates)
    cost = [0.0] * len(dates)
    tokens = [0] * len(dates)
    for g in groups:
        traces[g.bucket] += g.traces
        cost[g.bucket] += g.cost_usd
        tokens[g.bucket] += g.tokens
        if g.status == stats.FAILED:
            failed[g.bucket] += g.traces
    return [DayBucket(day, traces[i], failed[i], cost[i], tokens[i]) for i, day in enumerate(dates)]


def _models(groups: list[stats.ModelGroup], limit: int | None = MAX_MODELS) -> list[ModelCost]:
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])
    for g in groups:
        row = sums[g.model]
        row[0] += g.calls
        row[1] += g.priced
        row[2] += g.tokens
        row[3] += g.cost_usd
    models = [ModelCost(name, int(r[0]), int(r[1]), int(r[2]), r[3]) for name, r in sums.items()]
    models.sort(key=lambda m: (-m.cost_usd, -m.calls, m.model))
    return models if limit is None else models[:limit]


def _agents(groups: list[stats.TraceGroup]) -> list[AgentStats]:
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])
    for g in groups:
        row = sums[g.agent]
        row[0] += g.traces
        row[1] += g.traces if g.status == stats.FAILED else 0
        row[2] += g.tokens
        row[3] += g.cost_usd
    agents = [
        AgentStats(name, int(row[0]), int(row[1]), int(row[2]), row[3])
        for name, row in sums.items()
    ]
    agents.sort(key=lambda a: (-a.tokens, -a.traces, a.agent))
    return agents[:MAX_AGENTS]


def _statuses(groups: list[stats.TraceGroup]) -> list[StatusCount]:
    counts: dict[str, int] = defaultdict(int)
    for g in groups:
        counts[g.status] += g.traces
    return sorted(
        (StatusCount(status, n) for status, n in counts.items()),
        key=lambda s: (-s.traces, s.status),
    )


def _step_types(groups: list[stats.StepGroup]) -> list[StepTypeCount]:
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for g in groups:
        sums[g.step_type][0] += g.steps
        sums[g.step_type][1] += g.errors
    return sorted(
        (StepTypeCount(kind, steps, errors) for kind, (steps, errors) in sums.items()),
        key=lambda s: (-s.steps, s.step_type),
    )


def _failing_tools(groups: list[stats.StepGroup]) -> list[FailingTool]:
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for g in groups:
        if g.tool is not None:
            sums[g.tool][0] += g.errors
            sums[g.tool][1] += g.error_traces  # a trace is in one day: day counts add up
    tools = [FailingTool(name, errors, traces) for name, (errors, traces) in sums.items()]
    tools.sort(key=lambda t: (-t.errors, -t.traces, t.name))
    return tools[:MAX_TOOLS]
