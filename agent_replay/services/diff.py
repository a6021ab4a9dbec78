"""Diffing two traces: steps aligned by content, field-level differences, metric deltas.

Both front ends compare through this module: ``agent-replay diff`` prints a ``TraceDiff``, the
TUI's side-by-side diff screen renders the same ``StepPair`` list row by row. It works on the
format's JSON objects (as ``store.trace_detail.trace_json`` returns them); ``diff_stored`` is
the one function that reads the store. Pure otherwise: no clock, no I/O. Must not import
Textual or Rich.

Alignment
    Steps are aligned by what they are, never by step number (``services.diff_align``: a
    similarity of type, name, normalized input, outcome and model; Needleman-Wunsch with free
    gaps, cut at unique anchors when large), so one inserted step shows as one insertion
    instead of a cascade of mismatches. Within a pair, each field's differences are listed
    path by path (``services.diff_fields``).

Kinds
    ``matched`` (paired, no difference in ``STEP_FIELDS``), ``changed`` (paired, some field
    differs), ``inserted`` (only in B), ``deleted`` (only in A). Tokens, duration and cost are
    never "changes" (they always vary): every pair carries their deltas instead. An inserted step
    whose signature equals a deleted one's is marked as moved (``moved_from`` / ``moved_to``),
    which is how a reordering shows.

Forks
    When one trace is a fork of the other, the comparison is scoped to the fork: the parent's
    steps after ``max(forked_from_step, the fork's last step)`` are left out (counted in
    ``beyond_fork``, not reported as deletions) and the trace's status, output and error are not
    compared (a fork has status ``forked`` and no output by definition). A fresh fork against its
    parent therefore shows exactly its modification. ``fork_scope=False`` compares whole traces.

Cost
    A step's cost is its ``metadata.cost_usd`` when recorded; otherwise the part of the trace's
    ``total_cost_usd`` not covered by recorded step costs is shared by tokens (an estimate,
    flagged by ``TraceDiff.cost_estimated``), the same rule as the replay service.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_replay.services.diff_align import Signature, align_signatures, similarity
from agent_replay.services.diff_fields import (
    MISSING,
    DiffKind,
    FieldDiff,
    is_number,
    json_differences,
    value_context,
)
from agent_replay.store.db import Store

__all__ = [
    "MISSING",
    "STEP_FIELDS",
    "TRACE_FIELDS",
    "Delta",
    "DiffKind",
    "Divergence",
    "FieldDiff",
    "PairKind",
    "StepPair",
    "Totals",
    "TraceDiff",
    "diff_stored",
    "diff_traces",
    "json_differences",
    "step_costs",
    "value_context",
]
"""The comparison's API, with the field differences' names its callers read from here."""

PairKind = Literal["matched", "changed", "inserted", "deleted"]

STEP_FIELDS: tuple[str, ...] = ("name", "input", "output", "error", "model", "decision")
"""The step fields whose difference makes a pair ``changed`` (step_type always matches)."""
TRACE_FIELDS: tuple[str, ...] = ("input", "output", "status", "error")
"""The trace fields compared (only ``input`` when the diff is scoped to a fork)."""


# --- result types -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Delta:
    """A metric on both sides. ``None`` means the side did not record it."""

    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        """``b - a`` when both sides know the value, else ``None``."""
        if self.a is None or self.b is None:
            return None
        return self.b - self.a

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "delta": self.delta}


@dataclass
class StepPair:
    """One row of the alignment: a step of A, a step of B, or both."""

    kind: PairKind
    a: dict[str, Any] | None
    """A's step object (``None`` for an insertion)."""
    b: dict[str, Any] | None
    """B's step object (``None`` for a deletion)."""
    similarity: float = 0.0
    """How alike the two steps are (0..1); 0 for an unpaired step."""
    differences: list[FieldDiff] = field(default_factory=list)
    """What differs, field by field (empty unless ``changed``)."""
    truncated: int = 0
    """Differences left out of ``differences`` (over ``MAX_FIELD_DIFFS`` in a field)."""
    tokens: Delta = Delta(None, None)
    duration_ms: Delta = Delta(None, None)
    cost_usd: Delta = Delta(None, None)
    moved_from: int | None = None
    """For an insertion: the step number in A of an identical step deleted elsewhere."""
    moved_to: int | None = None
    """For a deletion: the step number in B of an identical step inserted elsewhere."""

    @property
    def a_number(self) -> int | None:
        return None if self.a is None else int(self.a["step_number"])

    @property
    def b_number(self) -> int | None:
        return None if self.b is None else int(self.b["step_number"])

    @property
    def step(self) -> dict[str, Any]:
        """The step shown for this row (B's when paired)."""
        step = self.b if self.b is not None else self.a
        assert step is not None
        return step

    @property
    def fields(self) -> list[str]:
        """The differing top-level fields, in ``STEP_FIELDS`` order, without repeats."""
        return list(dict.fromkeys(d.field for d in self.differences))

    def to_json(self, *, full: bool = False) -> dict[str, Any]:
        """The pair for ``diff --json``: step references (or whole steps with ``full``)."""
        return {
            "kind": self.kind,
            "a": _step_ref(self.a, full),
            "b": _step_ref(self.b, full),
            "similarity": round(self.similarity, 3),
            "differences": [d.to_json() for d in self.differences],
            "truncated": self.truncated,
            "tokens_used": self.tokens.to_json(),
            "duration_ms": self.duration_ms.to_json(),
            "cost_usd": self.cost_usd.to_json(),
            "moved_from": self.moved_from,
            "moved_to": self.moved_to,
        }


