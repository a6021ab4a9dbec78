"""Several matching policies -> one decision (the precedence rule).

The rule, for the enabled policies whose pattern matches a step:

1. **Exceptions.** An ``allow`` policy overrides every matching ``deny``,
   ``require_review`` and ``warn`` policy of *strictly lower* priority. At equal priority
   the stricter policy stands: an exception must outrank what it excuses.
2. **Strictest wins.** Of the policies left, the strictest action decides:
   ``deny`` > ``require_review`` > ``warn`` > ``allow``.
3. **Priority breaks ties.** Among policies of that action, the highest priority is the
   deciding policy (its name and description are the reason given); then the name, A-Z.

No matching policy: the step is allowed, and enforcement records nothing.

A policy that cannot be evaluated (its stored pattern is broken, or its regex cannot be
compiled here) counts as *matching* when its action is ``deny`` or ``require_review`` (it
fails closed), unless it was added with ``--fail-open``; a broken ``warn`` or ``allow`` policy
is skipped (a broken exception must never open a hole). When no policy can be read at all (a
corrupt store), the decision is ``deny`` (``failure``).

Stdlib only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from agent_replay.services.guard.match import StepText, pattern_matches
from agent_replay.services.guard.policy import STRICTNESS, Policy
from agent_replay.services.guard.regex import RegexError

FAIL_CLOSED_ACTIONS = frozenset({"deny", "require_review"})
"""Actions whose policy is applied when it cannot be evaluated (unless ``fail_open``)."""


class Match(NamedTuple):
    """A policy that matched the step (or could not be evaluated and fails closed)."""

    policy: Policy
    overridden: bool = False
    """An ``allow`` of higher priority made an exception to this policy."""
    error: str | None = None
    """Why the policy could not be evaluated (it is applied as if it matched)."""

    def to_json(self) -> dict[str, Any]:
        """The match as commands print it and guard_check steps store it.

        The action is under ``policy_action``: a stored guard check's ``action`` key is its
        verdict, which the dashboard counts blocks by (``store.stats.guard_blocked``).
        """
        data: dict[str, Any] = {
            "policy": self.policy.name,
            "id": self.policy.id,
            "policy_action": self.policy.action,
            "priority": self.policy.priority,
            "overridden": self.overridden,
        }
        if self.error is not None:
            data["error"] = self.error
        return data


class Evaluation(NamedTuple):
    """The decision for one step."""

    action: str
    """The winning action; ``allow`` when nothing matched."""
    policy: Policy | None
    """The deciding policy (``None``: no match, or the policies could not be read)."""
    reason: str
    """Why, in one line: the deciding policy, its description, an exception it made."""
    matches: tuple[Match, ...] = ()
    """Every matching policy, strictest and highest priority first (overridden ones too)."""
    warnings: tuple[str, ...] = ()
    """Fail-open policies skipped because they could not be evaluated."""
    failed: bool = False
    """The policies could not be read at all; the decision failed closed."""

    @property
    def matched(self) -> bool:
        """A policy matched (or the check failed closed): enforcement records the decision."""
        return bool(self.matches) or self.failed

    def to_json(self) -> dict[str, Any]:
        """The decision as ``guard check --json`` prints it and guard_check steps store it."""
        data: dict[str, Any] = {
            "action": self.action,
            "policy": self.policy.name if self.policy else None,
            "reason": self.reason,
            "matches": [m.to_json() for m in self.matches],
        }
        if self.warnings:
            data["warnings"] = list(self.warnings)
        if self.failed:
            data["failed_closed"] = True
        return data


NO_MATCH = "no policy matched"


def evaluate(policies: Iterable[Policy], step: StepText) -> Evaluation:
    """Match ``step`` against the enabled ``policies`` and decide."""
    matches: list[Match] = []
    warnings: list[str] = []
    for policy in policies:
        if not policy.enabled:
            continue
        problem = policy.problem
        if problem is None:
            try:
                if pattern_matches(policy.pattern, step):
                    matches.append(Match(policy))
                continue
            except RegexError as exc:
                problem = f"name_regex cannot be compiled: {exc}"
        if policy.action in FAIL_CLOSED_ACTIONS and not policy.fail_open:
            matches.append(Match(policy, error=problem))
        else:
            warnings.append(f'policy "{policy.name}" skipped: {problem}')
    return decide(matches, warnings=warnings)


def decide(matches: list[Match], *, warnings: Iterable[str] = ()) -> Evaluation:
    """Apply the precedence rule to the policies that matched."""
    if not matches:
        return Evaluation("allow", None, NO_MATCH, warnings=tuple(warnings))
    allows = [m.policy.priority for m in matches if m.policy.action == "allow"]
    exception = max(allows) if allows else None
    marked = [
        Match(m.policy, overridden=True, error=m.error)
        if exception is not None and m.policy.action != "allow" and m.policy.priority < exception
        else m
        for m in matches
    ]
    marked.sort(key=lambda m: (m.overridden, -STRICTNESS[m.policy.action], -m.policy.priority))
    standing = [m for m in marked if not m.overridden]
    # ``standing`` is never empty: the highest-priority allow is never overridden.
    winner = min(
        standing,
        key=lambda m: (-STRICTNESS[m.policy.action], -m.policy.priority, m.policy.name),
    )
    return Evaluation(
        winner.policy.action,
        winner.policy,
        _reason(winner, [m for m in marked if m.overridden]),
        tuple(marked),
        tuple(warnings),
    )


def failure(problem: str) -> Evaluation:
    """The decision when no policy can be read: deny, saying why and how to get out."""
    return Evaluation(
        "deny",
        None,
        f"agent-replay cannot read its guard policies ({problem}), so it fails closed; "
        "check them with `agent-replay guard list`, or remove --enforce from the hook "
        "registration to stop enforcing",
        failed=True,
    )


def undecidable(problem: str) -> Evaluation:
    """The decision when the payload itself cannot be read or decided (too deep, too big,
    not UTF-8 or JSON, an unknown shape): deny, saying why."""
    return Evaluation(
        "deny",
        None,
        f"agent-replay cannot decide this tool call ({problem}), so it fails closed; "
        "remove --enforce from the hook registration to stop enforcing",
        failed=True,
    )


def gone(count: int, problem: str) -> Evaluation:
    """The decision when policies vanished: the store's marker (``config.json``) says it had
    ``count`` enabled policies, but its database has none (``problem`` says how)."""
    policies = "policy" if count == 1 else "policies"
    return Evaluation(
        "deny",
        None,
        f"the guard policies vanished: this store had {count} enabled {policies} "
        f"(remembered in config.json), but {problem}, so agent-replay fails closed; restore "
        "the database, or run `agent-replay guard reset` if they are meant to be gone",
        failed=True,
    )


def _describe(policy: Policy) -> str:
    return f'policy "{policy.name}" ({policy.action}, priority {policy.priority})'


def _reason(winner: Match, overridden: list[Match]) -> str:
    policy = winner.policy
    head = f'policy "{policy.name}" ({policy.action})'
    if winner.error is not None:
        return f"{head} could not be evaluated ({winner.error}), so it fails closed"
    if overridden and policy.action == "allow":
        excused = ", ".join(_describe(m.policy) for m in overridden)
        text = f"{_describe(policy)} makes an exception to {excused}"
        return text + (f": {policy.description}" if policy.description else "")
    if policy.description:
        return f"{head}: {policy.description}"
    return f"{head} matched {json.dumps(policy.pattern, ensure_ascii=False)}"
