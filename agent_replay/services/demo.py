"""The demo data set: five sample traces and three guardrail policies, loaded into a store.

Owns the content of ``agent-replay demo``. Each trace shows one problem the tool exists to find:
an answer not grounded in what was retrieved, a failing tool-call chain, a dangerous production
delete, and a good run beside a regressed run of the same input (for ``diff`` and ``check``).

The data ships as package data, ``agent_replay/data/demo/``: ``traces.jsonl`` (the trace
format, one trace a line, what ``show --json`` prints) and ``policies.jsonl``. They double as
test fixtures: ``demo_traces(clock)`` is what ``load_demo`` writes.

The files are written as if "now" were ``ANCHOR``; loading moves every trace and step time by
the clock's distance from it, so the runs always happened over the few hours before now. Text
that names a calendar date relative to the run (the "next Friday" the booking agent resolves,
the "last quarter" the analytics agent queries) is a placeholder, ``{{name}}`` or
``{{name:strftime format}}``, filled in from the date the trace starts on (``_calendar``).

Traces go through the real ingest service (strict validation, redaction, the one write path);
policies through the guard service's rows. Ids are fixed and times derive from the injected
clock, so loading is idempotent and, under a fixed clock, deterministic.

A service module: imports the store and the trace format only; never Textual, Rich or the CLI.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import cast

from agent_replay.clock import Clock
from agent_replay.errors import StoreError
from agent_replay.services.guard.manage import insert_new_policies, remember_policies
from agent_replay.services.ingest import ingest_many
from agent_replay.store.db import Store
from agent_replay.store.writes import existing_trace_ids
from agent_replay.trace.base import canonical_time
from agent_replay.trace.io import dumps, loads

UNGROUNDED_ID = "trc_demo1ungrounded"
TOOL_CHAIN_ID = "trc_demo2toolchain"
DANGEROUS_ID = "trc_demo3dangerous"
GOOD_RUN_ID = "trc_demo4goodrun"
REGRESSED_ID = "trc_demo5regressed"
DEMO_TRACE_IDS: tuple[str, ...] = (
    UNGROUNDED_ID,
    TOOL_CHAIN_ID,
    DANGEROUS_ID,
    GOOD_RUN_ID,
    REGRESSED_ID,
)

POLICY_COLUMNS: tuple[str, ...] = (
    "id",
    "name",
    "description",
    "pattern",
    "action",
    "priority",
    "enabled",
    "created_at",
)

ANCHOR = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
"""The "now" the data files are written at (their times are this many hours before it)."""

DATA = resources.files("agent_replay") / "data" / "demo"
"""The folder of the demo data files (a package resource: inside a wheel, an installed tree)."""

Json = dict[str, object]
PolicyRow = tuple[str, str, str, str, str, int, int, str]

_PLACEHOLDER = re.compile(r"\{\{(\w+)(?::([^{}]+))?\}\}")
_TIMES = ("started_at", "ended_at")


@dataclass
class DemoResult:
    """What ``load_demo`` did.

    Attributes:
        traces_added: demo trace ids written by this call.
        traces_present: demo trace ids that were already in the store (left untouched).
        policies_added: names of the demo policies written by this call.
    """

    traces_added: list[str] = field(default_factory=list)
    traces_present: list[str] = field(default_factory=list)
    policies_added: list[str] = field(default_factory=list)


def load_demo(store: Store, clock: Clock) -> DemoResult:
    """Load the demo traces and policies, adding only what the store does not have yet.

    Args:
        store: an open, migrated store (its connection open in the calling thread).
        clock: the time the demo runs are placed before (they happened over the last hours).

    Returns:
        Which traces were added or already present, and which policies were added.

    Raises:
        StoreError: ingest rejected a demo trace, or a write failed.
    """
    result = DemoResult()
    traces = demo_traces(clock)
    present = existing_trace_ids(store, list(DEMO_TRACE_IDS))
    missing = [(str(t["id"]), t) for t in traces if t["id"] not in present]
    report = ingest_many(store, missing)
    if report.rejected:
        # A concurrent `demo` may have written the same ids in between; that is not a failure.
        raced = existing_trace_ids(store, [where for where, _ in missing])
        failures = [r for r in report.rejected if r.where not in raced]
        if failures:
            reasons = "; ".join(f"{r.where}: {r.reason}" for r in failures)
            raise StoreError(f"the demo traces were rejected: {reasons}")
        present |= {r.where for r in report.rejected}
    added = set(report.ingested)
    result.traces_added = [tid for tid in DEMO_TRACE_IDS if tid in added]
    result.traces_present = [tid for tid in DEMO_TRACE_IDS if tid in present]
    result.policies_added = insert_new_policies(store, demo_policies(clock), POLICY_COLUMNS)
    remember_policies(store)
    return result


def demo_policies(clock: Clock) -> list[PolicyRow]:
    """The demo guardrail policies as ``policies`` rows (``POLICY_COLUMNS`` order).

    Args:
        clock: stamps ``created_at``.

    Returns:
        One row per policy: deny destructive tools, review production calls, warn on secrets.
    """
    created_at = canonical_time(_now(clock))
    return [
        (
            str(p["id"]),
            str(p["name"]),
            str(p["description"]),
            dumps(p["pattern"]),
            str(p["action"]),
            cast(int, p["priority"]),
            int(bool(p["enabled"])),
            created_at,
        )
        for p in _read("policies.jsonl")
    ]


def demo_traces(clock: Clock) -> list[Json]:
    """The five demo traces as the format's JSON objects, in ``DEMO_TRACE_IDS`` order.

    Args:
        clock: the runs are placed over the few hours before ``clock.now()``.

    Returns:
        Trace objects that pass strict validation, with fixed trace and step ids.
    """
    shift = _now(clock) - ANCHOR
    traces = []
    for trace in _read("traces.jsonl"):
        _move(trace, shift)
        steps = cast(list[Json], trace["steps"])
        for step in steps:
            _move(step, shift)
        day = dt.datetime.fromisoformat(str(trace["started_at"])).date()
        traces.append(cast(Json, _fill(trace, _calendar(day))))
    return traces


def _read(name: str) -> list[Json]:
    """The JSON objects of one data file, one a line."""
    text = DATA.joinpath(name).read_text(encoding="utf-8")
    return [cast(Json, loads(line)) for line in text.splitlines() if line.strip()]


def _now(clock: Clock) -> dt.datetime:
    """The clock's time in UTC, to the millisecond (like every other demo timestamp)."""
    now = clock.now().astimezone(dt.UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _move(item: Json, shift: dt.timedelta) -> None:
    """Move an object's ``started_at`` / ``ended_at`` by ``shift``, in place."""
    for key in _TIMES:
        if key in item:
            item[key] = canonical_time(dt.datetime.fromisoformat(str(item[key])) + shift)


def _calendar(day: dt.date) -> dict[str, dt.date | str]:
    """The dates a run starting on ``day`` talks about, by placeholder name."""
    friday = day + dt.timedelta(days=(4 - day.weekday()) % 7 or 7)
    this_start = dt.date(day.year, (day.month - 1) // 3 * 3 + 1, 1)
    last_start = (this_start - dt.timedelta(days=1)).replace(day=1)
    last_start = last_start.replace(month=(last_start.month - 1) // 3 * 3 + 1)
    return {
        "next_friday": friday,
        "quarter_start": last_start,
        "quarter_end": this_start,
        "quarter_last_day": this_start - dt.timedelta(days=1),
        "quarter_label": f"Q{(last_start.month - 1) // 3 + 1} {last_start.year}",
    }


def _fill(value: object, calendar: dict[str, dt.date | str]) -> object:
    """``value`` with every ``{{name}}`` / ``{{name:format}}`` in its strings filled in."""
    if isinstance(value, str):
        if "{{" not in value:
            return value

        def one(match: re.Match[str]) -> str:
            # A date formats with strftime (ISO with no format); the quarter label as is.
            return format(calendar[match[1]], match[2] or "")

        return _PLACEHOLDER.sub(one, value)
    if isinstance(value, list):
        return [_fill(item, calendar) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, calendar) for key, item in value.items()}
    return value
