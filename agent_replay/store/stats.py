"""Aggregate queries behind the dashboard, each over a window of trace start times
(``traces.started_at_ms``) and grouped into time buckets by the database.

Five queries, so a large store never streams rows into Python:

- ``trace_groups``: traces, steps, tokens, cost per (bucket, agent, status): one pass over the
  window's traces (the ``traces_started`` index bounds it).
- ``step_groups``: steps and errors per (bucket, step type), failing tools, guard checks and
  blocks: one pass over the window's steps, reached through ``steps_trace_number``. It is the
  expensive one (it reads step rows), so callers can ask for just the buckets they lack.
- ``model_groups``: llm_calls, tokens and cost per (bucket, model), from the steps'
  ``cost_usd`` column (read with the step groups, and cached with them).
- ``eval_groups``: evaluations per evaluator; ``policy_counts``: the policies table.

Built with peewee's query builder over ``store/models``: one query on both backends, in the
subset SQLite and PostgreSQL share (``CASE``, ``COUNT``/``SUM``, ``COALESCE``, integer division
of BIGINTs, ``LIKE`` on ``LOWER``); no JSON or date functions.
Results are plain dataclasses. A store module: imports the store only; never services, Textual
or Rich.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any, cast

from peewee import SQL, Case, Expression, Node, Select, fn

from agent_replay.store.db import Store
from agent_replay.store.models import AnnotationRow, EvalRow, PolicyRow, StepRow, TraceRow

DAY_MS = 86_400_000
"""One day bucket, in milliseconds (UTC days when the window starts at a UTC midnight)."""

FAILED = "failed"
"""The trace status counted as a failure (timeouts are reported apart, by status)."""

BLOCK_KEYS: tuple[str, ...] = ("action", "verdict", "decision")
"""Keys of a guard check's output or metadata object that carry its verdict."""
BLOCK_VALUES: tuple[str, ...] = ("deny", "denied", "block", "blocked")
"""Verdicts that mean the guarded action was stopped (compared case-insensitively)."""


@dataclass(frozen=True)
class Window:
    """A half-open range ``[start_ms, end_ms)`` of trace start times (epoch milliseconds)."""

    start_ms: int
    end_ms: int


@dataclass(frozen=True)
class TraceGroup:
    """The traces of one agent with one status that started in one bucket."""

    bucket: int
    """Buckets counted from the window start (0 is the first)."""
    agent: str
    status: str
    traces: int
    steps: int
    """The sum of the traces' step counts."""
    tokens: int
    cost_usd: float


@dataclass(frozen=True)
class StepGroup:
    """The steps of one type in the traces that started in one bucket.

    Failing tool calls get groups of their own, one per tool name (``tool`` set): in those,
    every step is a ``tool_call`` with an error.
    """

    bucket: int
    step_type: str
    tool: str | None
    """The tool name of a failing-tool group (``""`` for an unnamed step), else ``None``."""
    steps: int
    errors: int
    """Steps with an error."""
    error_traces: int
    """Distinct traces with a failing call of ``tool`` (0 outside failing-tool groups)."""
    blocks: int
    """Guard checks that blocked (see ``guard_blocked``); 0 for other step types."""


@dataclass(frozen=True)
class ModelGroup:
    """The llm_call steps of one model in the traces that started in one bucket."""

    bucket: int
    model: str
    """The step's model (``""`` for calls that name none)."""
    calls: int
    priced: int
    """Calls with a cost (the producer's or the price table's)."""
    tokens: int
    cost_usd: float


@dataclass(frozen=True)
class EvalGroup:
    """The evaluations one evaluator made of the window's traces."""

    evaluator: str
    total: int
    passed: int


@dataclass(frozen=True)
class LabelGroup:
    """People's annotations of one label on the window's traces (runs or their steps)."""

    label: str
    annotations: int
    traces: int
    """Distinct traces carrying the label."""


@dataclass(frozen=True)
class PolicyCounts:
    """Rows of the policies table, and how many are enabled (policies are not windowed)."""

    total: int
    enabled: int


def _in_window(window: Window) -> Expression:
    return (TraceRow.started_at_ms >= window.start_ms) & (TraceRow.started_at_ms < window.end_ms)


