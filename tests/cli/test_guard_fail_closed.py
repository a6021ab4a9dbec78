"""`hook --enforce` fails closed: the real CLI, as each harness runs it, on every hostile input
it could meet (deep nesting, a 50 MB payload, invalid UTF-8, a missing or renamed event name,
a store emptied, deleted, corrupted or locked after it held policies). Each one blocks with a
reason in that harness's reply format (``--plain``: exit 2, the reason on stderr), well within
the harnesses' hook timeouts; capture mode on the same inputs exits 0 and prints nothing.

The cases of one input run as parallel processes; the 50 MB payload is built once."""

from __future__ import annotations

import functools
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS as FIXTURES

from agent_replay.clock import SystemClock
from agent_replay.services.guard.manage import add_policy
from agent_replay.store.db import ensure_database

pytestmark = pytest.mark.sqlite_only

FIXTURE_EVENTS = {
    "claude": ("claude-code/plain", "PreToolUse"),
    "codex": ("codex/plain", "PreToolUse"),
    "gemini": ("gemini-cli/plain", "BeforeTool"),
}
COLUMNS = ("claude", "codex", "gemini", "plain")
"""The reply formats: each harness's JSON, and ``--plain`` (with Claude Code's payload)."""
CPU_BUDGET_S = 10.0
"""Each decision, even of 50 MB, costs well under the harnesses' 60 s hook timeout. Measured as
the processes' CPU time, not wall time: the machine the suite runs on may be busy."""


def base_payload(harness: str) -> dict[str, Any]:
    folder, event = FIXTURE_EVENTS[harness]
    line = (FIXTURES / folder / "hooks" / f"{event}.jsonl").read_text().splitlines()[0]
    payload: dict[str, Any] = json.loads(line)["payload"]
    return payload


def deep(depth: int) -> str:
    """A JSON value nested ``depth`` levels, built as text (no recursion)."""
    return '{"a":' * depth + "1" + "}" * depth


def with_input(harness: str, tool_input_json: str) -> bytes:
    marker = '"__INPUT__"'
    text = json.dumps({**base_payload(harness), "tool_input": "__INPUT__"})
    return text.replace(marker, tool_input_json).encode()


@functools.cache
def big() -> bytes:
    """50 MB of file content, built once."""
    return b"x" * 50_000_000


def hostile(name: str, harness: str) -> bytes:
    """The hostile payload ``name`` in ``harness``'s own shape."""
    if name.startswith("deep-"):
        depth = int(name.split("-")[1])
        return with_input(harness, '{"command": "ls", "args": ' + deep(depth) + "}")
    if name == "50mb":
        head, tail = with_input(harness, '{"command": "rm -rf /", "content": "@"}').split(b"@")
        return head + big() + tail
    if name == "invalid-utf8":  # a raw 0xFF byte inside the command
        return with_input(harness, '{"command": "ls @"}').replace(b"@", b"\xff")
    if name in ("no-event", "renamed-event"):
        payload = {**base_payload(harness), "tool_input": {"command": "rm -rf /"}}
        del payload["hook_event_name"]
        if name == "renamed-event":
            payload["hook_event_name"] = "pre_tool_use"
        return json.dumps(payload).encode()
    return json.dumps(base_payload(harness)).encode()  # a harmless call: the store is the issue


PAYLOAD_CASES = ["deep-1000", "deep-10000", "deep-100000", "50mb", "invalid-utf8"]
PAYLOAD_CASES += ["no-event", "renamed-event"]
STORE_CASES = ["zero-byte-db", "deleted-db", "corrupt-db", "locked-db"]


