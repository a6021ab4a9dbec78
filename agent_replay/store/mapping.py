"""Explicit row <-> domain mapping (written out, not generated).

Rows are plain tuples in the column orders below, so the bulk writer can ``executemany`` them
and readers can build the format's JSON objects without a round trip through pydantic.
"""

from __future__ import annotations

import math

from agent_replay.trace.base import time_ms
from agent_replay.trace.io import dumps, input_hash, loads

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:  # pydantic stays off the read paths (list) that only need rows
    from typing import Any

    from agent_replay.store.shapes import (
        AnnotationJSON,
        DecisionJSON,
        EvalJSON,
        SnapshotJSON,
        StepJSON,
        TraceJSON,
    )
    from agent_replay.trace.models import Annotation, Step, Trace

TRACE_COLUMNS = (
    "id",
    "agent_name",
    "agent_version",
    "trigger",
    "status",
    "input",
    "output",
    "input_hash",
    "started_at",
    "started_at_ms",
    "ended_at",
    "total_duration_ms",
    "total_tokens",
    "total_cost_usd",
    "error",
    "session_id",
    "metadata",
    "parent_trace_id",
    "forked_from_step",
    "otel_trace_id",
    "source_format",
    "step_count",
    "created_at_ms",
    "producer_trace_id",
)
STEP_COLUMNS = (
    "id",
    "trace_id",
    "step_number",
    "step_type",
    "name",
    "input",
    "output",
    "error",
    "started_at",
    "started_at_ms",
    "ended_at",
    "duration_ms",
    "tokens_used",
    "model",
    "parent_step",
    "caused_by_step",
    "metadata",
    "call_id",
    "is_open",
    "cost_usd",
)
DECISION_COLUMNS = (
    "step_id",
    "trace_id",
    "options",
    "chosen",
    "rationale",
    "confidence",
    "decided_by",
)
SNAPSHOT_COLUMNS = ("step_id", "trace_id", "context_window", "environment", "tool_state")
EVAL_COLUMNS = (
    "id",
    "trace_id",
    "evaluator",
    "score",
    "passed",
    "threshold",
    "details",
    "model",
    "cost_usd",
    "created_at",
    "created_at_ms",
)
TAG_COLUMNS = ("trace_id", "tag", "position")
ANNOTATION_COLUMNS = (
    "id",
    "trace_id",
    "step_number",
    "label",
    "note",
    "score",
    "author",
    "created_at",
    "created_at_ms",
)


def quote(column: str) -> str:
    """Quote a column name (``trigger`` is an SQL keyword)."""
    return f'"{column}"'


def enc(value: Any) -> str | None:
    """A JSON payload for a TEXT column; ``None`` stays SQL NULL."""
    return None if value is None else dumps(value)


def enc_meta(value: dict[str, Any]) -> str | None:
    """Metadata: an empty object is stored as NULL."""
    return dumps(value) if value else None


def dec(text: str | None) -> Any:
    """Decode a JSON payload column."""
    return None if text is None else loads(text)


