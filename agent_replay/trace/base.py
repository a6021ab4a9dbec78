"""The pydantic-free part of the trace format: the enumerations and canonical time.

Kept apart from ``models`` so fast read paths (``list``, the hook) can use them without paying
for pydantic's import.
"""

from __future__ import annotations

import datetime as dt

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


def canonical_time(value: dt.datetime) -> str:
    """Render an instant as canonical UTC ISO-8601 with ``Z``.

    Milliseconds always; microseconds only when the instant has sub-millisecond precision, so
    nothing a producer recorded is lost and equal instants always render equally.
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    value = value.astimezone(dt.UTC)
    base = value.strftime("%Y-%m-%dT%H:%M:%S")
    micros = value.microsecond
    if micros % 1000:
        return f"{base}.{micros:06d}Z"
    return f"{base}.{micros // 1000:03d}Z"


def parse_time(value: str) -> dt.datetime:
    """Parse an ISO-8601 timestamp; a naive one is taken as UTC. Raises ``ValueError``."""
    text = value.strip()
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    parsed = dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed


def time_ms(value: str | None) -> int | None:
    """Milliseconds since the epoch of a canonical timestamp (the store's ordering column)."""
    if value is None:
        return None
    return int(parse_time(value).timestamp() * 1000)
