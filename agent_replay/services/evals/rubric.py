"""Custom rubrics: regex criteria over a trace's text, written in YAML or JSON.

A rubric::

    name: support-answer            # stored as evaluator "rubric:support-answer"
    threshold: 0.75                 # pass mark, 0..1 (default 0.7)
    criteria:
      - name: cites the refund window
        pattern: '\\b5-7 business days\\b'
        expected: true              # the pattern must match (default true)
        weight: 2                   # relative weight (default 1)
      - name: no instant-refund promise
        pattern: '\\binstant refunds?\\b'
        expected: false             # the pattern must not match
      - name: searched the help center
        pattern: '^kb_search$'
        scope: all                  # output (default) or all
        case_sensitive: true        # default false: patterns ignore case

Which text a criterion reads (``scope``):

- ``output`` (the default): the agent's answer: the output of every ``output`` step and the
  trace's ``output`` (the last ``llm_call``'s output when there is neither).
- ``all``: the trace's ``input``; each step's ``name``, ``input``, ``output`` and ``error`` in
  step order; the trace's ``output`` and ``error``.

JSON payloads are read value by value (each string or number inside, never the keys), and a
pattern is matched against each value separately, so ``^`` and ``$`` anchor a whole value.

A criterion scores 1 when "the pattern matches somewhere" equals ``expected``, else 0. The
rubric's score is the weighted mean; it passes at ``score >= threshold``. Patterns are RE2
syntax (https://github.com/google/re2/wiki/Syntax): matching is linear in the text whatever the
pattern, which is why backreferences and lookaround are not available. Patterns ignore case
(as people read ``hello|hi|welcome``); ``case_sensitive: true`` on a criterion matches case
exactly (``(?-i)`` inside a pattern does the same for part of it). ``\\b``, ``\\w`` and ``\\d``
are ASCII.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_replay.errors import UsageError
from agent_replay.services.evals.results import Criterion, EvalOutcome, Evidence
from agent_replay.services.evals.text import Span, all_spans, output_spans

MAX_EVIDENCE = 5
"""Matches kept as evidence per criterion."""
MAX_RUBRIC_BYTES = 1_000_000


class RubricError(UsageError):
    """A rubric file that can't be read or isn't valid (a usage error: exit 2)."""


class RubricCriterion(BaseModel):
    """One criterion of a rubric."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1)
    """What the criterion checks, shown in the results."""
    pattern: str = Field(min_length=1)
    """An RE2 regular expression."""
    expected: bool = True
    """``true``: the pattern must match; ``false``: it must not."""
    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    """Relative weight (the weights are normalized to sum to 1)."""
    scope: Literal["output", "all"] = "output"
    """``output``: the agent's answer; ``all``: every text of the trace."""
    case_sensitive: bool = False
    """``false`` (the default): the pattern ignores case; ``true``: case must match exactly."""
    description: str | None = None
    """A longer explanation (optional)."""


class Rubric(BaseModel):
    """A named set of weighted regex criteria with a pass mark."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=100)
    """The rubric's name; results are stored as ``rubric:<name>``."""
    threshold: float = Field(default=0.7, ge=0, le=1, allow_inf_nan=False)
    """The pass mark, 0..1."""
    description: str | None = None
    """What the rubric is for (optional)."""
    criteria: list[RubricCriterion] = Field(min_length=1)
    """At least one criterion."""

    @field_validator("criteria")
    @classmethod
    def _unique_names(cls, criteria: list[RubricCriterion]) -> list[RubricCriterion]:
        names = [c.name for c in criteria]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"criterion names must be unique: {', '.join(duplicates)}")
        return criteria

    @property
    def evaluator(self) -> str:
        return f"rubric:{self.name}"


@dataclass(frozen=True)
class CompiledRubric:
    """A validated rubric with its patterns compiled (RE2)."""

    rubric: Rubric
    patterns: tuple[Any, ...]
    source: str
    """Where it came from (the file name), for messages."""

    @property
    def evaluator(self) -> str:
        return self.rubric.evaluator


def _re2_options(case_sensitive: bool) -> Any:
    import re2  # deferred: only rubrics need RE2

    options = re2.Options()
    options.log_errors = False  # errors are reported here, not printed by the C++ library
    options.case_sensitive = case_sensitive
    return options


def compile_pattern(pattern: str, *, case_sensitive: bool = False) -> Any:
    """Compile an RE2 pattern (ignoring case unless ``case_sensitive``).

    Raises:
        ValueError: the pattern is not valid RE2 (the message says why).
    """
    import re2

    try:
        return re2.compile(pattern, options=_re2_options(case_sensitive))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else str(exc)
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(str(reason)) from None