def dec_meta(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    value: dict[str, Any] = loads(text)
    return value


class TraceRows:
    """Every row one trace writes, ready for ``executemany``.

    A plain class, not a dataclass: ``list``'s fast path imports this module (for the read
    builders below) and ``dataclasses`` imports ``inspect``, ~7 ms of its start-up (issue 17).
    """

    __slots__ = ("trace", "steps", "decisions", "snapshots", "evals", "tags", "annotations")

    def __init__(
        self,
        trace: tuple[Any, ...],
        steps: list[tuple[Any, ...]] | None = None,
        decisions: list[tuple[Any, ...]] | None = None,
        snapshots: list[tuple[Any, ...]] | None = None,
        evals: list[tuple[Any, ...]] | None = None,
        tags: list[tuple[Any, ...]] | None = None,
        annotations: list[tuple[Any, ...]] | None = None,
    ) -> None:
        self.trace = trace
        self.steps = steps if steps is not None else []
        self.decisions = decisions if decisions is not None else []
        self.snapshots = snapshots if snapshots is not None else []
        self.evals = evals if evals is not None else []
        self.tags = tags if tags is not None else []
        self.annotations = annotations if annotations is not None else []


def producer_id(metadata: dict[str, Any]) -> str | None:
    """The id the producer gave a trace (``metadata.producer_trace_id``), if it is text."""
    value = metadata.get("producer_trace_id")
    return value if isinstance(value, str) and value else None


def trace_row(
    trace: Trace,
    trace_id: str,
    *,
    created_ms: int,
    step_count: int,
    otel_trace_id: str | None = None,
    source_format: str | None = None,
) -> tuple[Any, ...]:
    """The ``traces`` row of a trace (in ``TRACE_COLUMNS`` order)."""
    started_ms = time_ms(trace.started_at)
    return (
        trace_id,
        trace.agent_name,
        trace.agent_version,
        trace.trigger,
        trace.status,
        enc(trace.input),
        enc(trace.output),
        input_hash(trace.input),
        trace.started_at,
        started_ms if started_ms is not None else created_ms,
        trace.ended_at,
        trace.total_duration_ms,
        trace.total_tokens,
        trace.total_cost_usd,
        trace.error,
        trace.session_id,
        enc_meta(trace.metadata),
        trace.parent_trace_id,
        trace.forked_from_step,
        otel_trace_id,
        source_format,
        step_count,
        created_ms,
        producer_id(trace.metadata),
    )


def step_row(
    step: Step, step_id: str, trace_id: str, *, call_id: str | None = None, is_open: bool = False
) -> tuple[Any, ...]:
    """The ``steps`` row of a step (in ``STEP_COLUMNS`` order)."""
    return (
        step_id,
        trace_id,
        step.step_number,
        step.step_type,
        step.name,
        enc(step.input),
        enc(step.output),
        step.error,
        step.started_at,
        time_ms(step.started_at),
        step.ended_at,
        step.duration_ms,
        step.tokens_used,
        step.model,
        step.parent_step,
        step.caused_by_step,
        enc_meta(step.metadata),
        call_id,
        1 if is_open else 0,
        step_cost(step.metadata),
    )


def step_cost(metadata: dict[str, Any]) -> float | None:
    """The ``cost_usd`` column of a step: its ``metadata.cost_usd`` when that is a
    non-negative number (the dashboard sums it by model and day without reading JSON)."""
    value = metadata.get("cost_usd") if metadata else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def decision_row(step: Step, step_id: str, trace_id: str) -> tuple[Any, ...] | None:
    d = step.decision
    if d is None:
        return None
    options = [o.model_dump() for o in d.options]
    return (step_id, trace_id, dumps(options), d.chosen, d.rationale, d.confidence, d.decided_by)


def snapshot_row(step: Step, step_id: str, trace_id: str) -> tuple[Any, ...] | None:
    s = step.snapshot
    if s is None:
        return None
    return (step_id, trace_id, enc(s.context_window), enc(s.environment), enc(s.tool_state))


def annotation_row(annotation: Annotation, annotation_id: str, trace_id: str) -> tuple[Any, ...]:
    """The ``annotations`` row of an annotation (in ``ANNOTATION_COLUMNS`` order)."""
    return (
        annotation_id,
        trace_id,
        annotation.step_number,
        annotation.label,
        annotation.note,
        annotation.score,
        annotation.author,
        annotation.created_at,
        time_ms(annotation.created_at),
    )


# --- reading: rows -> the format's JSON objects (keys in model field order) -------------------


def decision_dict(row: tuple[Any, ...]) -> DecisionJSON:
    """A ``decisions`` row (``DECISION_COLUMNS`` order) as the format's decision object."""
    return {
        "options": loads(row[2]),
        "chosen": row[3],
        "rationale": row[4],
        "confidence": row[5],
        "decided_by": row[6],
    }


def snapshot_dict(row: tuple[Any, ...]) -> SnapshotJSON:
    return {"context_window": dec(row[2]), "environment": dec(row[3]), "tool_state": dec(row[4])}


def step_dict(
    row: tuple[Any, ...],
    decision: DecisionJSON | None = None,
    snapshot: SnapshotJSON | None = None,
) -> StepJSON:
    """A ``steps`` row (``STEP_COLUMNS`` order) as the format's step object."""
    return {
        "id": row[0],
        "step_number": row[2],
        "step_type": row[3],
        "name": row[4],
        "input": dec(row[5]),
        "output": dec(row[6]),
        "error": row[7],
        "started_at": row[8],
        "ended_at": row[10],
        "duration_ms": row[11],
        "tokens_used": row[12],
        "model": row[13],
        "parent_step": row[14],
        "caused_by_step": row[15],
        "decision": decision,
        "snapshot": snapshot,
        "metadata": dec_meta(row[16]),
    }


def eval_dict(row: tuple[Any, ...]) -> EvalJSON:
    return {
        "id": row[0],
        "evaluator": row[2],
        "score": row[3],
        "passed": bool(row[4]),
        "threshold": row[5],
        "details": dec(row[6]),
        "model": row[7],
        "cost_usd": row[8],
        "created_at": row[9],
    }


def annotation_dict(row: tuple[Any, ...]) -> AnnotationJSON:
    """An ``annotations`` row (``ANNOTATION_COLUMNS`` order) as the format's annotation object."""
    return {
        "id": row[0],
        "step_number": row[2],
        "label": row[3],
        "note": row[4],
        "score": row[5],
        "author": row[6],
        "created_at": row[7],
    }


def trace_dict(
    row: tuple[Any, ...],
    tags: list[str],
    steps: list[StepJSON] | None,
    evals: list[EvalJSON] | None,
    annotations: list[AnnotationJSON] | None = None,
) -> TraceJSON:
    """A ``traces`` row (``TRACE_COLUMNS`` order) as the format's trace object.

    ``steps``/``evals``/``annotations`` of ``None`` leave those keys out (``list --json``).
    """
    out: TraceJSON = {
        "id": row[0],
        "agent_name": row[1],
        "agent_version": row[2],
        "trigger": row[3],
        "status": row[4],
        "input": dec(row[5]),
        "output": dec(row[6]),
        "started_at": row[8],
        "ended_at": row[10],
        "total_duration_ms": row[11],
        "total_tokens": row[12],
        "total_cost_usd": row[13],
        "error": row[14],
        "tags": tags,
        "session_id": row[15],
        "metadata": dec_meta(row[16]),
        "parent_trace_id": row[17],
        "forked_from_step": row[18],
    }
    if steps is not None:
        out["steps"] = steps
    if evals is not None:
        out["evals"] = evals
    if annotations is not None:
        out["annotations"] = annotations
    return out
