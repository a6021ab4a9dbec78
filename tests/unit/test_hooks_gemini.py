"""Gemini CLI hooks: the captured sessions replayed through ``agent-replay hook``; streamed
AfterModel chunks merged into one llm_call step; tool calls paired without call ids."""

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
from agent_replay.services.hook.dialects.gemini import NO_RESPONSE, tool_error
from agent_replay.services.hook.drain import drain_with_lock
from agent_replay.store.core import execute
from agent_replay.store.db import Store
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
    lines = (FIXTURES / folder / "hooks.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["payload"] for line in lines if line.strip()]


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


def usage(folder: str) -> list[int]:
    """The totalTokenCount of each model call, from its last AfterModel chunk."""
    return [
        p["llm_response"]["usageMetadata"]["totalTokenCount"]
        for p in payloads(folder)
        if p["hook_event_name"] == "AfterModel" and "usageMetadata" in p["llm_response"]
    ]


def check_session(trace: dict[str, Any], folder: str) -> None:
    first = payloads(folder)[0]
    assert (trace["agent_name"], trace["status"]) == ("gemini-cli", "completed")
    assert trace["session_id"] == first["session_id"]
    assert trace["started_at"] == first["timestamp"]  # the payloads' own clock
    assert (trace["input"], trace["output"]) == (PROMPT, ANSWER)
    assert trace["metadata"]["model"] == "gemini-3.8-flash"
    assert trace["metadata"]["end_reason"] == "exit"
    steps = trace["steps"]
    tools = ["run_shell_command", "read_file", "write_file", "run_shell_command"]
    expected = [("thought", "user_prompt")]
    for name in tools:
        expected += [("llm_call", "gemini-3.8-flash"), ("tool_call", name)]
    expected += [("llm_call", "gemini-3.8-flash"), ("output", "final_answer")]
    assert [(s["step_type"], s["name"]) for s in steps] == expected
    llm = [s for s in steps if s["step_type"] == "llm_call"]
    assert [s["tokens_used"] for s in llm] == usage(folder)  # once per call, not per chunk
    assert trace["total_tokens"] == sum(usage(folder))
    assert [s["output"] for s in llm] == ["Let me do that."] * 4 + [ANSWER]
    assert all(s["metadata"]["chunks"] == 2 for s in llm)
    assert all(s["metadata"]["finish_reason"] == "STOP" for s in llm)
    assert llm[0]["model"] == "gemini-3.8-flash"
    assert llm[0]["metadata"]["input_tokens"] == 2150
    assert llm[0]["input"]["messages"][0]["content"].endswith(PROMPT)
    assert llm[1]["input"]["message_count"] == 2
    tool_steps = [s for s in steps if s["step_type"] == "tool_call"]
    for tool in tool_steps:  # why: each call <- the model reply that asked for it
        assert tool["caused_by_step"] == tool["step_number"] - 1
        assert steps[tool["caused_by_step"] - 1]["step_type"] == "llm_call"
    assert tool_steps[0]["input"] == {"command": "ls -la", "description": "Run ls -la"}
    assert "notes.txt" in tool_steps[0]["output"]["returnDisplay"]
    assert tool_steps[1]["output"]["llmContent"].startswith("TODO:")
    assert [s["error"] for s in tool_steps[:3]] == [None, None, None]
    cat = tool_steps[3]
    assert cat["input"]["command"] == "cat does_not_exist.txt"
    assert cat["error"] == "Exit code 1\ncat: does_not_exist.txt: No such file or directory"
    for step in steps:
        assert trace["started_at"] <= step["started_at"] <= step["ended_at"] <= trace["ended_at"]


def test_the_plain_session_through_real_hook_processes(store: Store, store_dir: Path) -> None:
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir), "AGENT_REPLAY_HOOK_NO_SPAWN": "1"}
    for item in payloads("gemini-cli/plain"):
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
    check_session(only_trace(store), "gemini-cli/plain")
    assert execute(store, "SELECT source_format FROM traces").fetchone()[0] == "gemini-cli-hook"
    assert execute(store, "SELECT COUNT(*) FROM steps WHERE is_open = 1").fetchone()[0] == 0


