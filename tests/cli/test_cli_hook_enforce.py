"""`agent-replay hook --enforce` as the harnesses run it: the real pre-tool payloads of Claude
Code, Codex CLI and Gemini CLI on stdin, under deny, require_review, warn and allow policies;
the exact stdout, stderr and exit code of each dialect, and the guard_check steps recorded."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS as FIXTURES
from probe import HOOK_HEAVY, probe

from agent_replay.clock import SystemClock
from agent_replay.services.guard.manage import add_policy
from agent_replay.services.hook.drain import drain_with_lock
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json

HARNESSES = {
    "claude": ("claude-code/plain", "PreToolUse", "Bash"),
    "codex": ("codex/plain", "PreToolUse", "Bash"),
    "gemini": ("gemini-cli/plain", "BeforeTool", "run_shell_command"),
}
DESCRIPTION = "Listings stay out of this repo."
PATTERN = {"step_type": "tool_call", "input_contains": "ls -la"}


def payloads(harness: str) -> list[dict[str, Any]]:
    folder, event, _ = HARNESSES[harness]
    lines = (FIXTURES / folder / "hooks" / f"{event}.jsonl").read_text().splitlines()
    return [json.loads(line)["payload"] for line in lines]


def run_hook(
    store_dir: Path, *args: str, stdin: str | bytes = b"", spawn: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """``python -m agent_replay hook ARGS`` with ``stdin``; no drainer unless ``spawn``."""
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir)}
    env.pop("AGENT_REPLAY_HOOK_NO_SPAWN", None)
    if not spawn:
        env["AGENT_REPLAY_HOOK_NO_SPAWN"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "agent_replay", "hook", *args],
        input=stdin.encode("utf-8") if isinstance(stdin, str) else stdin,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


def add(store: Store, action: str, name: str = "listing", **options: Any) -> None:
    add_policy(
        store,
        SystemClock(),
        name=name,
        action=action,
        pattern=options.pop("pattern", PATTERN),
        description=options.pop("description", DESCRIPTION),
        **options,
    )


def steps(store: Store) -> list[dict[str, Any]]:
    (trace_id,) = [row[0] for row in execute(store, "SELECT id FROM traces").fetchall()]
    return list(trace_json(store, trace_id)["steps"])


def pre_tool_json(decision: str, reason: str) -> bytes:
    body = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }
    return (json.dumps(body) + "\n").encode()


def gemini_json(reason: str) -> bytes:
    return (json.dumps({"decision": "deny", "reason": reason}) + "\n").encode()


def warning_json(reason: str) -> bytes:
    return (json.dumps({"systemMessage": f"agent-replay guard warning: {reason}"}) + "\n").encode()


BLOCKED = 'Blocked by agent-replay guard: policy "listing" (deny): ' + DESCRIPTION
REVIEW = 'policy "listing" (require_review): ' + DESCRIPTION
CANNOT_ASK = "Review required by agent-replay guard, and {} hooks cannot ask for approval, so "
CANNOT_ASK += "the call is blocked: " + REVIEW
WARNED = 'policy "listing" (warn): ' + DESCRIPTION

# (harness, action) -> (stdout, stderr, exit code, decision recorded, tool call blocked)
EXPECTED: dict[tuple[str, str], tuple[bytes, bytes, int, str | None, bool]] = {
    ("claude", "deny"): (pre_tool_json("deny", BLOCKED), b"", 0, "deny", True),
    ("codex", "deny"): (pre_tool_json("deny", BLOCKED), b"", 0, "deny", True),
    ("gemini", "deny"): (gemini_json(BLOCKED), b"", 0, "deny", True),
    ("claude", "require_review"): (
        pre_tool_json("ask", "Review required by agent-replay guard: " + REVIEW),
        b"",
        0,
        "ask",
        False,
    ),
    ("codex", "require_review"): (
        pre_tool_json("deny", CANNOT_ASK.format("Codex CLI")),
        b"",
        0,
        "deny",
        True,
    ),
    ("gemini", "require_review"): (
        gemini_json(CANNOT_ASK.format("Gemini CLI")),
        b"",
        0,
        "deny",
        True,
    ),
    ("claude", "warn"): (warning_json(WARNED), b"", 0, "allow", False),
    ("codex", "warn"): (warning_json(WARNED), b"", 0, "allow", False),
    ("gemini", "warn"): (warning_json(WARNED), b"", 0, "allow", False),
    ("claude", "allow"): (b"", b"", 0, "allow", False),
    ("codex", "allow"): (b"", b"", 0, "allow", False),
    ("gemini", "allow"): (b"", b"", 0, "allow", False),
}


@pytest.mark.parametrize(("harness", "action"), list(EXPECTED), ids="-".join)
def test_each_dialect_answers_each_action_exactly(
    store: Store, store_dir: Path, harness: str, action: str
) -> None:
    add(store, action)
    payload = payloads(harness)[0]
    assert "ls -la" in json.dumps(payload["tool_input"])
    done = run_hook(store_dir, "--enforce", stdin=json.dumps(payload))
    stdout, stderr, code, decision, blocked = EXPECTED[(harness, action)]
    assert (done.stdout, done.stderr, done.returncode) == (stdout, stderr, code)

    drain_with_lock(store_dir)
    tool, guard = steps(store)
    assert (tool["step_type"], tool["name"]) == ("tool_call", HARNESSES[harness][2])
    assert (guard["step_type"], guard["name"]) == ("guard_check", "listing")
    assert guard["caused_by_step"] == tool["step_number"] == 1
    assert guard["output"]["decision"] == decision
    assert guard["output"]["action"] == action
    assert guard["output"]["policy"] == "listing"
    assert guard["metadata"]["harness"] == harness and guard["metadata"]["enforced"] is True
    assert guard["input"] == {"tool": tool["name"], "arguments": payload["tool_input"]}
    if blocked:  # the reason the harness was given, as its own session file records it
        answer = json.loads(done.stdout)
        told = answer.get("reason") or answer["hookSpecificOutput"]["permissionDecisionReason"]
        assert tool["error"] == told and 'policy "listing"' in told
    else:
        assert tool["error"] is None


@pytest.mark.parametrize(("harness", "action"), list(EXPECTED), ids="-".join)
def test_plain_answers_with_exit_codes(
    store: Store, store_dir: Path, harness: str, action: str
) -> None:
    """--plain: block = exit 2 and the reason on stderr; warn = a stderr line; nothing else."""
    add(store, action)
    done = run_hook(store_dir, "--enforce", "--plain", stdin=json.dumps(payloads(harness)[0]))
    assert done.stdout == b""
    if action == "deny":
        assert (done.returncode, done.stderr) == (2, (BLOCKED + "\n").encode())
    elif action == "require_review":
        assert done.returncode == 2
        assert done.stderr.decode().startswith("Review required by agent-replay guard, and this")
    elif action == "warn":
        expected = f"agent-replay guard warning: {WARNED}\n".encode()
        assert (done.returncode, done.stderr) == (0, expected)
    else:
        assert (done.returncode, done.stderr) == (0, b"")


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_every_real_pre_tool_payload_is_decided_and_recorded(
    store: Store, store_dir: Path, harness: str
) -> None:
    """A deny on every tool call: each of the session's four calls is blocked and recorded."""
    add(store, "deny", name="no-tools", pattern={"step_type": "tool_call"}, description=None)
    calls = payloads(harness)
    for payload in calls:
        done = run_hook(store_dir, "--enforce", stdin=json.dumps(payload))
        assert done.returncode == 0 and done.stderr == b""
        answer = json.loads(done.stdout)
        if harness == "gemini":
            assert answer["decision"] == "deny"
        else:
            assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    drain_with_lock(store_dir)
    recorded = steps(store)
    assert [s["step_type"] for s in recorded] == ["tool_call", "guard_check"] * len(calls)
    for tool, guard in zip(recorded[::2], recorded[1::2], strict=True):
        assert guard["caused_by_step"] == tool["step_number"]
        assert tool["error"].startswith("Blocked by agent-replay guard")
    assert [s["name"] for s in recorded[::2]] == [p["tool_name"] for p in calls]


