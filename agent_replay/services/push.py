"""``push``: copy traces from a local store to a team store, idempotent by trace id.

Re-running adds nothing; a trace whose rows changed locally since it was last pushed (it grew,
it ended, it was evaluated) replaces the copy, keeping the evaluations made on the team store.
What changed is decided by digests (``store/transfer``), so an unchanged trace costs one local
read and no write. Traces go in batches, one transaction each on the target.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import UsageError
from agent_replay.services.redact_store import redact_rows
from agent_replay.store.db import Store
from agent_replay.store.queries import TraceFilter, where_sql
from agent_replay.store.transfer import read_traces, stored_digests, trace_ids, write_traces

BATCH = 100
"""Traces per target transaction (and per progress report)."""


@dataclass
class PushReport:
    """What a push did."""

    target: str
    """The target store (URL with the password masked, or its file)."""
    new: list[str] = field(default_factory=list)
    """Ids of traces copied for the first time."""
    updated: list[str] = field(default_factory=list)
    """Ids of traces that changed since their last push, replaced."""
    unchanged: int = 0
    steps: int = 0
    """Steps written (in new and updated traces)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "new": self.new,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "steps": self.steps,
        }


def push(
    source: Store,
    target: Store,
    filters: TraceFilter | None = None,
    *,
    clock: Clock | None = None,
    progress: Callable[[int, int], None] | None = None,
    batch: int = BATCH,
    redact: bool = True,
) -> PushReport:
    """Copy the source's traces matching ``filters`` into ``target``.

    Args:
        progress: called with (traces looked at, traces to look at) after each batch.
        redact: redact every copied row with today's rules (a trace recorded with
            ``--no-redact`` or before a rule existed reaches the team store redacted).

    Raises:
        UsageError: source and target are the same store.
    """
    if source.target and source.target == target.target:
        raise UsageError("push needs two different stores: the target is the local store")
    now_ms = int((clock or SystemClock()).now().timestamp() * 1000)
    where, params = where_sql(source, filters or TraceFilter())
    ids = trace_ids(source, where, params)
    report = PushReport(target.label)
    if progress is not None:
        progress(0, len(ids))
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        copies = read_traces(source, chunk)
        pushed = stored_digests(target, chunk)
        changed = [c for c in copies if pushed.get(c.trace_id) != c.digest]
        report.unchanged += len(copies) - len(changed)
        if changed:
            known = set(pushed)
            if redact:
                for copy in changed:
                    copy.rows = {table: redact_rows(rows) for table, rows in copy.rows.items()}
            write_traces(target, changed, now_ms)
            for copy in changed:
                (report.updated if copy.trace_id in known else report.new).append(copy.trace_id)
                report.steps += copy.steps
        if progress is not None:
            progress(min(start + batch, len(ids)), len(ids))
    return report
