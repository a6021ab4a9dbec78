"""Claude Code hooks: every captured payload replayed through ``agent-replay hook`` (the real
fast path: queued in the inbox, then drained), and the trace it leaves.

The captures (``tests/fixtures/harness/claude-code/{plain,subagent,otel}``) are a real
``claude -p`` session: list the directory, read notes.txt, write summary.txt, then a failing
``cat does_not_exist.txt``, and a final answer (the subagent capture delegates to an Agent).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS as FIXTURES

from agent_replay.entry import main
from agent_replay.services.hook.capture import detect_dialect
from agent_replay.services.hook.drain import drain_with_lock
from agent_replay.services.hook.session import NO_RESULT
from agent_replay.store.core import execute
from agent_replay.store.db import Store, open_store
from agent_replay.store.trace_detail import trace_json

PROMPT = (
    "List the files in this directory, read notes.txt, write a short summary.txt, then check "
    "whether does_not_exist.txt exists."
)
ANSWER = (
    "Done. I listed the directory, read notes.txt, wrote summary.txt, and confirmed that "
    "does_not_exist.txt is missing."
)


def payloads(folder: str) -> list[dict[str, Any]]:
    """The payloads of a capture's ``hooks.jsonl``, in the order the CLI sent them."""
    lines = (FIXTURES / folder / "hooks.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["payload"] for line in lines if line.strip()]


def hook(monkeypatch: pytest.MonkeyPatch, payload: Any, *args: str) -> int:
    """One in-process ``agent-replay hook`` with ``payload`` (JSON-encoded unless bytes/str)."""
    data = payload if isinstance(payload, str | bytes) else json.dumps(payload)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    return main(["hook", *args])


def replay(monkeypatch: pytest.MonkeyPatch, store_dir: Path, items: list[Any], *args: str) -> None:
    """Queue every payload through the hook's fast path, then drain the inbox."""
    monkeypatch.setenv("AGENT_REPLAY_HOOK_NO_SPAWN", "1")
    for item in items:
        assert hook(monkeypatch, item, *args) == 0
    drain_with_lock(store_dir)


def replay_in_subprocesses(store_dir: Path, items: list[dict[str, Any]], *args: str) -> None:
    """Each payload through a real ``python -m agent_replay hook`` process; then drain."""
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir), "AGENT_REPLAY_HOOK_NO_SPAWN": "1"}
    for item in items:
        done = subprocess.run(
            [sys.executable, "-m", "agent_replay", "hook", *args],
            input=json.dumps(item),
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    drain_with_lock(store_dir)


def traces(store: Store) -> list[dict[str, Any]]:
    """Every trace in the store (with steps), oldest first."""
    rows = execute(store, "SELECT id FROM traces ORDER BY started_at_ms, created_at_ms")
    return [trace_json(store, row[0]) for row in rows.fetchall()]


def only_trace(store: Store) -> dict[str, Any]:
    found = traces(store)
    assert len(found) == 1, [t["id"] for t in found]
    return found[0]


def shape(trace: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(s["step_type"], s["name"]) for s in trace["steps"]]


def log_text(store_dir: Path) -> str:
    log = store_dir / "logs" / "agent-replay.log"
    return log.read_text(encoding="utf-8") if log.exists() else ""


def open_steps(store: Store) -> int:
    return int(execute(store, "SELECT COUNT(*) FROM steps WHERE is_open = 1").fetchone()[0])


PLAIN_SHAPE = [
    ("thought", "user_prompt"),
    ("tool_call", "Bash"),
    ("tool_call", "Read"),
    ("tool_call", "Write"),
    ("tool_call", "Bash"),
    ("output", "final_answer"),
]


def check_plain_session(trace: dict[str, Any], folder: str) -> None:
    """What the plain scripted session must look like once recorded."""
    session = payloads(folder)[0]["session_id"]
    durations = [
        p["duration_ms"]
        for p in payloads(folder)
        if p["hook_event_name"] in ("PostToolUse", "PostToolUseFailure")
    ]
    assert trace["agent_name"] == "claude-code"
    assert trace["session_id"] == session
    assert trace["status"] == "completed"
    assert trace["input"] == PROMPT
    assert trace["output"] == ANSWER
    assert trace["metadata"]["cwd"].endswith("/work")
    assert trace["metadata"]["transcript_path"].endswith(f"{session}.jsonl")
    assert trace["metadata"]["permission_mode"] == "default"
    assert trace["metadata"]["end_reason"] == "other"
    assert shape(trace) == PLAIN_SHAPE
    prompt, ls, read, write, cat, answer = trace["steps"]
    assert prompt["input"] == PROMPT
    assert ls["input"] == {"command": "ls -la", "description": "Run ls -la"}
    assert "notes.txt" in ls["output"]["stdout"]
    assert ls["error"] is None
    assert [s["duration_ms"] for s in trace["steps"][1:5]] == durations  # the harness's own
    assert read["output"]["file"]["content"].startswith("TODO:")
    assert write["input"]["file_path"].endswith("summary.txt")
    assert write["output"]["type"] == "create"
    assert cat["input"]["command"] == "cat does_not_exist.txt"
    assert cat["error"] == "Exit code 1\ncat: does_not_exist.txt: No such file or directory"
    assert cat["output"] is None
    assert answer["output"] == ANSWER
    for step in trace["steps"]:
        assert step["started_at"] <= step["ended_at"]
        assert step["started_at"] >= trace["started_at"]
        assert step["ended_at"] <= trace["ended_at"]


def test_the_plain_session_through_real_hook_processes(store: Store, store_dir: Path) -> None:
    """Every payload of the plain capture, each through its own `python -m agent_replay hook`
    process, gives one completed trace with the four tool calls, the failed cat included."""
    replay_in_subprocesses(store_dir, payloads("claude-code/plain"))
    trace = only_trace(store)
    check_plain_session(trace, "claude-code/plain")
    row = execute(store, "SELECT source_format FROM traces").fetchone()
    assert row[0] == "claude-code-hook"
    assert open_steps(store) == 0
    assert "dropped" not in log_text(store_dir)


def test_the_otel_capture_records_the_same_session(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(monkeypatch, store_dir, payloads("claude-code/otel"))
    check_plain_session(only_trace(store), "claude-code/otel")


def test_a_subagent_and_its_tool_calls_nest_under_the_agent_call(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(monkeypatch, store_dir, payloads("claude-code/subagent"))
    trace = only_trace(store)
    assert shape(trace) == [
        ("thought", "user_prompt"),
        ("tool_call", "Agent"),
        ("thought", "subagent:general-purpose"),
        ("tool_call", "Bash"),
        ("tool_call", "Read"),
        ("output", "final_answer"),
    ]
    _, agent, sub, bash, read, _ = trace["steps"]
    assert agent["parent_step"] is None
    assert sub["parent_step"] == agent["step_number"]
    assert bash["parent_step"] == read["parent_step"] == sub["step_number"]
    assert sub["input"] == "Read notes.txt in the current directory and report its TODO items."
    assert sub["output"].startswith("Subagent report: notes.txt has three TODO items")
    assert sub["metadata"]["agent_id"] == "a1ff7aa87e749d621"
    assert sub["metadata"]["agent_transcript_path"].endswith("agent-a1ff7aa87e749d621.jsonl")
    assert bash["metadata"]["agent_type"] == "general-purpose"
    assert agent["tokens_used"] == 1950 and agent["model"] == "claude-opus-5-5"
    assert trace["total_tokens"] == 1950
    assert trace["status"] == "completed"
    assert trace["output"] == "The subagent reports three TODO items in notes.txt."
    assert open_steps(store) == 0


def test_a_subagent_without_a_subagent_start_hook_still_nests(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [p for p in payloads("claude-code/subagent") if p["hook_event_name"] != "SubagentStart"]
    replay(monkeypatch, store_dir, items)
    steps = {s["name"]: s for s in only_trace(store)["steps"]}
    assert steps["Bash"]["parent_step"] == steps["subagent:general-purpose"]["step_number"]
    assert steps["subagent:general-purpose"]["parent_step"] == steps["Agent"]["step_number"]


SESSION = "sess-claude-1"


def event(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "transcript_path": f"/home/u/.claude/projects/p/{SESSION}.jsonl",
        "cwd": "/home/u/p",
        "hook_event_name": name,
        **fields,
    }


def tool(name: str, call_id: str, **fields: Any) -> dict[str, Any]:
    return event(name, tool_name="Bash", tool_use_id=call_id, **fields)


def test_a_background_subagent_stays_open_until_its_own_stop(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run_in_background`: the Agent call returns at once; the subagent works on."""
    spawn = {"prompt": "scan", "subagent_type": "Explore", "run_in_background": True}
    sub = {"agent_id": "ag1", "agent_type": "Explore"}
    replay(
        monkeypatch,
        store_dir,
        [
            event("PreToolUse", tool_name="Agent", tool_use_id="toolu_a", tool_input=spawn),
            event("SubagentStart", **sub),
            event(
                "PostToolUse",
                tool_name="Agent",
                tool_use_id="toolu_a",
                tool_input=spawn,
                tool_response={"status": "async_launched", "agentId": "ag1"},
            ),
            tool("PreToolUse", "toolu_b", tool_input={"command": "ls"}, **sub),
            tool("PostToolUse", "toolu_b", tool_input={"command": "ls"}, tool_response="x", **sub),
            event("SubagentStop", last_assistant_message="found 3 files", **sub),
        ],
    )
    agent, subagent, bash = only_trace(store)["steps"]
    assert subagent["parent_step"] == agent["step_number"]
    assert bash["parent_step"] == subagent["step_number"]
    assert subagent["output"] == "found 3 files"
    assert subagent["ended_at"] >= bash["ended_at"]
    assert open_steps(store) == 0


def test_each_turn_finishes_the_trace_and_the_next_prompt_reopens_it(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(
        monkeypatch,
        store_dir,
        [
            event("SessionStart", source="startup"),
            event("UserPromptSubmit", prompt="first"),
            event("Stop", last_assistant_message="one"),
        ],
    )
    assert only_trace(store)["status"] == "completed"
    replay(monkeypatch, store_dir, [event("UserPromptSubmit", prompt="second")])
    trace = only_trace(store)
    assert (trace["status"], trace["ended_at"], trace["output"]) == ("running", None, "one")
    replay(
        monkeypatch,
        store_dir,
        [event("Stop", last_assistant_message="two"), event("SessionEnd", reason="logout")],
    )
    trace = only_trace(store)
    assert trace["status"] == "completed"
    assert (trace["input"], trace["output"]) == ("first", "two")
    assert [s["input"] or s["output"] for s in trace["steps"]] == ["first", "one", "second", "two"]


def test_a_resumed_session_continues_its_trace(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(
        monkeypatch,
        store_dir,
        [
            event("SessionStart", source="startup"),
            event("UserPromptSubmit", prompt="first"),
            event("Stop", last_assistant_message="one"),
            event("SessionEnd", reason="prompt_input_exit"),
            event("SessionStart", source="resume"),
        ],
    )
    assert only_trace(store)["status"] == "running"
    replay(monkeypatch, store_dir, [event("UserPromptSubmit", prompt="again")])
    assert [s["input"] for s in only_trace(store)["steps"]][-1] == "again"


def test_a_result_without_its_call_is_one_complete_step(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PreToolUse not registered: PostToolUse alone still records the call, backdated by
    the harness's duration."""
    replay(
        monkeypatch,
        store_dir,
        [
            tool(
                "PostToolUse",
                "toolu_1",
                tool_input={"command": "ls"},
                tool_response="a",
                duration_ms=40,
            )
        ],
    )
    (step,) = only_trace(store)["steps"]
    assert (step["step_type"], step["name"], step["input"], step["output"]) == (
        "tool_call",
        "Bash",
        {"command": "ls"},
        "a",
    )
    assert step["duration_ms"] == 40 and step["metadata"]["call_id"] == "toolu_1"


def test_calls_pair_with_results_by_call_id_not_order(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(
        monkeypatch,
        store_dir,
        [
            tool("PreToolUse", "toolu_a", tool_input={"command": "a"}),
            tool("PreToolUse", "toolu_b", tool_input={"command": "b"}),
            tool("PreToolUse", "toolu_b", tool_input={"command": "b"}),  # delivered twice
            tool("PostToolUse", "toolu_b", tool_input={"command": "b"}, tool_response="B"),
            tool("PostToolUse", "toolu_a", tool_input={"command": "a"}, tool_response="A"),
        ],
    )
    steps = only_trace(store)["steps"]
    assert [(s["input"]["command"], s["output"]) for s in steps] == [("a", "A"), ("b", "B")]


def test_a_call_without_a_result_is_closed_as_failed_when_the_turn_ends(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool call blocked by another hook or denied never gets a PostToolUse."""
    replay(
        monkeypatch,
        store_dir,
        [
            tool("PreToolUse", "toolu_x", tool_input={"command": "rm -rf /"}),
            event("Stop", last_assistant_message="I could not do that."),
        ],
    )
    step = only_trace(store)["steps"][0]
    assert step["error"] == NO_RESULT
    assert open_steps(store) == 0


def test_stop_failure_fails_the_trace_and_session_end_keeps_it_failed(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(
        monkeypatch,
        store_dir,
        [
            event("UserPromptSubmit", prompt="hi"),
            event("StopFailure", error="rate_limit", error_details="429 Too Many Requests"),
            event("SessionEnd", reason="other"),
        ],
    )
    trace = only_trace(store)
    assert trace["status"] == "failed"
    assert trace["error"] == "rate_limit\n429 Too Many Requests"
    assert shape(trace)[-1] == ("error", "stop_failure")


def test_events_it_does_not_record_are_skipped_without_errors(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(
        monkeypatch,
        store_dir,
        [
            event("Notification", message="Claude needs your permission"),
            event("PreCompact", trigger="auto"),
            event("SomeEventFromTheFuture", whatever={"x": 1}),
            event("UserPromptSubmit", prompt="hi"),
            event("MessageDisplay", delta="Hello", final=True),
            event("PostToolBatch", tool_calls=[]),
        ],
    )
    assert shape(only_trace(store)) == [("thought", "user_prompt")]
    assert log_text(store_dir) == ""


def test_a_bad_payload_is_logged_and_dropped_and_the_rest_recorded(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(
        monkeypatch,
        store_dir,
        [
            "not json at all",
            [1, 2, 3],
            {"hook_event_name": "UserPromptSubmit", "prompt": "no session"},
            event("UserPromptSubmit", prompt="hi"),
        ],
    )
    assert only_trace(store)["input"] == "hi"
    log = log_text(store_dir)
    assert log.count("dropped") == 3
    assert "no session_id" in log


def test_no_input_keeps_names_timing_and_errors_but_no_content(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(monkeypatch, store_dir, payloads("claude-code/plain"), "--no-input")
    trace = only_trace(store)
    assert shape(trace) == PLAIN_SHAPE
    assert trace["input"] is None and trace["output"] is None
    assert all(s["input"] is None and s["output"] is None for s in trace["steps"])
    assert trace["steps"][4]["error"] == "Exit code 1"
    dump = json.dumps(traces(store))
    for secret in ("notes.txt", "TODO", "does_not_exist", "List the files"):
        assert secret not in dump


def test_secrets_are_redacted_by_default_and_kept_with_no_redact(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 3
    command = {"command": f"curl -H 'x-api-key: {key}' https://api.example.com"}
    replay(monkeypatch, store_dir, [tool("PreToolUse", "toolu_1", tool_input=command)])
    assert key not in json.dumps(only_trace(store))
    assert "REDACTED" in json.dumps(only_trace(store)["steps"][0]["input"])
    replay(
        monkeypatch,
        store_dir,
        [tool("PreToolUse", "toolu_2", tool_input=command)],
        "--no-redact",
    )
    assert only_trace(store)["steps"][1]["input"] == command


@pytest.mark.parametrize(
    "folder", ["claude-code/plain", "claude-code/subagent", "claude-code/otel"]
)
def test_every_claude_payload_is_detected_as_claude(store: Store, folder: str) -> None:
    assert {detect_dialect(store, p) for p in payloads(folder)} == {"claude"}


def test_an_explicit_dialect_wins_over_detection(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(monkeypatch, store_dir, [event("UserPromptSubmit", prompt="hi")], "--dialect", "codex")
    trace = only_trace(store)
    assert trace["agent_name"] == "codex"
    with open_store(store.target) as again:
        assert execute(again, "SELECT source_format FROM traces").fetchone()[0] == "codex-hook"