def test_the_otel_capture_records_the_same_session(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(monkeypatch, store_dir, payloads("gemini-cli/otel"))
    check_session(only_trace(store), "gemini-cli/otel")


def test_a_tool_call_is_never_caused_by_a_model_call_of_an_earlier_turn(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn whose model calls were not hooked (only some events registered): its tool call
    has no cause rather than the previous turn's model call."""
    items = payloads("gemini-cli/plain")
    first_tool = next(i for i, p in enumerate(items) if p["hook_event_name"] == "BeforeTool")
    prompt = next(p for p in items if p["hook_event_name"] == "BeforeAgent")
    again = [{**prompt, "prompt": "And once more?"}, items[first_tool]]
    replay(monkeypatch, store_dir, items[: first_tool + 1] + again)
    steps = only_trace(store)["steps"]
    first, second = [s for s in steps if s["step_type"] == "tool_call"]
    assert steps[first["caused_by_step"] - 1]["step_type"] == "llm_call"
    assert second["caused_by_step"] is None


def test_no_input_keeps_tokens_and_failures_but_no_text(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay(monkeypatch, store_dir, payloads("gemini-cli/plain"), "--no-input")
    trace = only_trace(store)
    assert trace["total_tokens"] == sum(usage("gemini-cli/plain"))
    assert [s["error"] for s in trace["steps"] if s["error"]] == ["Exit code 1"]
    dump = json.dumps(trace)
    for text in ("Let me do that", "notes.txt", "TODO", "session_context"):
        assert text not in dump


SESSION = "sess-gemini-1"


def event(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "transcript_path": "/home/u/.gemini/tmp/p/chats/session-x.jsonl",
        "cwd": "/home/u/p",
        "hook_event_name": name,
        "timestamp": fields.pop("at", "2026-01-01T10:00:00.000Z"),
        **fields,
    }


def test_same_named_tools_pair_by_input_when_results_come_out_of_order(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def call(name: str, path: str, **fields: Any) -> dict[str, Any]:
        return event(name, tool_name="read_file", tool_input={"file_path": path}, **fields)

    replay(
        monkeypatch,
        store_dir,
        [
            call("BeforeTool", "a.txt", at="2026-01-01T10:00:01.000Z"),
            call("BeforeTool", "b.txt", at="2026-01-01T10:00:02.000Z"),
            call(
                "AfterTool", "b.txt", tool_response={"llmContent": "B"}, at="2026-01-01T10:00:03Z"
            ),
            call(
                "AfterTool", "a.txt", tool_response={"llmContent": "A"}, at="2026-01-01T10:00:04Z"
            ),
        ],
    )
    steps = only_trace(store)["steps"]
    assert [(s["input"]["file_path"], s["output"]["llmContent"]) for s in steps] == [
        ("a.txt", "A"),
        ("b.txt", "B"),
    ]
    assert [s["duration_ms"] for s in steps] == [3000, 1000]


def test_a_tool_error_field_fails_the_step() -> None:
    assert tool_error({"error": {"message": "File not found", "type": "FILE_NOT_FOUND"}}) == (
        "File not found"
    )
    assert tool_error({"llmContent": "Output: ok\nExit Code: 0\n"}) is None
    assert tool_error({"llmContent": "Output: \nExit Code: 2\n", "returnDisplay": ""}) == (
        "Exit code 2"
    )
    assert tool_error("plain text") is None


def test_model_chunks_without_before_model_still_make_one_step_per_call(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def chunk(text: str, *, last: bool) -> dict[str, Any]:
        response: dict[str, Any] = {"text": text, "candidates": [{"content": {"parts": [text]}}]}
        if last:
            response["candidates"][0]["finishReason"] = "STOP"
            response["usageMetadata"] = {"totalTokenCount": 7}
        return event("AfterModel", llm_request={"model": "m"}, llm_response=response)

    replay(
        monkeypatch,
        store_dir,
        [
            chunk("a", last=False),
            chunk("b", last=True),
            chunk("c", last=False),
            chunk("d", last=True),
        ],
    )
    llm = only_trace(store)["steps"]
    assert [(s["output"], s["tokens_used"]) for s in llm] == [("ab", 7), ("cd", 7)]


def test_a_model_call_that_never_answered_is_closed_as_failed(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    replay(
        monkeypatch,
        store_dir,
        [event("BeforeModel", llm_request=request), event("BeforeModel", llm_request=request)],
    )
    first, second = only_trace(store)["steps"]
    assert first["error"] == NO_RESPONSE
    assert second["error"] is None


@pytest.mark.parametrize("folder", ["gemini-cli/plain", "gemini-cli/otel"])
def test_every_gemini_payload_is_detected_as_gemini(store: Store, folder: str) -> None:
    assert {detect_dialect(store, p) for p in payloads(folder)} == {"gemini"}
