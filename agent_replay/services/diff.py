"""Diffing two traces: steps aligned by content, field-level differences, metric deltas.

Both front ends compare through this module: ``agent-replay diff`` prints a ``TraceDiff``, the
TUI's side-by-side diff screen renders the same ``StepPair`` list row by row. It works on the
format's JSON objects (as ``store.queries.trace_json`` returns them); ``diff_stored`` is the one
function that reads the store. Pure otherwise: no clock, no I/O. Must not import Textual or Rich.

Alignment
    Steps are aligned by what they are, never by step number, so one inserted step shows as one
    insertion instead of a cascade of mismatches. Two steps can pair only when their
    ``step_type`` is the same; their similarity (0..1) then weighs

    - the name (``NAME_WEIGHT``),
    - the normalized input (``INPUT_WEIGHT`` x the Jaccard overlap of the input's leaves, where
      keys are sorted, strings trimmed with whitespace collapsed and numbers compared as
      numbers),
    - the outcome, failed or not (``OUTCOME_WEIGHT``: a failed attempt and its successful retry
      are different steps),
    - the model (``MODEL_WEIGHT``).

    A pair is kept only above ``PAIR_THRESHOLD``: steps of the same name always can pair, a
    renamed step pairs only when its input is nearly the same. The alignment maximizes the total
    of ``similarity - PAIR_THRESHOLD`` over the kept pairs (Needleman-Wunsch with free gaps: a
    weighted longest common subsequence). The identical head and tail of the two step lists are
    paired first in linear time; a middle larger than ``NW_MAX_CELLS`` is first cut at the steps
    that occur exactly once on each side (patience diff), recursively, and a huge middle with no
    such anchor is walked greedily, so a 10,000-step trace stays fast.

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

import difflib
import hashlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_replay.store.db import Store
from agent_replay.trace.io import canonical_json

PairKind = Literal["matched", "changed", "inserted", "deleted"]
DiffKind = Literal["changed", "added", "removed"]

STEP_FIELDS: tuple[str, ...] = ("name", "input", "output", "error", "model", "decision")
"""The step fields whose difference makes a pair ``changed`` (step_type always matches)."""
TRACE_FIELDS: tuple[str, ...] = ("input", "output", "status", "error")
"""The trace fields compared (only ``input`` when the diff is scoped to a fork)."""

NAME_WEIGHT = 0.5
INPUT_WEIGHT = 0.3
OUTCOME_WEIGHT = 0.15
MODEL_WEIGHT = 0.05
PAIR_THRESHOLD = 0.4
"""Two steps of the same type pair only when their similarity is above this."""
NW_MAX_CELLS = 250_000
"""The largest middle (rows x columns) aligned cell by cell; larger ones are cut first."""
MAX_LEAVES = 256
"""Input leaves kept per step for the similarity (the exact digest still covers everything)."""
MAX_FIELD_DIFFS = 50
"""Differences listed per pair and field; the rest are counted in ``StepPair.truncated``."""


class _Missing:
    """The value of a key or index that one side does not have."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()
"""Stands for "absent" in ``FieldDiff.a`` / ``FieldDiff.b`` (JSON ``null`` is a value)."""


# --- result types -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldDiff:
    """One difference inside a field: where, what kind, and both values.

    ``path`` starts with the field's name and follows JSON into it: ``input.sql``,
    ``input.messages[0].content``, ``decision.chosen``, ``output``.
    """

    field: str
    """The top-level field: ``input``, ``output``, ``name``, ``error``, ``model``, ..."""
    path: str
    """Where inside the field (the field's name itself when the whole value differs)."""
    kind: DiffKind
    """``changed`` (both sides have a value), ``added`` (only B), ``removed`` (only A)."""
    a: Any
    """A's value at ``path`` (``MISSING`` when added)."""
    b: Any
    """B's value at ``path`` (``MISSING`` when removed)."""

    def context(self, width: int = 60) -> tuple[str, str]:
        """Both values as one-line excerpts around their first difference (unescaped)."""
        return value_context(self.a, self.b, width)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"field": self.field, "path": self.path, "kind": self.kind}
        if self.a is not MISSING:
            out["a"] = self.a
        if self.b is not MISSING:
            out["b"] = self.b
        return out


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

    a: dict[str, Any]
    b: dict[str, Any]
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


def _trace_ref(trace: dict[str, Any]) -> dict[str, Any]:
    ref = {k: trace.get(k) for k in _TRACE_REF_FIELDS}
    ref["step_count"] = len(trace.get("steps") or [])
    return ref


# --- entry points -----------------------------------------------------------------------------


