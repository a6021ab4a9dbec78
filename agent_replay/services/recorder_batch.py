"""The recorder's group-commit path: a batch of clean steps in one pass, or nothing at all.

Live capture (``record``, ``run``) holds the steps that arrive within one commit window and
hands them to ``TraceRecorder.record_steps_if_clean``, which comes here: one redaction and
validation pass, one ``executemany`` per table and one ``step_count`` update for the batch,
instead of a handful of statements per step. The rows are exactly those the recorder's one-by-one
calls would write, through the same redactor, format models and row builders; a batch that
would need any repair or warning writes nothing, and the caller replays it through those calls.

Imports the store side only (``recorder_rows``, ``store/writes``): the recorder calls in, never
the other way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from agent_replay.errors import NotFoundError, TraceFormatError
from agent_replay.services import costs
from agent_replay.services.derive import duration_between
from agent_replay.services.recorder_rows import (
    DECISION_FIELDS,
    SNAPSHOT_FIELDS,
    STEP_FIELDS,
    add_steps,
    delete_steps,
    stored_numbers,
    trace_exists,
)
from agent_replay.services.redact import Redactor
from agent_replay.store import ids
from agent_replay.store.db import Store
from agent_replay.store.mapping import decision_row, snapshot_row, step_row
from agent_replay.store.models import DecisionRow, SnapshotRow, StepRow
from agent_replay.store.writes import insert_rows
from agent_replay.trace.base import STEP_TYPES, is_canonical
from agent_replay.trace.models import Step
from agent_replay.trace.validate import validate_trace

PendingStep = tuple[dict[str, Any], str | None, bool]
"""A step for the batch: its object (``step_number`` set), the producer's call id (or
``None``), and whether it is still open (its result comes with ``end_step``)."""

# Step fields whose text is a step type or a timestamp (see ``_redact_step``).
_PLAIN_TEXT_FIELDS = frozenset({"step_type", "started_at", "ended_at"})


def record_clean_batch(
    store: Store,
    trace_id: str,
    items: Sequence[PendingStep],
    *,
    redact: Redactor,
    lenient: bool,
) -> bool:
    """Record the steps if none needs a repair; ``False`` (nothing written) otherwise.

    See ``TraceRecorder.record_steps_if_clean``, the API this implements.

    Raises:
        NotFoundError: there is no such trace.
    """
    if not items:
        return True
    # Inside a caller's transaction (``pump``'s batch), no savepoint of its own: on SQLite a
    # savepoint journals every page the inserts touch (2.5x their cost); every check that
    # can refuse the batch runs before the first insert, and a failing insert undoes the
    # rows already in (``_insert_batch``), so it is still all or nothing.
    nested = store.is_sqlite and store.db.in_transaction()
    with contextlib.nullcontext() if nested else store.write():
        if not trace_exists(store, trace_id):
            raise NotFoundError(f"no trace {trace_id!r} to record into")
        steps = _clean_steps(store, trace_id, items, redact=redact, lenient=lenient)
        if steps is None:
            return False
        fresh = iter(ids.new_ids(ids.STEP, len(steps)))
        step_rows, decision_rows, snapshot_rows = [], [], []
        for step, (_, call_id, is_open) in zip(steps, items, strict=True):
            if step.duration_ms is None:
                step.duration_ms = duration_between(step.started_at, step.ended_at)
            if costs.needs_price(step):
                costs.price_step(step)
            step.id = step.id or next(fresh)
            step_rows.append(step_row(step, step.id, trace_id, call_id=call_id, is_open=is_open))
            decision = decision_row(step, step.id, trace_id)
            if decision is not None:
                decision_rows.append(decision)
            snapshot = snapshot_row(step, step.id, trace_id)
            if snapshot is not None:
                snapshot_rows.append(snapshot)
        _insert_batch(store, trace_id, step_rows, decision_rows, snapshot_rows, undo=nested)
        return True


def _clean_steps(
    store: Store,
    trace_id: str,
    items: Sequence[PendingStep],
    *,
    redact: Redactor,
    lenient: bool,
) -> list[Step] | None:
    """The batch's steps, validated, with their links set; ``None`` when any step would need
    a repair or a warning (invalid values, a step number already used, a link to a missing or
    later step)."""
    datas: list[dict[str, Any]] = []
    links: list[tuple[Any, Any]] = []
    for data, _, _ in items:
        redacted = _redact_step(redact, data)
        links.append((redacted.pop("parent_step", None), redacted.pop("caused_by_step", None)))
        datas.append(redacted)
    given = [d.get("step_number") for d in datas]
    numbers = [n for n in given if type(n) is int]
    if len(numbers) != len(given) or len(set(numbers)) != len(numbers):
        return None
    targets = {t for pair in links for t in pair if t is not None}
    stored = stored_numbers(store, trace_id, [*numbers, *(t for t in targets if type(t) is int)])
    if stored.intersection(numbers):
        return None
    try:
        validated = validate_trace({"agent_name": "recorder", "steps": datas}, lenient=lenient)
    except TraceFormatError:
        return None
    if validated.warnings:
        return None
    steps = validated.trace.steps
    known = set(stored)
    for step, (parent, caused_by) in zip(steps, links, strict=True):
        for link, value in (("parent_step", parent), ("caused_by_step", caused_by)):
            if value is None:
                continue
            if lenient and isinstance(value, str) and value.strip().isdigit():
                value = int(value)  # as the recorder's one-by-one path coerces it
            if type(value) is not int or not 0 < value < step.step_number:
                return None
            if value not in known:
                return None
            setattr(step, link, value)
        known.add(step.step_number)
    return steps


def _insert_batch(
    store: Store,
    trace_id: str,
    step_rows: list[tuple[Any, ...]],
    decision_rows: list[tuple[Any, ...]],
    snapshot_rows: list[tuple[Any, ...]],
    *,
    undo: bool,
) -> None:
    """Insert a batch's rows and count its steps; ``undo``: outside a savepoint, so a
    failure deletes what got in before it is raised (children first, by step id)."""
    try:
        insert_rows(store, StepRow, STEP_FIELDS, step_rows)
        insert_rows(store, DecisionRow, DECISION_FIELDS, decision_rows)
        insert_rows(store, SnapshotRow, SNAPSHOT_FIELDS, snapshot_rows)
        add_steps(store, trace_id, len(step_rows))
    except BaseException:
        if undo:
            delete_steps(store, [row[0] for row in step_rows])
        raise


def _redact_step(redact: Redactor, data: dict[str, Any]) -> dict[str, Any]:
    """``redact(data)`` for a step object, minus the values that can't hold a secret
    (``None``, numbers, a step type, a canonical timestamp), which it would return as they
    are: every string otherwise costs a pattern scan. Always a new dict."""
    kept: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in data.items():
        if (
            value is None
            or type(value) in (int, float, bool)
            or (
                key in _PLAIN_TEXT_FIELDS
                and type(value) is str
                and (value in STEP_TYPES or is_canonical(value))
            )
        ):
            kept[key] = value
        else:
            rest[key] = value
    redacted: dict[str, Any] = redact(rest)
    redacted.update(kept)
    return redacted
