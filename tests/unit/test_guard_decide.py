"""The precedence rule: exceptions, strictest wins, priority breaks ties; broken policies fail
closed unless they opt into failing open; an unreadable store denies."""

from __future__ import annotations

from typing import Any

from agent_replay.services.guard.decide import NO_MATCH, evaluate, failure
from agent_replay.services.guard.match import StepText
from agent_replay.services.guard.policy import Policy

DELETE = StepText("tool_call", "delete_user", {"user_id": "*", "env": "production"})


def policy(name: str, action: str, priority: int = 0, **options: Any) -> Policy:
    pattern = options.pop("pattern", {"name_contains": "delete"})
    return Policy(f"pol_{name}", name, pattern, action, priority, **options)


def decide(*policies: Policy, step: StepText = DELETE) -> tuple[str, str | None]:
    evaluation = evaluate(policies, step)
    return evaluation.action, evaluation.policy.name if evaluation.policy else None


def test_no_match_allows_and_is_not_a_match() -> None:
    evaluation = evaluate([policy("other", "deny", pattern={"name_contains": "drop"})], DELETE)
    assert (evaluation.action, evaluation.reason, evaluation.matched) == ("allow", NO_MATCH, False)


def test_the_strictest_action_wins_whatever_the_priority() -> None:
    assert decide(policy("w", "warn", 99), policy("r", "require_review", 1)) == (
        "require_review",
        "r",
    )
    assert decide(policy("r", "require_review", 99), policy("d", "deny", 1)) == ("deny", "d")


def test_priority_breaks_ties_between_policies_of_one_action_then_the_name() -> None:
    assert decide(policy("low", "deny", 1), policy("high", "deny", 5)) == ("deny", "high")
    assert decide(policy("b", "deny", 5), policy("a", "deny", 5)) == ("deny", "a")


def test_an_allow_of_higher_priority_carves_an_exception() -> None:
    evaluation = evaluate([policy("no-deletes", "deny", 10), policy("ok", "allow", 20)], DELETE)
    assert (evaluation.action, evaluation.policy.name) == ("allow", "ok")  # type: ignore[union-attr]
    overridden = {m.policy.name: m.overridden for m in evaluation.matches}
    assert overridden == {"ok": False, "no-deletes": True}
    assert "makes an exception to" in evaluation.reason


def test_an_allow_of_equal_or_lower_priority_does_not() -> None:
    assert decide(policy("d", "deny", 10), policy("a", "allow", 10)) == ("deny", "d")
    assert decide(policy("d", "deny", 10), policy("a", "allow", 9)) == ("deny", "d")


def test_an_exception_only_excuses_what_it_outranks() -> None:
    """allow@20 excuses deny@10 but not require_review@30."""
    assert decide(
        policy("d", "deny", 10), policy("a", "allow", 20), policy("r", "require_review", 30)
    ) == ("require_review", "r")


def test_the_deciding_policys_description_is_the_reason() -> None:
    evaluation = evaluate([policy("d", "deny", description="No deletes in prod.")], DELETE)
    assert evaluation.reason == 'policy "d" (deny): No deletes in prod.'
    bare = evaluate([policy("d", "deny")], DELETE)
    assert bare.reason == 'policy "d" (deny) matched {"name_contains": "delete"}'


def test_disabled_policies_are_ignored() -> None:
    assert decide(policy("d", "deny", enabled=False)) == ("allow", None)


def test_a_broken_deny_policy_fails_closed() -> None:
    broken = policy("broken", "deny", pattern={}, problem="the pattern is not valid JSON")
    evaluation = evaluate([broken], DELETE)
    assert (evaluation.action, evaluation.matched) == ("deny", True)
    assert evaluation.matches[0].error == "the pattern is not valid JSON"
    assert "could not be evaluated" in evaluation.reason and "fails closed" in evaluation.reason


def test_a_broken_policy_that_fails_open_is_skipped_with_a_warning() -> None:
    broken = policy("broken", "deny", pattern={}, problem="bad", fail_open=True)
    evaluation = evaluate([broken], DELETE)
    assert (evaluation.action, evaluation.matched) == ("allow", False)
    assert evaluation.warnings == ('policy "broken" skipped: bad',)


def test_a_broken_allow_never_opens_a_hole() -> None:
    broken_allow = policy("exception", "allow", 100, pattern={}, problem="bad")
    assert decide(broken_allow, policy("d", "deny", 1)) == ("deny", "d")


def test_a_regex_this_build_cannot_compile_fails_closed() -> None:
    """A row written by another build (or by hand) with a regex RE2 refuses."""
    odd = policy("odd", "require_review", pattern={"name_regex": "(?=x)"})
    evaluation = evaluate([odd], DELETE)
    assert evaluation.action == "require_review"
    assert "name_regex cannot be compiled" in (evaluation.matches[0].error or "")


def test_an_unreadable_store_denies_and_says_how_to_get_out() -> None:
    evaluation = failure("DatabaseError: file is not a database")
    assert (evaluation.action, evaluation.failed, evaluation.matched) == ("deny", True, True)
    assert "fails closed" in evaluation.reason and "--enforce" in evaluation.reason
    assert evaluation.to_json()["failed_closed"] is True


def test_the_stored_form_never_puts_a_block_verdict_in_match_entries() -> None:
    """Match entries keep their action under policy_action: an overridden deny must not make
    the dashboard count an allowed call as a block."""
    evaluation = evaluate([policy("d", "deny", 10), policy("a", "allow", 20)], DELETE)
    data = evaluation.to_json()
    assert data["action"] == "allow"
    assert all("action" not in m and "policy_action" in m for m in data["matches"])
