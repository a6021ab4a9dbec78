"""The CI regression check: the runs in the store matched to a golden file (``golden``)
and every structural regression reported. Wording never fails a check: only structure is
compared.

Matching and comparing
    Candidates are the runs in the store (optionally one agent, a tag, a ``since``), oldest
    first. Forks are never candidates and never golden: they are edits, not runs. Each
    candidate is matched to golden runs by ``(agent_name, input_hash)``; when several golden runs
    share the key, a candidate passes if it agrees with any of them and is reported against the
    closest one. ``DEFAULT_FIELDS`` are compared unless narrowed; ``model`` is opt-in. Each
    differing field is reported once, at its first difference (sequences are aligned with
    ``difflib``, so an inserted step is named as such), with the candidate's step number.

Streaming
    The golden file is loaded into a dict keyed by ``(agent_name, input_hash)``; candidates are
    read page by page and only a matched candidate's steps are loaded, so memory stays flat in the
    number of runs (only failing results are kept for the report).

Errors (exit codes through ``errors``): a ``--fields`` naming an unknown field is a
``UsageError`` (2); no candidate runs, or no candidate matching any golden run, is an
``AgentReplayError`` (1: nothing was checked, which must never pass silently). Must not import
Textual or Rich.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_replay.errors import AgentReplayError, UsageError
from agent_replay.services.diff import json_differences, value_context
from agent_replay.services.golden import (
    DEFAULT_FIELDS,
    FINGERPRINT_FIELDS,
    PAGE_SIZE,
    Fingerprint,
    GoldenSet,
    fingerprint,
    iter_runs,
)
from agent_replay.store.db import Store
from agent_replay.store.queries import TraceFilter
from agent_replay.store.trace_detail import step_dicts
from agent_replay.trace.io import canonical_json, input_hash

MAX_UNMATCHED_LISTED = 100
CONTEXT_WIDTH = 60

Outcome = Literal["pass", "regression", "unmatched"]


@dataclass(frozen=True)
class Divergence:
    """One field of a candidate run that differs from its golden counterpart."""

    field: str
    """The fingerprint field: ``step_count``, ``step_types``, ``tool_inputs``, ..."""
    step: int | None
    """The candidate's step number where the difference starts (``None``: the whole run)."""
    golden_step: int | None
    """The golden run's step number there (counting from 1), when it has one."""
    expected: Any
    actual: Any
    message: str
    """A one-line description (producer text unescaped: the caller escapes it)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "step": self.step,
            "golden_step": self.golden_step,
            "expected": self.expected,
            "actual": self.actual,
            "message": self.message,
        }


@dataclass
class RunResult:
    """How one candidate run fared."""

    trace_id: str
    agent_name: str
    input_hash: str
    outcome: Outcome
    golden_trace_id: str | None = None
    divergences: list[Divergence] = field(default_factory=list)
    started_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "agent_name": self.agent_name,
            "input_hash": self.input_hash,
            "outcome": self.outcome,
            "golden_trace_id": self.golden_trace_id,
            "started_at": self.started_at,
            "divergences": [d.to_json() for d in self.divergences],
        }


def parse_fields(text: str | None) -> tuple[str, ...]:
    """``--fields f1,f2`` -> the fields to compare (``DEFAULT_FIELDS`` when not given).

    Raises:
        UsageError: an unknown field, or none at all (comparing nothing would always pass).
    """
    if text is None:
        return DEFAULT_FIELDS
    names = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in names if f not in FINGERPRINT_FIELDS]
    if unknown:
        raise UsageError(
            f"--fields: unknown field {', '.join(repr(f) for f in unknown)}; "
            f"expected some of {', '.join(FINGERPRINT_FIELDS)}"
        )
    if not names:
        raise UsageError(f"--fields is empty; expected some of {', '.join(FINGERPRINT_FIELDS)}")
    return tuple(dict.fromkeys(names))


def compare(
    candidate: Fingerprint, golden: Fingerprint, fields: Sequence[str] = DEFAULT_FIELDS
) -> list[Divergence]:
    """Every field of ``fields`` on which ``candidate`` differs from ``golden`` (first place)."""
    found: list[Divergence] = []
    for name in fields:
        divergence = _COMPARERS[name](candidate, golden)
        if divergence is not None:
            found.append(divergence)
    return found


def _step_count(c: Fingerprint, g: Fingerprint) -> Divergence | None:
    if c.step_count == g.step_count:
        return None
    where = _first_edit(
        list(zip(c.step_types, c.step_names, strict=True)),
        list(zip(g.step_types, g.step_names, strict=True)),
    )
    detail = ""
    step = golden_step = None
    if where is not None:
        tag, ci, gi = where
        if tag == "insert":
            step = c.number(ci)
            detail = f" (step {step} {c.step_types[ci]} {_show(c.step_names[ci])} is extra)"
        elif tag == "delete":
            golden_step = gi + 1
            step = c.number(ci) if ci < c.step_count else None
            detail = (
                f" (golden step {golden_step} {g.step_types[gi]} {_show(g.step_names[gi])} "
                "is missing)"
            )
        else:
            step, golden_step = c.number(ci), gi + 1
            detail = f" (first different step: {step})"
    return Divergence(
        "step_count",
        step,
        golden_step,
        g.step_count,
        c.step_count,
        f"step_count: expected {g.step_count}, got {c.step_count}{detail}",
    )


def _sequence(
    name: str,
    c_items: list[Any],
    g_items: list[Any],
    c_pos: Sequence[int],
    g_pos: Sequence[int] | None,
) -> Callable[[Fingerprint, Fingerprint], Divergence | None]:
    """A comparer for an ordered field; ``*_pos`` map an item's index to its step position."""

    def comparer(c: Fingerprint, g: Fingerprint) -> Divergence | None:
        if c_items == g_items:  # lists of strings (or None): plain equality is exact
            return None
        where = _first_edit(c_items, g_items)
        assert where is not None
        tag, ci, gi = where
        step = c.number(c_pos[ci]) if ci < len(c_pos) else None
        golden_step = g_pos[gi] + 1 if g_pos is not None and gi < len(g_pos) else None
        if tag == "insert":
            message = f"step {step}: {name}: extra {_show(c_items[ci])}"
            return Divergence(name, step, None, None, c_items[ci], message)
        if tag == "delete":
            at = f"step {step}" if step is not None else "end of run"
            message = f"{at}: {name}: missing {_show(g_items[gi])}"
            if golden_step is not None:
                message += f" (golden step {golden_step})"
            return Divergence(name, step, golden_step, g_items[gi], None, message)
        expected, actual = g_items[gi], c_items[ci]
        message = f"step {step}: {name}: expected {_show(expected)}, got {_show(actual)}"
        return Divergence(name, step, golden_step, expected, actual, message)

    return comparer