def parse_rubric(data: Any, source: str = "rubric") -> CompiledRubric:
    """Validate a rubric's data (already parsed from YAML or JSON) and compile its patterns.

    Raises:
        RubricError: every problem, each with its path (``criteria[1].pattern: ...``).
    """
    if not isinstance(data, dict):
        raise RubricError(f"{source}: a rubric must be a mapping with name, threshold, criteria")
    try:
        rubric = Rubric.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = "".join(
                f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p))
                for i, p in enumerate(error["loc"])
            )
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                message = "unknown field"
            problems.append(f"{where}: {message}" if where else message)
        raise RubricError(
            f"{source}: invalid rubric: " + "; ".join(problems), hints=_HINTS
        ) from None
    patterns = []
    problems = []
    for index, criterion in enumerate(rubric.criteria):
        try:
            patterns.append(
                compile_pattern(criterion.pattern, case_sensitive=criterion.case_sensitive)
            )
        except ValueError as exc:
            problems.append(f"criteria[{index}].pattern ({criterion.name}): {exc}")
    if problems:
        raise RubricError(
            f"{source}: invalid rubric: " + "; ".join(problems),
            hints=[
                "patterns use RE2 syntax (linear time): no backreferences (\\1) or "
                "lookaround ((?=...), (?!...)); patterns ignore case unless case_sensitive: true"
            ],
        )
    return CompiledRubric(rubric, tuple(patterns), source)


_HINTS = [
    "a rubric has name, threshold (0..1) and criteria: a list of "
    "{name, pattern, expected (true|false), weight (> 0), scope (output|all), "
    "case_sensitive (true|false)}"
]


def load_rubric(path: str | Path) -> CompiledRubric:
    """Read a rubric from a ``.yaml``/``.yml`` or ``.json`` file (other names: JSON, then YAML).

    Raises:
        RubricError: the file can't be read or parsed, or the rubric is invalid.
    """
    file = Path(path).expanduser()
    source = str(path)
    try:
        if file.stat().st_size > MAX_RUBRIC_BYTES:
            raise RubricError(f"{source}: larger than {MAX_RUBRIC_BYTES:,} bytes")
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RubricError(f"rubric file not found: {source}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RubricError(f"cannot read the rubric {source}: {exc}") from None
    suffix = file.suffix.lower()
    if suffix == ".json":
        data = _json(text, source)
    elif suffix in (".yaml", ".yml"):
        data = _yaml(text, source)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = _yaml(text, source)
    return parse_rubric(data, source)


def _json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RubricError(
            f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None


def _yaml(text: str, source: str) -> Any:
    import yaml  # deferred: only rubric files need it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RubricError(f"{source}: not valid YAML{where}: {problem}") from None


def run_rubric(compiled: CompiledRubric, trace: Mapping[str, Any]) -> EvalOutcome:
    """Score a trace against a rubric (see the module doc)."""
    rubric = compiled.rubric
    total_weight = sum(c.weight for c in rubric.criteria)
    scopes: dict[str, list[Span]] = {}
    criteria: list[Criterion] = []
    for criterion, pattern in zip(rubric.criteria, compiled.patterns, strict=True):
        if criterion.scope not in scopes:
            scopes[criterion.scope] = (
                output_spans(trace) if criterion.scope == "output" else all_spans(trace)
            )
        matches: list[Evidence] = []
        count = 0
        for span in scopes[criterion.scope]:
            for match in pattern.finditer(span.text):
                count += 1
                if len(matches) < MAX_EVIDENCE:
                    matches.append(span.evidence(match.start(), match.end(), "match"))
                if not criterion.expected and count >= 100:
                    break
            if count and criterion.expected:
                break  # one match is enough to hold
        held = bool(count) == criterion.expected
        where = "the output" if criterion.scope == "output" else "the trace"
        if criterion.expected:
            summary = f"matched in {where}" if count else f"no match in {where}"
        else:
            summary = (
                f"{count} unwanted match{'es' if count != 1 else ''} in {where}"
                if count
                else f"no match in {where}, as expected"
            )
        criteria.append(
            Criterion(
                criterion.name,
                round(criterion.weight / total_weight, 4),
                1.0 if held else 0.0,
                summary,
                matches,
            )
        )
    failed = [c.name for c in criteria if not c.score]
    summary = (
        "every criterion held"
        if not failed
        else f"{len(failed)} of {len(criteria)} criteria missed: {', '.join(failed)}"
    )
    return EvalOutcome.scored(
        rubric.evaluator, criteria, rubric.threshold, summary, rubric=compiled.source
    )
