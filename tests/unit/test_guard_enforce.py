"""`hook --enforce` in-process: the answer table per harness, harness detection on the real
payloads, the recorded guard_check steps, and the block verdict the app reads back."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from captures import HARNESS as FIXTURES

from agent_replay.services.guard.decide import evaluate, failure
from agent_replay.services.guard.manage import add_policy
from agent_replay.services.guard.match import StepText
from agent_replay.services.guard.policy import Policy
from agent_replay.services.guard.verdict import is_blocked
from agent_replay.services.hook.drain import drain
from agent_replay.services.hook.enforce import answer, harness_of, is_pre_tool, run_fast
from agent_replay.services.hook.harness import detect
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import step_dicts

PRE_TOOL_FILES = {
    "claude": ["claude-code/plain", "claude-code/otel", "claude-code/subagent"],
    "codex": ["codex/plain"],
    "gemini": ["gemini-cli/plain", "gemini-cli/otel"],
}


def payloads(folder: str) -> list[dict[str, Any]]:
    event = "BeforeTool" if folder.startswith("gemini") else "PreToolUse"
    lines = (FIXTURES / folder / "hooks" / f"{event}.jsonl").read_text().splitlines()
    return [json.loads(line)["payload"] for line in lines]


def evaluation_of(action: str, description: str = "Listing is off limits."):
    rule = Policy("pol_t", "no-listing", {"input_contains": "ls -la"}, action, 0, description)
    return evaluate([rule], StepText("tool_call", "Bash", {"command": "ls -la"}))


# --- detection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("harness", "folder"), [(h, f) for h, folders in PRE_TOOL_FILES.items() for f in folders]
)
def test_every_real_pre_tool_payload_is_recognized_with_its_harness(
    harness: str, folder: str
) -> None:
    for payload in payloads(folder):
        assert is_pre_tool(payload)
        assert harness_of(payload) == harness


def test_other_events_are_not_decided() -> None:
    assert not is_pre_tool({"hook_event_name": "PostToolUse"})
    assert not is_pre_tool(None)
    assert not is_pre_tool(["PreToolUse"])


def test_the_dialect_flag_wins_over_detection() -> None:
    assert harness_of({"hook_event_name": "BeforeTool"}, "codex") == "codex"


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_every_real_payload_of_every_event_is_detected_without_a_store(harness: str) -> None:
    """The one detection (``hook.harness.detect``, which the capture and enforce share) names
    the harness of every recorded payload from its fields alone."""
    top = FIXTURES / {"claude": "claude-code", "codex": "codex", "gemini": "gemini-cli"}[harness]
    seen = 0
    for path in sorted(top.glob("*/hooks/*.jsonl")):
        for line in path.read_text().splitlines():
            assert detect(json.loads(line)["payload"]) == harness, path
            seen += 1
    assert seen >= 10


# --- the answer table ----------------------------------------------------------------------

REASON = 'policy "no-listing" ({action}): Listing is off limits.'


def claude_json(decision: str, reason: str) -> str:
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }
    return json.dumps(output) + "\n"


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_deny_answers_permission_decision_deny(harness: str) -> None:
    reply = answer(evaluation_of("deny"), harness)
    reason = "Blocked by agent-replay guard: " + REASON.format(action="deny")
    assert reply == (claude_json("deny", reason), "", 0, "deny")


def test_require_review_asks_claude_code() -> None:
    reply = answer(evaluation_of("require_review"), "claude")
    reason = "Review required by agent-replay guard: " + REASON.format(action="require_review")
    assert reply == (claude_json("ask", reason), "", 0, "ask")


def test_require_review_blocks_codex_which_cannot_ask() -> None:
    reply = answer(evaluation_of("require_review"), "codex")
    reason = (
        "Review required by agent-replay guard, and Codex CLI hooks cannot ask for approval, "
        "so the call is blocked: " + REASON.format(action="require_review")
    )
    assert reply == (claude_json("deny", reason), "", 0, "deny")


def test_gemini_gets_decision_deny_for_deny_and_for_review() -> None:
    deny = answer(evaluation_of("deny"), "gemini")
    reason = "Blocked by agent-replay guard: " + REASON.format(action="deny")
    assert deny == (json.dumps({"decision": "deny", "reason": reason}) + "\n", "", 0, "deny")
    review = answer(evaluation_of("require_review"), "gemini")
    assert json.loads(review.stdout)["decision"] == "deny"
    assert "Gemini CLI hooks cannot ask" in json.loads(review.stdout)["reason"]


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_warn_shows_a_message_and_allows(harness: str) -> None:
    reply = answer(evaluation_of("warn"), harness)
    message = "agent-replay guard warning: " + REASON.format(action="warn")
    assert reply == (json.dumps({"systemMessage": message}) + "\n", "", 0, "allow")


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_allow_and_no_match_print_nothing(harness: str) -> None:
    assert answer(evaluation_of("allow"), harness) == ("", "", 0, "allow")
    no_match = evaluate([], StepText("tool_call", "Bash"))
    assert answer(no_match, harness) == ("", "", 0, "allow")


def test_plain_blocks_with_exit_2_and_the_reason_on_stderr() -> None:
    deny = answer(evaluation_of("deny"), "claude", plain=True)
    assert deny == (
        "",
        "Blocked by agent-replay guard: " + REASON.format(action="deny") + "\n",
        2,
        "deny",
    )
    review = answer(evaluation_of("require_review"), "claude", plain=True)
    assert (review.stdout, review.exit_code, review.decision) == ("", 2, "deny")
    assert "this hook cannot ask for approval" in review.stderr
    warn = answer(evaluation_of("warn"), "claude", plain=True)
    assert (warn.stdout, warn.exit_code) == ("", 0) and "warning" in warn.stderr


def test_failing_closed_denies_with_the_reason() -> None:
    reply = answer(failure("DatabaseError: file is not a database"), "claude")
    reason = json.loads(reply.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert reply.decision == "deny" and "cannot read its guard policies" in reason


# --- in-process enforcement and recording --------------------------------------------------

OPTIONS = {"dialect": "auto", "no_input": False, "redact": True, "dir": None, "sync": False}


def enforce(payload: dict[str, Any], **options: Any) -> tuple[int | None, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_fast(
        {**OPTIONS, **options}, io.BytesIO(json.dumps(payload).encode()), out=out, err=err
    )
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_REPLAY_HOOK_NO_SPAWN", "1")


def add(store: Store, clock: Any, name: str, action: str, pattern: dict[str, str], **kw: Any):
    return add_policy(store, clock, name=name, action=action, pattern=pattern, **kw)


def trace_steps(store: Store) -> list[dict[str, Any]]:
    (trace_id,) = [r[0] for r in execute(store, "SELECT id FROM traces").fetchall()]
    return step_dicts(store, trace_id)


def test_a_denied_call_is_recorded_with_its_guard_check(store: Store, clock, quiet) -> None:
    add(store, clock, "no-listing", "deny", {"input_contains": "ls -la"})
    payload = payloads("claude-code/plain")[0]
    code, out, _ = enforce(payload)
    assert code == 0 and json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"
    drain(store, clock=clock)
    tool, guard = trace_steps(store)
    assert (tool["step_type"], tool["name"]) == ("tool_call", "Bash")
    assert tool["error"].startswith('Blocked by agent-replay guard: policy "no-listing"')
    assert (guard["step_type"], guard["name"], guard["caused_by_step"]) == (
        "guard_check",
        "no-listing",
        tool["step_number"],
    )
    assert guard["input"] == {"tool": "Bash", "arguments": payload["tool_input"]}
    assert guard["output"]["decision"] == "deny" and guard["output"]["action"] == "deny"
    assert guard["metadata"] == {
        "enforced": True,
        "call_id": payload["tool_use_id"],
        "harness": "claude",
    }
    assert is_blocked(guard) and not is_blocked(tool)


def test_no_input_keeps_the_arguments_out_of_the_guard_check(store: Store, clock, quiet) -> None:
    add(store, clock, "warn-listing", "warn", {"input_contains": "ls -la"}, description="Lists.")
    enforce(payloads("codex/plain")[0], no_input=True)
    drain(store, clock=clock)
    tool, guard = trace_steps(store)
    assert guard["input"] == {"tool": "Bash"} and tool["input"] is None
    assert "ls -la" not in json.dumps(guard)
    assert not is_blocked(guard) and tool["error"] is None


def test_a_subagents_blocked_call_nests_its_guard_check_beside_the_call(
    store: Store, clock, quiet
) -> None:
    spawn, inner = payloads("claude-code/subagent")[:2]
    assert inner.get("agent_id") and inner["tool_name"] == "Bash"
    add(store, clock, "no-bash", "deny", {"name_regex": "^Bash$"})
    assert enforce(spawn) == (0, "", "")  # the Agent call: no policy matches
    code, out, _ = enforce(inner)
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"
    drain(store, clock=clock)
    steps = {s["step_number"]: s for s in trace_steps(store)}
    guard = next(s for s in steps.values() if s["step_type"] == "guard_check")
    tool = steps[guard["caused_by_step"]]
    assert tool["name"] == "Bash" and tool["parent_step"] is not None
    assert guard["parent_step"] == tool["parent_step"]


def test_unmatched_calls_record_no_guard_check(store: Store, clock, quiet) -> None:
    add(store, clock, "no-deletes", "deny", {"name_contains": "delete"})
    payload = {
        "session_id": "s1",
        "transcript_path": "/home/u/.claude/projects/p/s1.jsonl",
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": "notes.txt"},
        "tool_use_id": "toolu_1",
    }
    assert enforce(payload) == (0, "", "")
    drain(store, clock=clock)
    assert [s["step_type"] for s in trace_steps(store)] == ["tool_call"]


# --- the verdict the app reads -------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "blocked"),
    [
        ({"decision": "deny", "action": "deny"}, True),
        ({"decision": "deny", "action": "require_review"}, True),  # Gemini had to deny
        ({"decision": "ask", "action": "require_review"}, False),  # Claude Code asked
        ({"decision": "allow", "action": "warn"}, False),
        (
            {
                "decision": "allow",
                "action": "allow",
                "matches": [{"policy_action": "deny", "overridden": True}],
            },
            False,
        ),
        ({"verdict": "BLOCKED"}, True),
        ({"result": {"blocked": True}}, True),
        ("denied", True),
        ({"verdict": "pass"}, False),
    ],
)
def test_is_blocked_follows_the_dashboards_rule(output: Any, blocked: bool) -> None:
    assert is_blocked({"step_type": "guard_check", "output": output}) is blocked


def test_only_guard_checks_block() -> None:
    assert not is_blocked({"step_type": "tool_call", "output": {"decision": "deny"}})
    assert is_blocked({"step_type": "guard_check", "error": "raised", "output": None})


def test_the_verdict_words_are_the_dashboards() -> None:
    from agent_replay.services.guard import verdict
    from agent_replay.store import stats

    assert (verdict.BLOCK_KEYS, verdict.BLOCK_VALUES) == (stats.BLOCK_KEYS, stats.BLOCK_VALUES)


def test_the_hook_reads_the_policies_guard_list_shows_in_the_same_order(
    store: Store, clock: Any
) -> None:
    """enforce's stdlib read and manage's query builder read one row one way."""
    import sqlite3

    from agent_replay.services.guard.manage import list_policies
    from agent_replay.services.hook.enforce import load_policies

    add(store, clock, "b-low", "deny", {"name_contains": "rm"})
    add(store, clock, "c-high", "warn", {"input_contains": "ls"}, priority=5, fail_open=True)
    add(store, clock, "a-low", "require_review", {"step_type": "tool_call"}, description="x")
    add(store, clock, "off", "deny", {"name_contains": "x"}, enabled=False)
    assert store.path is not None
    with sqlite3.connect(store.path) as conn:
        read = load_policies(conn)
    assert read == list_policies(store, enabled_only=True)
    assert [p.name for p in read] == ["c-high", "a-low", "b-low"]
