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

The SQL is the portable subset SQLite and PostgreSQL share (``CASE``, ``COUNT``/``SUM``,
``COALESCE``, integer division of BIGINTs, ``LIKE`` on ``LOWER``); no JSON or date functions.
Results are plain dataclasses. A store module: imports the store only; never services, Textual
or Rich.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from agent_replay.store.db import Store
from agent_replay.store.writes import execute

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
    """Guard checks that blocked (see ``GUARD_BLOCK_SQL``); 0 for other step types."""


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


_IN_WINDOW = "t.started_at_ms >= ? AND t.started_at_ms < ?"
_BUCKET = "(t.started_at_ms - ?) / ?"  # BIGINT integer division in SQLite and PostgreSQL
_HAS_ERROR = "s.error IS NOT NULL"


def _mentions(column: str, words: tuple[str, ...]) -> str:
    return " OR ".join(f"LOWER(s.{column}) LIKE '%{word}%'" for word in words)


def _verdicts(column: str) -> str:
    # Payloads are stored as compact JSON (no spaces), so a key and its value read exactly so.
    text = f"LOWER(s.{column})"
    tests = [f'{text} LIKE \'%"{key}":"{value}"%\'' for key in BLOCK_KEYS for value in BLOCK_VALUES]
    tests.append(f"{text} LIKE '%\"blocked\":true%'")
    tests += [f"{text} = '\"{value}\"'" for value in BLOCK_VALUES]
    return " OR ".join(tests)


GUARD_BLOCK_SQL = (
    "CASE WHEN s.step_type <> 'guard_check' THEN 0 "
    f"WHEN {_HAS_ERROR} THEN 1 "
    # A cheap gate first: most checks allow, and their payloads never mention these words.
    f"WHEN NOT ({_mentions('output', ('den', 'block'))} "
    f"OR {_mentions('metadata', ('den', 'block'))}) THEN 0 "
    f"WHEN {_verdicts('output')} OR {_verdicts('metadata')} THEN 1 "
    "ELSE 0 END"
)
"""Whether a step is a guard check that blocked (1) or not (0).

A ``guard_check`` step blocked its action when:

- its ``error`` is set (the check failed closed, or raised to stop the action); or
- its output or its metadata is a JSON object with ``"action"``, ``"verdict"`` or
  ``"decision"`` set to ``deny``, ``denied``, ``block`` or ``blocked`` (any case), or with
  ``"blocked": true``; or
- its output or metadata is one of those words as a JSON string.

The keys are matched anywhere in the object (a nested ``{"verdict": "deny"}`` counts too).
``allow``, ``pass``, ``warn`` and ``require_review`` verdicts are not blocks.
"""


def count_all_traces(store: Store) -> int:
    """Every trace in the store, whatever its time (tells an empty store from a quiet window)."""
    return int(execute(store, "SELECT COUNT(*) FROM traces").fetchone()[0])


def trace_groups(store: Store, window: Window, bucket_ms: int = DAY_MS) -> list[TraceGroup]:
    """Traces, steps, tokens and cost per (bucket, agent, status) in the window.

    Missing totals (``NULL`` tokens or cost) count as zero.
    """
    rows = execute(
        store,
        f"SELECT {_BUCKET}, t.agent_name, t.status, COUNT(*), COALESCE(SUM(t.step_count), 0), "
        "COALESCE(SUM(t.total_tokens), 0), COALESCE(SUM(t.total_cost_usd), 0) "
        f"FROM traces t WHERE {_IN_WINDOW} "
        f"GROUP BY {_BUCKET}, t.agent_name, t.status ORDER BY 1, 2, 3",
        [window.start_ms, bucket_ms, window.start_ms, window.end_ms, window.start_ms, bucket_ms],
    ).fetchall()
    return [
        TraceGroup(int(r[0]), r[1], r[2], int(r[3]), int(r[4]), int(r[5]), float(r[6]))
        for r in rows
    ]


