"""Custom rubrics: loading YAML and JSON, validation with clear errors, RE2 patterns, which text
each scope reads, and weighted scoring."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from agent_replay.services.evals.rubric import RubricError, load_rubric, parse_rubric, run_rubric

TRACE: dict[str, Any] = {
    "id": "trc_r",
    "agent_name": "support",
    "status": "completed",
    "input": {"question": "How long do refunds take?"},
    "output": "Refunds take 5-7 business days. Sorry for the wait!",
    "steps": [
        {
            "step_number": 1,
            "step_type": "retrieval",
            "name": "kb_search",
            "input": {"query": "refund time"},
            "output": {"text": "5-7 business days"},
        },
        {
            "step_number": 2,
            "step_type": "output",
            "name": "reply",
            "output": "Refunds take 5-7 business days. Sorry for the wait!",
        },
    ],
}

YAML = """
name: support-answer
threshold: 0.75
criteria:
  - name: cites the refund window
    pattern: '(?i)\\b5-7 business days\\b'
    weight: 2
  - name: no apology
    pattern: '(?i)\\bsorry\\b'
    expected: false
  - name: searched the help center
    pattern: '^kb_search$'
    scope: all
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_yaml_rubric_scores_weighted_criteria(tmp_path: Path) -> None:
    """Held: the window (weight 2) and the search (1); missed: the apology (1) -> 0.75."""
    outcome = run_rubric(load_rubric(write(tmp_path, "r.yaml", YAML)), TRACE)
    assert outcome.evaluator == "rubric:support-answer"
    assert [c.score for c in outcome.criteria] == [1.0, 0.0, 1.0]
    assert [c.weight for c in outcome.criteria] == [0.5, 0.25, 0.25]
    assert (outcome.score, outcome.threshold, outcome.passed) == (0.75, 0.75, True)


def test_unwanted_matches_are_evidence_with_step_and_text(tmp_path: Path) -> None:
    """The apology is found in output step 2 and in the trace's output (values, not keys)."""
    outcome = run_rubric(load_rubric(write(tmp_path, "r.yaml", YAML)), TRACE)
    apology = outcome.criteria[1]
    assert apology.summary == "1 unwanted match in the output"
    (evidence,) = apology.evidence
    assert (evidence.step, evidence.field) == (2, "output")
    assert "Sorry" in evidence.text


def test_the_output_scope_reads_only_the_answer() -> None:
    """``kb_search`` is a step name, not part of the answer: an output-scoped search misses."""
    rubric = parse_rubric({"name": "r", "criteria": [{"name": "tool", "pattern": "kb_search"}]})
    assert run_rubric(rubric, TRACE).criteria[0].score == 0.0


def test_the_all_scope_reads_inputs_names_outputs_and_errors() -> None:
    rubric = parse_rubric(
        {
            "name": "r",
            "criteria": [
                {"name": "question", "pattern": "How long", "scope": "all"},
                {"name": "query", "pattern": "^refund time$", "scope": "all"},
            ],
        }
    )
    outcome = run_rubric(rubric, TRACE)
    assert [c.score for c in outcome.criteria] == [1.0, 1.0]
    assert outcome.criteria[0].evidence[0].step is None  # the trace's own input
    assert outcome.criteria[1].evidence[0].field == "input.query"


def test_json_keys_are_never_matched() -> None:
    """``question`` is a key of the trace input, never text."""
    rubric = parse_rubric(
        {"name": "r", "criteria": [{"name": "k", "pattern": "question", "scope": "all"}]}
    )
    assert run_rubric(rubric, TRACE).criteria[0].score == 0.0


def test_a_json_rubric_loads(tmp_path: Path) -> None:
    data = {"name": "j", "threshold": 1, "criteria": [{"name": "c", "pattern": "Refunds"}]}
    outcome = run_rubric(load_rubric(write(tmp_path, "r.json", json.dumps(data))), TRACE)
    assert outcome.passed and outcome.score == 1.0


