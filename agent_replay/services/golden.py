"""Golden datasets and the CI regression check.

``agent-replay export --format golden`` writes known-good runs as structural fingerprints;
``agent-replay check --golden FILE`` matches the runs in the store to them and reports every
structural regression. Wording never fails a check: only structure is compared.

The golden file (JSON, one document)::

    {"format": "agent-replay/golden", "version": 1, "created_at": "...Z",
     "fields": ["step_count", "step_types", "step_names", "tool_inputs", "status", "model"],
     "runs": [{"trace_id": "trc_...", "agent_name": "...", "input_hash": "<sha256 hex>",
               "step_count": 8, "step_types": [...], "step_names": [...],
               "tool_inputs": [...], "status": "completed", "model": [...]}, ...]}

- ``input_hash``: SHA-256 of the canonical JSON of the trace input (``trace.io.input_hash``);
- ``step_types`` / ``step_names``: one entry per step, in step order;
- ``tool_inputs``: the input of each ``tool_call`` step, in order;
- ``model``: the model of each step that records one, in order (so adding a tool step does not
  change it, switching a step's model does).

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

Errors (exit codes through ``errors``): a golden file that isn't valid JSON or has the wrong
shape is a ``UsageError`` (2: the user passed a bad file); an empty golden file, no candidate
runs, or no candidate matching any golden run is an ``AgentReplayError`` (1: nothing was checked,
which must never pass silently). Must not import Textual or Rich.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, Any, Literal

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import AgentReplayError, UsageError
from agent_replay.services.diff import json_differences, value_context
from agent_replay.store.db import Store
from agent_replay.store.queries import TraceFilter, TraceSummary, list_traces, step_dicts
from agent_replay.trace.base import canonical_time
from agent_replay.trace.io import canonical_json, dumps_bytes, input_hash

GOLDEN_FORMAT = "agent-replay/golden"
GOLDEN_VERSION = 1
FINGERPRINT_FIELDS: tuple[str, ...] = (
    "step_count",
    "step_types",
    "step_names",
    "tool_inputs",
    "status",
    "model",
)
"""Every field a golden run records, and the values ``--fields`` accepts."""
DEFAULT_FIELDS: tuple[str, ...] = (
    "step_count",
    "step_types",
    "step_names",
    "tool_inputs",
    "status",
)
"""Compared unless ``--fields`` says otherwise (``model`` is opt-in)."""
PAGE_SIZE = 500
MAX_UNMATCHED_LISTED = 100
CONTEXT_WIDTH = 60

_HASH = re.compile(r"^[0-9a-f]{64}$")

Outcome = Literal["pass", "regression", "unmatched"]


# --- fingerprints -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Fingerprint:
    """The structure of one run: what a golden file stores and what ``check`` compares."""

    agent_name: str
    input_hash: str
    step_count: int
    step_types: list[str]
    step_names: list[str | None]
    tool_inputs: list[Any]
    status: str
    model: list[str]
    trace_id: str | None = None
    step_numbers: list[int] | None = None
    """The steps' numbers, in order (candidates; a golden file's steps count from 1)."""
    model_positions: list[int] | None = None
    """The 0-based step position of each ``model`` entry (candidates only: a golden file
    keeps the models, not which step used them)."""

    def number(self, position: int) -> int:
        """The step number at a 0-based position in step order."""
        if self.step_numbers is not None and 0 <= position < len(self.step_numbers):
            return self.step_numbers[position]
        return position + 1

    @cached_property
    def tool_keys(self) -> list[bytes]:
        """The tool inputs as canonical JSON (computed once: a golden run is compared often)."""
        return [canonical_json(v) for v in self.tool_inputs]

    def tool_positions(self) -> list[int]:
        return [i for i, t in enumerate(self.step_types) if t == "tool_call"]

    def to_json(self) -> dict[str, Any]:
        """The golden file's entry for this run."""
        return {
            "trace_id": self.trace_id,
            "agent_name": self.agent_name,
            "input_hash": self.input_hash,
            "step_count": self.step_count,
            "step_types": self.step_types,
            "step_names": self.step_names,
            "tool_inputs": self.tool_inputs,
            "status": self.status,
            "model": self.model,
        }


