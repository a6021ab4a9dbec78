"""Golden datasets: the known-good runs ``check --golden`` compares against.

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

Comparing the runs in the store to a golden file (``check --golden``) is ``golden_check``.

Errors (exit codes through ``errors``): a golden file that isn't valid JSON or has the wrong
shape is a ``UsageError`` (2: the user passed a bad file); an empty golden file is an
``AgentReplayError`` (1: nothing could be checked, which must never pass silently). Must not
import Textual or Rich.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import IO, Any

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import AgentReplayError, UsageError
from agent_replay.services.capture import vocabulary
from agent_replay.store.db import Store
from agent_replay.store.queries import TraceFilter, TraceSummary, list_traces
from agent_replay.store.trace_detail import step_dicts
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

_HASH = re.compile(r"^[0-9a-f]{64}$")


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
    trace: Mapping[str, Any], steps: Sequence[Mapping[str, Any]] | None = None
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
    names = [
        vocabulary.RENAMED.get((t, n), n) if n else n for t, n in zip(types, names, strict=True)
    ]
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