def test_an_allow_exception_is_recorded_with_the_policy_it_overrode(
    store: Store, store_dir: Path
) -> None:
    add(store, "deny", name="no-shell", pattern={"name_regex": "(?i)bash"}, priority=10)
    add(store, "allow", name="listing-ok", priority=20)
    done = run_hook(store_dir, "--enforce", stdin=json.dumps(payloads("claude")[0]))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    drain_with_lock(store_dir)
    _, guard = steps(store)
    assert (guard["name"], guard["output"]["decision"], guard["output"]["action"]) == (
        "listing-ok",
        "allow",
        "allow",
    )
    assert [(m["policy"], m["overridden"]) for m in guard["output"]["matches"]] == [
        ("listing-ok", False),
        ("no-shell", True),
    ]


def test_other_events_are_captured_and_answered_with_nothing(store: Store, store_dir: Path) -> None:
    add(store, "deny", name="no-tools", pattern={"step_type": "tool_call"})
    post = json.loads(
        (FIXTURES / "claude-code/plain/hooks/PostToolUse.jsonl").read_text().splitlines()[0]
    )["payload"]
    done = run_hook(store_dir, "--enforce", stdin=json.dumps(post))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    drain_with_lock(store_dir)
    assert [s["step_type"] for s in steps(store)] == ["tool_call"]


