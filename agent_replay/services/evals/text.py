"""Which text of a trace the checks read, as ``Span``s that remember where they came from.

Values, never JSON keys: a payload ``{"email": "a@b.co", "note": "hi"}`` yields the spans
``a@b.co`` (path ``email``) and ``hi`` (path ``note``), so a key named ``password`` or ``drop``
is never mistaken for content. Numbers count as text (``1284310.55``); booleans and nulls don't.

Two views:

``output_spans``
    The agent's answer: the output of every ``output`` step, then the trace's ``output`` (left
    out when an output step already said the same). With neither, the last ``llm_call``'s output
    stands in.
``all_spans``
    Every text of the trace, in this order: the trace's ``input``; then for each step, in step
    order, its ``name``, ``input``, ``output`` and ``error``; then the trace's ``output`` and
    ``error``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agent_replay.services.evals.results import EXCERPT_WIDTH, Evidence

MAX_DEPTH = 64
"""JSON nesting followed when collecting values (deeper values are skipped)."""


@dataclass(frozen=True)
class Span:
    """One text value of a trace and where it is."""

    step: int | None
    """The step number; ``None`` for the trace's own fields."""
    field: str
    """``input``, ``output``, ``error`` or ``name``."""
    path: str
    """Where inside the field's JSON (``documents[0].text``); ``""`` for the field itself."""
    text: str

    def evidence(
        self,
        start: int = 0,
        end: int | None = None,
        note: str | None = None,
        *,
        context: bool = True,
    ) -> Evidence:
        """Evidence pointing at ``text[start:end]`` (the whole text by default), excerpted with
        the text around it (``context``) or alone (a whole sentence)."""
        end = len(self.text) if end is None else end
        field = f"{self.field}.{self.path}" if self.path else self.field
        if context:
            shown = excerpt(self.text, start, end)
        else:
            shown = excerpt(self.text[start:end].strip(), 0, len(self.text[start:end].strip()))
        return Evidence(self.step, field, shown, note)


def leaves(value: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """``(path, text)`` for each string or number inside a JSON value (keys excluded)."""
    if isinstance(value, str):
        if value.strip():
            yield path, value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield path, repr(value) if isinstance(value, float) else str(value)
    elif depth < MAX_DEPTH:
        if isinstance(value, dict):
            for key, item in value.items():
                yield from leaves(item, f"{path}.{key}" if path else str(key), depth + 1)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield from leaves(item, f"{path}[{index}]", depth + 1)


def field_spans(step: int | None, field: str, value: Any) -> list[Span]:
    """The spans of one field's value."""
    return [Span(step, field, path, text) for path, text in leaves(value)]


def output_spans(trace: Mapping[str, Any]) -> list[Span]:
    """The agent's answer (see the module doc)."""
    spans: list[Span] = []
    for step in trace.get("steps") or []:
        if step.get("step_type") == "output":
            spans.extend(field_spans(step["step_number"], "output", step.get("output")))
    said = {span.text.strip() for span in spans}
    for span in field_spans(None, "output", trace.get("output")):
        if span.text.strip() not in said:
            spans.append(span)
    if spans:
        return spans
    llm_calls = [s for s in trace.get("steps") or [] if s.get("step_type") == "llm_call"]
    if llm_calls:
        last = llm_calls[-1]
        return field_spans(last["step_number"], "output", last.get("output"))
    return []


def all_spans(trace: Mapping[str, Any]) -> list[Span]:
    """Every text of the trace (see the module doc)."""
    spans = field_spans(None, "input", trace.get("input"))
    for step in trace.get("steps") or []:
        number = step["step_number"]
        if step.get("name"):
            spans.append(Span(number, "name", "", str(step["name"])))
        spans.extend(field_spans(number, "input", step.get("input")))
        spans.extend(field_spans(number, "output", step.get("output")))
        if step.get("error"):
            spans.append(Span(number, "error", "", str(step["error"])))
    spans.extend(field_spans(None, "output", trace.get("output")))
    if trace.get("error"):
        spans.append(Span(None, "error", "", str(trace["error"])))
    return spans


def excerpt(text: str, start: int, end: int, width: int = EXCERPT_WIDTH) -> str:
    """``text[start:end]`` with context on both sides, at most ``width`` characters, on one line.

    Cut ends are marked with ``…``.
    """
    start, end = max(0, start), max(start, min(end, len(text)))
    if end - start >= width:
        return _one_line(text[start : start + width - 1]) + "…"
    room = width - (end - start)
    before = min(start, room // 2)
    after = min(len(text) - end, room - before)
    before = min(start, room - after)
    lo, hi = start - before, end + after
    out = _one_line(text[lo:hi])
    return ("…" if lo > 0 else "") + out + ("…" if hi < len(text) else "")


_SPACE = re.compile(r"\s+")


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentences(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each sentence: split after ``.``, ``!``, ``?`` and at line breaks."""
    position = 0
    for match in _SENTENCE_END.finditer(text):
        if text[position : match.start()].strip():
            yield position, match.start()
        position = match.end()
    if text[position:].strip():
        yield position, len(text)
