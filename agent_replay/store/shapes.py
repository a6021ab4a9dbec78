"""The typed shapes the store's readers return: the trace format's JSON objects (what
``show --json`` prints and ``ingest`` reads back) as ``TypedDict``s, so mypy sees every key a
service or a screen reads.

A ``TypedDict`` is a plain ``dict`` at run time: the readers build ordinary dicts (the row
builders in ``store/mapping``) and nothing is converted or validated on the way out. The
fast path (``list``, ``show``: ``commands/fast_read``) never imports this module: the store
imports it under ``TYPE_CHECKING`` only, which keeps ``typing``'s class machinery out of the
start-up. Keys are the format's own names, in the models' field order
(``agent_replay/trace/models.py``).
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class DecisionJSON(TypedDict):
    """A step's decision: the options weighed and the one chosen."""

    options: list[dict[str, Any]]
    """Each ``{"option": ..., "rationale": ..., "score": ...}`` (``DecisionOption``)."""
    chosen: str
    rationale: str | None
    confidence: float | None
    decided_by: str


class SnapshotJSON(TypedDict):
    """What the agent saw at a step (any JSON value each)."""

    context_window: Any
    environment: Any
    tool_state: Any


class StepJSON(TypedDict):
    """A stored step (its ``id`` always set), with its decision and snapshot."""

    id: str
    step_number: int
    step_type: str
    name: str | None
    input: Any
    output: Any
    error: str | None
    started_at: str | None
    ended_at: str | None
    duration_ms: float | None
    tokens_used: int | None
    model: str | None
    parent_step: int | None
    caused_by_step: int | None
    decision: DecisionJSON | None
    snapshot: SnapshotJSON | None
    metadata: dict[str, Any]


class EvalJSON(TypedDict):
    """A stored evaluation of a trace."""

    id: str
    evaluator: str
    score: float
    passed: bool
    threshold: float | None
    details: Any
    model: str | None
    cost_usd: float | None
    created_at: str | None


class EvalListJSON(EvalJSON):
    """One row of the evaluations list (``services/evals/records``): the eval and its trace."""

    trace_id: str
    agent_name: str


class AnnotationJSON(TypedDict):
    """A person's note on a run (``step_number`` ``None``) or on one of its steps."""

    id: str
    step_number: int | None
    label: str
    note: str | None
    score: float | None
    author: str | None
    created_at: str | None


class TraceFields(TypedDict):
    """A stored trace's own fields, without its steps, evals and annotations."""

    id: str
    agent_name: str
    agent_version: str | None
    trigger: str | None
    status: str
    input: Any
    output: Any
    started_at: str | None
    ended_at: str | None
    total_duration_ms: float | None
    total_tokens: int | None
    total_cost_usd: float | None
    error: str | None
    tags: list[str]
    session_id: str | None
    metadata: dict[str, Any]
    parent_trace_id: str | None
    forked_from_step: int | None


class TraceJSON(TraceFields):
    """A full trace object. A reader may leave a part out (``trace_json(with_steps=False)``:
    the caller streams the steps), hence ``NotRequired``."""

    steps: NotRequired[list[StepJSON]]
    evals: NotRequired[list[EvalJSON]]
    annotations: NotRequired[list[AnnotationJSON]]


class TraceListJSON(TraceFields):
    """One ``list --json`` object: the trace's own fields plus ``step_count`` and ``is_fork``."""

    step_count: int
    is_fork: bool
