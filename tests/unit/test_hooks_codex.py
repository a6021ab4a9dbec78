"""Codex CLI hooks: the captured session replayed through ``agent-replay hook``, and how a
failed command is recognised (Codex has no failure event; see ``services/hook/dialects/codex``)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS as FIXTURES

from agent_replay.entry import main
from agent_replay.services.hook.capture import detect_dialect
from agent_replay.services.hook.dialects.codex import exit_code_in, rollout_exit_code
from agent_replay.services.hook.drain import drain_with_lock
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json

FOLDER = FIXTURES / "codex" / "plain"

PROMPT = (
    "List the files in this directory, read notes.txt, write a short summary.txt, then check "
    "whether does_not_exist.txt exists."
)
ANSWER = (
    "Done. I listed the directory, read notes.txt, wrote summary.txt, and confirmed that "
    "does_not_exist.txt is missing."
)
CAT_CALL = "call_mock7b6786e7c63a4daaa9c0c25a"


def payloads() -> list[dict[str, Any]]:
    lines = (FOLDER / "hooks.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["payload"] for line in lines if line.strip()]


def rollout() -> Path:
    (found,) = (FOLDER / "rollout").rglob("rollout-*.jsonl")
    return found


def replay(monkeypatch: pytest.MonkeyPatch, store_dir: Path, items: list[Any], *args: str) -> None:
    """Each payload through the hook's fast path in-process, then drain the inbox."""
    monkeypatch.setenv("AGENT_REPLAY_HOOK_NO_SPAWN", "1")
    for item in items:
        raw = json.dumps(item).encode("utf-8")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
        assert main(["hook", *args]) == 0
    drain_with_lock(store_dir)


def only_trace(store: Store) -> dict[str, Any]:
    rows = execute(store, "SELECT id FROM traces").fetchall()
    assert len(rows) == 1
    return trace_json(store, rows[0][0])


def test_the_session_through_real_hook_processes(store: Store, store_dir: Path) -> None:
    """Every payload in its own `python -m agent_replay hook` process. The rollout named by
    the payloads is not on this machine, so the failed cat has no exit code to show: its step
    records the command's output without an error."""
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir), "AGENT_REPLAY_HOOK_NO_SPAWN": "1"}
    for item in payloads():
        done = subprocess.run(
            [sys.executable, "-m", "agent_replay", "hook"],
            input=json.dumps(item),
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    drain_with_lock(store_dir)
    trace = only_trace(store)
    assert (trace["agent_name"], trace["status"]) == ("codex", "completed")
    assert trace["session_id"] == "01a229b9-a903-78c1-b289-f02dcbb94ff4"
    assert (trace["input"], trace["output"]) == (PROMPT, ANSWER)
    assert trace["metadata"]["model"] == "gpt-5.5"
    assert trace["metadata"]["permission_mode"] == "bypassPermissions"
    assert execute(store, "SELECT source_format FROM traces").fetchone()[0] == "codex-hook"
    steps = trace["steps"]
    assert [(s["step_type"], s["name"]) for s in steps] == [
        ("thought", "user_prompt"),
        ("tool_call", "Bash"),
        ("tool_call", "Bash"),
        ("tool_call", "apply_patch"),
        ("tool_call", "Bash"),
        ("output", "final_answer"),
    ]
    assert [s["input"]["command"] for s in steps[1:3]] == ["ls -la", "cat notes.txt"]
    assert steps[2]["output"] == "TODO:\n- buy milk\n- fix bug #42\n- write tests\n"
    assert steps[3]["output"].startswith("Exit code: 0\n") and steps[3]["error"] is None
    cat = steps[4]
    assert cat["input"] == {"command": "cat does_not_exist.txt"}
    assert cat["output"] == "cat: does_not_exist.txt: No such file or directory\n"
    assert cat["error"] is None
    assert steps[0]["metadata"]["turn_id"] == "01a229b9-a934-7140-8355-f6d76f0b83c0"
    assert all(s["started_at"] <= s["ended_at"] for s in steps)
    assert execute(store, "SELECT COUNT(*) FROM steps WHERE is_open = 1").fetchone()[0] == 0


def test_the_failed_cat_fails_when_the_rollout_is_readable(
    store: Store, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the user's machine the payload's transcript_path is the live rollout, where Codex
    has already written the command's exit code when the hook runs."""
    local = tmp_path / "sessions" / rollout().name
    local.parent.mkdir()
    shutil.copy(rollout(), local)
    items = [{**p, "transcript_path": str(local)} for p in payloads()]
    replay(monkeypatch, store_dir, items)
    tools = [s for s in only_trace(store)["steps"] if s["step_type"] == "tool_call"]
    steps = {s["input"]["command"]: s for s in tools}
    assert steps["cat does_not_exist.txt"]["error"] == (
        "Exit code 1\ncat: does_not_exist.txt: No such file or directory"
    )
    assert [c for c, s in steps.items() if s["error"]] == ["cat does_not_exist.txt"]


def test_exit_code_from_the_rollout_tail() -> None:
    assert rollout_exit_code(str(rollout()), CAT_CALL) == 1
    assert rollout_exit_code(str(rollout()), "call_mock74c305e4d96d4d35952d058f") == 0
    assert rollout_exit_code(str(rollout()), "call_unknown") is None
    assert rollout_exit_code("/nonexistent/rollout-x.jsonl", CAT_CALL) is None
    assert rollout_exit_code(str(FOLDER / "hooks.jsonl"), CAT_CALL) is None  # not a rollout


@pytest.mark.parametrize(
    ("response", "code"),
    [
        ("Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess.", 0),
        ("Exit code: 2\nWall time: 0 seconds\nOutput:\nboom", 2),
        ("Chunk ID: b6\nWall time: 0.0000 seconds\nProcess exited with code 1\nOutput:\nx", 1),
        ('{"output": "x", "metadata": {"exit_code": 127, "duration_seconds": 0.1}}', 127),
        ({"exit_code": 3, "stdout": ""}, 3),
        ("cat: does_not_exist.txt: No such file or directory\n", None),
        ("a\nb\nc\nd\ne\nf\nExit code: 1", None),  # in the output, not a header
        (None, None),
    ],
)
def test_exit_code_stated_in_a_response(response: Any, code: int | None) -> None:
    assert exit_code_in(response) == code


def test_a_response_with_a_non_zero_exit_code_is_a_failed_step(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = {k: v for k, v in payloads()[2].items() if k != "tool_response"}
    replay(
        monkeypatch,
        store_dir,
        [
            base,
            {
                **base,
                "hook_event_name": "PostToolUse",
                "tool_response": "Exit code: 2\nWall time: 0 seconds\nOutput:\nls: cannot access",
            },
        ],
    )
    (step,) = only_trace(store)["steps"]
    assert step["error"].startswith("Exit code 2\n")


def test_every_codex_payload_is_detected_as_codex(store: Store) -> None:
    assert {detect_dialect(store, p) for p in payloads()} == {"codex"}


def test_codex_payloads_are_detected_without_the_transcript_path(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex's home folder can be anywhere (CODEX_HOME): its fields tell it apart, and once
    a session has a trace, later payloads follow it (SessionEnd has no telling field)."""
    items = [{k: v for k, v in p.items() if k != "transcript_path"} for p in payloads()]
    replay(monkeypatch, store_dir, items)
    trace = only_trace(store)
    assert (trace["agent_name"], trace["status"]) == ("codex", "completed")
    assert trace["metadata"]["end_reason"] == "other"
