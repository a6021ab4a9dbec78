"""Removing traces and giving the space back.

Deleting a trace row removes everything attached to it: its steps, tags, evaluations, push
digest, and through the steps its decisions and snapshots (``ON DELETE CASCADE``, with foreign
keys on in every SQLite connection); the search index follows through its triggers (SQLite)
or with the rows (PostgreSQL). Forks of a deleted trace are traces of their own and stay.

Space: SQLite keeps freed pages in the file. A store created by this build has
``auto_vacuum=INCREMENTAL``, so ``PRAGMA incremental_vacuum`` hands them back at once; an
older store is converted with one ``VACUUM`` when enough is free to be worth it (a rewrite of
the file, after which the search index is rebuilt: ``VACUUM`` may renumber the rowids it is
keyed by). PostgreSQL reuses dead rows by itself; ``VACUUM (ANALYZE)`` makes them reusable now
and refreshes the planner's statistics.

The counts, deletes and reads go through the query builder. What keeps SQL text here are the
maintenance commands it has no form for: ``VACUUM`` (PostgreSQL's ``VACUUM (ANALYZE)`` of the
trace tables) and SQLite's ``incremental_vacuum``, which must run to its end
(``executescript``); SQLite's other pragmas go through peewee's ``pragma()``.

A store module: no services, Textual or Rich.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from peewee import Select, chunked, fn

from agent_replay.store.db import DB_ERRORS, Store
from agent_replay.store.models import (
    AnnotationRow,
    DecisionRow,
    EvalRow,
    OtelLogRow,
    OtelSpanRow,
    SnapshotRow,
    StepRow,
    TagRow,
    TraceRow,
)

_CHUNK = 500
VACUUM_FREE_SHARE = 0.25
"""A store without incremental auto-vacuum is rewritten (``VACUUM``) when at least this share
of its pages is free..."""
VACUUM_FREE_BYTES = 4 * 1024 * 1024
"""...and at least this much."""

ATTACHED = ("steps", "decisions", "snapshots", "evals", "tags", "annotations")
"""What goes with a trace, as counted in ``DeleteCounts``."""
_ATTACHED_MODELS = (StepRow, DecisionRow, SnapshotRow, EvalRow, TagRow, AnnotationRow)
"""The models of ``ATTACHED``, in its order."""


@dataclass
class DeleteCounts:
    """Rows removed (or that would be): traces and what was attached to them."""

    traces: int = 0
    steps: int = 0
    decisions: int = 0
    snapshots: int = 0
    evals: int = 0
    tags: int = 0
    annotations: int = 0

    def add(self, other: DeleteCounts) -> None:
        for name in ("traces", *ATTACHED):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in ("traces", *ATTACHED)}


def count_attached(store: Store, ids: Sequence[str]) -> DeleteCounts:
    """How many rows these traces would take with them (one read per chunk of ids)."""
    counts = DeleteCounts()
    for chunk in chunked(ids, _CHUNK):
        columns: list[Any] = [TraceRow.select(fn.COUNT(TraceRow.id)).where(TraceRow.id.in_(chunk))]
        columns.extend(
            model.select(fn.COUNT(model.trace_id)).where(model.trace_id.in_(chunk))
            for model in _ATTACHED_MODELS
        )
        row = Select(columns=columns).tuples().execute(store.db)[0]
        counts.add(DeleteCounts(*(int(v) for v in row)))
    return counts


def delete_traces(store: Store, ids: Sequence[str]) -> DeleteCounts:
    """Delete these traces and everything attached, in one transaction per chunk of ids.

    Returns:
        What was removed.
    """
    counts = DeleteCounts()
    for chunk in chunked(ids, _CHUNK):
        with store.write():
            counts.add(count_attached(store, chunk))
            TraceRow.delete().where(TraceRow.id.in_(chunk)).execute(store.db)
    return counts


def delete_otel_groups(store: Store, group_keys: Sequence[str]) -> int:
    """Drop the OTLP receiver's staged spans and log records of these groups (so a deleted
    trace is not rebuilt from them when a late span arrives). Returns the rows removed."""
    removed = 0
    for chunk in chunked(group_keys, _CHUNK):
        with store.write():
            for model in (OtelSpanRow, OtelLogRow):
                deleted = model.delete().where(model.group_key.in_(chunk)).execute(store.db)
                removed += max(0, int(deleted or 0))
    return removed


def otel_group_keys(store: Store) -> list[str]:
    """Every group key staged by the OTLP receiver (an index scan)."""
    spans = OtelSpanRow.select(OtelSpanRow.group_key).distinct()
    logs = (
        OtelLogRow.select(OtelLogRow.group_key)
        .distinct()
        .where(OtelLogRow.group_key.is_null(False))
    )
    return [str(r[0]) for r in (spans | logs).tuples().execute(store.db)]


@dataclass
class Reclaimed:
    """What giving space back did."""

    method: str
    """``incremental_vacuum``, ``vacuum``, ``vacuum_analyze`` or ``none``."""
    bytes_before: int | None = None
    """The database file's size (SQLite only)."""
    bytes_after: int | None = None

    @property
    def freed(self) -> int | None:
        if self.bytes_before is None or self.bytes_after is None:
            return None
        return max(0, self.bytes_before - self.bytes_after)

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "bytes_freed": self.freed,
        }


def reclaim_space(store: Store, *, full: bool = False) -> Reclaimed:
    """Give the space of deleted rows back (see the module docstring).

    Args:
        full: rewrite a SQLite store that has no incremental auto-vacuum even when little is
            free (and convert it, so later reclaims are incremental).
    """
    if not store.is_sqlite:
        try:
            store.db.execute_sql(
                "VACUUM (ANALYZE) traces, steps, decisions, snapshots, evals, tags, annotations, "
                "push_digests"
            )
        except DB_ERRORS:  # not the tables' owner: autovacuum will do it
            return Reclaimed("none")
        return Reclaimed("vacuum_analyze")
    from agent_replay.store.search import catch_up

    # A deleted row that was indexed waits in the search queue with its old text (the
    # contentless index deletes by replaying it): fold the queue first, so that space is free.
    catch_up(store)
    before = file_bytes(store)

    def pragma(name: str) -> int:
        return int(store.db.pragma(name))

    mode = pragma("auto_vacuum")
    free_pages = pragma("freelist_count")
    page_size = pragma("page_size")
    method = "none"
    if mode == 2:  # incremental
        if free_pages:
            # executescript steps the pragma to the end: Python's execute() steps it once,
            # which frees one page.
            store.db.connection().executescript("PRAGMA incremental_vacuum;")
            method = "incremental_vacuum"
    else:
        total = max(1, pragma("page_count"))
        free_bytes = free_pages * page_size
        if full or (free_pages / total >= VACUUM_FREE_SHARE and free_bytes >= VACUUM_FREE_BYTES):
            from agent_replay.store.migrations import rebuild_search_index

            store.db.pragma("auto_vacuum", "INCREMENTAL")
            store.db.execute_sql("VACUUM")
            with store.write():
                rebuild_search_index(store.db)
            method = "vacuum"
    if method != "none":
        store.db.pragma("wal_checkpoint", "TRUNCATE")
    return Reclaimed(method, before, file_bytes(store))


def file_bytes(store: Store) -> int | None:
    """The SQLite file and its WAL, in bytes (``None`` for PostgreSQL)."""
    if store.path is None:
        return None
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += store.path.with_name(store.path.name + suffix).stat().st_size
        except OSError:
            pass
    return total
