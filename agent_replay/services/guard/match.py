"""What a pattern means for one step: every given field must match (AND).

Text fields (``name_contains``, ``input_contains``, ``output_contains``) compare *folded* text
on both sides: Unicode NFKC normalization then case folding, so ``ＤＥＬＥＴＥ`` (full-width),
``Delete`` and ``delete`` are the same word, and a ligature or a composed accent cannot slip a
word past a policy. An input or output that is not text is searched in its text leaves: every
string, key and number of the JSON value, one per line (so ``"rm -rf"`` matches
``{"command": "rm -rf /tmp/x"}`` however the JSON would escape it).

``name_regex`` runs RE2 on the name as written (use ``(?i)`` for case-insensitivity); a step
without a name has the empty name.

Stdlib only (plus RE2 when a pattern has a regex); linear in the size of the step.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator, Mapping
from functools import cached_property, lru_cache
from typing import Any

MAX_DEPTH = 64
"""Nesting deeper than this is searched as its JSON text (a hostile input can't recurse us)."""


@lru_cache(maxsize=1024)
def fold(text: str) -> str:
    """``text`` normalized for comparison: NFKC, case-folded, NFKC again (folding can
    produce characters that compose)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def fold_uncached(text: str) -> str:
    """``fold`` for large, one-off texts (inputs and outputs), kept out of the cache."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def leaves(value: Any, depth: int = 0) -> Iterator[str]:
    """The text leaves of a JSON value: strings, keys, numbers and booleans."""
    if isinstance(value, str):
        yield value
    elif value is None:
        return
    elif isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, int | float):
        yield json.dumps(value)
    elif depth >= MAX_DEPTH:
        yield json.dumps(value, ensure_ascii=False, default=str)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from leaves(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from leaves(item, depth + 1)
    else:
        yield str(value)


def value_text(value: Any) -> str:
    """A JSON value as searchable text (its leaves, one per line)."""
    if isinstance(value, str):
        return value
    return "\n".join(leaves(value))


class StepText:
    """One step as patterns see it; folded texts are computed once, when first needed."""

    def __init__(self, step_type: str, name: str, input: Any = None, output: Any = None) -> None:
        self.step_type = step_type
        self.name = name
        self.input = input
        self.output = output

    @classmethod
    def from_step(cls, step: Mapping[str, Any]) -> StepText:
        """From a step object of the trace format (or ``guard check``'s stdin)."""
        name = step.get("name")
        return cls(
            str(step.get("step_type") or ""),
            name if isinstance(name, str) else "",
            step.get("input"),
            step.get("output"),
        )

    @cached_property
    def folded_name(self) -> str:
        return fold(self.name)

    @cached_property
    def folded_input(self) -> str:
        return fold_uncached(value_text(self.input))

    @cached_property
    def folded_output(self) -> str:
        return fold_uncached(value_text(self.output))


def pattern_matches(pattern: Mapping[str, str], step: StepText) -> bool:
    """Whether every field of ``pattern`` matches ``step``.

    Cheap tests run first (type, then the name) so a long input is only folded when the rest
    of the pattern already matched.

    Raises:
        RegexError: the pattern's ``name_regex`` cannot be compiled here.
    """
    step_type = pattern.get("step_type")
    if step_type is not None and step.step_type != step_type:
        return False
    needle = pattern.get("name_contains")
    if needle is not None and fold(needle) not in step.folded_name:
        return False
    regex = pattern.get("name_regex")
    if regex is not None:
        from agent_replay.services.guard.regex import search

        if not search(regex, step.name):
            return False
    if pattern.get("matches") == "destructive":
        from agent_replay.services.guard.danger import is_destructive  # deferred: RE2, ~2 ms

        if not is_destructive(step.name, step.input):
            return False
    needle = pattern.get("input_contains")
    if needle is not None and (step.input is None or fold(needle) not in step.folded_input):
        return False
    needle = pattern.get("output_contains")
    if needle is not None and (step.output is None or fold(needle) not in step.folded_output):
        return False
    return True
