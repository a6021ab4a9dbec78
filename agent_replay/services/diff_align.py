"""Aligning two traces' steps by content: the pairing ``services.diff`` reports on.

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

Pure: no store, no clock, no I/O. Must not import Textual or Rich.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agent_replay.trace.io import canonical_json

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


@dataclass(frozen=True)
class Signature:
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
    def of(step: dict[str, Any]) -> Signature:
        """The signature of a step (the format's JSON object)."""
        normalized = normalize(step.get("input"))
        leaves: list[tuple[str, str]] = []
        for path, value in _leaves(normalized, ""):
            leaves.append((path, canonical_json(value).decode()))
            if len(leaves) >= MAX_LEAVES:
                break
        return Signature(
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


def similarity(a: Signature, b: Signature) -> float:
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
    return align_signatures([Signature.of(s) for s in a], [Signature.of(s) for s in b])


def align_signatures(sig_a: list[Signature], sig_b: list[Signature]) -> Alignment:
    """``align_steps`` over signatures already computed (``Signature.of`` each step)."""
    out: Alignment = []
    _align_range(sig_a, sig_b, 0, len(sig_a), 0, len(sig_b), out)
    return out


def _align_range(
    sa: list[Signature], sb: list[Signature], a0: int, a1: int, b0: int, b1: int, out: Alignment
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
    sa: list[Signature], sb: list[Signature], a0: int, a1: int, b0: int, b1: int
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
    sa: list[Signature], sb: list[Signature], a0: int, a1: int, b0: int, b1: int
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


def _greedy(
    sa: list[Signature], sb: list[Signature], a0: int, a1: int, b0: int, b1: int
) -> Alignment:
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
