"""The native event protocol v1: what an event may say, how the engine coerces its fields,
and the report of what a stream did.

Protocol v1: one JSON object a line, ``{"v": 1, "type": ..., "trace_id": ...}``; types
``trace_start``, ``step_start``, ``step_end``, ``step``, ``decision``, ``snapshot``,
``trace_end`` (fields in ``FIELDS``). ``trace_id`` is the producer's: it is mapped to one of our
ids (kept in the trace's ``metadata.producer_trace_id`` and its ``producer_trace_id`` column),
unless it already names a trace in the store, which is then recorded into; a producer id of a
trace still ``running`` (an earlier stream's ``--leave-open``) resumes that trace. Unknown
types and fields are skipped with one warning per kind; lines that are not JSON objects with a
``type`` are counted as malformed; events the recorder can't place or keep (unknown trace, a
``step_end`` with nothing to close, an unknown ``step_type``, a step number out of range) are
rejected and counted, and the events around them still land. Nothing a producer sends makes
the engine crash: any error while recording one event rejects that event only.

Where the rest of a native stream lives (all in ``services/capture``): ``event_traces`` decides
which trace an event goes to and holds what the engine knows of each (``TraceState``);
``events`` is ``EventEngine`` (native events -> ``TraceRecorder`` calls, steps coalesced per
batch); ``pump`` reads a file descriptor line by line and commits in small transactions.
Stdlib, orjson and the trace format only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from agent_replay.errors import AgentReplayError
from agent_replay.trace.base import STEP_TYPES
from agent_replay.trace.models import MAX_SAFE_INT

PROTOCOL_VERSION = 1
# How many malformed lines / rejected events / repairs are kept with their details.
SAMPLES = 5

_COMMON = frozenset({"v", "type", "trace_id"})
FIELDS: dict[str, frozenset[str]] = {
    "trace_start": _COMMON
    | {
        "agent_name",
        "agent_version",
        "trigger",
        "session_id",
        "input",
        "tags",
        "metadata",
        "started_at",
    },
    "step_start": _COMMON
    | {
        "step_type",
        "name",
        "input",
        "step_number",
        "parent_step",
        "caused_by_step",
        "call_id",
        "started_at",
        "model",
        "metadata",
    },
    "step_end": _COMMON
    | {
        "step_number",
        "call_id",
        "output",
        "error",
        "ended_at",
        "tokens_used",
        "duration_ms",
        "model",
        "metadata",
    },
    "step": _COMMON
    | {
        "step_number",
        "step_type",
        "name",
        "input",
        "output",
        "error",
        "started_at",
        "ended_at",
        "duration_ms",
        "tokens_used",
        "model",
        "parent_step",
        "caused_by_step",
        "decision",
        "snapshot",
        "metadata",
    },
    "decision": _COMMON
    | {
        "step_number",
        "name",
        "started_at",
        "parent_step",
        "caused_by_step",
        "decision",
        "options",
        "chosen",
        "rationale",
        "confidence",
        "decided_by",
    },
    "snapshot": _COMMON
    | {"step_number", "call_id", "snapshot", "context_window", "environment", "tool_state"},
    "trace_end": _COMMON
    | {
        "status",
        "output",
        "error",
        "ended_at",
        "total_tokens",
        "total_cost_usd",
        "total_duration_ms",
        "metadata",
    },
}
EVENT_TYPES = tuple(FIELDS)
TRACE_START_FIELDS = (
    "agent_name",
    "agent_version",
    "trigger",
    "session_id",
    "input",
    "tags",
    "started_at",
)
DECISION_FIELDS = ("options", "chosen", "rationale", "confidence", "decided_by")
SNAPSHOT_FIELDS = ("context_window", "environment", "tool_state")
END_FIELDS = ("output", "error", "ended_at", "tokens_used", "duration_ms", "model", "metadata")
START_FIELDS = (
    "step_number",
    "step_type",
    "name",
    "input",
    "started_at",
    "model",
    "parent_step",
    "caused_by_step",
    "metadata",
)
STEP_FIELDS = (
    "step_number",
    "step_type",
    "name",
    "input",
    "output",
    "error",
    "started_at",
    "ended_at",
    "duration_ms",
    "tokens_used",
    "model",
    "parent_step",
    "caused_by_step",
    "decision",
    "snapshot",
    "metadata",
)
# How the engine coerces a field before the recorder validates it (see ``_fields``).
FIELD_KINDS = {
    "name": "text",
    "model": "text",
    "error": "text",
    "parent_step": "link",
    "caused_by_step": "link",
    "metadata": "object",
    "decision": "object",
    "snapshot": "object",
    "step_number": "number",
}


@dataclass
class EventReport:
    """What a stream did: counts, the first few problems with where they were, and warnings.

    ``malformed`` and ``rejected`` are problems (``record`` exits 1); ``skipped`` (unknown
    types and fields, by kind) and ``repairs`` (values the recorder coerced or dropped) are
    warnings.
    """

    events: int = 0
    steps: int = 0
    traces: list[str] = field(default_factory=list)
    malformed: int = 0
    malformed_samples: list[tuple[str, str]] = field(default_factory=list)
    rejected: int = 0
    rejected_samples: list[tuple[str, str]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    repairs: int = 0
    repair_samples: list[tuple[str, str]] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    left_open: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every line was an event and every event was recorded."""
        return not self.malformed and not self.rejected

    def as_json(self) -> dict[str, Any]:
        """The summary ``record --json`` prints."""
        return {
            "ok": self.ok,
            "events": self.events,
            "steps": self.steps,
            "traces": list(self.traces),
            "timed_out": list(self.timed_out),
            "left_open": list(self.left_open),
            "malformed": {
                "count": self.malformed,
                "first": [{"where": w, "reason": r} for w, r in self.malformed_samples],
            },
            "rejected": {
                "count": self.rejected,
                "first": [{"where": w, "reason": r} for w, r in self.rejected_samples],
            },
            "skipped": [{"kind": k, "count": n} for k, n in self.skipped.items()],
            "repairs": {
                "count": self.repairs,
                "first": [{"where": w, "warning": m} for w, m in self.repair_samples],
            },
        }


