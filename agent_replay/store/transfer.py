"""Copying whole traces between stores, row for row (``push``: a local store to a team store).

A trace travels as its rows (the trace, tags, steps, decisions, snapshots, evals, annotations),
exactly as stored, so the copy is identical: ids, times, ingest time, source format, open steps.
Each copy carries a digest of its rows; the target keeps the digest it was last pushed with
(``push_digests``), so a trace whose rows did not change since is skipped, and one that grew is
replaced (its evaluations and annotations made on the target are kept).

A store module: no services, Textual or Rich.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_replay.store.db import Store
from agent_replay.store.mapping import (
    ANNOTATION_COLUMNS,
    DECISION_COLUMNS,
    EVAL_COLUMNS,
    SNAPSHOT_COLUMNS,
    STEP_COLUMNS,
    TAG_COLUMNS,
    TRACE_COLUMNS,
    quote,
)
from agent_replay.store.writes import execute, insert_many
from agent_replay.trace.io import dumps_bytes

_CHUNK = 500

# table -> (columns, the column naming the trace, the order rows are digested in)
TABLES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "traces": (TRACE_COLUMNS, "id", "id"),
    "tags": (TAG_COLUMNS, "trace_id", "position, tag"),
    "steps": (STEP_COLUMNS, "trace_id", "step_number"),
    "decisions": (DECISION_COLUMNS, "trace_id", "step_id"),
    "snapshots": (SNAPSHOT_COLUMNS, "trace_id", "step_id"),
    "evals": (EVAL_COLUMNS, "trace_id", "created_at_ms, id"),  # per store: eval_order
    "annotations": (ANNOTATION_COLUMNS, "trace_id", "created_at_ms, id"),  # annotation_order
}


@dataclass
class TraceCopy:
    """One trace's rows, table by table (in ``TABLES`` order), and their digest."""

    trace_id: str
    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    digest: str = ""

    @property
    def steps(self) -> int:
        return len(self.rows.get("steps", []))


def trace_ids(store: Store, where: str = "1 = 1", params: Sequence[Any] = ()) -> list[str]:
    """Ids of the traces matching a condition on ``traces t``, oldest first."""
    rows = execute(
        store, f"SELECT t.id FROM traces t WHERE {where} ORDER BY t.started_at_ms, t.id", params
    ).fetchall()
    return [str(r[0]) for r in rows]


def read_traces(store: Store, ids: Sequence[str]) -> list[TraceCopy]:
    """The rows of these traces (those that exist), with their digests."""
    copies: dict[str, TraceCopy] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        marks = ", ".join(["?"] * len(chunk))
        for table, (columns, key, order) in TABLES.items():
            if table == "evals":  # their write order is part of the trace (see eval_order)
                from agent_replay.store.queries import eval_order

                order = eval_order(store)
            elif table == "annotations":
                from agent_replay.store.queries import annotation_order

                order = annotation_order(store)
            names = ", ".join(quote(c) for c in columns)
            rows = execute(
                store,
                f"SELECT {names} FROM {table} WHERE {key} IN ({marks}) ORDER BY {key}, {order}",
                chunk,
            ).fetchall()
            for row in rows:
                trace_id = row[columns.index(key)]
                if table == "traces":
                    copies[trace_id] = TraceCopy(trace_id, {t: [] for t in TABLES})
                copy = copies.get(trace_id)
                if copy is not None:
                    copy.rows[table].append(tuple(row))
    for copy in copies.values():
        copy.digest = digest(copy)
    return [copies[i] for i in ids if i in copies]


def digest(copy: TraceCopy) -> str:
    """A digest of a trace's rows: equal digests, equal rows."""
    hasher = hashlib.blake2b(digest_size=16)
    for table in TABLES:
        rows = copy.rows.get(table, [])
        if table == "annotations" and not rows:
            continue  # digests of traces pushed before annotations existed stay the same
        hasher.update(table.encode())
        hasher.update(dumps_bytes([list(r) for r in rows]))
    return hasher.hexdigest()


def stored_digests(store: Store, ids: Sequence[str]) -> dict[str, str]:
    """The digest each of these traces was last pushed with (traces never pushed are absent,
    as are traces deleted since: the digest goes with its trace)."""
    found: dict[str, str] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        marks = ", ".join(["?"] * len(chunk))
        for trace_id, value in execute(
            store,
            f"SELECT d.trace_id, d.digest FROM push_digests d JOIN traces t ON t.id = d.trace_id "
            f"WHERE d.trace_id IN ({marks})",
            chunk,
        ).fetchall():
            found[str(trace_id)] = str(value)
    return found


def write_traces(store: Store, copies: Sequence[TraceCopy], now_ms: int) -> tuple[int, int]:
    """Write these traces into ``store`` in one transaction: new ones inserted, existing ones
    replaced in place (the trace row updated, its steps, tags, decisions and snapshots
    rewritten, its evaluations and annotations upserted by id: those made on this store stay).

    Returns:
        ``(inserted, replaced)``.
    """
    if not copies:
        return 0, 0
    from agent_replay.store.writes import existing_trace_ids

    with store.write():
        ids = [c.trace_id for c in copies]
        existing = existing_trace_ids(store, ids)
        replaced = [c for c in copies if c.trace_id in existing]
        for start in range(0, len(replaced), _CHUNK):
            chunk = [c.trace_id for c in replaced[start : start + _CHUNK]]
            marks = ", ".join(["?"] * len(chunk))
            # Steps take their decisions and snapshots with them (ON DELETE CASCADE).
            for table in ("steps", "tags", "push_digests"):
                execute(store, f"DELETE FROM {table} WHERE trace_id IN ({marks})", chunk)
            for table in ("evals", "annotations"):
                row_ids = [r[0] for c in replaced[start : start + _CHUNK] for r in c.rows[table]]
                for first in range(0, len(row_ids), _CHUNK):
                    part = row_ids[first : first + _CHUNK]
                    execute(
                        store,
                        f"DELETE FROM {table} WHERE id IN ({', '.join(['?'] * len(part))})",
                        part,
                    )
        sets = ", ".join(f"{quote(c)} = ?" for c in TRACE_COLUMNS[1:])
        for copy in replaced:
            (row,) = copy.rows["traces"]
            execute(store, f"UPDATE traces SET {sets} WHERE id = ?", [*row[1:], row[0]])
        fresh = [c for c in copies if c.trace_id not in existing]
        insert_many(store, "traces", TRACE_COLUMNS, [r for c in fresh for r in c.rows["traces"]])
        for table, (columns, _, _) in TABLES.items():
            if table != "traces":
                insert_many(store, table, columns, [r for c in copies for r in c.rows[table]])
        insert_many(
            store,
            "push_digests",
            ("trace_id", "digest", "pushed_ms"),
            [(c.trace_id, c.digest, now_ms) for c in copies],
        )
    return len(fresh), len(replaced)
