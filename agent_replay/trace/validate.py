"""Turning producer data into a valid ``Trace``: strict mode and lenient mode.

Strict mode (ingest, the SDK) reports every problem at once, each with its path
(``steps[3].caused_by_step: must reference an earlier step (got 7)``) and refuses the trace.
Lenient mode (live capture, importers, OTLP) coerces what it can, drops what it can't keep and
returns the warnings; it fails only when the data is not an object at all.

Cross-field rules (checked in both modes, repaired in lenient mode):
- step numbers are positive and unique;
- ``parent_step`` names an earlier step of the same trace;
- ``caused_by_step`` names a strictly earlier step, so why-chains are acyclic;
- ``decision`` appears only on ``decision`` steps, and ``chosen`` is one of its options;
- ``ended_at`` is not before ``started_at``;
- an annotation's ``step_number`` names a step of the trace.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agent_replay.errors import TraceFormatError
from agent_replay.trace.base import time_before
from agent_replay.trace.models import (
    READ_ONLY_TRACE_FIELDS,
    Annotation,
    Decision,
    DecisionOption,
    EvalResult,
    Snapshot,
    Step,
    Trace,
)

Problem = tuple[str, str]


@dataclass
class Validated:
    """A valid trace and the warnings collected while making it so (lenient mode only)."""

    trace: Trace
    warnings: list[str] = field(default_factory=list)


def format_loc(loc: tuple[int | str, ...]) -> str:
    """``('steps', 3, 'caused_by_step')`` -> ``steps[3].caused_by_step``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _pydantic_problems(exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if (
            err["type"] not in ("missing", "extra_forbidden")
            and "input" in err
            and "(got" not in msg
        ):
            shown = repr(err["input"])
            if len(shown) <= 60:
                msg += f" (got {shown})"
        problems.append((format_loc(loc), msg))
    return problems


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _model_problems(steps: list[Step]) -> list[Problem] | None:
    """The fast check for validated steps: ``None`` when they break no rule (the common case),
    so only a trace with problems pays for the detailed walk."""
    numbers = {s.step_number for s in steps}
    if len(numbers) != len(steps):
        return None
    for s in steps:
        n = s.step_number
        p, c = s.parent_step, s.caused_by_step
        if p is not None and (p >= n or p not in numbers):
            return None
        if c is not None and (c >= n or c not in numbers):
            return None
        d = s.decision
        if d is not None and (
            s.step_type != "decision"
            or (d.options and d.chosen not in {o.option for o in d.options})
        ):
            return None
        if (
            s.started_at is not None
            and s.ended_at is not None
            and time_before(s.ended_at, s.started_at)
        ):
            return None
    return []


def semantic_problems(steps: list[Any]) -> list[Problem]:
    """Cross-field problems in a list of steps (models or raw dicts; odd values are skipped)."""
    if steps and all(isinstance(s, Step) for s in steps):
        fast = _model_problems(steps)
        if fast is not None:
            return fast
    problems: list[Problem] = []
    numbers: set[int] = set()
    for index, step in enumerate(steps):
        if not isinstance(step, dict | Step):
            continue
        number = _get(step, "step_number")
        if _is_int(number):
            if number in numbers:
                problems.append((f"steps[{index}].step_number", f"duplicate step number {number}"))
            numbers.add(number)
    for index, step in enumerate(steps):
        if not isinstance(step, dict | Step):
            continue
        number = _get(step, "step_number")
        for link in ("parent_step", "caused_by_step"):
            target = _get(step, link)
            if not _is_int(target) or not _is_int(number):
                continue
            if target >= number:
                problems.append(
                    (f"steps[{index}].{link}", f"must reference an earlier step (got {target})")
                )
            elif target not in numbers:
                problems.append(
                    (f"steps[{index}].{link}", f"references step {target}, which does not exist")
                )
        decision = _get(step, "decision")
        if decision is not None:
            step_type = _get(step, "step_type")
            if step_type != "decision":
                problems.append(
                    (
                        f"steps[{index}].decision",
                        f"only decision steps may carry a decision (step_type is {step_type!r})",
                    )
                )
            options = _get(decision, "options")
            if not isinstance(options, list):
                options = []  # not a list: pydantic's own problem already says so
            names = [_get(o, "option") for o in options if isinstance(o, dict | DecisionOption)]
            chosen = _get(decision, "chosen")
            if names and isinstance(chosen, str) and chosen not in names:
                problems.append(
                    (
                        f"steps[{index}].decision.chosen",
                        f"must be one of the options {names!r} (got {chosen!r})",
                    )
                )
        problems.extend(_time_order(step, f"steps[{index}]"))
    return problems


def _time_order(obj: Any, path: str) -> list[Problem]:
    start, end = _get(obj, "started_at"), _get(obj, "ended_at")
    if isinstance(start, str) and isinstance(end, str):
        try:
            if time_before(end, start):
                prefix = f"{path}." if path else ""
                return [(f"{prefix}ended_at", f"is before started_at ({end} < {start})")]
        except ValueError:
            return []
    return []


def annotation_problems(annotations: list[Any], steps: list[Any]) -> list[Problem]:
    """Annotations that name a step the trace does not have."""
    numbers = {_get(s, "step_number") for s in steps if isinstance(s, dict | Step)}
    problems: list[Problem] = []
    for index, annotation in enumerate(annotations):
        if not isinstance(annotation, dict | Annotation):
            continue
        number = _get(annotation, "step_number")
        if _is_int(number) and number not in numbers:
            problems.append(
                (
                    f"annotations[{index}].step_number",
                    f"references step {number}, which does not exist",
                )
            )
    return problems


def _strip_read_only(data: dict[str, Any]) -> dict[str, Any]:
    if any(key in data for key in READ_ONLY_TRACE_FIELDS):
        data = {k: v for k, v in data.items() if k not in READ_ONLY_TRACE_FIELDS}
    return data


def validate_trace(data: Any, *, lenient: bool = False, label: str = "trace") -> Validated:
    """Validate producer data as a trace.

    Args:
        data: the decoded JSON object of one trace.
        lenient: coerce and repair instead of refusing (capture paths).
        label: how error messages name this trace (``line 12``, ``trace 3``).

    Returns:
        The trace, plus warnings in lenient mode.

    Raises:
        TraceFormatError: strict mode found problems (all of them, with paths), or the data is
            not a JSON object.
    """
    if not isinstance(data, dict):
        raise TraceFormatError(
            [("", f"a trace must be a JSON object (got {type(data).__name__})")], label=label
        )
    data = _strip_read_only(data)
    if lenient:
        return _validate_lenient(data)
    try:
        trace = Trace.model_validate(data, strict=True)
    except ValidationError as exc:
        problems = _pydantic_problems(exc)
        steps = data.get("steps")
        if isinstance(steps, list):
            problems.extend(semantic_problems(steps))
            annotations = data.get("annotations")
            if isinstance(annotations, list):
                problems.extend(annotation_problems(annotations, steps))
        problems.extend(_time_order(data, ""))
        raise TraceFormatError(problems, label=label) from None
    problems = semantic_problems(trace.steps) + _time_order(trace, "")
    if trace.annotations:
        problems += annotation_problems(trace.annotations, trace.steps)
    if problems:
        raise TraceFormatError(problems, label=label)
    return Validated(trace)


# --- lenient mode -------------------------------------------------------------------------

_NESTED = {"decision": Decision, "snapshot": Snapshot}


def _drop_unknown(obj: dict[str, Any], model: type[Any], path: str, warnings: list[str]) -> None:
    for key in [k for k in obj if k not in model.model_fields]:
        warnings.append(f"{path or 'trace'}.{key}: unknown field dropped")
        del obj[key]


def _prune_unknown(data: dict[str, Any], warnings: list[str]) -> None:
    _drop_unknown(data, Trace, "", warnings)
    for key, model in (("steps", Step), ("evals", EvalResult), ("annotations", Annotation)):
        items = data.get(key)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            _drop_unknown(item, model, f"{key}[{index}]", warnings)
            if key != "steps":
                continue
            for name, nested in _NESTED.items():
                value = item.get(name)
                if isinstance(value, dict):
                    _drop_unknown(value, nested, f"{key}[{index}].{name}", warnings)
                    options = value.get("options") if name == "decision" else None
                    if not isinstance(options, list):
                        continue
                    for o_index, option in enumerate(options):
                        if isinstance(option, dict):
                            path = f"{key}[{index}].decision.options[{o_index}]"
                            _drop_unknown(option, DecisionOption, path, warnings)


# Replacement values for required fields that fail validation in lenient mode. A step type is
# never guessed: a step without a valid one is dropped (see ``_remove_at``).
_REQUIRED_FALLBACK: dict[str, Any] = {"agent_name": "unknown"}


def _remove_at(data: Any, loc: tuple[int | str, ...]) -> bool:
    """Remove (or reset) the value at ``loc``; return whether something changed."""
    if not loc:
        return False
    parent = data
    for part in loc[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return False
    last = loc[-1]
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        parent.pop(last)
        return True
    if isinstance(parent, dict) and last in parent:
        if last in _REQUIRED_FALLBACK:
            if parent[last] == _REQUIRED_FALLBACK[last]:
                return False
            parent[last] = _REQUIRED_FALLBACK[last]
        elif (last in ("step_number", "step_type") and loc[0] == "steps") or last in (
            "evaluator",
            "chosen",
            "option",
            "label",
        ):
            # The enclosing object can't exist without it: drop the object instead.
            return _remove_at(data, loc[:-1])
        else:
            del parent[last]
        return True
    if isinstance(parent, dict) and last in _REQUIRED_FALLBACK:
        parent[last] = _REQUIRED_FALLBACK[last]
        return True
    if isinstance(parent, dict):
        return _remove_at(data, loc[:-1])
    return False


def _validate_lenient(data: dict[str, Any]) -> Validated:
    # Fast path: most capture data is already valid; only repair (on a copy) when it isn't.
    try:
        trace = Trace.model_validate(data, strict=False, context={"lenient": True})
    except ValidationError:
        pass
    else:
        if (
            not semantic_problems(trace.steps)
            and not _time_order(trace, "")
            and not (trace.annotations and annotation_problems(trace.annotations, trace.steps))
        ):
            return Validated(trace)
    warnings: list[str] = []
    data = copy.deepcopy(data)
    _prune_unknown(data, warnings)
    context = {"lenient": True}
    for _ in range(50):
        try:
            trace = Trace.model_validate(data, strict=False, context=context)
            break
        except ValidationError as exc:
            # Fix the deepest paths first so list indexes stay valid while removing.
            errors = sorted(exc.errors(include_url=False), key=lambda e: e["loc"], reverse=True)
            changed = False
            for err in errors:
                loc = tuple(
                    p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))
                )
                if _remove_at(data, loc):
                    warnings.append(f"{format_loc(loc)}: {err['msg']}; dropped")
                    changed = True
            if not changed:
                raise TraceFormatError(_pydantic_problems(exc)) from None
    else:  # pragma: no cover - each pass removes at least one value
        raise TraceFormatError([("", "could not repair the trace")])
    _repair_semantics(trace, warnings)
    return Validated(trace, warnings)