Warn = Callable[[str], None]


def no_warn(message: str) -> None:
    """The default warning sink: warnings are only counted in the report."""


class Rejected(Exception):
    """An event the engine refuses (counted in the report, never raised out of the engine)."""


def rejection_reason(exc: BaseException) -> str:
    """Why an event was rejected, in words: our own errors say it; anything else (a value no
    check foresaw) is named by its kind, so the summary still points at the line."""
    if isinstance(exc, Rejected):
        return str(exc)
    if isinstance(exc, AgentReplayError):
        return exc.message
    return f"could not be recorded ({type(exc).__name__}: {exc})"


def as_step_type(value: Any) -> str:
    """The step type of a step event: one of the format's, as given or differing only in case
    and surrounding spaces (unambiguous); anything else is refused, never guessed."""
    if value.__class__ is str and value in STEP_TYPES:
        return str(value)
    if value is None:
        raise Rejected(f"needs a step_type (one of {', '.join(STEP_TYPES)})")
    if isinstance(value, str) and value.strip().lower() in STEP_TYPES:
        return value.strip().lower()
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise Rejected(f"unknown step_type {shown} (one of {', '.join(STEP_TYPES)})")


def as_text(value: Any) -> str | None:
    """A text field: strings as they are, other scalars as text, ``None`` kept."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return str(value)


def as_call_id(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


# --- reading a file descriptor --------------------------------------------------------------

# --- the engine's coercions of an event's fields --------------------------------------------
# ``skip(kind, where)`` counts a value dropped with a warning (``EventEngine.skip``).

Skip = Callable[[str, str], None]


def event_fields(
    renumbered: dict[int, int],
    event: dict[str, Any],
    where: str,
    names: tuple[str, ...],
    skip: Skip,
) -> dict[str, Any]:
    """The step fields of an event, with the engine's coercions (the hot path: plain values
    pass through without a call); links follow the trace's ``renumbered`` steps."""
    data: dict[str, Any] = {}
    get = event.get
    for name in names:
        value = get(name)
        if value is not None:
            kind = FIELD_KINDS.get(name)
            if kind is None:
                pass
            elif kind == "text":
                if value.__class__ is not str:
                    value = as_text(value)
            elif kind == "link":
                if value.__class__ is not int or not 0 < value <= MAX_SAFE_INT:
                    value = link_value(name, value, where, skip)
                if renumbered and type(value) is int:
                    value = renumbered.get(value, value)
            elif kind == "object":
                if value.__class__ is not dict:
                    value = event_object(event, name, where, skip)
            elif kind == "number":
                if value.__class__ is not int or not 0 < value <= MAX_SAFE_INT:
                    value = event_number(event, where, skip)
        data[name] = value
    return data


def event_number(event: dict[str, Any], where: str, skip: Skip) -> int | None:
    """A step number as given (digits in a string coerced); anything else is dropped and the
    recorder numbers the step."""
    value = event.get("step_number")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if value is None:
        return None
    if type(value) is int:
        if not 0 < value <= MAX_SAFE_INT:
            raise Rejected(f"step_number must be a positive integer (got {value})")
        return value
    skip("step_number that is not a number", where)
    return None


def link_value(name: str, value: Any, where: str, skip: Skip) -> int | None:
    """A ``parent_step``/``caused_by_step`` as a step number (digits in a string coerced);
    anything else can't name a step and is dropped with a warning."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if type(value) is int and 0 < value <= MAX_SAFE_INT:
        return value
    skip(f"{name} that is not a step number", where)
    return None


def event_object(event: dict[str, Any], name: str, where: str, skip: Skip) -> dict[str, Any] | None:
    value = event.get(name)
    if value is None or isinstance(value, dict):
        return value
    skip(f"{name} that is not an object", where)
    return None


def event_tags(event: dict[str, Any], where: str, skip: Skip) -> list[str]:
    value = event.get("tags")
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return [t for t in value if t.strip()]
    skip("tags that are not a list of strings", where)
    return []