def test_the_threshold_defaults_to_0_7() -> None:
    rubric = parse_rubric({"name": "r", "criteria": [{"name": "c", "pattern": "x"}]})
    assert rubric.rubric.threshold == 0.7


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"criteria": [{"name": "c", "pattern": "x"}]}, "name: Field required"),
        ({"name": "r", "criteria": []}, "criteria: List should have at least 1 item"),
        (
            {"name": "r", "threshold": 1.5, "criteria": [{"name": "c", "pattern": "x"}]},
            "threshold: Input should be less than or equal to 1",
        ),
        (
            {"name": "r", "criteria": [{"name": "c", "pattern": "x", "weight": 0}]},
            "criteria[0].weight: Input should be greater than 0",
        ),
        (
            {"name": "r", "criteria": [{"name": "c", "pattern": "x", "expected": "maybe"}]},
            "criteria[0].expected: Input should be a valid boolean",
        ),
        (
            {"name": "r", "criteria": [{"name": "c", "patern": "x"}]},
            "criteria[0].patern: unknown field",
        ),
        (
            {"name": "r", "criteria": [{"name": "c", "pattern": "x", "scope": "steps"}]},
            "criteria[0].scope: Input should be 'output' or 'all'",
        ),
        (
            {
                "name": "r",
                "criteria": [{"name": "c", "pattern": "x"}, {"name": "c", "pattern": "y"}],
            },
            "criterion names must be unique: c",
        ),
        (["name", "r"], "a rubric must be a mapping"),
    ],
)
def test_invalid_rubrics_are_rejected_with_the_path_of_each_problem(data: Any, message: str):
    with pytest.raises(RubricError) as caught:
        parse_rubric(data, "r.yaml")
    assert message in caught.value.message
    assert caught.value.message.startswith("r.yaml")
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("pattern", [r"(a)\1", r"foo(?=bar)", r"(?<!x)y", "unclosed("])
def test_patterns_re2_cannot_run_in_linear_time_are_rejected(pattern: str) -> None:
    """Backreferences and lookaround are refused (RE2 guarantees linear time), with a hint."""
    with pytest.raises(RubricError) as caught:
        parse_rubric({"name": "r", "criteria": [{"name": "bad", "pattern": pattern}]}, "r.yaml")
    assert "criteria[0].pattern (bad):" in caught.value.message
    assert "RE2" in caught.value.hints[0]


def test_a_catastrophic_pattern_runs_in_linear_time() -> None:
    """``(a+)+$`` on 100,000 a's and a b: instant with RE2 (hours with backtracking)."""
    rubric = parse_rubric({"name": "r", "criteria": [{"name": "c", "pattern": "(a+)+$"}]})
    trace = {**TRACE, "output": "a" * 100_000 + "b", "steps": []}
    started = time.perf_counter()
    run_rubric(rubric, trace)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("r.yaml", "name: [unclosed", "not valid YAML (line 1"),
        ("r.json", "{nope", "not valid JSON (line 1"),
        ("missing.yaml", None, "rubric file not found"),
    ],
)
def test_unreadable_rubric_files(tmp_path: Path, name: str, text: str | None, message: str):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(RubricError) as caught:
        load_rubric(path)
    assert message in caught.value.message


# --- the README's rubric, as the README describes it -------------------------------------------

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_rubric() -> str:
    """The first YAML block of the README's "Custom rubrics" paragraph, as written there."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("**Custom rubrics**") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    return section[start : section.index("```", start)]


def answered(text: str) -> dict[str, Any]:
    step = {"step_number": 1, "step_type": "output", "name": "reply", "output": text}
    return {"id": "trc_g", "agent_name": "a", "status": "completed", "steps": [step]}


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("Hello! Your refund is on its way. Let me know if there is anything else.", 1.0),
        ("Your damn order is late.", 0.0),
        ("Welcome back! Your order shipped today.", 0.6667),
        ("Hello! The damn system crashed again.", 0.3333),
    ],
    ids=["greets and helps", "rude", "greets only", "greets and swears"],
)
def test_the_readmes_rubric_on_greetings_and_profanity(tmp_path: Path, text: str, score: float):
    """``hello|hi|welcome`` matches "Hello!" and "Welcome": patterns ignore case by default."""
    compiled = load_rubric(write(tmp_path, "friendly.yaml", readme_rubric()))
    outcome = run_rubric(compiled, answered(text))
    assert outcome.score == score
    assert outcome.passed is (score >= 0.6)


def test_case_sensitive_true_matches_case_exactly(tmp_path: Path) -> None:
    rubric = {
        "name": "exact",
        "criteria": [
            {"name": "lower", "pattern": "hello", "case_sensitive": True},
            {"name": "any", "pattern": "hello"},
        ],
    }
    outcome = run_rubric(parse_rubric(rubric), answered("Hello there"))
    assert [c.score for c in outcome.criteria] == [0.0, 1.0]
    assert run_rubric(parse_rubric(rubric), answered("hello there")).score == 1.0


def test_case_sensitive_must_be_a_boolean() -> None:
    rubric = {"name": "x", "criteria": [{"name": "c", "pattern": "a", "case_sensitive": "maybe"}]}
    with pytest.raises(RubricError, match=r"criteria\[0\]\.case_sensitive"):
        parse_rubric(rubric)