# --- failing closed -----------------------------------------------------------------------


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_a_corrupt_store_fails_closed(tmp_path: Path, harness: str) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "traces.db").write_bytes(b"this is not a database" * 100)
    done = run_hook(folder, "--enforce", stdin=json.dumps(payloads(harness)[0]))
    assert done.returncode == 0 and done.stderr == b""
    answer = json.loads(done.stdout)
    reason = answer.get("reason") or answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert "cannot read its guard policies" in reason and "fails closed" in reason
    plain = run_hook(folder, "--enforce", "--plain", stdin=json.dumps(payloads(harness)[0]))
    assert plain.returncode == 2 and b"fails closed" in plain.stderr


def test_a_broken_policy_fails_closed_unless_it_fails_open(store: Store, store_dir: Path) -> None:
    add(store, "require_review", name="odd")
    connection = sqlite3.connect(store_dir / "traces.db")
    with connection:
        connection.execute('UPDATE policies SET pattern = \'{"name_regex": "(?=x)"}\'')
    connection.close()
    payload = json.dumps(payloads("claude")[0])
    closed = run_hook(store_dir, "--enforce", stdin=payload)
    reason = json.loads(closed.stdout)["hookSpecificOutput"]
    assert reason["permissionDecision"] == "ask"
    assert "could not be evaluated" in reason["permissionDecisionReason"]
    connection = sqlite3.connect(store_dir / "traces.db")
    with connection:
        connection.execute("UPDATE policies SET fail_open = 1")
    connection.close()
    opened = run_hook(store_dir, "--enforce", stdin=payload)
    assert (opened.returncode, opened.stdout) == (0, b"")


def test_a_mistyped_flag_under_enforce_fails_closed(store_dir: Path) -> None:
    """Capture never blocks on a typo; an enforcing registration with a typo blocks, naming
    the flag, rather than silently enforcing nothing."""
    done = run_hook(store_dir, "--enforce", "--bogus", stdin=json.dumps(payloads("claude")[0]))
    assert done.returncode == 2 and b"--bogus" in done.stderr


def test_plain_without_enforce_is_a_capture_typo_and_exits_0(store_dir: Path) -> None:
    done = run_hook(store_dir, "--plain", stdin=json.dumps(payloads("claude")[0]))
    assert (done.returncode, done.stdout) == (0, b"")
    assert b"--plain only applies with --enforce" in done.stderr


# --- the full path: first use and --sync --------------------------------------------------


def test_the_first_payload_into_a_new_store_is_decided_and_recorded(store_dir: Path) -> None:
    assert not store_dir.exists()
    done = run_hook(store_dir, "--enforce", stdin=json.dumps(payloads("codex")[0]))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    from agent_replay.store.db import open_store

    drain_with_lock(store_dir)  # the drainer's work: the hook never waits for it
    with open_store(store_dir, create=False) as store:
        assert [s["step_type"] for s in steps(store)] == ["tool_call"]


def test_sync_answers_like_the_fast_path_and_records_at_once(store: Store, store_dir: Path) -> None:
    add(store, "deny")
    done = run_hook(store_dir, "--enforce", "--sync", stdin=json.dumps(payloads("gemini")[0]))
    assert (done.stdout, done.stderr, done.returncode) == (gemini_json(BLOCKED), b"", 0)
    assert [s["step_type"] for s in steps(store)] == ["tool_call", "guard_check"]


# --- hostile input, the budget's import rules, and the real drainer -----------------------


def test_a_hostile_100kb_call_is_decided_promptly(store: Store, store_dir: Path) -> None:
    """A catastrophic-backtracking regex against a 100 KB tool name and input."""
    add(store, "deny", name="evil-regex", pattern={"name_regex": "(a+)+$"})
    add(store, "warn", name="long-input", pattern={"input_contains": "needle-not-there"})
    hostile = "a" * 100_000 + "!"
    payload = {**payloads("claude")[0], "tool_name": hostile, "tool_input": {"command": hostile}}
    began = time.perf_counter()
    done = run_hook(store_dir, "--enforce", stdin=json.dumps(payload))
    assert time.perf_counter() - began < 10  # a process start; Python's re would never return
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_the_enforce_fast_path_imports_nothing_heavy(store: Store, store_dir: Path) -> None:
    """A real enforced hook run (a deny with a regex, the detached drainer) stays stdlib-only
    (RE2 aside), as the hook budget requires."""
    add(store, "deny", name="no-bash", pattern={"name_regex": "^Bash$"})
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir)}
    env.pop("AGENT_REPLAY_HOOK_NO_SPAWN", None)
    run = probe(
        argv=["hook", "--enforce"],
        banned=HOOK_HEAVY,
        env=env,
        stdin=json.dumps(payloads("claude")[0]),
    )
    assert (run.code, run.loaded, run.stderr) == (0, [], "")
    assert json.loads(run.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    drain_with_lock(store_dir)  # waits for the detached drainer
    assert [s["step_type"] for s in steps(store)] == ["tool_call", "guard_check"]