def diff_stored(store: Store, a_id: str, b_id: str, *, fork_scope: bool = True) -> TraceDiff:
    """Diff two stored traces, given as full ids or unique prefixes.

    Raises:
        NotFoundError, AmbiguousIdError: an id does not name exactly one trace.
    """
    from agent_replay.store.queries import resolve_trace_id, trace_json

    a = trace_json(store, resolve_trace_id(store, a_id))
    b = trace_json(store, resolve_trace_id(store, b_id))
    return diff_traces(a, b, fork_scope=fork_scope)


def diff_traces(a: dict[str, Any], b: dict[str, Any], *, fork_scope: bool = True) -> TraceDiff:
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

    sig_a = [_Sig.of(s) for s in steps_a]
    sig_b = [_Sig.of(s) for s in steps_b]
    cost_a = {s["step_number"]: c for s, c in zip(a.get("steps") or [], costs_a, strict=True)}
    cost_b = {s["step_number"]: c for s, c in zip(b.get("steps") or [], costs_b, strict=True)}
    pairs: list[StepPair] = []
    moves: list[tuple[StepPair, _Sig]] = []
    for i, j in _align_sigs(sig_a, sig_b):
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


def _fork_extent(fork: dict[str, Any]) -> int:
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


def _mark_moves(unpaired: list[tuple[StepPair, _Sig]]) -> None:
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


# --- alignment --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sig:
    """What alignment looks at in a step, computed once per step."""

    step_type: str
    name: str
    digest: str
    leaves: frozenset[tuple[str, str]]
    failed: bool
    model: str | None

    @property
    def key(self) -> tuple[str, str, str, bool]:
        """Exact identity for anchoring and move detection: type, name, normalized input and
        outcome."""
        return (self.step_type, self.name, self.digest, self.failed)

    @staticmethod
    def of(step: dict[str, Any]) -> _Sig:
        normalized = normalize(step.get("input"))
        leaves: list[tuple[str, str]] = []
        for path, value in _leaves(normalized, ""):
            leaves.append((path, canonical_json(value).decode()))
            if len(leaves) >= MAX_LEAVES:
                break
        return _Sig(
            step_type=str(step.get("step_type")),
            name=str(step.get("name") or ""),
            digest=hashlib.sha1(canonical_json(normalized)).hexdigest(),
            leaves=frozenset(leaves),
            failed=bool(step.get("error")) or step.get("step_type") == "error",
            model=step.get("model"),
        )


def normalize(value: Any) -> Any:
    """A JSON value normalized for comparison: strings trimmed with runs of whitespace made one
    space, integral floats made ints (``1.0`` is ``1``); keys are sorted when encoded."""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}")
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def similarity(a: _Sig, b: _Sig) -> float:
    """How alike two steps are, 0..1 (0 when their types differ); see the module doc."""
    if a.step_type != b.step_type:
        return 0.0
    score = 0.0
    if a.name == b.name:
        score += NAME_WEIGHT
    if a.digest == b.digest:
        score += INPUT_WEIGHT
    elif a.leaves or b.leaves:
        union = len(a.leaves | b.leaves)
        score += INPUT_WEIGHT * (len(a.leaves & b.leaves) / union if union else 1.0)
    if a.failed == b.failed:
        score += OUTCOME_WEIGHT
    if a.model == b.model:
        score += MODEL_WEIGHT
    return score


Alignment = list[tuple[int | None, int | None]]


