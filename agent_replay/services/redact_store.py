"""Redaction of rows already stored: ``agent-replay redact`` and ``push``.

A store written before a rule existed (or with ``--no-redact``) can hold secrets. ``scrub``
applies today's rules (``redact``) to every text cell of the tables that hold what agents
did: traces, steps, decisions, snapshots, evals, annotations, spooled hook payloads and the
OTLP staging tables. A cell holding JSON (how payloads are stored) is redacted as a value and
re-encoded; other text as text. Then the full-text index is rebuilt and the freed pages are
given back (``VACUUM``, then the WAL truncated), so the old text is gone from the files too.

``redact_rows`` is the same cell redaction for rows copied to another store (``push``).

A service module: the store and ``redact`` only; never Textual, Rich or the CLI.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_replay.services.redact import PLACEHOLDER, redact_string, redact_text, redact_value
from agent_replay.store.db import DB_ERRORS, Store
from agent_replay.store.retention import file_bytes
from agent_replay.store.writes import execute
from agent_replay.trace.io import dumps

TABLES: dict[str, str | None] = {
    "traces": "id",
    "steps": "trace_id",
    "decisions": "trace_id",
    "snapshots": "trace_id",
    "evals": "trace_id",
    "annotations": "trace_id",
    "hook_inbox": None,
    "otel_spans": None,
    "otel_logs": None,
}
"""Each table scrubbed, and the column naming its trace (``None``: not a trace's rows, scrubbed
only when no trace filter is given)."""
BATCH = 500


def _kinds(text: str) -> Counter[str]:
    return Counter(m.group()[10:-1] for m in PLACEHOLDER.finditer(text))


def redact_cell(value: Any) -> Any:
    """One stored cell redacted: JSON text as a value (re-encoded as the store encodes it),
    other text as text; anything else as it is."""
    if not isinstance(value, str) or len(value) < 6:
        return value
    if value[:1] in ("{", "[", '"'):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return redact_text(value)
        if isinstance(parsed, str):
            redacted: Any = redact_string(parsed)
        elif isinstance(parsed, dict | list):
            redacted = redact_value(parsed)
        else:
            return value
        return value if redacted == parsed else dumps(redacted)
    return redact_string(value)


def redact_rows(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Rows with every cell redacted (``push`` into a team store)."""
    return [tuple(redact_cell(cell) for cell in row) for row in rows]


@dataclass
class ScrubReport:
    """What a scrub found (and, unless a dry run, replaced)."""

    dry_run: bool
    kinds: Counter[str] = field(default_factory=Counter)
    """Secrets found, per kind (``github_token``: 3)."""
    rows: dict[str, int] = field(default_factory=dict)
    """Rows changed, per table."""
    reclaimed: str = "none"
    """How freed space was given back: ``vacuum``, ``vacuum_analyze`` (PostgreSQL), ``none``."""
    file_bytes: tuple[int, int] | None = None
    """The SQLite file and WAL size before and after."""

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "secrets": sum(self.kinds.values()),
            "kinds": dict(sorted(self.kinds.items())),
            "rows": {k: v for k, v in self.rows.items() if v},
            "reclaimed": self.reclaimed,
            **({"file_bytes": list(self.file_bytes)} if self.file_bytes else {}),
        }


def _text_columns(store: Store, table: str) -> list[str]:
    if store.is_sqlite:
        rows = execute(store, f"PRAGMA table_info({table})").fetchall()
        columns = [(str(r[1]), str(r[2]).upper()) for r in rows]
    else:
        rows = execute(
            store,
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = ? AND table_schema = current_schema()",
            [table],
        ).fetchall()
        columns = [(str(r[0]), str(r[1]).upper()) for r in rows]
    return [
        name
        for name, kind in columns
        if ("TEXT" in kind or "CHAR" in kind or kind in ("", "JSON"))
        and name != "id"
        and not name.endswith(("_id", "_at", "_hash", "status", "step_type"))
    ]


def _key(store: Store, table: str) -> str:
    return "rowid" if store.is_sqlite else "ctid"


def scrub(
    store: Store,
    trace_ids: Sequence[str] | None = None,
    *,
    dry_run: bool = False,
    progress: Callable[[str, int], None] | None = None,
) -> ScrubReport:
    """Apply today's redaction to the stored rows (of ``trace_ids``, else all), then rebuild the
    full-text index and reclaim the freed pages.

    Args:
        progress: called with (table, rows looked at) after each batch.
    """
    report = ScrubReport(dry_run)
    wanted = None if trace_ids is None else set(trace_ids)
    for table, trace_column in TABLES.items():
        if wanted is not None and trace_column is None:
            continue
        try:
            columns = _text_columns(store, table)
        except DB_ERRORS:
            continue
        if not columns:
            continue
        report.rows[table] = _scrub_table(
            store, table, columns, trace_column, wanted, report, progress
        )
    if not dry_run and any(report.rows.values()):
        _reclaim(store, report)
    return report


def _scrub_table(
    store: Store,
    table: str,
    columns: list[str],
    trace_column: str | None,
    wanted: set[str] | None,
    report: ScrubReport,
    progress: Callable[[str, int], None] | None,
) -> int:
    key = _key(store, table)
    names = ", ".join(f'"{c}"' for c in columns)
    select = f"SELECT {key}, {names}{f', {trace_column}' if trace_column else ''} FROM {table}"
    changed = 0
    seen = 0
    last: Any = None
    while True:
        if store.is_sqlite:
            where = "" if last is None else f" WHERE {key} > ?"
            rows = execute(
                store,
                f"{select}{where} ORDER BY {key} LIMIT {BATCH}",
                [] if last is None else [last],
            ).fetchall()
        else:  # ctid has no keyset order worth relying on: one pass
            rows = [] if last is not None else execute(store, select).fetchall()
            last = True
        if not rows:
            break
        if store.is_sqlite:
            last = rows[-1][0]
        updates = []
        for row in rows:
            if wanted is not None and row[-1] not in wanted:
                continue
            cells = row[1 : 1 + len(columns)]
            new = [redact_cell(cell) for cell in cells]
            if new != list(cells):
                for old_cell, new_cell in zip(cells, new, strict=True):
                    if old_cell != new_cell:
                        report.kinds.update(_kinds(str(new_cell)) - _kinds(str(old_cell)))
                updates.append((*new, row[0]))
        seen += len(rows)
        if updates and not report.dry_run:
            assignments = ", ".join(f'"{c}" = ?' for c in columns)
            with store.write():
                for values in updates:
                    execute(store, f"UPDATE {table} SET {assignments} WHERE {key} = ?", values)
        changed += len(updates)
        if progress is not None:
            progress(table, seen)
        if not store.is_sqlite:
            break
    return changed


def _reclaim(store: Store, report: ScrubReport) -> None:
    """Rebuild the full-text index (it holds the words of the old text) and give the freed
    pages back, so the old text is gone from the file and its WAL."""
    if not store.is_sqlite:
        try:
            store.db.execute_sql("VACUUM (ANALYZE) traces, steps, decisions, snapshots, evals")
            report.reclaimed = "vacuum_analyze"
        except DB_ERRORS:
            report.reclaimed = "none"
        return
    from agent_replay.store.migrations import rebuild_search_index

    before = file_bytes(store) or 0
    with store.write():
        rebuild_search_index(store.db)
    store.db.execute_sql("VACUUM")
    with store.write():
        rebuild_search_index(store.db)  # VACUUM may renumber the rowids the index is keyed by
    store.db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    report.reclaimed = "vacuum"
    report.file_bytes = (before, file_bytes(store) or 0)
