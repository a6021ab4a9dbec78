"""Ingest: whole traces into the store, validated strictly, all-or-nothing per trace.

The fast path validates a batch, builds every row, and inserts the batch table by table with
``executemany`` inside one transaction. If the batch hits a constraint, it is retried trace by
trace, each in its own savepoint, so one bad trace never takes the others down with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import StoreError, TraceFormatError
from agent_replay.services.derive import derive_trace
from agent_replay.services.redact import redact_value
from agent_replay.store import ids
from agent_replay.store.db import DB_ERRORS, Store
from agent_replay.store.mapping import (
    TraceRows,
    annotation_row,
    decision_row,
    enc,
    snapshot_row,
    step_row,
    trace_row,
)
from agent_replay.store.writes import existing_trace_ids, insert_trace_rows
from agent_replay.trace.base import time_ms
from agent_replay.trace.models import Trace
from agent_replay.trace.validate import validate_trace

BATCH_SIZE = 500
SEARCH_BACKLOG_PER_BATCH = 2_000
"""Queued search-index rows (``store/search``) each ingest batch folds in beyond its own: a
bulk load leaves the index current (the first search after it reads, it doesn't index a
million rows), and an older backlog drains a bounded step at a time."""


@dataclass
class Rejection:
    """A trace that was not ingested, where it was, and why."""

    where: str
    reason: str
    problems: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class IngestReport:
    """What an ingest did: ids written (or that would be, in a dry run) and rejections."""

    ingested: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    steps: int = 0


def prepare(
    trace: Trace,
    *,
    created_ms: int,
    extra_tags: Sequence[str] = (),
    source_format: str | None = None,
    otel_trace_id: str | None = None,
) -> TraceRows:
    """Assign ids, derive missing totals, and build every row of one validated trace.

    Mutates ``trace``: it ends up exactly as stored (ids filled, totals derived).
    """
    derive_trace(trace)
    if extra_tags:
        trace.tags = list(dict.fromkeys([*trace.tags, *extra_tags]))
    trace_id = trace.id or ids.new_id(ids.TRACE)
    trace.id = trace_id
    fresh = iter(ids.new_ids(ids.STEP, sum(1 for s in trace.steps if s.id is None)))
    rows = TraceRows(
        trace_row(
            trace,
            trace_id,
            created_ms=created_ms,
            step_count=len(trace.steps),
            otel_trace_id=otel_trace_id,
            source_format=source_format,
        ),
        tags=[(trace_id, tag, position) for position, tag in enumerate(trace.tags)],
    )
    for step in trace.steps:
        step_id = step.id or next(fresh)
        step.id = step_id
        rows.steps.append(step_row(step, step_id, trace_id))
        decision = decision_row(step, step_id, trace_id)
        if decision is not None:
            rows.decisions.append(decision)
        snapshot = snapshot_row(step, step_id, trace_id)
        if snapshot is not None:
            rows.snapshots.append(snapshot)
    for evaluation in trace.evals:
        evaluation.id = evaluation.id or ids.new_id(ids.EVAL)
        rows.evals.append(
            (
                evaluation.id,
                trace_id,
                evaluation.evaluator,
                evaluation.score,
                1 if evaluation.passed else 0,
                evaluation.threshold,
                enc(evaluation.details),
                evaluation.model,
                evaluation.cost_usd,
                evaluation.created_at,
                time_ms(evaluation.created_at),
            )
        )
    for annotation in trace.annotations:
        annotation.id = annotation.id or ids.new_id(ids.ANNOTATION)
        rows.annotations.append(annotation_row(annotation, annotation.id, trace_id))
    return rows


def ingest_trace(
    db: Store,
    trace: Trace | dict[str, Any],
    *,
    tags: Sequence[str] = (),
    source_format: str | None = None,
    clock: Clock | None = None,
    redact: bool = True,
) -> Trace:
    """Validate one trace strictly and write it in one transaction.

    Args:
        db: the store (from ``ensure_database``).
        trace: a ``Trace`` or its JSON object.
        tags: extra tags to add.
        clock: stamps the ingest time (the ordering key of a trace with no ``started_at``).
        redact: replace secrets before anything is written (``redact.redact_value``); on by
            default, as on every write path.

    Returns:
        The trace as stored, with its id and step ids.

    Raises:
        TraceFormatError: the trace is invalid (every problem, with paths).
        StoreError: a trace with the same id exists, or the write failed.
    """
    data = trace.model_dump() if isinstance(trace, Trace) else trace
    model = validate_trace(redact_value(data) if redact else data).trace
    try:
        rows = prepare(
            model, created_ms=_now_ms(clock), extra_tags=tags, source_format=source_format
        )
    except (TypeError, ValueError, OverflowError) as exc:  # a payload JSON can't encode
        raise TraceFormatError([("", f"cannot encode the trace as JSON: {exc}")]) from exc
    with db.write():
        if model.id and existing_trace_ids(db, [model.id]):
            raise StoreError(f"a trace with id {model.id} is already in the store")
        try:
            insert_trace_rows(db, [rows])
        except DB_ERRORS + (OverflowError,) as exc:
            raise StoreError(f"cannot write trace {model.id}: {exc}") from exc
    return model


ItemSource = Iterable[tuple[str, Any]]


def _now_ms(clock: Clock | None) -> int:
    now = (clock or SystemClock()).now()
    return int(now.timestamp() * 1000)


def ingest_many(
    store: Store | None,
    items: ItemSource,
    *,
    tags: Sequence[str] = (),
    dry_run: bool = False,
    source_format: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    batch_size: int = BATCH_SIZE,
    clock: Clock | None = None,
    known_ids: Callable[[list[str]], set[str]] | None = None,
    redact: bool = True,
) -> IngestReport:
    """Ingest ``(where, object)`` pairs; an object that is an exception is a parse failure.

    Args:
        store: where to write (``None`` only with ``dry_run``).
        items: e.g. ``("line 3", {...})`` from a JSONL reader.
        dry_run: validate only; nothing is written.
        progress: called with (traces done, steps done) after each batch.
        known_ids: in a dry run, tells which ids a store already holds (reported as they
            would be by a real run).
        redact: replace secrets before anything is written (on by default).
    """
    report = IngestReport()
    batch: list[tuple[str, TraceRows]] = []
    seen: set[str] = set()

    def flush() -> None:
        if not batch:
            return
        if not dry_run:
            assert store is not None
            _write_batch(store, batch, report)
        else:
            stored = known_ids([rows.trace[0] for _, rows in batch]) if known_ids else set()
            for where, rows in batch:
                if rows.trace[0] in stored:
                    report.rejected.append(Rejection(where, _already_stored(rows.trace[0])))
                else:
                    report.ingested.append(rows.trace[0])
                    report.steps += len(rows.steps)
        batch.clear()
        if progress is not None:
            progress(len(report.ingested), report.steps)

    created_ms = _now_ms(clock)
    for where, obj in items:
        if isinstance(obj, Exception):
            report.rejected.append(Rejection(where, str(obj)))
            continue
        try:
            model = validate_trace(redact_value(obj) if redact else obj, label=where).trace
        except TraceFormatError as exc:
            report.rejected.append(Rejection(where, exc.message, exc.problems))
            continue
        if model.id is not None and model.id in seen:
            report.rejected.append(
                Rejection(where, f"trace id {model.id} appears twice in the input")
            )
            continue
        try:
            rows = prepare(
                model, created_ms=created_ms, extra_tags=tags, source_format=source_format
            )
        except (TypeError, ValueError, OverflowError) as exc:  # a payload JSON can't encode
            report.rejected.append(Rejection(where, f"cannot encode the trace as JSON: {exc}"))
            continue
        seen.add(rows.trace[0])
        batch.append((where, rows))
        if len(batch) >= batch_size:
            flush()
    flush()
    return report


def _already_stored(trace_id: str) -> str:
    return f"a trace with id {trace_id} is already in the store"


def _write_batch(store: Store, batch: list[tuple[str, TraceRows]], report: IngestReport) -> None:
    with store.write():
        existing = existing_trace_ids(store, [rows.trace[0] for _, rows in batch])
        fresh = []
        for where, rows in batch:
            if rows.trace[0] in existing:
                report.rejected.append(Rejection(where, _already_stored(rows.trace[0])))
            else:
                fresh.append((where, rows))
        try:
            with store.db.atomic():  # a savepoint: undo the batch, keep the transaction
                insert_trace_rows(store, [rows for _, rows in fresh])
            written = fresh
        except DB_ERRORS + (OverflowError,):  # a bad row in the batch: find it trace by trace
            written = []
            for where, rows in fresh:
                try:
                    with store.db.atomic():
                        insert_trace_rows(store, [rows])
                    written.append((where, rows))
                except DB_ERRORS + (OverflowError,) as exc:
                    report.rejected.append(Rejection(where, f"cannot write trace: {exc}"))
        if written and store.is_sqlite:
            # Index what this batch queued (and a bounded step of any backlog) in its own
            # transaction: about a tenth of the batch's cost, paid as it goes.
            from agent_replay.store.migrations import catch_up_search_index

            queued = sum(1 + len(rows.steps) for _, rows in written)
            catch_up_search_index(store.db, limit=queued + SEARCH_BACKLOG_PER_BATCH)
    report.ingested.extend(rows.trace[0] for _, rows in written)
    report.steps += sum(len(rows.steps) for _, rows in written)
