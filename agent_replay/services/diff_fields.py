"""Field-level differences between two JSON values, and one-line excerpts around them.

``json_differences`` walks two values (objects key by key, lists element by element after
aligning equal elements, anything else as a whole) and lists what changed, was added or was
removed, path by path: what ``services.diff`` reports for each paired step and for the traces
themselves, and what the golden checks and the fork editor compare. Pure: no store, no clock,
no I/O. Must not import Textual or Rich.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal

from agent_replay.trace.io import canonical_json

DiffKind = Literal["changed", "added", "removed"]

MAX_FIELD_DIFFS = 50
"""Differences listed per pair and field; the rest are counted in ``StepPair.truncated``."""


class _Missing:
    """The value of a key or index that one side does not have."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()
"""Stands for "absent" in ``FieldDiff.a`` / ``FieldDiff.b`` (JSON ``null`` is a value)."""


@dataclass(frozen=True)
class FieldDiff:
    """One difference inside a field: where, what kind, and both values.

    ``path`` starts with the field's name and follows JSON into it: ``input.sql``,
    ``input.messages[0].content``, ``decision.chosen``, ``output``.
    """

    field: str
    """The top-level field: ``input``, ``output``, ``name``, ``error``, ``model``, ..."""
    path: str
    """Where inside the field (the field's name itself when the whole value differs)."""
    kind: DiffKind
    """``changed`` (both sides have a value), ``added`` (only B), ``removed`` (only A)."""
    a: Any
    """A's value at ``path`` (``MISSING`` when added)."""
    b: Any
    """B's value at ``path`` (``MISSING`` when removed)."""

    def context(self, width: int = 60) -> tuple[str, str]:
        """Both values as one-line excerpts around their first difference (unescaped)."""
        return value_context(self.a, self.b, width)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"field": self.field, "path": self.path, "kind": self.kind}
        if self.a is not MISSING:
            out["a"] = self.a
        if self.b is not MISSING:
            out["b"] = self.b
        return out


def json_differences(
    a: Any, b: Any, field_name: str, path: str, *, limit: int = MAX_FIELD_DIFFS
) -> tuple[list[FieldDiff], int]:
    """The leaf-level differences between two JSON values.

    Objects are compared key by key, lists element by element after aligning equal elements
    (so one inserted message is one ``added`` difference), anything else as a whole.

    Returns:
        Up to ``limit`` differences, and how many more there were.
    """
    found: list[FieldDiff] = []
    extra = 0

    def add(item: FieldDiff) -> None:
        nonlocal extra
        if len(found) < limit:
            found.append(item)
        else:
            extra += 1

    def walk(x: Any, y: Any, where: str) -> None:
        if x is MISSING:
            add(FieldDiff(field_name, where, "added", MISSING, y))
        elif y is MISSING:
            add(FieldDiff(field_name, where, "removed", x, MISSING))
        elif _same(x, y):
            return
        elif isinstance(x, dict) and isinstance(y, dict):
            for key in dict.fromkeys([*x, *y]):
                walk(x.get(key, MISSING), y.get(key, MISSING), f"{where}.{key}")
        elif isinstance(x, list) and isinstance(y, list):
            _walk_lists(x, y, where, walk)
        else:
            add(FieldDiff(field_name, where, "changed", x, y))

    if a is None and b is not None:
        a = MISSING
    elif b is None and a is not None:
        b = MISSING
    walk(a, b, path)
    return found, extra


def _walk_lists(x: list[Any], y: list[Any], where: str, walk: Any) -> None:
    keys_x = [canonical_json(v) for v in x]
    keys_y = [canonical_json(v) for v in y]
    matcher = difflib.SequenceMatcher(None, keys_x, keys_y, autojunk=False)
    for tag, i0, i1, j0, j1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        common = min(i1 - i0, j1 - j0) if tag == "replace" else 0
        for k in range(common):
            walk(x[i0 + k], y[j0 + k], f"{where}[{i0 + k}]")
        for i in range(i0 + common, i1):
            walk(x[i], MISSING, f"{where}[{i}]")
        for j in range(j0 + common, j1):
            walk(MISSING, y[j], f"{where}[{j}]")


def _same(x: Any, y: Any) -> bool:
    if type(x) is type(y) or (is_number(x) and is_number(y)):
        if isinstance(x, dict | list):
            return canonical_json(x) == canonical_json(y)
        return bool(x == y)
    return False


def is_number(value: Any) -> bool:
    """Whether a JSON value is a number (``bool`` is not, though Python says it is an int)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def value_context(a: Any, b: Any, width: int = 60) -> tuple[str, str]:
    """Two values as one-line excerpts of at most ``width`` characters, each cut around the
    first character where their texts differ (strings as they are, other values as JSON).
    Not escaped: the caller escapes producer text for its terminal."""
    ta, tb = _as_text(a), _as_text(b)
    if len(ta) <= width and len(tb) <= width:
        return ta, tb
    first = next(
        (k for k, (ca, cb) in enumerate(zip(ta, tb, strict=False)) if ca != cb),
        min(len(ta), len(tb)),
    )
    start = 0 if first <= width // 2 else first - width // 3
    return _window(ta, start, width), _window(tb, start, width)


def _as_text(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    if isinstance(value, str):
        return value.replace("\n", "⏎")
    return canonical_json(value).decode()


def _window(text: str, start: int, width: int) -> str:
    start = min(start, max(0, len(text) - width + 1))
    prefix = "…" if start > 0 else ""
    room = width - len(prefix)
    body = text[start : start + room]
    if start + room < len(text):
        body = body[: room - 1] + "…"
    return prefix + body
