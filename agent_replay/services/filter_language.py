"""The trace list's filter-bar language: ``status:failed agent:bot tag:prod session:s1
since:7d sort:tokens`` plus free text: words searched (as prefixes) in the names, inputs,
outputs, errors and session ids of traces and their steps through the search index, or a trace
id prefix (``store/search.text_filter_sql``).

Shared by the TUI's filter bar and the dashboard's drill-down, so both filter the same way.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from dataclasses import dataclass

from agent_replay.errors import UsageError
from agent_replay.store.queries import SORT_COLUMNS, TraceFilter
from agent_replay.trace.base import TRACE_STATUSES, parse_time

KEYS = ("status", "agent", "tag", "session", "since", "sort")
_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_ms(value: str, now: dt.datetime) -> int:
    """``7d``/``12h``/``30m``/``2w``/``45s``, a date or an ISO time -> epoch milliseconds."""
    text = value.strip()
    match = _RELATIVE.match(text)
    if match:
        delta = dt.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
        return int((now - delta).timestamp() * 1000)
    try:
        return int(parse_time(text).timestamp() * 1000)
    except ValueError:
        raise UsageError(
            f"since {value!r}: expected a duration like 7d, 12h, 30m, 2w or a date like 2026-01-01"
        ) from None


@dataclass(frozen=True)
class ListQuery:
    """A parsed filter-bar query."""

    filters: TraceFilter
    sort: str = "time"


def parse_query(text: str, now: dt.datetime) -> ListQuery:
    """Parse the filter-bar language.

    Raises:
        UsageError: an unknown status or sort, or a bad ``since``.
    """
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    values: dict[str, str] = {}
    free: list[str] = []
    for token in tokens:
        key, sep, value = token.partition(":")
        if sep and key.lower() in KEYS and value:
            values[key.lower()] = value
        else:
            free.append(token)
    status = values.get("status")
    if status is not None and status not in TRACE_STATUSES:
        raise UsageError(f"unknown status {status!r}; expected one of {', '.join(TRACE_STATUSES)}")
    sort = values.get("sort", "time")
    if sort not in SORT_COLUMNS:
        raise UsageError(f"unknown sort {sort!r}; expected one of {', '.join(SORT_COLUMNS)}")
    filters = TraceFilter(
        status=status,
        agent=values.get("agent"),
        tag=values.get("tag"),
        session=values.get("session"),
        since_ms=since_ms(values["since"], now) if "since" in values else None,
        text=" ".join(free) or None,
    )
    return ListQuery(filters, sort)
