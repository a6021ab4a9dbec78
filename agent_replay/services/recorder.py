"""``TraceRecorder``: the incremental write engine every live capture path uses.

Each call is one small ``BEGIN IMMEDIATE`` transaction, so parallel processes (hooks) recording
into one store never collide: the next step number, pairing a result with its call and closing a
trace are read-then-write operations done under the write lock. Every value passes through the
trace format's models (strict for the SDK, lenient for capture paths) and the same row builders
ingest uses, so a trace recorded step by step is identical to the same trace ingested at once.

This module is the API and its one-by-one path (validation, repairs, warnings). Beside it:
``recorder_rows`` holds every statement the recorder reads and writes the store with (Peewee's
query builder, the per-step ones compiled once), and ``recorder_batch`` the group-commit path
behind ``record_steps_if_clean``. Both are called from here; neither calls back.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import NotFoundError, TraceFormatError, UsageError
from agent_replay.services import costs, limits
from agent_replay.services import recorder_rows as rows
from agent_replay.services.derive import duration_between
from agent_replay.services.derive import total_tokens as sum_tokens
from agent_replay.services.ingest import prepare
from agent_replay.services.recorder_batch import PendingStep, record_clean_batch
from agent_replay.services.redact import Redactor, identity, redact_capped
from agent_replay.store import ids, writers
from agent_replay.store.db import Store
from agent_replay.store.mapping import (
    annotation_dict,
    annotation_row,
    dec_meta,
    decision_row,
    enc,
    enc_meta,
    snapshot_row,
    step_cost,
    step_row,
)
from agent_replay.store.shapes import AnnotationJSON
from agent_replay.store.writes import insert_trace_rows
from agent_replay.trace.base import canonical_time
from agent_replay.trace.io import input_hash
from agent_replay.trace.models import MAX_SAFE_INT, Annotation, Decision, Snapshot, Step, Trace
from agent_replay.trace.validate import validate_trace

__all__ = ["PendingStep", "TraceRecorder"]


class TraceRecorder:
    """Record a trace as it happens.

    Args:
        db: the store.
        clock: the time source for timestamps the caller leaves out.
        lenient: coerce and repair bad values (capture paths) instead of raising
            ``TraceFormatError`` (the SDK's default); warnings collect in ``warnings``.
        redact: replace secrets (API keys, tokens, private keys, passwords in URLs) with
            ``[REDACTED:<kind>]`` before anything is written; on by default, as on every
            capture path (``--no-redact`` turns it off).
        max_value_bytes: the most one text value keeps (default 1 MiB, or
            ``AGENT_REPLAY_MAX_VALUE_BYTES``); longer ones keep their beginning and a marker
            with the original size and SHA-256 digest (``services/limits``).

    Example:
        >>> rec = TraceRecorder(ensure_database(".agent-replay"))
        >>> tid = rec.start_trace("support-bot", input={"q": "refund?"})
        >>> n = rec.start_step(tid, "tool_call", "lookup_order", input={"id": 7})
        >>> rec.end_step(tid, n, output={"status": "shipped"})
        >>> rec.end_trace(tid, output="It shipped.")
    """

    def __init__(
        self,
        db: Store,
        *,
        clock: Clock | None = None,
        lenient: bool = False,
        redact: bool = True,
        max_value_bytes: int | None = None,
    ) -> None:
        self.db = db
        self.clock = clock or SystemClock()
        self.lenient = lenient
        self.max_value_bytes = max_value_bytes or limits.max_value_bytes()
        # Every value is capped (size, nesting) before it is redacted and validated.
        self.redact: Redactor = (
            functools.partial(redact_capped, max_bytes=self.max_value_bytes)
            if redact
            else limits.capped(identity, self.max_value_bytes)
        )
        self.warnings: list[str] = []

    # --- helpers ------------------------------------------------------------------------

    def _now(self) -> str:
        return canonical_time(self.clock.now())

    def _object(self, value: Any, name: str) -> dict[str, Any]:
        """A copy of an object argument (``None``: empty). Anything else is refused (strict)
        or dropped with a warning (lenient)."""
        if value is None:
            return {}
        if isinstance(value, dict):
            return dict(value)
        problem = f"must be an object (got {type(value).__name__})"
        if not self.lenient or name == "step":
            raise TraceFormatError([(name, problem)], label=name)
        self.warnings.append(f"{name}: {problem}; dropped")
        return {}

    def _validate_trace(self, data: dict[str, Any]) -> Trace:
        validated = validate_trace(self.redact(data), lenient=self.lenient)
        self.warnings.extend(validated.warnings)
        return validated.trace

    def _validate_step(self, data: dict[str, Any]) -> Step:
        """One step through the format's rules (links are checked against the store)."""
        links = {k: data.pop(k) for k in ("parent_step", "caused_by_step") if k in data}
        before = len(self.warnings)
        wrapper = self._validate_trace({"agent_name": "recorder", "steps": [data]})
        if not wrapper.steps:  # lenient mode dropped it: nothing in it could be kept as a step
            reasons = [w.removeprefix("steps[0].") for w in self.warnings[before:]]
            del self.warnings[before:]
            raise TraceFormatError(
                [("", r.removesuffix("; dropped")) for r in reasons], label="step"
            )
        step = wrapper.steps[0]
        for key, value in links.items():
            if self.lenient and isinstance(value, str) and value.strip().isdigit():
                value = int(value)  # lenient mode coerces links like every other field
            setattr(step, key, value)
        return step

    def _check_links(self, trace_id: str, step: Step) -> None:
        for link in ("parent_step", "caused_by_step"):
            target = getattr(step, link)
            if target is None:
                continue
            problem = None
            if not isinstance(target, int) or isinstance(target, bool) or target <= 0:
                problem = f"must be a positive step number (got {target!r})"
            elif target >= step.step_number:
                problem = f"must reference an earlier step (got {target})"
            elif not rows.step_exists(self.db, trace_id, target):
                problem = f"references step {target}, which does not exist"
            if problem:
                if not self.lenient:
                    raise TraceFormatError([(f"step {step.step_number}.{link}", problem)])
                self.warnings.append(f"step {step.step_number}.{link}: {problem}; dropped")
                setattr(step, link, None)

    def _require_trace(self, trace_id: str) -> tuple[Any, ...]:
        row = rows.trace_head(self.db, trace_id)
        if row is None:
            raise NotFoundError(f"no trace {trace_id!r} to record into")
        return row

    def _insert_step(
        self, trace_id: str, step: Step, *, call_id: str | None, is_open: bool
    ) -> None:
        if rows.step_exists(self.db, trace_id, step.step_number):
            problem = f"step {step.step_number} already exists in trace {trace_id}"
            if not self.lenient:
                raise UsageError(problem)
            self.warnings.append(f"{problem}; renumbered")
            step.step_number = rows.next_step_number(self.db, trace_id)
        self._check_links(trace_id, step)
        if step.duration_ms is None:
            step.duration_ms = duration_between(step.started_at, step.ended_at)
        if costs.needs_price(step):
            costs.price_step(step)
        step.id = step.id or ids.new_id(ids.STEP)
        rows.insert_step(
            self.db,
            step_row(step, step.id, trace_id, call_id=call_id, is_open=is_open),
            decision_row(step, step.id, trace_id),
            snapshot_row(step, step.id, trace_id),
        )

    # --- the API ------------------------------------------------------------------------

    def start_trace(
        self,
        agent_name: str,
        *,
        trace_id: str | None = None,
        input: Any = None,
        tags: list[str] | None = None,
        session_id: str | None = None,
        started_at: str | None = None,
        agent_version: str | None = None,
        trigger: str | None = None,
        metadata: dict[str, Any] | None = None,
        source_format: str | None = None,
        otel_trace_id: str | None = None,
    ) -> str:
        """Open a trace (status ``running``) and return its id."""
        data: dict[str, Any] = {
            "id": trace_id,
            "agent_name": agent_name,
            "agent_version": agent_version,
            "trigger": trigger,
            "status": "running",
            "input": input,
            "started_at": started_at or self._now(),
            "tags": list(tags or []),
            "session_id": session_id,
            "metadata": self._object(metadata, "metadata"),
        }
        trace = self._validate_trace(data)
        prepared = prepare(
            trace,
            created_ms=int(self.clock.now().timestamp() * 1000),
            source_format=source_format,
            otel_trace_id=otel_trace_id,
        )
        with self.db.write():
            if trace_id is not None and rows.trace_exists(self.db, trace_id):
                raise UsageError(f"a trace with id {trace_id} is already in the store")
            insert_trace_rows(self.db, [prepared])
        assert trace.id is not None
        return trace.id

    def start_step(
        self,
        trace_id: str,
        step_type: str,
        name: str | None = None,
        *,
        input: Any = None,
        step_number: int | None = None,
        started_at: str | None = None,
        parent_step: int | None = None,
        caused_by_step: int | None = None,
        model: str | None = None,
        metadata: dict[str, Any] | None = None,
        call_id: str | None = None,
    ) -> int:
        """Open a step (its result comes with ``end_step``); returns its step number."""
        _check_key(step_number, call_id, required=False)
        with self.db.write():
            self._require_trace(trace_id)
            number = (
                rows.next_step_number(self.db, trace_id) if step_number is None else step_number
            )
            step = self._validate_step(
                {
                    "step_number": number,
                    "step_type": step_type,
                    "name": name,
                    "input": input,
                    "started_at": started_at or self._now(),
                    "model": model,
                    "parent_step": parent_step,
                    "caused_by_step": caused_by_step,
                    "metadata": self._object(metadata, "metadata"),
                }
            )
            self._insert_step(trace_id, step, call_id=call_id, is_open=True)
            return step.step_number

    def find_open_step(self, trace_id: str, call_id: str) -> int | None:
        """The number of the open step started with this producer call id, if any."""
        return rows.open_step_number(self.db, trace_id, call_id)

    def end_step(
        self,
        trace_id: str,
        step_number: int | None = None,
        *,
        call_id: str | None = None,
        output: Any = None,
        error: str | None = None,
        ended_at: str | None = None,
        tokens_used: int | None = None,
        duration_ms: float | None = None,
        model: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int:
        """Close a step, found by number or by the call id it was started with."""
        _check_key(step_number, call_id)
        with self.db.write():
            if step_number is None:
                if call_id is None:
                    raise UsageError("end_step needs a step number or a call id")
                step_number = self.find_open_step(trace_id, call_id)
                if step_number is None:
                    raise NotFoundError(f"trace {trace_id} has no open step for call {call_id}")
            current = rows.load_step(self.db, trace_id, step_number, children=False)
            updates: dict[str, Any] = {
                "output": output,
                "error": error,
                "ended_at": ended_at or self._now(),
                "tokens_used": tokens_used,
                "duration_ms": duration_ms,
                "model": model,
            }
            merged = {**current, **{k: v for k, v in updates.items() if v is not None}}
            merged["metadata"] = {**current["metadata"], **self._object(metadata, "metadata")}
            merged.pop("decision"), merged.pop("snapshot")
            step = self._validate_step(merged)
            if step.duration_ms is None:
                step.duration_ms = duration_between(step.started_at, step.ended_at)
            if costs.needs_price(step):
                costs.price_step(step)
            rows.close_step(
                self.db,
                trace_id,
                step_number,
                {
                    "output": enc(step.output),
                    "error": step.error,
                    "ended_at": step.ended_at,
                    "tokens_used": step.tokens_used,
                    "duration_ms": step.duration_ms,
                    "model": step.model,
                    "metadata": enc_meta(step.metadata),
                    "is_open": 0,
                    "cost_usd": step_cost(step.metadata),
                },
            )
            return step_number

    def step(self, trace_id: str, step: Step | dict[str, Any]) -> int:
        """Record a complete step (with its decision and snapshot, if any); returns its number."""
        data = step.model_dump() if isinstance(step, Step) else self._object(step, "step")
        with self.db.write():
            self._require_trace(trace_id)
            if data.get("step_number") is None:
                data["step_number"] = rows.next_step_number(self.db, trace_id)
            model = self._validate_step(data)
            self._insert_step(trace_id, model, call_id=None, is_open=False)
            return model.step_number

    def record_steps_if_clean(self, trace_id: str, items: Sequence[PendingStep]) -> bool:
        """Record several steps in one pass, or nothing at all.

        The group-commit fast path of live capture (``record``, ``run``): one validation
        pass, one ``executemany`` and one ``step_count`` update for a batch, instead of a
        handful of statements per step. Each item is a step object with its ``step_number``
        set, the producer's call id, and whether the step is still open; the rows written
        are exactly those the same steps recorded one by one with ``step`` (or
        ``start_step`` then ``end_step`` for a closed item with a call id) would give.

        Only clean batches take this path: when any step would need a repair or a warning
        (invalid values, a step number already used, a link to a missing or later step),
        nothing is written and ``False`` is returned, so the caller records those steps one
        by one through ``step``/``start_step``/``end_step``, which repair and warn as usual.

        Raises:
            NotFoundError: there is no such trace.
        """
        return record_clean_batch(
            self.db, trace_id, items, redact=self.redact, lenient=self.lenient
        )

    def decision(
        self,
        trace_id: str,
        decision: Decision | dict[str, Any],
        *,
        step_number: int | None = None,
        name: str | None = None,
        started_at: str | None = None,
        parent_step: int | None = None,
        caused_by_step: int | None = None,
    ) -> int:
        """Attach a decision to an existing decision step, or record a new decision step."""
        _check_key(step_number, None, required=False)
        data = (
            decision.model_dump()
            if isinstance(decision, Decision)
            else self._object(decision, "decision")
        )
        with self.db.write():
            self._require_trace(trace_id)
            if step_number is not None and rows.step_exists(self.db, trace_id, step_number):
                current = rows.load_step(self.db, trace_id, step_number)
                current.pop("snapshot")
                current["decision"] = data
                step = self._validate_step(current)
                row = decision_row(step, current["id"], trace_id)
                assert row is not None
                rows.put_decision(self.db, row)
                return step_number
            return self._record_new(
                trace_id,
                {
                    "step_number": (
                        rows.next_step_number(self.db, trace_id)
                        if step_number is None
                        else step_number
                    ),
                    "step_type": "decision",
                    "name": name,
                    "started_at": started_at or self._now(),
                    "parent_step": parent_step,
                    "caused_by_step": caused_by_step,
                    "decision": data,
                },
            )

    def _record_new(self, trace_id: str, data: dict[str, Any]) -> int:
        model = self._validate_step(data)
        self._insert_step(trace_id, model, call_id=None, is_open=False)
        return model.step_number

    def snapshot(
        self, trace_id: str, step_number: int, snapshot: Snapshot | dict[str, Any]
    ) -> None:
        """Attach (or replace) the state snapshot of a step."""
        _check_key(step_number, None)
        data = (
            snapshot.model_dump()
            if isinstance(snapshot, Snapshot)
            else self._object(snapshot, "snapshot")
        )
        with self.db.write():
            current = rows.load_step(self.db, trace_id, step_number)
            current.pop("decision")
            current["snapshot"] = data
            step = self._validate_step(current)
            row = snapshot_row(step, current["id"], trace_id)
            assert row is not None
            rows.put_snapshot(self.db, row)

    def annotate(
        self,
        trace_id: str,
        *,
        label: str,
        step_number: int | None = None,
        note: str | None = None,
        score: float | None = None,
        author: str | None = None,
    ) -> AnnotationJSON:
        """Add a person's annotation to a trace (or to one of its steps).

        The annotation passes through the format's ``Annotation`` model (strictly: it comes
        from a person, not a producer) and redaction, like every other write; the trace and
        the step must exist. Returns the annotation as stored (the format's object).

        Raises:
            NotFoundError: no such trace, or the trace has no step ``step_number``.
            TraceFormatError: an invalid label, step number or score.
        """
        from pydantic import ValidationError

        from agent_replay.trace.validate import format_loc

        data = {
            "id": ids.new_id(ids.ANNOTATION),
            "step_number": step_number,
            "label": label,
            "note": note,
            "score": score,
            "author": author,
            "created_at": self._now(),
        }
        try:
            model = Annotation.model_validate(self.redact(data))
        except ValidationError as exc:
            problems = [(format_loc(tuple(e["loc"])), e["msg"]) for e in exc.errors()]
            raise TraceFormatError(problems, label="annotation") from None
        assert model.id is not None
        with self.db.write():
            self._require_trace(trace_id)
            if model.step_number is not None and not rows.step_exists(
                self.db, trace_id, model.step_number
            ):
                raise NotFoundError(
                    f"trace {trace_id} has no step {model.step_number}",
                    hints=[f"`agent-replay show {trace_id}` lists its steps"],
                )
            row = annotation_row(model, model.id, trace_id)
            rows.insert_annotation(self.db, row)
        return annotation_dict(row)

    def set_input(self, trace_id: str, input: Any) -> None:
        """Set (or replace) the input of a trace that is being recorded, e.g. the first prompt
        of a session that started before it was typed."""
        checked = self._validate_trace({"agent_name": "recorder", "input": input})
        with self.db.write():
            self._require_trace(trace_id)
            rows.update_trace(
                self.db,
                trace_id,
                {"input": enc(checked.input), "input_hash": input_hash(checked.input)},
            )

    def claim(self, trace_id: str, kind: str) -> None:
        """Register this process as the live writer of a running trace (``record``, ``run``,
        ``import``), so a reader that finds it ``running`` after this process died finalizes
        it as ``timeout`` (``services/liveness``) instead of showing it running forever."""
        with self.db.write():
            writers.register(
                self.db, trace_id, kind, now_ms=int(self.clock.now().timestamp() * 1000)
            )

    def release(self, trace_id: str) -> None:
        """Stop being the trace's live writer while leaving it running (``--leave-open``: a
        later stream resumes it)."""
        with self.db.write():
            writers.unregister(self.db, trace_id)

    def reopen_trace(self, trace_id: str) -> None:
        """Set a finished trace back to ``running`` (a session goes on after a turn ended)."""
        with self.db.write():
            self._require_trace(trace_id)
            rows.update_trace(
                self.db,
                trace_id,
                {"status": "running", "ended_at": None, "total_duration_ms": None},
            )

    def end_trace(
        self,
        trace_id: str,
        *,
        status: str = "completed",
        output: Any = None,
        error: str | None = None,
        ended_at: str | None = None,
        total_tokens: int | None = None,
        total_cost_usd: float | None = None,
        total_duration_ms: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Finalize a trace: status, output, and totals (derived from the steps when omitted)."""
        with self.db.write():
            row = self._require_trace(trace_id)
            checked = self._validate_trace(
                {
                    "agent_name": "recorder",
                    "status": status,
                    "output": output,
                    "error": error,
                    "started_at": row[2],
                    "ended_at": ended_at or self._now(),
                    "total_tokens": total_tokens,
                    "total_cost_usd": total_cost_usd,
                    "total_duration_ms": total_duration_ms,
                    "metadata": self._object(metadata, "metadata"),
                }
            )
            if checked.total_tokens is None:
                checked.total_tokens = sum_tokens(rows.step_tokens(self.db, trace_id))
            if checked.total_duration_ms is None:
                checked.total_duration_ms = duration_between(checked.started_at, checked.ended_at)
            if checked.total_cost_usd is None:
                rows.derive_cost(self.db, trace_id, checked)
            values: dict[str, Any] = {
                "status": checked.status,
                "ended_at": checked.ended_at,
                "total_tokens": checked.total_tokens,
                "total_cost_usd": checked.total_cost_usd,
                "total_duration_ms": checked.total_duration_ms,
            }
            # Output and error are set when given; a trace that had them keeps them otherwise.
            if output is not None:
                values["output"] = enc(checked.output)
            if error is not None:
                values["error"] = checked.error
            if checked.metadata:  # the caller's, plus an offset ended_at kept by validation
                current = dec_meta(rows.trace_metadata(self.db, trace_id))
                added = dict(checked.metadata)
                originals = {
                    **current.get("original_times", {}),
                    **added.pop("original_times", {}),
                }
                merged = {**current, **added}
                if originals:
                    merged["original_times"] = originals
                values["metadata"] = enc_meta(merged)
            rows.update_trace(self.db, trace_id, values)
            writers.unregister(self.db, trace_id)  # an ended trace has no writer to watch


def _check_key(step_number: Any, call_id: Any, *, required: bool = True) -> None:
    """A step number and call id as arguments must be what they say (one of them, when
    ``required``): the SDK refuses anything else with its own error, before any query."""
    problems = []
    if step_number is not None and (
        type(step_number) is not int or not 0 < step_number <= MAX_SAFE_INT
    ):
        problems.append(("step_number", f"must be a positive integer (got {step_number!r:.60})"))
    if call_id is not None and not isinstance(call_id, str):
        problems.append(("call_id", f"must be a string (got {type(call_id).__name__})"))
    if problems:
        raise TraceFormatError(problems, label="step")
    if required and step_number is None and call_id is None:
        raise UsageError("a step number or a call id is required")
