"""The pydantic-free part of the trace format: the enumerations and canonical time.

Kept apart from ``models`` so fast read paths (``list``, the hook) can use them without paying
for pydantic's import.
"""

from __future__ import annotations

import datetime as dt
import re

STEP_TYPES: tuple[str, ...] = (
    "thought",
    "tool_call",
    "llm_call",
    "retrieval",
    "output",
    "decision",
    "error",
    "guard_check",
)
TRACE_STATUSES: tuple[str, ...] = ("running", "completed", "failed", "timeout", "forked")


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ONE_MS = dt.timedelta(milliseconds=1)
# Already canonical: ``2026-01-01T00:00:00.000Z`` or ``…00.000000Z`` (the common case on read).
_CANONICAL = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(\d\d[1-9]|\d[1-9]\d|[1-9]\d\d)?Z$")


def canonical_time(value: dt.datetime) -> str:
    """Render an instant as canonical UTC ISO-8601 with ``Z``.

    Milliseconds always; microseconds only when the instant has sub-millisecond precision, so
    nothing a producer recorded is lost and equal instants always render equally.
    """
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    spec = "microseconds" if value.microsecond % 1000 else "milliseconds"
    return value.isoformat(timespec=spec) + "Z"


def is_canonical(value: str) -> bool:
    """Whether a timestamp string is already in canonical form."""
    return _CANONICAL.match(value) is not None


def parse_time(value: str) -> dt.datetime:
    """Parse an ISO-8601 timestamp; a naive one is taken as UTC. Raises ``ValueError``."""
    text = value.strip()
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    parsed = dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed


def normalize_time(value: str) -> str:
    """A timestamp string in canonical form (``ValueError`` if it is not ISO-8601)."""
    if _CANONICAL.match(value):
        return value
    return canonical_time(parse_time(value))


def time_ms(value: str | None) -> int | None:
    """Milliseconds since the epoch of a timestamp (the store's ordering column)."""
    if value is None:
        return None
    return (parse_time(value) - _EPOCH) // _ONE_MS


def time_before(a: str, b: str) -> bool:
    """Whether instant ``a`` is strictly before ``b`` (canonical strings of one precision
    compare as text; anything else is parsed)."""
    if len(a) == len(b) and a.endswith("Z") and b.endswith("Z"):
        return a < b
    return parse_time(a) < parse_time(b)