def _first_edit(c_items: list[Any], g_items: list[Any]) -> tuple[str, int, int] | None:
    """The first edit turning ``g_items`` into ``c_items``: (tag, candidate index, golden
    index); tags are ``replace``, ``insert`` (extra in the candidate), ``delete`` (missing)."""
    keys_c = [canonical_json(v) for v in c_items]
    keys_g = [canonical_json(v) for v in g_items]
    matcher = difflib.SequenceMatcher(None, keys_g, keys_c, autojunk=False)
    for tag, g0, _g1, c0, _c1 in matcher.get_opcodes():
        if tag != "equal":
            return tag, c0, g0
    return None


def _compare_types(c: Fingerprint, g: Fingerprint) -> Divergence | None:
    steps_c, steps_g = range(c.step_count), range(g.step_count)
    return _sequence("step_types", c.step_types, g.step_types, steps_c, steps_g)(c, g)


def _compare_names(c: Fingerprint, g: Fingerprint) -> Divergence | None:
    steps_c, steps_g = range(c.step_count), range(g.step_count)
    return _sequence("step_names", c.step_names, g.step_names, steps_c, steps_g)(c, g)


def _compare_models(c: Fingerprint, g: Fingerprint) -> Divergence | None:
    # A golden file keeps the models, not which step used each, so the golden side's step is
    # known only when both fingerprints come from stored runs.
    c_pos = c.model_positions if c.model_positions is not None else range(len(c.model))
    return _sequence("model", c.model, g.model, c_pos, g.model_positions)(c, g)


def _compare_tools(c: Fingerprint, g: Fingerprint) -> Divergence | None:
    if c.tool_keys == g.tool_keys:
        return None
    c_pos, g_pos = c.tool_positions(), g.tool_positions()
    where = _first_edit(c.tool_inputs, g.tool_inputs)
    assert where is not None
    tag, ci, gi = where
    step = c.number(c_pos[ci]) if ci < len(c_pos) else None
    golden_step = g_pos[gi] + 1 if gi < len(g_pos) else None
    if tag == "insert":
        name = _show(c.step_names[c_pos[ci]])
        return Divergence(
            "tool_inputs",
            step,
            None,
            None,
            c.tool_inputs[ci],
            f"step {step}: tool_inputs: extra tool call {name} with input "
            f"{_show(c.tool_inputs[ci])}",
        )
    if tag == "delete":
        name = _show(g.step_names[g_pos[gi]])
        at = f"step {step}" if step is not None else "end of run"
        return Divergence(
            "tool_inputs",
            step,
            golden_step,
            g.tool_inputs[gi],
            None,
            f"{at}: tool_inputs: missing tool call {name} (golden step {golden_step})",
        )
    expected, actual = g.tool_inputs[gi], c.tool_inputs[ci]
    diffs, _ = json_differences(expected, actual, "input", "input", limit=1)
    name = _show(c.step_names[c_pos[ci]])
    if diffs:
        d = diffs[0]
        want, got = value_context(d.a, d.b, CONTEXT_WIDTH)
        detail = f"{d.path} {d.kind}: expected {want}, got {got}"
    else:  # pragma: no cover - equal canonical JSON never gets here
        detail = "input differs"
    return Divergence(
        "tool_inputs",
        step,
        golden_step,
        expected,
        actual,
        f"step {step}: tool_inputs: tool call {name} {detail}",
    )