@dataclass(frozen=True)
class Divergence:
    """Where the two traces first part ways, and what differs there."""

    where: Literal["input", "step"]
    """``input``: the traces' inputs differ (before any step); ``step``: a step pair."""
    pair_index: int | None
    """Index into ``TraceDiff.pairs`` (``None`` for an input divergence)."""
    kind: PairKind | None
    a_step: int | None
    b_step: int | None
    step_type: str | None
    name: str | None
    differences: list[FieldDiff]

    def to_json(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "pair_index": self.pair_index,
            "kind": self.kind,
            "a_step": self.a_step,
            "b_step": self.b_step,
            "step_type": self.step_type,
            "name": self.name,
            "fields": list(dict.fromkeys(d.field for d in self.differences)),
            "differences": [d.to_json() for d in self.differences],
        }


@dataclass(frozen=True)
class Totals:
    """Sums over the compared steps of each side (consistent with the per-pair deltas)."""

    steps: Delta
    tokens: Delta
    duration_ms: Delta
    cost_usd: Delta

    def to_json(self) -> dict[str, Any]:
        return {
            "step_count": self.steps.to_json(),
            "tokens_used": self.tokens.to_json(),
            "duration_ms": self.duration_ms.to_json(),
            "cost_usd": self.cost_usd.to_json(),
        }


@dataclass
class TraceDiff:
    """Everything ``diff A B`` reports. ``a`` and ``b`` are the trace objects (with steps)."""

    a: Mapping[str, Any]
    b: Mapping[str, Any]
    pairs: list[StepPair]
    trace_differences: list[FieldDiff]
    """Differences of the traces themselves (``TRACE_FIELDS``): input, output, status, error."""
    totals: Totals
    cost_estimated: bool = False
    """Whether some step cost is pro-rated from a trace total (no recorded step costs)."""
    fork_parent: Literal["a", "b"] | None = None
    """Which side is the other's fork parent when the comparison is scoped to the fork."""
    beyond_fork: int = 0
    """Parent steps after the fork's extent, left out of the comparison."""

    @property
    def counts(self) -> dict[str, int]:
        """How many pairs of each kind (every kind present, zero or not)."""
        out = {"matched": 0, "changed": 0, "inserted": 0, "deleted": 0}
        for pair in self.pairs:
            out[pair.kind] += 1
        return out

    @property
    def identical(self) -> bool:
        """No step changed, inserted or deleted and no trace field differs."""
        return not self.trace_differences and all(p.kind == "matched" for p in self.pairs)

    @property
    def input_differences(self) -> list[FieldDiff]:
        return [d for d in self.trace_differences if d.field == "input"]

    @property
    def output_differences(self) -> list[FieldDiff]:
        return [d for d in self.trace_differences if d.field == "output"]

    @property
    def first_divergence(self) -> Divergence | None:
        """The trace input when it differs (it precedes every step), else the first pair that
        is not ``matched``; ``None`` when the steps and the input agree."""
        inputs = self.input_differences
        if inputs:
            return Divergence("input", None, None, None, None, None, None, inputs)
        for index, pair in enumerate(self.pairs):
            if pair.kind != "matched":
                step = pair.step
                return Divergence(
                    "step",
                    index,
                    pair.kind,
                    pair.a_number,
                    pair.b_number,
                    step.get("step_type"),
                    step.get("name"),
                    pair.differences,
                )
        return None

    def to_json(self, *, compact: bool = False, full_steps: bool = False) -> dict[str, Any]:
        """The ``diff --json`` object (``compact`` leaves the pairs out)."""
        first = self.first_divergence
        out: dict[str, Any] = {
            "a": _trace_ref(self.a),
            "b": _trace_ref(self.b),
            "identical": self.identical,
            "counts": self.counts,
            "first_divergence": first.to_json() if first else None,
            "trace_differences": [d.to_json() for d in self.trace_differences],
            "totals": self.totals.to_json(),
            "cost_estimated": self.cost_estimated,
            "fork_scope": (
                {"parent": self.fork_parent, "beyond_fork": self.beyond_fork}
                if self.fork_parent
                else None
            ),
        }
        if not compact:
            out["pairs"] = [p.to_json(full=full_steps) for p in self.pairs]
        return out