def _bucket(window: Window, bucket_ms: int) -> Expression:
    # BIGINT integer division in SQLite and PostgreSQL (both operands integers).
    return (TraceRow.started_at_ms - window.start_ms) / bucket_ms


def _like(column: Node, pattern: str) -> Expression:
    """``LOWER(column) LIKE pattern``: peewee's ``**`` is ILIKE on PostgreSQL and LIKE on
    SQLite (its ``%``, LIKE, is GLOB there); the pattern is lower case, so both agree."""
    lowered: Expression = fn.LOWER(column) ** pattern
    return lowered


def _any(tests: list[Expression]) -> Expression:
    return functools.reduce(operator.or_, tests)


def _mentions(column: Node, words: tuple[str, ...]) -> Expression:
    return _any([_like(column, f"%{word}%") for word in words])


def _verdicts(column: Node) -> Expression:
    # Payloads are stored as compact JSON (no spaces), so a key and its value read exactly so.
    tests = [_like(column, f'%"{key}":"{value}"%') for key in BLOCK_KEYS for value in BLOCK_VALUES]
    tests.append(_like(column, '%"blocked":true%'))
    tests += [fn.LOWER(column) == f'"{value}"' for value in BLOCK_VALUES]
    return _any(tests)


def guard_blocked(steps: Any = StepRow) -> Case:
    """Whether a step is a guard check that blocked (1) or not (0), as a SQL expression over
    ``steps`` (``StepRow`` or an alias of it).

    A ``guard_check`` step blocked its action when:

    - its ``error`` is set (the check failed closed, or raised to stop the action); or
    - its output or its metadata is a JSON object with ``"action"``, ``"verdict"`` or
      ``"decision"`` set to ``deny``, ``denied``, ``block`` or ``blocked`` (any case), or with
      ``"blocked": true``; or
    - its output or metadata is one of those words as a JSON string.

    The keys are matched anywhere in the object (a nested ``{"verdict": "deny"}`` counts too).
    ``allow``, ``pass``, ``warn`` and ``require_review`` verdicts are not blocks.
    """
    words = ("den", "block")
    return Case(
        None,
        [
            (steps.step_type != "guard_check", 0),
            (steps.error.is_null(False), 1),
            # A cheap gate first: most checks allow, and their payloads never mention these.
            (~(_mentions(steps.output, words) | _mentions(steps.metadata, words)), 0),
            (_verdicts(steps.output) | _verdicts(steps.metadata), 1),
        ],
        0,
    )


def count_all_traces(store: Store) -> int:
    """Every trace in the store, whatever its time (tells an empty store from a quiet window)."""
    return int(TraceRow.select().count(store.db))


def _rows(query: Select, store: Store) -> list[tuple[Any, ...]]:
    return cast("list[tuple[Any, ...]]", list(query.tuples().execute(store.db)))


def trace_groups(store: Store, window: Window, bucket_ms: int = DAY_MS) -> list[TraceGroup]:
    """Traces, steps, tokens and cost per (bucket, agent, status) in the window.

    Missing totals (``NULL`` tokens or cost) count as zero.
    """
    bucket = _bucket(window, bucket_ms)
    query = (
        TraceRow.select(
            bucket,
            TraceRow.agent_name,
            TraceRow.status,
            fn.COUNT(SQL("*")),
            fn.COALESCE(fn.SUM(TraceRow.step_count), 0),
            fn.COALESCE(fn.SUM(TraceRow.total_tokens), 0),
            fn.COALESCE(fn.SUM(TraceRow.total_cost_usd), 0),
        )
        .where(_in_window(window))
        .group_by(bucket, TraceRow.agent_name, TraceRow.status)
        .order_by(bucket, TraceRow.agent_name, TraceRow.status)
    )
    return [
        TraceGroup(int(r[0]), r[1], r[2], int(r[3]), int(r[4]), int(r[5]), float(r[6]))
        for r in _rows(query, store)
    ]


