"""What an evaluation produces: a score, a verdict against a threshold, and per-criterion
details with evidence (which step, which text).

``EvalOutcome.to_json()`` is the trace format's ``EvalResult`` object (what ``show --json``
prints under ``evals``); ``details`` holds ``summary``, ``criteria`` and any evaluator-specific
extras (an AI review's suggestions, the model's token usage). Plain dataclasses: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EXCERPT_WIDTH = 160
"""Longest evidence excerpt kept (characters)."""


@dataclass(frozen=True)
class Evidence:
    """Where a criterion found (or missed) something: a step (or the trace) and the text."""

    step: int | None
    """The step number; ``None`` for the trace's own fields."""
    field: str
    """The field read: ``input``, ``output``, ``error`` or ``name``."""
    text: str
    """An excerpt of the text found (never more than ``EXCERPT_WIDTH`` characters)."""
    note: str | None = None
    """What the excerpt shows (``hedge "might"``, ``email``, ``not in the retrieved text``)."""

    @property
    def where(self) -> str:
        """``step 5 output`` or ``trace output``."""
        return f"step {self.step} {self.field}" if self.step is not None else f"trace {self.field}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "field": self.field, "text": self.text}
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evidence:
        return cls(
            data.get("step"),
            str(data.get("field") or ""),
            str(data.get("text") or ""),
            data.get("note"),
        )


@dataclass
class Criterion:
    """One criterion of an evaluation: its weight, its score and the evidence behind it."""

    name: str
    weight: float
    """The criterion's share of the evaluator's score (weights of an evaluator sum to 1)."""
    score: float | None
    """0..1; ``None`` for an informational item (an AI root cause's suggested fix)."""
    summary: str
    """One line saying what was found."""
    evidence: list[Evidence] = field(default_factory=list)
    applicable: bool = True
    """``False`` when the trace has nothing to judge (no retrieval to ground against)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "weight": self.weight,
            "score": self.score,
            "applicable": self.applicable,
            "summary": self.summary,
            "evidence": [e.to_json() for e in self.evidence],
        }


@dataclass
class EvalOutcome:
    """The result of one evaluator on one trace (a row of the ``evals`` table once saved)."""

    evaluator: str
    """The preset's name, ``rubric:<name>`` for a rubric."""
    score: float
    """0..1 (rounded to 4 places, so boundaries compare exactly)."""
    threshold: float | None
    """The pass mark; ``None`` for an informational evaluator (always passes)."""
    passed: bool
    criteria: list[Criterion] = field(default_factory=list)
    summary: str = ""
    model: str | None = None
    """The AI model that judged (``None`` for deterministic evaluators)."""
    cost_usd: float | None = None
    """What the AI calls cost (0 for deterministic evaluators)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Evaluator-specific details (suggestions, risk level, token usage, ...)."""
    id: str | None = None
    """Set when stored."""
    created_at: str | None = None
    """Set when stored (canonical UTC)."""

    @classmethod
    def scored(
        cls,
        evaluator: str,
        criteria: list[Criterion],
        threshold: float,
        summary: str = "",
        **extra: Any,
    ) -> EvalOutcome:
        """An outcome whose score is the weighted sum of its criteria's scores."""
        total_weight = sum(c.weight for c in criteria if c.score is not None) or 1.0
        score = sum(c.weight * (c.score or 0.0) for c in criteria) / total_weight
        score = round(score, 4)
        return cls(
            evaluator,
            score,
            threshold,
            score >= threshold,
            criteria,
            summary,
            cost_usd=0.0,
            extra=extra,
        )

    def details(self) -> dict[str, Any]:
        """The ``details`` JSON stored with the result."""
        return {
            "summary": self.summary,
            "criteria": [c.to_json() for c in self.criteria],
            **self.extra,
        }

    def to_json(self) -> dict[str, Any]:
        """The trace format's ``EvalResult`` object."""
        return {
            "id": self.id,
            "evaluator": self.evaluator,
            "score": self.score,
            "passed": self.passed,
            "threshold": self.threshold,
            "details": self.details(),
            "model": self.model,
            "cost_usd": self.cost_usd,
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class EvalFailure:
    """An evaluator that could not produce a result (an AI reply that stayed malformed, an API
    error after retries, a rejected key)."""

    evaluator: str
    error: str
    hints: list[str] = field(default_factory=list)
    cost_usd: float = 0.0
    """What the failed calls cost all the same."""

    def to_json(self) -> dict[str, Any]:
        return {
            "evaluator": self.evaluator,
            "error": self.error,
            "hints": self.hints,
            "cost_usd": self.cost_usd,
        }