def step_groups(store: Store, window: Window, bucket_ms: int = DAY_MS) -> list[StepGroup]:
    """Steps per (bucket, step type) of the traces started in the window, with failing tool
    calls split out per tool name, and guard blocks counted (``GUARD_BLOCK_SQL``).

    An error is a step whose ``error`` is set.
    """
    tool = f"CASE WHEN s.step_type = 'tool_call' AND {_HAS_ERROR} THEN COALESCE(s.name, '') END"
    rows = execute(
        store,
        f"SELECT {_BUCKET}, s.step_type, {tool}, COUNT(*), "
        f"SUM(CASE WHEN {_HAS_ERROR} THEN 1 ELSE 0 END), "
        f"COUNT(DISTINCT CASE WHEN s.step_type = 'tool_call' AND {_HAS_ERROR} "
        f"THEN s.trace_id END), SUM({GUARD_BLOCK_SQL}) "
        f"FROM traces t JOIN steps s ON s.trace_id = t.id WHERE {_IN_WINDOW} "
        f"GROUP BY {_BUCKET}, s.step_type, {tool} ORDER BY 1, 2, 3",
        [window.start_ms, bucket_ms, window.start_ms, window.end_ms, window.start_ms, bucket_ms],
    ).fetchall()
    return [
        StepGroup(int(r[0]), r[1], r[2], int(r[3]), int(r[4]), int(r[5]), int(r[6])) for r in rows
    ]


def model_groups(store: Store, window: Window, bucket_ms: int = DAY_MS) -> list[ModelGroup]:
    """llm_calls, tokens and cost per (bucket, model) of the traces started in the window:
    the sum of the steps' ``cost_usd`` column (their ``metadata.cost_usd``), no JSON read."""
    rows = execute(
        store,
        f"SELECT {_BUCKET}, COALESCE(s.model, ''), COUNT(*), COUNT(s.cost_usd), "
        "COALESCE(SUM(s.tokens_used), 0), COALESCE(SUM(s.cost_usd), 0) "
        f"FROM traces t JOIN steps s ON s.trace_id = t.id WHERE {_IN_WINDOW} "
        "AND s.step_type = 'llm_call' "
        f"GROUP BY {_BUCKET}, COALESCE(s.model, '') ORDER BY 1, 2",
        [window.start_ms, bucket_ms, window.start_ms, window.end_ms, window.start_ms, bucket_ms],
    ).fetchall()
    return [ModelGroup(int(r[0]), r[1], int(r[2]), int(r[3]), int(r[4]), float(r[5])) for r in rows]


def eval_groups(store: Store, window: Window) -> list[EvalGroup]:
    """Evaluations of the traces started in the window, per evaluator (alphabetical)."""
    rows = execute(
        store,
        "SELECT e.evaluator, COUNT(*), SUM(CASE WHEN e.passed <> 0 THEN 1 ELSE 0 END) "
        f"FROM traces t JOIN evals e ON e.trace_id = t.id WHERE {_IN_WINDOW} "
        "GROUP BY e.evaluator ORDER BY e.evaluator",
        _params(window),
    ).fetchall()
    return [EvalGroup(r[0], int(r[1]), int(r[2])) for r in rows]


def label_groups(store: Store, window: Window, limit: int = 20) -> list[LabelGroup]:
    """Annotation labels on the traces started in the window, most used first (Peewee's
    query builder: the same query on SQLite and PostgreSQL)."""
    from peewee import fn

    from agent_replay.store.models import AnnotationRow, TraceRow

    count = fn.COUNT(AnnotationRow.id)
    query = (
        AnnotationRow.select(
            AnnotationRow.label, count, fn.COUNT(AnnotationRow.trace_id.distinct())
        )
        .join(TraceRow, on=(AnnotationRow.trace_id == TraceRow.id))
        .where(
            (TraceRow.started_at_ms >= window.start_ms) & (TraceRow.started_at_ms < window.end_ms)
        )
        .group_by(AnnotationRow.label)
        .order_by(count.desc(), AnnotationRow.label)
        .limit(limit)
        .bind(store.db)
        .tuples()
    )
    rows = cast("list[tuple[Any, ...]]", list(query))  # .tuples(): plain rows, not models
    return [LabelGroup(str(label), int(n), int(traces)) for label, n, traces in rows]


def policy_counts(store: Store) -> PolicyCounts:
    """How many policies there are, and how many are enabled."""
    row = execute(
        store,
        "SELECT COUNT(*), COALESCE(SUM(CASE WHEN enabled <> 0 THEN 1 ELSE 0 END), 0) FROM policies",
    ).fetchone()
    return PolicyCounts(int(row[0]), int(row[1]))


def _params(window: Window) -> list[Any]:
    return [window.start_ms, window.end_ms]