def step_groups(store: Store, window: Window, bucket_ms: int = DAY_MS) -> list[StepGroup]:
    """Steps per (bucket, step type) of the traces started in the window, with failing tool
    calls split out per tool name, and guard blocks counted (``guard_blocked``).

    An error is a step whose ``error`` is set.
    """
    bucket = _bucket(window, bucket_ms)
    has_error = StepRow.error.is_null(False)
    failed_call = (StepRow.step_type == "tool_call") & has_error
    tool = Case(None, [(failed_call, fn.COALESCE(StepRow.name, ""))])
    query = (
        TraceRow.select(
            bucket,
            StepRow.step_type,
            tool,
            fn.COUNT(SQL("*")),
            fn.SUM(Case(None, [(has_error, 1)], 0)),
            fn.COUNT(Case(None, [(failed_call, StepRow.trace_id)]).distinct()),
            fn.SUM(guard_blocked()),
        )
        .join(StepRow, on=(StepRow.trace_id == TraceRow.id))
        .where(_in_window(window))
        .group_by(bucket, StepRow.step_type, tool)
        .order_by(bucket, StepRow.step_type, tool)
    )
    return [
        StepGroup(int(r[0]), r[1], r[2], int(r[3]), int(r[4]), int(r[5]), int(r[6]))
        for r in _rows(query, store)
    ]


def model_groups(store: Store, window: Window, bucket_ms: int = DAY_MS) -> list[ModelGroup]:
    """llm_calls, tokens and cost per (bucket, model) of the traces started in the window:
    the sum of the steps' ``cost_usd`` column (their ``metadata.cost_usd``), no JSON read."""
    bucket = _bucket(window, bucket_ms)
    model = fn.COALESCE(StepRow.model, "")
    query = (
        TraceRow.select(
            bucket,
            model,
            fn.COUNT(SQL("*")),
            fn.COUNT(StepRow.cost_usd),
            fn.COALESCE(fn.SUM(StepRow.tokens_used), 0),
            fn.COALESCE(fn.SUM(StepRow.cost_usd), 0),
        )
        .join(StepRow, on=(StepRow.trace_id == TraceRow.id))
        .where(_in_window(window) & (StepRow.step_type == "llm_call"))
        .group_by(bucket, model)
        .order_by(bucket, model)
    )
    return [
        ModelGroup(int(r[0]), r[1], int(r[2]), int(r[3]), int(r[4]), float(r[5]))
        for r in _rows(query, store)
    ]


def eval_groups(store: Store, window: Window) -> list[EvalGroup]:
    """Evaluations of the traces started in the window, per evaluator (alphabetical)."""
    query = (
        TraceRow.select(
            EvalRow.evaluator,
            fn.COUNT(SQL("*")),
            fn.SUM(Case(None, [(EvalRow.passed != 0, 1)], 0)),
        )
        .join(EvalRow, on=(EvalRow.trace_id == TraceRow.id))
        .where(_in_window(window))
        .group_by(EvalRow.evaluator)
        .order_by(EvalRow.evaluator)
    )
    return [EvalGroup(r[0], int(r[1]), int(r[2])) for r in _rows(query, store)]


def label_groups(store: Store, window: Window, limit: int = 20) -> list[LabelGroup]:
    """Annotation labels on the traces started in the window, most used first."""
    count = fn.COUNT(AnnotationRow.id)
    query = (
        AnnotationRow.select(
            AnnotationRow.label, count, fn.COUNT(AnnotationRow.trace_id.distinct())
        )
        .join(TraceRow, on=(AnnotationRow.trace_id == TraceRow.id))
        .where(_in_window(window))
        .group_by(AnnotationRow.label)
        .order_by(count.desc(), AnnotationRow.label)
        .limit(limit)
    )
    return [LabelGroup(str(label), int(n), int(traces)) for label, n, traces in _rows(query, store)]


def policy_counts(store: Store) -> PolicyCounts:
    """How many policies there are, and how many are enabled."""
    query = PolicyRow.select(
        fn.COUNT(SQL("*")), fn.COALESCE(fn.SUM(Case(None, [(PolicyRow.enabled != 0, 1)], 0)), 0)
    )
    row = _rows(query, store)[0]
    return PolicyCounts(int(row[0]), int(row[1]))
