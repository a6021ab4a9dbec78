"""Forking a trace at a step: a new, first-class trace that branches off a recorded run.

``agent-replay fork`` and the TUI's fork editor both go through this module. A fork is written
through ``ingest_trace`` (the one validated write path), so it is a trace like any other, with
fresh trace and step ids, plus ``parent_trace_id``, ``forked_from_step`` and status ``forked``
(a final status: a fork is never left "running").

What a fork of trace P at step N holds
    - P's steps before N, copied as recorded (decisions and snapshots included);
    - P's step N, its input edited if a step edit is given, and *no recorded outcome*: the
      fork has not run step N, so its output, error, tokens, duration, end and cost are
      cleared and the step is marked ``not re-run`` (``services.outcome``); ``fork --rerun``
      gives it the model's new reply instead;
    - no steps after N, no evals, no output or error (the fork has not run past N);
    - P's agent name and version, trigger, input (edited if a trace-input edit is given) and
      metadata, plus ``metadata.fork`` (``from_step``, ``created_at`` and ``edits``: each edit's
      ``target``, ``mode`` and ``modification``);
    - P's start time (so the fork sorts beside its parent), ended where step N started;
    - the tags given (P's tags are not copied: a fork of a ``golden`` run is not golden);
    - no session id (live capture correlates by session; a fork must never receive events);
    - ``total_cost_usd``: the cost of the steps before N (recorded ``metadata.cost_usd``, else
      P's total shared by tokens; the rule of ``services.diff.step_costs``).

The edits
    Two targets, either or both: the fork's *trace input* (``agent-replay fork
    --modify-input``: the run's input, ``{"task": ...}`` in the trace format) and step N's
    *step input* (``--modify-step-input``, and what the TUI's fork editor edits).


    ``merge`` (the default) applies the modification as a JSON Merge Patch (RFC 7386): when both
    are objects, keys merge recursively, a ``null`` value deletes the key, any other value
    replaces it; a modification that is not an object replaces the input whole. ``replace``
    always replaces the input with the modification.

A diff of a fresh fork against its parent (``services.diff``, scoped to the fork) therefore
shows exactly the edits, plus step N's cleared outcome (reported as a change: the fork does not
know what its step N would produce). Must not import Textual or Rich.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import UsageError
from agent_replay.services.diff import step_costs
from agent_replay.services.outcome import NOT_RERUN_LABEL, clear_outcome, outcome_note
from agent_replay.store.db import Store
from agent_replay.trace.base import canonical_time, time_before

EditMode = Literal["merge", "replace"]
EditTarget = Literal["trace_input", "step_input"]

_COPIED_TRACE_FIELDS = ("agent_name", "agent_version", "trigger", "input", "started_at")
_DROPPED_STEP_FIELDS = ("id",)


@dataclass(frozen=True)
class InputEdit:
    """A change to the input at the fork step."""

    value: Any
    """The modification: a JSON value (a patch under ``merge``, the new input under
    ``replace``)."""
    mode: EditMode = "merge"
    """``merge`` (JSON Merge Patch, RFC 7386) or ``replace``."""


@dataclass(frozen=True)
class AppliedEdit:
    """One edit as applied to the fork: what it changed, from what, to what."""

    target: EditTarget
    """``trace_input`` (the fork's input) or ``step_input`` (step N's input)."""
    edit: InputEdit
    original_input: Any
    """The input before the edit."""
    new_input: Any
    """The input after the edit."""

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "mode": self.edit.mode,
            "modification": self.edit.value,
            "original_input": self.original_input,
            "input": self.new_input,
        }


@dataclass(frozen=True)
class ForkResult:
    """A fork as written."""

    trace_id: str
    """The fork's full id."""
    parent_trace_id: str
    forked_from_step: int
    step_count: int
    edits: tuple[AppliedEdit, ...]
    """The edits applied, trace input first (empty: an unmodified copy up to step N)."""
    not_rerun: str = ""
    """What step N says about its outcome (``services.outcome.outcome_note``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.trace_id,
            "parent_trace_id": self.parent_trace_id,
            "forked_from_step": self.forked_from_step,
            "step_count": self.step_count,
            "status": "forked",
            "edits": [e.to_json() for e in self.edits],
            "not_rerun": [self.forked_from_step],
        }


# --- the edit ---------------------------------------------------------------------------------


def parse_modification(
    text: str, *, allow_file: bool = True, source: str = "--modify-input"
) -> Any:
    """Parse an edit given on the command line (``source``: the option's name): JSON text, or
    (``allow_file``) ``@path`` to read it from a file. No JSON value starts with ``@``, so the
    two never clash.

    The TUI's fork editor calls this on every keystroke for live validation (with
    ``allow_file=False``: typing must never read files).

    Raises:
        UsageError: the text (or file) is not valid JSON; the message says where and why.
    """
    from agent_replay.trace.io import loads

    option = source
    if allow_file and text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{option} {text}: cannot read {path}: {exc}") from None
        source = f"{option} {path}"
    if not text.strip():
        raise UsageError(f"{source}: empty; expected a JSON value such as '{{\"key\": 1}}'")
    try:
        return loads(text)
    except ValueError as exc:  # orjson.JSONDecodeError is a ValueError
        raise UsageError(
            f"{source} is not valid JSON: {exc}",
            hints=[f'quote the JSON for your shell: {option} \'{{"query": "new"}}\''],
        ) from None


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON Merge Patch (RFC 7386) without mutating either argument."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply_edit(original: Any, edit: InputEdit | None) -> Any:
    """The input after ``edit`` (a copy of ``original`` when there is none)."""
    if edit is None:
        return copy.deepcopy(original)
    if edit.mode == "replace":
        return copy.deepcopy(edit.value)
    return merge_patch(original, edit.value)


# --- building and writing ---------------------------------------------------------------------


def fork_point_input(trace: Mapping[str, Any], from_step: int) -> Any:
    """The input a step edit at ``from_step`` starts from: that step's input (what the fork
    editor pre-fills).

    Raises:
        UsageError: no such step (see ``check_fork_step``).
    """
    check_fork_step(trace, from_step)
    step = next(s for s in trace["steps"] if s["step_number"] == from_step)
    return step.get("input")


def check_fork_step(trace: Mapping[str, Any], from_step: int) -> None:
    """Reject a fork step the trace doesn't have.

    Raises:
        UsageError: ``from_step`` is not a step number of the trace.
    """
    numbers = [int(s["step_number"]) for s in trace.get("steps") or []]
    if not numbers:
        raise UsageError(f"trace {trace.get('id')} has no steps to fork from")
    if from_step < 1 or from_step > max(numbers):
        raise UsageError(
            f"--from-step {from_step} is out of range: trace {trace.get('id')} has steps "
            f"{min(numbers)}..{max(numbers)}"
        )
    if from_step not in numbers:
        raise UsageError(f"trace {trace.get('id')} has no step {from_step}")


def planned_edits(
    trace: Mapping[str, Any],
    from_step: int,
    step_edit: InputEdit | None,
    trace_edit: InputEdit | None,
) -> tuple[AppliedEdit, ...]:
    """The edits a fork of ``trace`` at ``from_step`` applies, trace input first.

    Raises:
        UsageError: ``from_step`` is not a step of ``trace``.
    """
    edits = []
    if trace_edit is not None:
        original = trace.get("input")
        edits.append(
            AppliedEdit("trace_input", trace_edit, original, apply_edit(original, trace_edit))
        )
    if step_edit is not None:
        original = fork_point_input(trace, from_step)
        edits.append(
            AppliedEdit("step_input", step_edit, original, apply_edit(original, step_edit))
        )
    return tuple(edits)


def build_fork(
    parent: Mapping[str, Any],
    from_step: int,
    edit: InputEdit | None = None,
    *,
    trace_edit: InputEdit | None = None,
    tags: list[str] | tuple[str, ...] = (),
    clock: Clock | None = None,
    step_ran: bool = False,
) -> dict[str, Any]:
    """The fork of a trace object as a new trace object (not written; no ids).

    Args:
        parent: the full trace object to fork (``trace_json``), with its ``id``.
        from_step: the step to fork at (N, see the module doc).
        edit: the change to step N's input, if any.
        trace_edit: the change to the fork's (trace) input, if any.
        tags: the fork's tags.
        clock: stamps ``metadata.fork.created_at``.
        step_ran: step N did run in the fork as recorded (the proxy served it from the
            recording): it keeps its outcome and cost instead of being marked not re-run.

    Raises:
        UsageError: ``from_step`` is not a step of ``parent``.
    """
    check_fork_step(parent, from_step)
    now = canonical_time((clock or SystemClock()).now())
    steps_in = [s for s in parent["steps"] if s["step_number"] <= from_step]
    costs, _ = step_costs(parent)
    cost_by_number = {s["step_number"]: c for s, c in zip(parent["steps"], costs, strict=True)}
    last = from_step if step_ran else from_step - 1
    known = [cost_by_number[s["step_number"]] for s in steps_in if s["step_number"] <= last]
    applied = planned_edits(parent, from_step, edit, trace_edit)
    new_input = {e.target: e.new_input for e in applied}

    steps: list[dict[str, Any]] = []
    for step in steps_in:
        copied = {k: copy.deepcopy(v) for k, v in step.items() if k not in _DROPPED_STEP_FIELDS}
        if step["step_number"] == from_step:
            if "step_input" in new_input:
                copied["input"] = new_input["step_input"]
            if not step_ran:
                copied = clear_outcome(copied)
        steps.append(copied)

    fork: dict[str, Any] = {k: copy.deepcopy(parent.get(k)) for k in _COPIED_TRACE_FIELDS}
    if "trace_input" in new_input:
        fork["input"] = new_input["trace_input"]
    info: dict[str, Any] = {"from_step": from_step, "created_at": now}
    if applied:
        info["edits"] = [
            {"target": e.target, "mode": e.edit.mode, "modification": copy.deepcopy(e.edit.value)}
            for e in applied
        ]
    fork.update(
        status="forked",
        ended_at=_fork_end(steps),
        total_cost_usd=(
            round(sum(c for c in known if c is not None), 9)
            if any(c is not None for c in known)
            else None
        ),
        tags=list(tags),
        metadata={**copy.deepcopy(parent.get("metadata") or {}), "fork": info},
        parent_trace_id=parent["id"],
        forked_from_step=from_step,
        steps=steps,
    )
    started, ended = fork.get("started_at"), fork.get("ended_at")
    if started and ended and time_before(ended, started):
        fork["ended_at"] = None  # a producer's clock skew must not make the fork invalid
    return {k: v for k, v in fork.items() if v is not None}


def _fork_end(steps: list[dict[str, Any]]) -> str | None:
    """Where the fork's record stops: step N's start, else the latest end before it."""
    if steps and steps[-1].get("started_at"):
        return str(steps[-1]["started_at"])
    ends = [s["ended_at"] for s in steps if s.get("ended_at")]
    return str(ends[-1]) if ends else None


def fork_trace(
    store: Store,
    trace_id: str,
    from_step: int,
    edit: InputEdit | None = None,
    *,
    trace_edit: InputEdit | None = None,
    tags: list[str] | tuple[str, ...] = (),
    clock: Clock | None = None,
    redact: bool = True,
) -> ForkResult:
    """Fork a stored trace at ``from_step`` and write the fork (see the module doc).

    Args:
        store: the store.
        trace_id: the parent's full id or a unique prefix.
        from_step: N, a step number of the parent.
        edit: the change to step N's input (``None`` and no ``trace_edit``: an unmodified copy
            of steps 1..N).
        trace_edit: the change to the fork's (trace) input.
        tags: the fork's tags.
        clock: stamps the fork's creation.
        redact: redact secrets in what is written (the edits too); ``--no-redact`` turns
            it off.

    Returns:
        The fork as written, with its full id.

    Raises:
        NotFoundError, AmbiguousIdError: ``trace_id`` does not name one trace.
        UsageError: ``from_step`` is not a step of the parent.
        TraceFormatError, StoreError: the fork could not be written.
    """
    from agent_replay.services.ingest import ingest_trace
    from agent_replay.store.trace_detail import resolve_trace_id, trace_json

    parent = trace_json(store, resolve_trace_id(store, trace_id))
    fork = build_fork(parent, from_step, edit, trace_edit=trace_edit, tags=tags, clock=clock)
    written = ingest_trace(store, fork, clock=clock, redact=redact)
    assert written.id is not None
    return ForkResult(
        trace_id=written.id,
        parent_trace_id=parent["id"],
        forked_from_step=from_step,
        step_count=len(written.steps),
        edits=planned_edits(parent, from_step, edit, trace_edit),
        not_rerun=outcome_note(fork["steps"][-1]) or NOT_RERUN_LABEL,
    )