def _step_ref(step: dict[str, Any] | None, full: bool) -> dict[str, Any] | None:
    if step is None:
        return None
    if full:
        return step
    return {k: step.get(k) for k in ("id", "step_number", "step_type", "name")}


_TRACE_REF_FIELDS = (
    "id",
    "agent_name",
    "agent_version",
    "status",
    "started_at",
    "total_tokens",
    "total_duration_ms",
    "total_cost_usd",
    "parent_trace_id",
    "forked_from_step",
)


def _trace_ref(trace: Mapping[str, Any]) -> dict[str, Any]:
    ref = {k: trace.get(k) for k in _TRACE_REF_FIELDS}
    ref["step_count"] = len(trace.get("steps") or [])
    return ref


# --- entry points -----------------------------------------------------------------------------


def diff_stored(store: Store, a_id: str, b_id: str, *, fork_scope: bool = True) -> TraceDiff:
    """Diff two stored traces, given as full ids or unique prefixes.

    Raises:
        NotFoundError, AmbiguousIdError: an id does not name exactly one trace.
    """
    from agent_replay.store.trace_detail import resolve_trace_id, trace_json

    a = trace_json(store, resolve_trace_id(store, a_id))
    b = trace_json(store, resolve_trace_id(store, b_id))
    return diff_traces(a, b, fork_scope=fork_scope)