def fingerprint(
    trace: dict[str, Any], steps: Sequence[dict[str, Any]] | None = None
) -> Fingerprint:
    """The fingerprint of a trace object (``steps`` default to ``trace["steps"]``)."""
    steps = list(trace.get("steps") or []) if steps is None else list(steps)
    return Fingerprint(
        agent_name=str(trace["agent_name"]),
        input_hash=input_hash(trace.get("input")),
        step_count=len(steps),
        step_types=[str(s["step_type"]) for s in steps],
        step_names=[s.get("name") for s in steps],
        tool_inputs=[s.get("input") for s in steps if s["step_type"] == "tool_call"],
        status=str(trace.get("status")),
        model=[str(s["model"]) for s in steps if s.get("model")],
        trace_id=trace.get("id"),
        step_numbers=[int(s["step_number"]) for s in steps],
        model_positions=[i for i, s in enumerate(steps) if s.get("model")],
    )


# --- the golden file --------------------------------------------------------------------------


@dataclass
class GoldenSet:
    """A loaded golden file: runs keyed by ``(agent_name, input_hash)``."""

    runs: dict[tuple[str, str], list[Fingerprint]]
    count: int
    """How many golden runs the file holds."""
    source: str = ""

    def lookup(self, agent_name: str, hash_: str) -> list[Fingerprint]:
        return self.runs.get((agent_name, hash_), [])


def load_golden(path: Path) -> GoldenSet:
    """Read and validate a golden file.

    Raises:
        UsageError: not readable, not JSON, or not a golden file (the message names the entry
            and field at fault).
        AgentReplayError: the file is empty or holds no runs (nothing to check against).
    """
    from agent_replay.trace.io import loads

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"--golden {path}: cannot read it: {exc}") from None
    if not data.strip():
        raise AgentReplayError(
            f"golden file {path} is empty: there is nothing to check against",
            hints=["create one with `agent-replay export --format golden --output FILE`"],
        )
    try:
        document = loads(data)
    except ValueError as exc:
        raise UsageError(f"golden file {path} is not valid JSON: {exc}") from None
    return parse_golden(document, source=str(path))


def parse_golden(document: Any, *, source: str = "golden file") -> GoldenSet:
    """Validate a decoded golden document (see ``load_golden``)."""

    def bad(where: str, problem: str) -> UsageError:
        return UsageError(
            f"{source} is not a golden file: {where}: {problem}",
            hints=["golden files are written by `agent-replay export --format golden`"],
        )

    if not isinstance(document, dict):
        raise bad("top level", f"expected an object, got {_kind(document)}")
    if document.get("format") != GOLDEN_FORMAT:
        raise bad("format", f"expected {GOLDEN_FORMAT!r}, got {document.get('format')!r}")
    if document.get("version") != GOLDEN_VERSION:
        raise bad("version", f"this build reads version {GOLDEN_VERSION}")
    runs = document.get("runs")
    if not isinstance(runs, list):
        raise bad("runs", f"expected an array, got {_kind(runs)}")
    if not runs:
        raise AgentReplayError(
            f"{source} holds no runs: there is nothing to check against",
            hints=["did the export's filters match nothing? (`agent-replay list` with them)"],
        )
    keyed: dict[tuple[str, str], list[Fingerprint]] = {}
    for index, entry in enumerate(runs):
        where = f"runs[{index}]"
        run = _parse_entry(entry, where, bad)
        keyed.setdefault((run.agent_name, run.input_hash), []).append(run)
    return GoldenSet(keyed, len(runs), source)


