"""Whether a recorded ``guard_check`` step blocked its action, for a step object in memory.

The same rule as ``store.stats.guard_blocked`` (which the dashboard and the live watch use
in SQL): the check has an error, or its output or metadata carries a verdict (``action``,
``verdict`` or ``decision``) of ``deny``, ``denied``, ``block`` or ``blocked`` (any case,
nested anywhere), or ``"blocked": true``, or is one of those words as a string. The
top-level ``decision`` of a check recorded by ``hook --enforce`` is what the harness was told,
so a ``require_review`` that asked Claude Code is not a block, and one Gemini CLI had to deny
is. Match entries keep their action under ``policy_action``, which is never read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BLOCK_KEYS: tuple[str, ...] = ("action", "verdict", "decision")
"""Keys carrying a verdict (``store.stats.BLOCK_KEYS``; a test keeps them equal). Repeated
here so the timeline widget that calls this never imports the store."""
BLOCK_VALUES: tuple[str, ...] = ("deny", "denied", "block", "blocked")
"""Verdicts that stopped the action (``store.stats.BLOCK_VALUES``)."""

_VALUES = frozenset(BLOCK_VALUES)
_DEPTH = 32


def is_blocked(step: Mapping[str, Any]) -> bool:
    """Whether ``step`` (a step object) is a guard check that blocked its action."""
    if step.get("step_type") != "guard_check":
        return False
    if step.get("error"):
        return True
    return _says_block(step.get("output")) or _says_block(step.get("metadata"))


def _says_block(value: Any, depth: int = 0) -> bool:
    if isinstance(value, str):
        return depth == 0 and value.lower() in _VALUES
    if depth > _DEPTH:
        return False
    if isinstance(value, Mapping):
        for raw_key, item in value.items():
            key = str(raw_key).lower()
            if key == "blocked" and item is True:
                return True
            if key in BLOCK_KEYS and isinstance(item, str) and item.lower() in _VALUES:
                return True
            if isinstance(item, Mapping | list) and _says_block(item, depth + 1):
                return True
        return False
    if isinstance(value, list):
        return any(_says_block(item, depth + 1) for item in value if not isinstance(item, str))
    return False