def _compare_status(c: Fingerprint, g: Fingerprint) -> Divergence | None:
    if c.status == g.status:
        return None
    return Divergence(
        "status", None, None, g.status, c.status, f"status: expected {g.status}, got {c.status}"
    )


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    text, _ = value_context(value, value, CONTEXT_WIDTH)
    return repr(text) if isinstance(value, str) else text


_COMPARERS: dict[str, Any] = {
    "step_count": _step_count,
    "step_types": _compare_types,
    "step_names": _compare_names,
    "tool_inputs": _compare_tools,
    "status": _compare_status,
    "model": _compare_models,
}


def check_runs(
    store: Store,
    golden: GoldenSet,
    *,
    filters: TraceFilter | None = None,
    fields: Sequence[str] = DEFAULT_FIELDS,
    page_size: int = PAGE_SIZE,
) -> Iterator[RunResult]:
    """Check every candidate run in the store against ``golden``, oldest first, streamed.

    Yields one ``RunResult`` per candidate: ``pass``, ``regression`` (with its divergences,
    against the closest golden run of its key) or ``unmatched`` (no golden run has its agent
    name and input hash). Only a matched candidate's steps are read.
    """
    for summary in iter_runs(store, filters, descending=False, page_size=page_size):
        data = summary.data
        key_hash = input_hash(data.get("input"))
        agent = str(data["agent_name"])
        result = RunResult(summary.id, agent, key_hash, "unmatched", started_at=data["started_at"])
        counterparts = golden.lookup(agent, key_hash)
        if counterparts:
            run = fingerprint(data, step_dicts(store, summary.id))
            best: tuple[Fingerprint, list[Divergence]] | None = None
            for candidate_golden in counterparts:
                found = compare(run, candidate_golden, fields)
                if best is None or len(found) < len(best[1]):
                    best = (candidate_golden, found)
                if not found:
                    break
            assert best is not None
            result.golden_trace_id = best[0].trace_id
            result.divergences = best[1]
            result.outcome = "regression" if best[1] else "pass"
        yield result


@dataclass
class CheckReport:
    """The tally of a check: counts, and the failing results (passes are only counted)."""

    golden_runs: int
    """Runs in the golden file."""
    fields: tuple[str, ...]
    strict: bool = False
    golden_inputs: int = 0
    """Distinct (agent name, input hash) keys in the golden file."""
    candidates: int = 0
    passed: int = 0
    regressed: int = 0
    unmatched: int = 0
    failures: list[RunResult] = field(default_factory=list)
    """Regressions, and (under ``strict``) unmatched runs, in the order checked."""
    unmatched_runs: list[RunResult] = field(default_factory=list)
    """Runs with no golden counterpart: all under ``strict``, else the first
    ``MAX_UNMATCHED_LISTED`` (they are only informational then; the rest are counted)."""
    golden_matched: set[tuple[str, str]] = field(default_factory=set)

    def add(self, result: RunResult) -> None:
        """Count one result."""
        self.candidates += 1
        if result.outcome == "pass":
            self.passed += 1
        elif result.outcome == "regression":
            self.regressed += 1
            self.failures.append(result)
        else:
            self.unmatched += 1
            if self.strict or len(self.unmatched_runs) < MAX_UNMATCHED_LISTED:
                self.unmatched_runs.append(result)
            if self.strict:
                self.failures.append(result)
        if result.outcome != "unmatched":
            self.golden_matched.add((result.agent_name, result.input_hash))

    @property
    def checked(self) -> int:
        """Candidates compared with a golden run."""
        return self.passed + self.regressed

    @property
    def ok(self) -> bool:
        return self.regressed == 0 and not (self.strict and self.unmatched)

    def require_something_checked(self, filters_text: str = "") -> None:
        """Refuse a check that compared nothing (it must never pass silently).

        Raises:
            AgentReplayError: no candidate runs, or none matched a golden run.
        """
        scope = f" ({filters_text})" if filters_text else ""
        if self.candidates == 0:
            raise AgentReplayError(
                f"no candidate runs in the store{scope}: nothing was checked",
                hints=["record or ingest the runs to check first; forks are never candidates"],
            )
        if self.checked == 0:
            raise AgentReplayError(
                f"none of the {self.candidates} candidate run(s){scope} has a golden "
                "counterpart (same agent name and input): nothing was checked",
                hints=["is it the right golden file? runs match on agent name + input hash"],
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "fields": list(self.fields),
            "strict": self.strict,
            "golden_runs": self.golden_runs,
            "golden_inputs": self.golden_inputs,
            "golden_inputs_exercised": len(self.golden_matched),
            "candidates": self.candidates,
            "checked": self.checked,
            "passed": self.passed,
            "regressed": self.regressed,
            "unmatched": self.unmatched,
            "regressions": [r.to_json() for r in self.failures if r.outcome == "regression"],
            "unmatched_runs": [r.to_json() for r in self.unmatched_runs],
        }
