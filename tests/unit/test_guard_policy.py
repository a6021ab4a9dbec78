"""Guard patterns: validation (what `guard add` refuses and why) and what a pattern matches,
including linear-time regexes against hostile input."""

from __future__ import annotations

import time

import pytest

from agent_replay.services.guard.match import StepText, fold, pattern_matches, value_text
from agent_replay.services.guard.policy import (
    Policy,
    PolicyError,
    parse_pattern,
    policy_from_row,
    validate_action,
    validate_name,
    validate_pattern,
)
from agent_replay.services.guard.regex import RegexError, compile_linear, search

# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("[1, 2]", "must be a JSON object (got an array)"),
        ('"text"', "must be a JSON object (got text)"),
        ("{}", "the pattern is empty"),
        ("{not json", "not valid JSON"),
        ('{"nam_regex": "x"}', "unknown pattern key 'nam_regex'"),
        ('{"name_contains": ""}', "name_contains must be non-empty text (got empty text)"),
        ('{"name_contains": 3}', "name_contains must be non-empty text (got a number)"),
        ('{"input_contains": null}', "input_contains must be non-empty text (got null)"),
        ('{"step_type": "tool"}', "unknown step_type 'tool'"),
        ('{"name_regex": "(?=delete)"}', "name_regex '(?=delete)' is not usable"),
        ('{"name_regex": "(\\\\w+)\\\\1"}', "is not usable: invalid escape sequence"),
        ('{"name_regex": "["}', "missing ]"),
    ],
)
def test_bad_patterns_are_refused_with_the_reason(pattern: str, reason: str) -> None:
    with pytest.raises(PolicyError, match=None) as caught:
        parse_pattern(pattern)
    assert reason in str(caught.value)


def test_a_valid_pattern_keeps_the_canonical_key_order() -> None:
    pattern = {"input_contains": "prod", "step_type": "tool_call", "name_regex": "(?i)del"}
    assert list(validate_pattern(pattern)) == ["step_type", "name_regex", "input_contains"]


@pytest.mark.parametrize("action", ["allow", "warn", "require_review", "deny"])
def test_the_four_actions_are_accepted(action: str) -> None:
    assert validate_action(action) == action


@pytest.mark.parametrize("action", ["block", "DENY", "", None])
def test_other_actions_are_refused(action: object) -> None:
    with pytest.raises(PolicyError, match="use one of allow, warn, require_review, deny"):
        validate_action(action)


@pytest.mark.parametrize("name", ["", "   ", "a\x1b[31mred", "x" * 201])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(PolicyError):
        validate_name(name)


def test_a_broken_stored_row_becomes_a_policy_with_its_problem() -> None:
    """Hand-edited rows are not dropped: enforcement must know they exist to fail closed."""
    row = ("pol_x", "broken", None, "{oops", "deny", 5, 1, 0, "2026-01-01T00:00:00.000Z")
    policy = policy_from_row(row)
    assert policy.problem is not None and "not valid JSON" in policy.problem
    assert (policy.action, policy.priority, policy.enabled) == ("deny", 5, True)
    assert policy.to_json()["pattern"] == "{oops"


# --- matching ------------------------------------------------------------------------------


def step(name: str = "", step_type: str = "tool_call", **fields: object) -> StepText:
    return StepText.from_step({"step_type": step_type, "name": name, **fields})


def test_every_given_field_must_match() -> None:
    pattern = {"step_type": "tool_call", "name_contains": "delete", "input_contains": "prod"}
    assert pattern_matches(pattern, step("delete_user", input={"env": "prod"}))
    assert not pattern_matches(pattern, step("delete_user", input={"env": "staging"}))
    assert not pattern_matches(pattern, step("delete_user", "llm_call", input={"env": "prod"}))
    assert not pattern_matches(pattern, step("list_users", input={"env": "prod"}))


@pytest.mark.parametrize(
    "name",
    ["DELETE_user", "Delete_User", "ＤＥＬＥＴＥ_user", "delete_user", "bulk-deLETE"],
    ids=["upper", "title", "full-width", "lower", "inside"],
)
def test_name_contains_is_case_insensitive_and_unicode_normalized(name: str) -> None:
    assert pattern_matches({"name_contains": "delete"}, step(name))


def test_folding_handles_ligatures_and_composed_accents() -> None:
    assert fold("ﬁle") == fold("FILE")  # the fi ligature
    assert fold("Cafe\u0301") == fold("CAFÉ")  # e + combining acute == precomposed É
    assert pattern_matches({"name_contains": "straße"}, step("STRASSE_lookup"))


def test_input_contains_searches_the_text_leaves_not_the_json_encoding() -> None:
    """A command with quotes matches as typed, whatever JSON escaping would make of it."""
    tool_input = {"command": 'echo "hi" && rm -rf /tmp/x', "nested": [{"env": "Production"}]}
    assert pattern_matches({"input_contains": 'echo "hi"'}, step(input=tool_input))
    assert pattern_matches({"input_contains": "production"}, step(input=tool_input))
    assert pattern_matches({"input_contains": "nested"}, step(input=tool_input))  # keys too
    assert not pattern_matches({"input_contains": "rm -rf /etc"}, step(input=tool_input))
    assert value_text(42) == "42"


def test_output_contains_needs_an_output() -> None:
    assert pattern_matches({"output_contains": "password"}, step(output="the Password is x"))
    assert not pattern_matches({"output_contains": "password"}, step())


def test_name_regex_is_case_sensitive_unless_asked() -> None:
    assert pattern_matches({"name_regex": "^delete_"}, step("delete_user"))
    assert not pattern_matches({"name_regex": "^delete_"}, step("DELETE_user"))
    assert pattern_matches({"name_regex": "(?i)^delete_"}, step("DELETE_user"))


def test_a_step_without_a_name_has_the_empty_name() -> None:
    assert pattern_matches({"name_regex": "^$"}, StepText.from_step({"step_type": "thought"}))
    assert not pattern_matches({"name_contains": "x"}, StepText.from_step({"step_type": "x"}))


# --- linear time ---------------------------------------------------------------------------

HOSTILE = "a" * 100_000 + "!"  # 100 KB: with Python's re, (a+)+$ would never return


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+$", "(a*)*b", "(x+x+)+y"])
def test_catastrophic_backtracking_patterns_return_in_milliseconds(pattern: str) -> None:
    compile_linear(pattern)  # compiling is not what is timed
    began = time.perf_counter()
    assert not search(pattern, HOSTILE)
    assert time.perf_counter() - began < 0.05


def test_a_hostile_name_and_input_are_matched_in_milliseconds() -> None:
    """The whole check: a regex, a contains over a 100 KB input, a folded 100 KB name."""
    policy = Policy(
        "pol_x",
        "evil",
        {"name_regex": "(a+)+$", "name_contains": "zzz", "input_contains": "never"},
        "deny",
    )
    hostile = StepText("tool_call", HOSTILE, {"command": HOSTILE, "list": [HOSTILE] * 3})
    compile_linear("(a+)+$")
    began = time.perf_counter()
    assert not pattern_matches(policy.pattern, hostile)
    assert not pattern_matches({"input_contains": "never"}, hostile)
    assert time.perf_counter() - began < 0.1


def test_re2_refuses_backtracking_constructs_when_compiled() -> None:
    for pattern in ("(?=x)", "(?<=x)y", r"(\w)\1"):
        with pytest.raises(RegexError):
            compile_linear(pattern)