def _repair_semantics(trace: Trace, warnings: list[str]) -> None:
    seen: set[int] = set()
    next_free = max((s.step_number for s in trace.steps), default=0) + 1
    for index, step in enumerate(trace.steps):
        if step.step_number in seen:
            warnings.append(
                f"steps[{index}].step_number: duplicate {step.step_number}; renumbered {next_free}"
            )
            step.step_number = next_free
            next_free += 1
        seen.add(step.step_number)
    for index, step in enumerate(trace.steps):
        for link in ("parent_step", "caused_by_step"):
            target = getattr(step, link)
            if target is not None and (target >= step.step_number or target not in seen):
                warnings.append(f"steps[{index}].{link}: invalid reference {target}; dropped")
                setattr(step, link, None)
        if step.decision is not None:
            if step.step_type != "decision":
                warnings.append(f"steps[{index}].decision: not a decision step; dropped")
                step.decision = None
            elif step.decision.options and step.decision.chosen not in {
                o.option for o in step.decision.options
            }:
                warnings.append(f"steps[{index}].decision.chosen: not among the options; added")
                step.decision.options.append(DecisionOption(option=step.decision.chosen))
        if _time_order(step, f"steps[{index}]"):
            warnings.append(f"steps[{index}].ended_at: before started_at; dropped")
            step.ended_at = None
    if _time_order(trace, ""):
        warnings.append("ended_at: before started_at; dropped")
        trace.ended_at = None
    for index, annotation in enumerate(trace.annotations):
        if annotation.step_number is not None and annotation.step_number not in seen:
            warnings.append(
                f"annotations[{index}].step_number: no step {annotation.step_number}; "
                "kept on the whole run"
            )
            annotation.step_number = None