def spawn(store_dir: Path, args: list[str], data: bytes) -> subprocess.Popen[bytes]:
    """Start ``agent-replay hook ARGS`` reading ``data`` (from a file: every run starts at
    once, none waits for the test to feed it)."""
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir), "AGENT_REPLAY_HOOK_NO_SPAWN": "1"}
    with tempfile.TemporaryFile() as stdin:
        stdin.write(data)
        stdin.seek(0)
        return subprocess.Popen(
            [sys.executable, "-m", "agent_replay", "hook", *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )


def finish(process: subprocess.Popen[bytes]) -> tuple[int, bytes, bytes]:
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


def assert_blocked(
    column: str, code: int, out: bytes, err: bytes, expect: str | tuple[str, ...]
) -> None:
    """Blocked, in ``column``'s reply format, with a reason containing ``expect`` (or one of
    them)."""
    if column == "plain":
        assert (code, out) == (2, b""), err
        reason = err.decode()
    else:
        assert (code, err) == (0, b""), err
        answer = json.loads(out)
        if column == "gemini":
            assert answer["decision"] == "deny"
            reason = answer["reason"]
        else:
            assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
            reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
    expected = (expect,) if isinstance(expect, str) else expect
    assert reason.startswith("Blocked by agent-replay guard: "), reason
    assert any(e in reason for e in expected), reason


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_matrix(
    store_dir: Path,
    case: str,
    expect: str | tuple[str, ...],
    *,
    between: Callable[[], None] | None = None,
) -> None:
    """Every reply format under ``--enforce``, and capture mode, on one input, in parallel;
    each run within ``CPU_BUDGET_S``."""
    began = children_cpu()
    runs = []
    for column in COLUMNS:
        harness = "claude" if column == "plain" else column
        args = ["--enforce", "--plain"] if column == "plain" else ["--enforce"]
        runs.append((column, spawn(store_dir, args, hostile(case, harness))))
    capture = spawn(store_dir, [], hostile(case, "codex"))
    for column, process in runs:
        code, out, err = finish(process)
        assert_blocked(column, code, out, err, expect)
    if between is not None:
        between()  # e.g. release a lock the capture run is waiting on
    code, out, err = finish(capture)
    assert (code, out, err) == (0, b"", b"")
    assert (children_cpu() - began) / (len(runs) + 1) < CPU_BUDGET_S


@pytest.fixture
def guarded(store_dir: Path) -> Iterator[Path]:
    """A store with one enabled policy: deny tool calls whose input holds ``rm -rf``."""
    store = ensure_database(store_dir)
    add_policy(
        store,
        SystemClock(),
        name="no-rm-rf",
        action="deny",
        pattern={"step_type": "tool_call", "input_contains": "rm -rf"},
        description="Recursive deletes stay out of this repo.",
    )
    store.close()
    yield store_dir


EXPECT = {
    "deep-1000": "nested too deeply",
    "deep-10000": "nested too deeply",
    "deep-100000": "nested too deeply",
    "50mb": 'policy "no-rm-rf"',
    "invalid-utf8": "not valid UTF-8",
    "no-event": 'policy "no-rm-rf"',
    "renamed-event": 'policy "no-rm-rf"',
}


@pytest.mark.parametrize("case", PAYLOAD_CASES)
def test_hostile_payloads_are_refused_or_decided_never_allowed(guarded: Path, case: str) -> None:
    run_matrix(guarded, case, EXPECT[case])


def _locked(store_dir: Path) -> Callable[[], None]:
    holder = sqlite3.connect(store_dir / "traces.db", isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("DELETE FROM hook_inbox")
    return lambda: (holder.execute("ROLLBACK"), holder.close())  # type: ignore[func-returns-value]


@pytest.mark.parametrize("case", STORE_CASES)
def test_a_store_that_lost_its_policies_blocks(guarded: Path, case: str) -> None:
    """The store held an enabled policy; then its database was emptied, deleted, corrupted or
    locked: every call blocks, naming the problem (a harmless ``ls -la`` included).

    The capture run beside them queues its payload and wakes the drainer, which may build a
    new, empty store in place of a missing or zero-byte file before an enforcing run reads it:
    that run then blocks because the remembered policies vanished, which is the same problem
    seen one step later."""
    db = guarded / "traces.db"
    vanished = "the guard policies vanished"
    expect: str | tuple[str, ...]
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    release = None
    if case == "zero-byte-db":
        db.write_bytes(b"")
        expect = ("traces.db is empty", vanished)
    elif case == "deleted-db":
        db.unlink()
        expect = ("traces.db is missing", vanished)
    elif case == "corrupt-db":
        db.write_bytes(b"not a database, " * 512)
        expect = "cannot read its guard policies"
    else:
        release = _locked(guarded)
        expect = "database is locked"
    run_matrix(guarded, case, expect, between=release)


def test_guard_reset_accepts_that_the_policies_are_gone(guarded: Path, cli: Any) -> None:
    (guarded / "traces.db").unlink()
    refused = finish(spawn(guarded, ["--enforce"], hostile("deleted-db", "claude")))
    assert_blocked("claude", *refused, "guard reset")
    result = cli("guard", "reset")
    assert result.code == 0 and "1 enabled remembered, 0 enabled" in result.out
    allowed = finish(spawn(guarded, ["--enforce"], hostile("deleted-db", "claude")))
    assert allowed == (0, b"", b"")


def test_removing_the_last_policy_is_not_a_vanishing(guarded: Path, cli: Any) -> None:
    assert cli("guard", "remove", "no-rm-rf").code == 0
    assert json.loads((guarded / "config.json").read_text())["guard"]["enabled_policies"] == 0
    done = finish(spawn(guarded, ["--enforce"], hostile("no-event", "claude")))
    assert done == (0, b"", b"")


def test_dialect_forces_the_reply_format_and_post_tool_never_blocks(guarded: Path) -> None:
    bare = json.dumps({"tool_name": "bash", "tool_input": {"command": "rm -rf /"}}).encode()
    post = {**base_payload("claude"), "hook_event_name": "PostToolUse"}
    post["tool_input"] = {"command": "rm -rf /"}
    runs = [
        spawn(guarded, ["--enforce", "--dialect", "gemini"], bare),
        spawn(guarded, ["--enforce", "--dialect=codex"], bare),
        spawn(guarded, ["--enforce", "--plain"], json.dumps(post).encode()),
        spawn(
            guarded,
            ["--enforce"],
            with_input("gemini", deep(5000)).replace(b"BeforeTool", b"AfterTool"),
        ),
    ]
    gemini, codex, post_plain, post_deep = (finish(p) for p in runs)
    assert_blocked("gemini", *gemini, 'policy "no-rm-rf"')
    assert_blocked("codex", *codex, 'policy "no-rm-rf"')
    assert post_plain == (0, b"", b"")
    assert post_deep == (0, b"", b"")