def align_steps(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> Alignment:
    """Align two step lists by content.

    Returns:
        ``(i, j)`` index pairs in order: both set for a pair, ``(i, None)`` for a step only in
        ``a``, ``(None, j)`` for one only in ``b``. Within a run of unpaired steps, A's come
        first.
    """
    return _align_sigs([_Sig.of(s) for s in a], [_Sig.of(s) for s in b])


def _align_sigs(sig_a: list[_Sig], sig_b: list[_Sig]) -> Alignment:
    out: Alignment = []
    _align_range(sig_a, sig_b, 0, len(sig_a), 0, len(sig_b), out)
    return out


def _align_range(
    sa: list[_Sig], sb: list[_Sig], a0: int, a1: int, b0: int, b1: int, out: Alignment
) -> None:
    # The identical head and tail pair up in linear time (a fork against its parent, two runs
    # that only differ in the middle).
    head: Alignment = []
    while a0 < a1 and b0 < b1 and sa[a0].key == sb[b0].key:
        head.append((a0, b0))
        a0, b0 = a0 + 1, b0 + 1
    tail: Alignment = []
    while a1 > a0 and b1 > b0 and sa[a1 - 1].key == sb[b1 - 1].key:
        a1, b1 = a1 - 1, b1 - 1
        tail.append((a1, b1))
    out.extend(head)
    rows, cols = a1 - a0, b1 - b0
    if rows == 0 or cols == 0:
        out.extend((i, None) for i in range(a0, a1))
        out.extend((None, j) for j in range(b0, b1))
    elif rows * cols <= NW_MAX_CELLS:
        out.extend(_needleman_wunsch(sa, sb, a0, a1, b0, b1))
    else:
        # Too big to align cell by cell: cut at the steps that occur exactly once on each side
        # (patience diff), then align each gap between those anchors the same way.
        anchors = _unique_anchors(sa, sb, a0, a1, b0, b1)
        if not anchors:
            out.extend(_greedy(sa, sb, a0, a1, b0, b1))
        else:
            i, j = a0, b0
            for x, y in anchors:
                _align_range(sa, sb, i, x, j, y, out)
                out.append((x, y))
                i, j = x + 1, y + 1
            _align_range(sa, sb, i, a1, j, b1, out)
    out.extend(reversed(tail))


def _unique_anchors(
    sa: list[_Sig], sb: list[_Sig], a0: int, a1: int, b0: int, b1: int
) -> list[tuple[int, int]]:
    """Pairs of steps whose key occurs exactly once in each range, the longest run of them in
    the same order on both sides (patience sorting; O(n log n))."""
    import bisect

    seen_a: dict[Any, int] = {}
    for i in range(a0, a1):
        seen_a[sa[i].key] = -1 if sa[i].key in seen_a else i
    seen_b: dict[Any, int] = {}
    for j in range(b0, b1):
        seen_b[sb[j].key] = -1 if sb[j].key in seen_b else j
    common = sorted((i, seen_b[k]) for k, i in seen_a.items() if i >= 0 and seen_b.get(k, -1) >= 0)
    if not common:
        return []
    # The longest increasing subsequence of B positions, in A order.
    tails: list[int] = []
    tail_index: list[int] = []
    back: list[int] = [-1] * len(common)
    for index, (_, j) in enumerate(common):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_index.append(index)
        else:
            tails[k] = j
            tail_index[k] = index
        back[index] = tail_index[k - 1] if k > 0 else -1
    chain: list[tuple[int, int]] = []
    index = tail_index[-1]
    while index >= 0:
        chain.append(common[index])
        index = back[index]
    chain.reverse()
    return chain


def _needleman_wunsch(
    sa: list[_Sig], sb: list[_Sig], a0: int, a1: int, b0: int, b1: int
) -> Alignment:
    rows, cols = a1 - a0, b1 - b0
    # score[i][j]: the best total for A[a0:a0+i] against B[b0:b0+j]; gaps cost nothing, a pair
    # earns similarity - PAIR_THRESHOLD (only pairs above the threshold are ever taken).
    gain = [[0.0] * cols for _ in range(rows)]
    for i in range(rows):
        x = sa[a0 + i]
        row = gain[i]
        for j in range(cols):
            y = sb[b0 + j]
            if x.step_type == y.step_type:
                row[j] = similarity(x, y) - PAIR_THRESHOLD
    score = [[0.0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(1, rows + 1):
        prev, cur, g = score[i - 1], score[i], gain[i - 1]
        for j in range(1, cols + 1):
            best = prev[j] if prev[j] >= cur[j - 1] else cur[j - 1]
            if g[j - 1] > 0 and prev[j - 1] + g[j - 1] > best:
                best = prev[j - 1] + g[j - 1]
            cur[j] = best
    path: Alignment = []
    i, j = rows, cols
    # Walking back, a gap is preferred over an equally good pair, so among equal alignments the
    # earliest steps pair up (an extra identical step shows as the later one).
    while i > 0 or j > 0:
        if j > 0 and (i == 0 or math.isclose(score[i][j], score[i][j - 1])):
            path.append((None, b0 + j - 1))
            j -= 1
        elif i > 0 and (j == 0 or math.isclose(score[i][j], score[i - 1][j])):
            path.append((a0 + i - 1, None))
            i -= 1
        else:
            path.append((a0 + i - 1, b0 + j - 1))
            i, j = i - 1, j - 1
    path.reverse()
    return _deletions_first(path)


def _deletions_first(path: Alignment) -> Alignment:
    """Within each run of unpaired steps, list A's (deletions) before B's (insertions)."""
    out: Alignment = []
    run: Alignment = []
    for item in [*path, (0, 0)]:
        if item[0] is None or item[1] is None:
            run.append(item)
            continue
        out.extend(x for x in run if x[1] is None)
        out.extend(x for x in run if x[0] is None)
        run = []
        out.append(item)
    out.pop()
    return out


def _greedy(sa: list[_Sig], sb: list[_Sig], a0: int, a1: int, b0: int, b1: int) -> Alignment:
    """A linear fallback for huge middles without anchors: walk both sides, pairing steps that
    are similar enough, looking a few steps ahead on each side for a partner."""
    window = 8
    out: Alignment = []
    i, j = a0, b0

    def pairs(x: int, y: int) -> bool:
        return similarity(sa[x], sb[y]) > PAIR_THRESHOLD

    while i < a1 and j < b1:
        if pairs(i, j):
            out.append((i, j))
            i, j = i + 1, j + 1
            continue
        ahead_b = next((k for k in range(j + 1, min(j + window, b1)) if pairs(i, k)), None)
        ahead_a = next((k for k in range(i + 1, min(i + window, a1)) if pairs(k, j)), None)
        if ahead_b is not None and (ahead_a is None or ahead_b - j <= ahead_a - i):
            out.extend((None, k) for k in range(j, ahead_b))
            j = ahead_b
        elif ahead_a is not None:
            out.extend((k, None) for k in range(i, ahead_a))
            i = ahead_a
        else:
            out.extend([(i, None), (None, j)])
            i, j = i + 1, j + 1
    out.extend((k, None) for k in range(i, a1))
    out.extend((None, k) for k in range(j, b1))
    return _deletions_first(out)


# --- field differences ------------------------------------------------------------------------


def json_differences(
    a: Any, b: Any, field_name: str, path: str, *, limit: int = MAX_FIELD_DIFFS
) -> tuple[list[FieldDiff], int]:
    """The leaf-level differences between two JSON values.

    Objects are compared key by key, lists element by element after aligning equal elements
    (so one inserted message is one ``added`` difference), anything else as a whole.

    Returns:
        Up to ``limit`` differences, and how many more there were.
    """
    found: list[FieldDiff] = []
    extra = 0

    def add(item: FieldDiff) -> None:
        nonlocal extra
        if len(found) < limit:
            found.append(item)
        else:
            extra += 1

    def walk(x: Any, y: Any, where: str) -> None:
        if x is MISSING:
            add(FieldDiff(field_name, where, "added", MISSING, y))
        elif y is MISSING:
            add(FieldDiff(field_name, where, "removed", x, MISSING))
        elif _same(x, y):
            return
        elif isinstance(x, dict) and isinstance(y, dict):
            for key in dict.fromkeys([*x, *y]):
                walk(x.get(key, MISSING), y.get(key, MISSING), f"{where}.{key}")
        elif isinstance(x, list) and isinstance(y, list):
            _walk_lists(x, y, where, walk)
        else:
            add(FieldDiff(field_name, where, "changed", x, y))

    if a is None and b is not None:
        a = MISSING
    elif b is None and a is not None:
        b = MISSING
    walk(a, b, path)
    return found, extra


def _walk_lists(x: list[Any], y: list[Any], where: str, walk: Any) -> None:
    keys_x = [canonical_json(v) for v in x]
    keys_y = [canonical_json(v) for v in y]
    matcher = difflib.SequenceMatcher(None, keys_x, keys_y, autojunk=False)
    for tag, i0, i1, j0, j1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        common = min(i1 - i0, j1 - j0) if tag == "replace" else 0
        for k in range(common):
            walk(x[i0 + k], y[j0 + k], f"{where}[{i0 + k}]")
        for i in range(i0 + common, i1):
            walk(x[i], MISSING, f"{where}[{i}]")
        for j in range(j0 + common, j1):
            walk(MISSING, y[j], f"{where}[{j}]")


def _same(x: Any, y: Any) -> bool:
    if type(x) is type(y) or (_is_number(x) and _is_number(y)):
        if isinstance(x, dict | list):
            return canonical_json(x) == canonical_json(y)
        return bool(x == y)
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def value_context(a: Any, b: Any, width: int = 60) -> tuple[str, str]:
    """Two values as one-line excerpts of at most ``width`` characters, each cut around the
    first character where their texts differ (strings as they are, other values as JSON).
    Not escaped: the caller escapes producer text for its terminal."""
    ta, tb = _as_text(a), _as_text(b)
    if len(ta) <= width and len(tb) <= width:
        return ta, tb
    first = next(
        (k for k, (ca, cb) in enumerate(zip(ta, tb, strict=False)) if ca != cb),
        min(len(ta), len(tb)),
    )
    start = 0 if first <= width // 2 else first - width // 3
    return _window(ta, start, width), _window(tb, start, width)


def _as_text(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    if isinstance(value, str):
        return value.replace("\n", "⏎")
    return canonical_json(value).decode()


def _window(text: str, start: int, width: int) -> str:
    start = min(start, max(0, len(text) - width + 1))
    prefix = "…" if start > 0 else ""
    room = width - len(prefix)
    body = text[start : start + room]
    if start + room < len(text):
        body = body[: room - 1] + "…"
    return prefix + body


# --- metrics ----------------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    if _is_number(value) and math.isfinite(value):
        return float(value)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def step_costs(trace: dict[str, Any]) -> tuple[list[float | None], bool]:
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
