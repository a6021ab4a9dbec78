"""The trace format: the one definition of a valid trace, step, decision and snapshot.

Pure data, no I/O. Imports only pydantic and the stdlib; never the store, services or Textual.
``agent_replay.trace.validate`` turns raw producer data into these models (strict or lenient).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from agent_replay.trace.base import (  # noqa: F401  (time helpers re-exported for callers)
    STEP_TYPES,
    TRACE_STATUSES,
    canonical_time,
    normalize_time,
    parse_time,
    time_ms,
)

StepType = Literal[
    "thought",
    "tool_call",
    "llm_call",
    "retrieval",
    "output",
    "decision",
    "error",
    "guard_check",
]
assert STEP_TYPES == StepType.__args__  # type: ignore[attr-defined]

TraceStatus = Literal["running", "completed", "failed", "timeout", "forked"]
assert TRACE_STATUSES == TraceStatus.__args__  # type: ignore[attr-defined]

DecidedBy = Literal["agent", "user", "policy"]


def _normalize_timestamp(value: Any, info: ValidationInfo) -> Any:
    """Normalize a timestamp field to canonical UTC; epoch numbers only in lenient mode."""
    if value is None:
        return None
    lenient = bool(info.context and info.context.get("lenient"))
    if isinstance(value, dt.datetime):
        return canonical_time(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and lenient:
        # Epoch seconds, or milliseconds when the number is too large to be seconds.
        try:
            seconds = value / 1000 if abs(value) > 1e11 else value
            return canonical_time(dt.datetime.fromtimestamp(seconds, dt.UTC))
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"epoch time out of range (got {value!r})") from None
    if not isinstance(value, str):
        raise ValueError(f"must be an ISO-8601 timestamp string (got {type(value).__name__})")
    try:
        return normalize_time(value)
    except ValueError:
        raise ValueError(f"must be an ISO-8601 timestamp (got {value!r})") from None


def _has_offset(value: Any) -> bool:
    """Whether a timestamp string carries a UTC offset other than zero."""
    if not isinstance(value, str) or value[-1:] in ("Z", "z") or value.endswith("+00:00"):
        return False
    if len(value) < 6:
        return False
    tail = value[-6:]
    return tail[0] in "+-" and tail[3] == ":"


def _keep_original_times(data: Any) -> Any:
    """Keep a producer's timestamp in ``metadata.original_times`` when it had a non-UTC offset
    (the stored value is always canonical UTC, which would lose the producer's local zone)."""
    if not isinstance(data, dict):
        return data
    start, end = data.get("started_at"), data.get("ended_at")
    if start is None and end is None:
        return data
    originals = {k: v for k, v in (("started_at", start), ("ended_at", end)) if _has_offset(v)}
    metadata = data.get("metadata")
    if not originals or not isinstance(metadata, dict | None):
        return data
    metadata = dict(metadata or {})
    kept = metadata.get("original_times")
    metadata["original_times"] = {**(kept if isinstance(kept, dict) else {}), **originals}
    return {**data, "metadata": metadata}


# Counts stay exact in JSON (2**53 - 1 is the largest integer every JSON reader keeps) and
# a derived total (the sum of the steps' tokens) can never overflow SQLite's 64-bit INTEGER.
MAX_SAFE_INT = 2**53 - 1
MAX_STEP_TOKENS = 10**12

TRACE_ID_PATTERN = r"^trc_[A-Za-z0-9_-]{1,64}$"


class _Model(BaseModel):
    """Shared config: unknown fields are refused (lenient mode strips them first)."""

    model_config = ConfigDict(extra="forbid", validate_default=False, allow_inf_nan=False)


class DecisionOption(_Model):
    """One option the agent considered at a decision point."""

    option: str = Field(min_length=1)
    rationale: str | None = None
    score: float | None = None


class Decision(_Model):
    """A decision point: the options considered, the one chosen, why, and by whom."""

    options: list[DecisionOption] = Field(default_factory=list)
    chosen: str = Field(min_length=1)
    rationale: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    decided_by: DecidedBy = "agent"


class Snapshot(_Model):
    """The agent's state at a step: what it saw, where it ran, what its tools held."""

    context_window: Any = None
    environment: dict[str, Any] | None = None
    tool_state: dict[str, Any] | None = None


class EvalResult(_Model):
    """A stored evaluation of a trace (see the eval command)."""

    id: str | None = Field(default=None, pattern=r"^evl_[A-Za-z0-9_-]{1,64}$")
    evaluator: str = Field(min_length=1)
    score: float
    passed: bool
    threshold: float | None = None
    details: Any = None
    model: str | None = None
    cost_usd: float | None = Field(default=None, ge=0)
    created_at: str | None = None

    _ts = field_validator("created_at", mode="before")(_normalize_timestamp)


class Annotation(_Model):
    """A person's judgement of a run or of one of its steps: a label (``good``, ``wrong-tool``),
    an optional note and score. Annotations are how hand-approved runs become a golden set
    (``export --format golden --label good``)."""

    id: str | None = Field(default=None, pattern=r"^ann_[A-Za-z0-9_-]{1,64}$")
    step_number: int | None = Field(default=None, gt=0, le=MAX_SAFE_INT)
    """The step judged; ``None`` for the whole run."""
    label: str = Field(min_length=1, max_length=200)
    note: str | None = None
    score: float | None = None
    author: str | None = None
    """Who annotated (the login name by default)."""
    created_at: str | None = None

    _ts = field_validator("created_at", mode="before")(_normalize_timestamp)

    @field_validator("label")
    @classmethod
    def _clean_label(cls, label: str) -> str:
        """Labels are trimmed and non-empty, so ``list --label good`` finds ``" good"`` too."""
        label = label.strip()
        if not label:
            raise ValueError("the label must not be blank")
        return label


class Step(_Model):
    """One step of an agent run."""

    id: str | None = Field(default=None, pattern=r"^stp_[A-Za-z0-9_-]{1,64}$")
    step_number: int = Field(gt=0, le=MAX_SAFE_INT)
    step_type: StepType
    name: str | None = None
    input: Any = None
    output: Any = None
    error: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_ms: float | None = Field(default=None, ge=0)
    tokens_used: int | None = Field(default=None, ge=0, le=MAX_STEP_TOKENS)
    model: str | None = None
    parent_step: int | None = Field(default=None, gt=0, le=MAX_SAFE_INT)
    caused_by_step: int | None = Field(default=None, gt=0, le=MAX_SAFE_INT)
    decision: Decision | None = None
    snapshot: Snapshot | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    _ts = field_validator("started_at", "ended_at", mode="before")(_normalize_timestamp)
    _originals = model_validator(mode="before")(_keep_original_times)


class Trace(_Model):
    """One agent run. ``agent_name`` is the only required field."""

    id: str | None = Field(default=None, pattern=TRACE_ID_PATTERN)
    agent_name: str = Field(min_length=1)
    agent_version: str | None = None
    trigger: str | None = None
    status: TraceStatus = "completed"
    input: Any = None
    output: Any = None
    started_at: str | None = None
    ended_at: str | None = None
    total_duration_ms: float | None = Field(default=None, ge=0)
    total_tokens: int | None = Field(default=None, ge=0, le=MAX_SAFE_INT)
    total_cost_usd: float | None = Field(default=None, ge=0)
    error: str | None = None
    tags: list[str] = Field(default_factory=list)
    session_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    parent_trace_id: str | None = Field(default=None, pattern=TRACE_ID_PATTERN)
    forked_from_step: int | None = Field(default=None, gt=0, le=MAX_SAFE_INT)
    steps: list[Step] = Field(default_factory=list)
    evals: list[EvalResult] = Field(default_factory=list)
    annotations: list[Annotation] = Field(default_factory=list)

    _ts = field_validator("started_at", "ended_at", mode="before")(_normalize_timestamp)
    _originals = model_validator(mode="before")(_keep_original_times)

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, tags: list[str]) -> list[str]:
        """Tags are trimmed, non-empty and unique, in first-seen order."""
        seen: dict[str, None] = {}
        for tag in tags:
            tag = tag.strip()
            if not tag:
                raise ValueError("tags must be non-empty strings")
            seen.setdefault(tag, None)
        return list(seen)

    def step(self, number: int) -> Step | None:
        """The step with this step number, if any."""
        for candidate in self.steps:
            if candidate.step_number == number:
                return candidate
        return None


# Fields that ``list --json`` adds to a trace object; accepted back by ingest and ignored.
READ_ONLY_TRACE_FIELDS = ("step_count", "is_fork")

TRACE_FIELDS = tuple(Trace.model_fields)
STEP_FIELDS = tuple(Step.model_fields)
