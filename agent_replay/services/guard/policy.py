"""Guard policies: the model, and the validation ``guard add`` (and the app's form) apply.

A policy is a pattern over one step plus an action. The pattern is a JSON object of these
fields, every given field must match (AND):

| field | matches when |
|---|---|
| ``step_type`` | the step's type is exactly this (``tool_call``, ``llm_call``, ...) |
| ``name_contains`` | the step's name contains this text (case-insensitive, NFKC-normalized) |
| ``name_regex`` | RE2 finds this regex in the step's name (linear time; ``(?i)`` for case) |
| ``input_contains`` | the step's input contains this text (case-insensitive, NFKC-normalized) |
| ``output_contains`` | the step's output contains this text (idem) |
| ``matches`` | ``destructive``: a destructive tool call, as ``safety-check`` defines it |

Actions, from the least to the most strict: ``allow``, ``warn``, ``require_review``,
``deny``. ``decide`` combines several matching policies.

Stdlib only (the hook's enforce path imports it); ``name_regex`` is compiled with RE2 through
``regex``, imported only when a pattern has one.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from agent_replay.trace.base import STEP_TYPES

DEFINITIONS = ("destructive",)
"""The named definitions ``matches`` accepts (each is implemented in ``danger``)."""

ACTIONS: tuple[str, ...] = ("allow", "warn", "require_review", "deny")
"""Every action, from the least to the most strict."""
STRICTNESS: dict[str, int] = {action: rank for rank, action in enumerate(ACTIONS)}
"""An action's rank: higher is stricter (``deny`` is 3)."""
PATTERN_KEYS: tuple[str, ...] = (
    "step_type",
    "name_contains",
    "name_regex",
    "input_contains",
    "output_contains",
    "matches",
)
"""The fields a pattern may have."""
MAX_NAME = 200
"""Longest policy name accepted."""


class PolicyError(ValueError):
    """A policy (or its pattern) is not valid; the message says which field and why."""


class Policy(NamedTuple):
    """One guard policy as stored (``policies`` table).

    A ``NamedTuple`` rather than a dataclass: ``dataclasses`` costs the hook ~5 ms to import.
    """

    id: str
    name: str
    pattern: dict[str, str]
    """The validated pattern (empty when ``problem`` is set)."""
    action: str
    priority: int = 0
    """Breaks ties between policies of the same action; also decides ``allow`` exceptions."""
    description: str | None = None
    enabled: bool = True
    fail_open: bool = False
    """When the policy cannot be evaluated, skip it instead of applying its action."""
    created_at: str | None = None
    problem: str | None = None
    """Why the stored row cannot be evaluated (bad JSON, an unknown key, a bad regex)."""
    raw_pattern: str | None = None
    """The pattern column as stored (shown when it cannot be parsed)."""

    def to_json(self) -> dict[str, Any]:
        """The policy as ``guard list --json`` prints it."""
        data: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "pattern": self.pattern if self.problem is None else self.raw_pattern,
            "action": self.action,
            "priority": self.priority,
            "enabled": self.enabled,
            "fail_open": self.fail_open,
            "created_at": self.created_at,
        }
        if self.problem is not None:
            data["problem"] = self.problem
        return data


def validate_action(action: Any) -> str:
    """The action, or ``PolicyError`` naming the ones accepted."""
    if action not in ACTIONS:
        raise PolicyError(f"unknown action {action!r}: use one of {', '.join(ACTIONS)}")
    return str(action)


def validate_name(name: Any) -> str:
    """A policy name: non-empty text on one line, at most ``MAX_NAME`` characters."""
    if not isinstance(name, str) or not name.strip():
        raise PolicyError("a policy needs a name")
    name = name.strip()
    if len(name) > MAX_NAME:
        raise PolicyError(f"the name is too long ({len(name)} characters; at most {MAX_NAME})")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in name):
        raise PolicyError("the name must not contain control characters")
    return str(name)


def parse_pattern(text: str) -> dict[str, str]:
    """Parse and validate a pattern given as JSON text (``--pattern``)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise PolicyError(f"the pattern is not valid JSON: {exc}") from None
    return validate_pattern(value)


def validate_pattern(pattern: Any) -> dict[str, str]:
    """A valid pattern, or ``PolicyError`` with the first problem found.

    Refused: anything but a JSON object, an empty object, an unknown key, a value that is not
    non-empty text, an unknown ``step_type``, a ``name_regex`` RE2 cannot compile (or RE2 is
    not installed: a backtracking engine is never used in its place).
    """
    if not isinstance(pattern, dict):
        raise PolicyError(f"the pattern must be a JSON object (got {_kind(pattern)})")
    if not pattern:
        raise PolicyError(f"the pattern is empty: give at least one of {', '.join(PATTERN_KEYS)}")
    for key, value in pattern.items():
        if key not in PATTERN_KEYS:
            raise PolicyError(f"unknown pattern key {key!r} (known: {', '.join(PATTERN_KEYS)})")
        if not isinstance(value, str) or not value:
            raise PolicyError(f"{key} must be non-empty text (got {_kind(value)})")
    definition = pattern.get("matches")
    if definition is not None and definition not in DEFINITIONS:
        raise PolicyError(f"unknown matches {definition!r} (known: {', '.join(DEFINITIONS)})")
    step_type = pattern.get("step_type")
    if step_type is not None and step_type not in STEP_TYPES:
        raise PolicyError(f"unknown step_type {step_type!r} (known: {', '.join(STEP_TYPES)})")
    regex = pattern.get("name_regex")
    if regex is not None:
        from agent_replay.services.guard.regex import RegexError, compile_linear

        try:
            compile_linear(regex)
        except RegexError as exc:
            raise PolicyError(f"name_regex {regex!r} is not usable: {exc}") from None
    # Keep the canonical key order, so a stored pattern reads the same whatever was typed.
    return {key: pattern[key] for key in PATTERN_KEYS if key in pattern}


def policy_from_row(row: tuple[Any, ...]) -> Policy:
    """A ``Policy`` from a ``policies`` row in ``POLICY_COLUMNS`` order.

    A row that cannot be evaluated (hand-edited JSON, a regex this build's RE2 refuses, an
    unknown action) still becomes a policy, with ``problem`` set: enforcement then fails it
    closed (or open, if the policy says so) rather than silently dropping it.
    """
    pid, name, description, raw, action, priority, enabled, fail_open, created_at = row
    problem = None
    pattern: dict[str, str] = {}
    try:
        pattern = parse_pattern(raw)
    except PolicyError as exc:
        problem = str(exc)
    if action not in ACTIONS and problem is None:
        problem = f"unknown action {action!r}"
    return Policy(
        id=str(pid),
        name=str(name),
        description=description,
        pattern=pattern,
        action=str(action),
        priority=int(priority or 0),
        enabled=bool(enabled),
        fail_open=bool(fail_open),
        created_at=created_at,
        problem=problem,
        raw_pattern=raw if isinstance(raw, str) else None,
    )


POLICY_COLUMNS: tuple[str, ...] = (
    "id",
    "name",
    "description",
    "pattern",
    "action",
    "priority",
    "enabled",
    "fail_open",
    "created_at",
)
"""The ``policies`` columns ``policy_from_row`` reads, in its order: what the store's reads
(``manage``, the query builder) and the hook's stdlib read (``enforce.load_policies``) select,
so both read a row one way. Both order policies highest ``priority`` first, then by ``name``
(a test checks they agree)."""


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "empty text" if not value else "text"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
