"""Deleting traces: ``delete`` named ones, ``prune`` old ones, then give the space back.

Everything attached to a trace goes with it (``store/retention``), and so do the OTLP
receiver's staged spans it was built from, so a late span never brings a deleted trace back.
``prune`` never takes a ``running`` trace unless asked for that status: a long session's trace
started long ago and is still being written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from peewee import fn

from agent_replay.store.db import Store
from agent_replay.store.models import TagRow, TraceRow
from agent_replay.store.retention import (
    DeleteCounts,
    Reclaimed,
    count_attached,
    delete_otel_groups,
    delete_traces,
    otel_group_keys,
    reclaim_space,
)
from agent_replay.store.trace_detail import resolve_trace_id

BATCH = 500


@dataclass
class RetentionReport:
    """What a delete or prune removed (or, in a dry run, would remove)."""

    ids: list[str] = field(default_factory=list)
    counts: DeleteCounts = field(default_factory=DeleteCounts)
    dry_run: bool = False
    reclaimed: Reclaimed | None = None
    cutoff_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "ids": self.ids,
            "counts": self.counts.to_json(),
            "reclaimed": self.reclaimed.to_json() if self.reclaimed else None,
        }


def resolve_ids(store: Store, refs: Sequence[str]) -> list[str]:
    """Full ids for ids or unique prefixes, all resolved before anything is deleted.

    Raises:
        NotFoundError, AmbiguousIdError: as ``resolve_trace_id``.
    """
    return list(dict.fromkeys(resolve_trace_id(store, ref) for ref in refs))


def prunable(
    store: Store,
    *,
    before_ms: int,
    statuses: Sequence[str] = (),
    keep_tags: Sequence[str] = (),
) -> list[str]:
    """Ids of the traces started before ``before_ms`` (oldest first) that ``prune`` takes:
    of these statuses (any but ``running`` when none is given), without any of these tags."""
    condition = TraceRow.started_at_ms < before_ms
    if statuses:
        condition &= TraceRow.status.in_(list(statuses))
    else:
        condition &= TraceRow.status != "running"
    if keep_tags:
        tagged = TagRow.select(TagRow.trace_id).where(
            (TagRow.trace_id == TraceRow.id) & TagRow.tag.in_(list(keep_tags))
        )
        condition &= ~fn.EXISTS(tagged)
    query = (
        TraceRow.select(TraceRow.id)
        .where(condition)
        .order_by(TraceRow.started_at_ms, TraceRow.id)
        .tuples()
    )
    return [str(row[0]) for row in query.execute(store.db)]


def remove(
    store: Store,
    ids: Sequence[str],
    *,
    dry_run: bool = False,
    reclaim: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> RetentionReport:
    """Delete these traces (everything attached, their staged OTLP items), then reclaim.

    Args:
        dry_run: count what would go; delete nothing.
        progress: called with (traces deleted, traces to delete) after each batch.
    """
    report = RetentionReport(ids=list(ids), dry_run=dry_run)
    if dry_run:
        report.counts = count_attached(store, ids)
        return report
    groups = _otel_groups(store, ids)
    for start in range(0, len(ids), BATCH):
        report.counts.add(delete_traces(store, ids[start : start + BATCH]))
        if progress is not None:
            progress(min(start + BATCH, len(ids)), len(ids))
    if groups:
        delete_otel_groups(store, groups)
    if reclaim and ids:
        report.reclaimed = reclaim_space(store)
    return report


def _otel_groups(store: Store, ids: Sequence[str]) -> list[str]:
    """The staging groups the OTLP receiver built these traces from (if any came from it)."""
    built: set[str] = set()
    for start in range(0, len(ids), BATCH):
        query = TraceRow.select(TraceRow.id).where(
            TraceRow.id.in_(list(ids[start : start + BATCH])) & (TraceRow.source_format == "otlp")
        )
        built.update(str(row[0]) for row in query.tuples().execute(store.db))
    if not built:
        return []
    from agent_replay.services.otel.nodes import trace_id_for

    return [key for key in otel_group_keys(store) if trace_id_for(key) in built]