def diff_traces(
    a: Mapping[str, Any], b: Mapping[str, Any], *, fork_scope: bool = True
) -> TraceDiff:
    """Align the steps of two trace objects and report what differs (see the module doc).

    Args:
        a: the "before" trace object, with ``steps``.
        b: the "after" trace object, with ``steps``.
        fork_scope: when one trace is the other's fork, compare only up to the fork's extent.
    """
    steps_a = list(a.get("steps") or [])
    steps_b = list(b.get("steps") or [])
    costs_a, estimated_a = step_costs(a)
    costs_b, estimated_b = step_costs(b)
    fork_parent: Literal["a", "b"] | None = None
    beyond = 0
    if fork_scope:
        if b.get("parent_trace_id") and b.get("parent_trace_id") == a.get("id"):
            fork_parent = "a"
            keep = _fork_extent(b)
            beyond = sum(1 for s in steps_a if s["step_number"] > keep)
            steps_a = [s for s in steps_a if s["step_number"] <= keep]
        elif a.get("parent_trace_id") and a.get("parent_trace_id") == b.get("id"):
            fork_parent = "b"
            keep = _fork_extent(a)
            beyond = sum(1 for s in steps_b if s["step_number"] > keep)
            steps_b = [s for s in steps_b if s["step_number"] <= keep]

    sig_a = [Signature.of(s) for s in steps_a]
    sig_b = [Signature.of(s) for s in steps_b]
    cost_a = {s["step_number"]: c for s, c in zip(a.get("steps") or [], costs_a, strict=True)}
    cost_b = {s["step_number"]: c for s, c in zip(b.get("steps") or [], costs_b, strict=True)}
    pairs: list[StepPair] = []
    moves: list[tuple[StepPair, Signature]] = []
    for i, j in align_signatures(sig_a, sig_b):
        sa = steps_a[i] if i is not None else None
        sb = steps_b[j] if j is not None else None
        sim = similarity(sig_a[i], sig_b[j]) if i is not None and j is not None else 0.0
        pair = _make_pair(sa, sb, sim, cost_a, cost_b)
        pairs.append(pair)
        if i is None or j is None:
            moves.append((pair, sig_a[i] if i is not None else sig_b[j]))  # type: ignore[index]
    _mark_moves(moves)

    trace_fields = ("input",) if fork_parent else TRACE_FIELDS
    trace_diffs: list[FieldDiff] = []
    for name in trace_fields:
        trace_diffs.extend(json_differences(a.get(name), b.get(name), name, name)[0])

    def total(values: Sequence[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    kept_a = [p.a for p in pairs if p.a is not None]
    kept_b = [p.b for p in pairs if p.b is not None]
    totals = Totals(
        steps=Delta(len(kept_a), len(kept_b)),
        tokens=Delta(
            total([_int(s.get("tokens_used")) for s in kept_a]),
            total([_int(s.get("tokens_used")) for s in kept_b]),
        ),
        duration_ms=Delta(
            total([_num(s.get("duration_ms")) for s in kept_a]),
            total([_num(s.get("duration_ms")) for s in kept_b]),
        ),
        cost_usd=Delta(
            total([cost_a.get(s["step_number"]) for s in kept_a]),
            total([cost_b.get(s["step_number"]) for s in kept_b]),
        ),
    )
    return TraceDiff(
        a=a,
        b=b,
        pairs=pairs,
        trace_differences=trace_diffs,
        totals=totals,
        cost_estimated=estimated_a or estimated_b,
        fork_parent=fork_parent,
        beyond_fork=beyond,
    )


def _fork_extent(fork: Mapping[str, Any]) -> int:
    numbers = [int(s["step_number"]) for s in fork.get("steps") or []]
    return max([int(fork.get("forked_from_step") or 0), *numbers])


def _make_pair(
    a: dict[str, Any] | None,
    b: dict[str, Any] | None,
    sim: float,
    cost_a: dict[int, float | None],
    cost_b: dict[int, float | None],
) -> StepPair:
    tokens = Delta(
        _int(a.get("tokens_used")) if a else None, _int(b.get("tokens_used")) if b else None
    )
    duration = Delta(
        _num(a.get("duration_ms")) if a else None, _num(b.get("duration_ms")) if b else None
    )
    cost = Delta(
        cost_a.get(a["step_number"]) if a else None, cost_b.get(b["step_number"]) if b else None
    )
    if a is None or b is None:
        kind: PairKind = "inserted" if a is None else "deleted"
        return StepPair(kind, a, b, tokens=tokens, duration_ms=duration, cost_usd=cost)
    differences: list[FieldDiff] = []
    truncated = 0
    for name in STEP_FIELDS:
        found, more = json_differences(_ordered(name, a), _ordered(name, b), name, name)
        differences.extend(found)
        truncated += more
    return StepPair(
        "changed" if differences else "matched",
        a,
        b,
        similarity=sim,
        differences=differences,
        truncated=truncated,
        tokens=tokens,
        duration_ms=duration,
        cost_usd=cost,
    )


_DECISION_ORDER = ("chosen", "decided_by", "confidence", "rationale", "options")


def _ordered(name: str, step: dict[str, Any]) -> Any:
    """A step's field, with a decision's keys in reading order (the choice first)."""
    value = step.get(name)
    if name == "decision" and isinstance(value, dict):
        head = {k: value[k] for k in _DECISION_ORDER if k in value}
        return {**head, **value}
    return value


def _mark_moves(unpaired: list[tuple[StepPair, Signature]]) -> None:
    """Link each inserted step to a deleted step with the same signature (a reordering)."""
    deleted: dict[tuple[str, str, str, bool], list[StepPair]] = {}
    for pair, sig in unpaired:
        if pair.kind == "deleted":
            deleted.setdefault(sig.key, []).append(pair)
    if not deleted:
        return
    for pair, sig in unpaired:
        if pair.kind != "inserted":
            continue
        candidates = deleted.get(sig.key)
        if candidates:
            source = candidates.pop(0)
            pair.moved_from = source.a_number
            source.moved_to = pair.b_number


# --- metrics ----------------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    if is_number(value) and math.isfinite(value):
        return float(value)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def step_costs(trace: Mapping[str, Any]) -> tuple[list[float | None], bool]:
    """Each step's cost in USD, in step order, and whether any is an estimate.

    A step's ``metadata.cost_usd`` when recorded; otherwise the share, by tokens, of the trace's
    ``total_cost_usd`` that recorded step costs leave over; ``None`` when neither is known.
    """
    steps = trace.get("steps") or []
    known: list[float | None] = []
    for step in steps:
        cost = _num((step.get("metadata") or {}).get("cost_usd"))
        known.append(cost if cost is not None and cost >= 0 else None)
    total = _num(trace.get("total_cost_usd"))
    if total is None or all(c is not None for c in known):
        return known, False
    remainder = max(total - sum(c for c in known if c is not None), 0.0)
    tokens = [_int(s.get("tokens_used")) or 0 for s in steps]
    uncosted = sum(t for t, c in zip(tokens, known, strict=True) if c is None)
    share = remainder / uncosted if uncosted else 0.0
    costs: list[float | None] = [
        c if c is not None else share * t for t, c in zip(tokens, known, strict=True)
    ]
    return costs, True