def _parse_entry(entry: Any, where: str, bad: Any) -> Fingerprint:
    if not isinstance(entry, dict):
        raise bad(where, f"expected an object, got {_kind(entry)}")

    def need(name: str, check: Any, expected: str) -> Any:
        if name not in entry:
            raise bad(f"{where}.{name}", "missing")
        value = entry[name]
        if not check(value):
            raise bad(f"{where}.{name}", f"expected {expected}, got {_kind(value)}")
        return value

    def is_str_list(value: Any, nullable: bool = False) -> bool:
        return isinstance(value, list) and all(
            isinstance(v, str) or (nullable and v is None) for v in value
        )

    agent = need("agent_name", lambda v: isinstance(v, str) and v, "a non-empty string")
    hash_ = need("input_hash", lambda v: isinstance(v, str) and _HASH.match(v), "a sha256 hex")
    count = need(
        "step_count", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "int"
    )
    types = need("step_types", is_str_list, "an array of strings")
    names = need("step_names", lambda v: is_str_list(v, True), "an array of strings")
    tools = need("tool_inputs", lambda v: isinstance(v, list), "an array")
    status = need("status", lambda v: isinstance(v, str), "a string")
    model = need("model", is_str_list, "an array of strings")
    trace_id = entry.get("trace_id")
    if trace_id is not None and not isinstance(trace_id, str):
        raise bad(f"{where}.trace_id", f"expected a string, got {_kind(trace_id)}")
    if len(types) != count or len(names) != count:
        raise bad(where, f"step_count is {count} but it lists {len(types)} step types")
    if len(tools) != types.count("tool_call"):
        raise bad(where, f"{types.count('tool_call')} tool_call steps but {len(tools)} inputs")
    return Fingerprint(agent, hash_, count, types, names, tools, status, model, trace_id)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), type(value).__name__)


def iter_runs(
    store: Store,
    filters: TraceFilter | None = None,
    *,
    sort: str = "time",
    descending: bool = True,
    limit: int | None = None,
    page_size: int = PAGE_SIZE,
) -> Iterator[TraceSummary]:
    """Trace summaries matching ``filters``, page by page, forks left out."""
    after: tuple[Any, str] | None = None
    emitted = 0
    while True:
        page = list_traces(
            store, filters, sort=sort, descending=descending, limit=page_size, after=after
        )
        for summary in page.items:
            if summary.is_fork or summary.data.get("status") == "forked":
                continue
            yield summary
            emitted += 1
            if limit is not None and emitted >= limit:
                return
        if page.after is None:
            return
        after = page.after


def iter_golden_runs(
    store: Store,
    filters: TraceFilter | None = None,
    *,
    sort: str = "time",
    limit: int | None = None,
) -> Iterator[Fingerprint]:
    """The fingerprints of the runs matching ``filters`` (forks left out), streamed."""
    for summary in iter_runs(store, filters, sort=sort, limit=limit):
        yield fingerprint(summary.data, step_dicts(store, summary.id))


def write_golden(
    runs: Iterable[Fingerprint], stream: IO[bytes], *, clock: Clock | None = None
) -> int:
    """Write a golden document to ``stream``, one run a line; return the number of runs."""
    now = canonical_time((clock or SystemClock()).now())
    header = dumps_bytes(
        {
            "format": GOLDEN_FORMAT,
            "version": GOLDEN_VERSION,
            "created_at": now,
            "fields": list(FINGERPRINT_FIELDS),
        }
    )
    stream.write(header[:-1] + b',"runs":[')
    count = 0
    for run in runs:
        stream.write((b",\n" if count else b"\n") + dumps_bytes(run.to_json()))
        count += 1
    stream.write(b"\n]}\n" if count else b"]}\n")
    return count


def export_golden(
    store: Store,
    filters: TraceFilter | None,
    output: Path | None,
    *,
    sort: str = "time",
    limit: int | None = None,
    clock: Clock | None = None,
    stream: IO[bytes] | None = None,
) -> int:
    """Write the golden dataset of the runs matching ``filters`` to ``output`` (atomically:
    complete or not at all) or, without one, to ``stream`` (default: stdout).

    Returns:
        The number of runs written.
    """
    runs = iter_golden_runs(store, filters, sort=sort, limit=limit)
    if output is None:
        target = stream if stream is not None else sys.stdout.buffer
        count = write_golden(runs, target, clock=clock)
        target.flush()
        return count
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "wb") as handle:
            count = write_golden(runs, handle, clock=clock)
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    return count


# --- checking ---------------------------------------------------------------------------------


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
