"""Redaction of rows already stored: ``agent-replay redact`` and ``push``.

A store written before a rule existed (or with ``--no-redact``) can hold secrets. ``scrub``
applies today's rules (``redact``) to every text cell of the tables that hold what agents
did: traces, steps, decisions, snapshots, evals, annotations, spooled hook payloads and the
OTLP staging tables. A cell holding JSON (how payloads are stored) is redacted as a value and
re-encoded; other text as text. Then the full-text index is rebuilt and the freed pages are
given back (``VACUUM``, then the WAL truncated), so the old text is gone from the files too.

``redact_rows`` is the same cell redaction for rows copied to another store (``push``).

Reads and updates are built by Peewee's query builder from the models (one query for both
backends). The one SQL text is SQLite's ``VACUUM``, which the builder has no form for (the
module's entry in ``KEEP``, tests/meta/test_sql_strings.py).

A service module: the store and ``redact`` only; never Textual, Rich or the CLI.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from peewee import Field, TextField, Tuple

from agent_replay.services.redact import PLACEHOLDER, redact_string, redact_text, redact_value
from agent_replay.store.db import Store
from agent_replay.store.models import (
    AnnotationRow,
    BaseModel,
    DecisionRow,
    EvalRow,
    HookInboxRow,
    OtelLogRow,
    OtelSpanRow,
    SnapshotRow,
    StepRow,
    TraceRow,
)
from agent_replay.store.retention import file_bytes, reclaim_space
from agent_replay.store.statements import Statement, arg
from agent_replay.trace.io import dumps

TABLES: dict[type[BaseModel], Field | None] = {
    TraceRow: TraceRow.id,
    StepRow: StepRow.trace_id,
    DecisionRow: DecisionRow.trace_id,
    SnapshotRow: SnapshotRow.trace_id,
    EvalRow: EvalRow.trace_id,
    AnnotationRow: AnnotationRow.trace_id,
    HookInboxRow: None,
    OtelSpanRow: None,
    OtelLogRow: None,
}
"""Each table scrubbed, and the column naming its trace (``None``: not a trace's rows, scrubbed
only when no trace filter is given)."""
BATCH = 500
"""Rows read (and rewritten in one transaction) at a time."""


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


def text_columns(model: type[BaseModel]) -> list[Field]:
    """The columns of a table that can hold producer text: every text column but ids,
    timestamps, digests and the fixed vocabularies (status, step type). From the models, which
    a test keeps in agreement with the migrated schema."""
    return [
        f
        for f in model._meta.sorted_fields
        if isinstance(f, TextField)
        and f.column_name != "id"
        and not f.column_name.endswith(("_id", "_at", "_hash", "status", "step_type"))
    ]


def scrub(
    store: Store,
    trace_ids: Sequence[str] | None = None,
    *,
    dry_run: bool = False,
    progress: Callable[[str, int], None] | None = None,
    batch: int = BATCH,
) -> ScrubReport:
    """Apply today's redaction to the stored rows (of ``trace_ids``, else all), then rebuild the
    full-text index and reclaim the freed pages.

    Args:
        progress: called with (table, rows looked at) after each batch.
        batch: rows read (and rewritten in one transaction) at a time.
    """
    report = ScrubReport(dry_run)
    wanted = None if trace_ids is None else set(trace_ids)
    for model, trace_field in TABLES.items():
        if wanted is not None and trace_field is None:
            continue
        table = model._meta.table_name
        report.rows[table] = _scrub_table(
            store, model, trace_field, wanted, report, progress, batch
        )
    if not dry_run and any(report.rows.values()):
        _reclaim(store, report)
    return report


def _scrub_table(
    store: Store,
    model: type[BaseModel],
    trace_field: Field | None,
    wanted: set[str] | None,
    report: ScrubReport,
    progress: Callable[[str, int], None] | None,
    batch: int,
) -> int:
    """Scrub one table, a keyset batch at a time in primary-key order (a composite key as a
    row value). Rows are read raw (``Database.execute``: no field converters), so a cell is
    compared and written back exactly as stored."""
    table = model._meta.table_name
    key = list(model._meta.get_primary_keys())
    columns = text_columns(model)
    update = _update_statement(model, columns, key)
    selected = [*key, *columns, *([trace_field] if trace_field is not None else [])]
    width = len(key)
    changed = 0
    seen = 0
    last: tuple[Any, ...] | None = None
    while True:
        query = model.select(*selected).order_by(*key).limit(batch)
        if last is not None:
            query = query.where(Tuple(*key) > Tuple(*last))
        rows = store.db.execute(query).fetchall()
        if not rows:
            break
        last = tuple(rows[-1][:width])
        updates = []
        for row in rows:
            if wanted is not None and row[-1] not in wanted:
                continue
            cells = row[width : width + len(columns)]
            new = [redact_cell(cell) for cell in cells]
            if new != list(cells):
                for old_cell, new_cell in zip(cells, new, strict=True):
                    if old_cell != new_cell:
                        report.kinds.update(_kinds(str(new_cell)) - _kinds(str(old_cell)))
                updates.append((*new, *row[:width]))
        seen += len(rows)
        if updates and not report.dry_run:
            with store.write():
                update.run_many(store, updates)
        changed += len(updates)
        if progress is not None:
            progress(table, seen)
    return changed


def _update_statement(model: type[BaseModel], columns: list[Field], key: list[Field]) -> Statement:
    """``UPDATE table SET columns WHERE key``, its parameters the new values (in ``columns``
    order, the models' field order, which is how peewee orders ``SET``), then the key."""
    return Statement(
        lambda: model.update({column: arg() for column in columns}).where(
            *(field == arg() for field in key)
        )
    )


def _reclaim(store: Store, report: ScrubReport) -> None:
    """Rebuild the full-text index (it holds the words of the old text) and give the freed
    pages back, so the old text is gone from the file and its WAL.

    PostgreSQL: ``VACUUM (ANALYZE)``, as ``prune`` reclaims (``store.retention``). SQLite: the
    file rewritten (``VACUUM``, which even a store with incremental auto-vacuum needs here: the
    old text also lingers in the free space inside pages still in use), then the WAL truncated.
    """
    if not store.is_sqlite:
        report.reclaimed = reclaim_space(store).method
        return
    from agent_replay.store.migrations import rebuild_search_index

    before = file_bytes(store) or 0
    with store.write():
        rebuild_search_index(store.db)
    store.db.execute_sql("VACUUM")  # no query builder for it (a KEEP in test_sql_strings)
    with store.write():
        rebuild_search_index(store.db)  # VACUUM may renumber the rowids the index is keyed by
    store.db.pragma("wal_checkpoint", "TRUNCATE")
    report.reclaimed = "vacuum"
    report.file_bytes = (before, file_bytes(store) or 0)
