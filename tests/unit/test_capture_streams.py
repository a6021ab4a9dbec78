"""Stream formats replayed from the real captures in tests/fixtures (``codex exec --json``,
``gemini -p --output-format stream-json``, ``claude -p --output-format stream-json``): the
resulting trace's steps, inputs, outputs, tokens, and the failed ``cat does_not_exist.txt``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS

from agent_replay.services.capture.events import EventEngine
from agent_replay.services.capture.pump import FdReader, finish, pump
from agent_replay.services.capture.stream_sink import shell_failure
from agent_replay.services.capture.streams import make_sink
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import get_trace
from agent_replay.trace.models import Trace

CODEX = HARNESS / "codex" / "plain" / "exec-json.jsonl"
GEMINI = [HARNESS / "gemini-cli" / p / "stream-json.jsonl" for p in ("plain", "otel")]
CLAUDE = HARNESS / "claude-code" / "plain" / "stream-json.jsonl"
CLAUDE_SUBAGENT = HARNESS / "claude-code" / "subagent" / "stream-json.jsonl"


FAILED_CAT = "cat: does_not_exist.txt: No such file or directory"


class Replayed:
    def __init__(self, trace: Trace, engine: EventEngine, warnings: list[str]) -> None:
        self.trace = trace
        self.engine = engine
        self.report = engine.report
        self.warnings = warnings

    def kinds(self) -> list[tuple[str, str | None]]:
        return [(s.step_type, s.name) for s in self.trace.steps]


def replay(store: Store, fmt: str, source: Path | bytes, tmp_path: Path, **kw: Any) -> Replayed:
    """Record a stream file (or bytes) in the given format, the way ``record`` does."""
    if isinstance(source, bytes):
        path = tmp_path / "stream.jsonl"
        path.write_bytes(source)
        source = path
    warnings: list[str] = []
    engine = EventEngine(store, warn=warnings.append, source_format=fmt)
    sink = make_sink(fmt, engine, **kw)
    fd = os.open(source, os.O_RDONLY)
    try:
        pump(FdReader(fd), sink)
    finally:
        os.close(fd)
    finish(sink)
    assert len(engine.report.traces) == 1, engine.report.as_json()
    return Replayed(get_trace(store, engine.report.traces[0]), engine, warnings)


def jsonl(*events: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


# --- codex exec --json ----------------------------------------------------------------------


def test_codex_exec_fixture_maps_onto_steps(store: Store, tmp_path: Path) -> None:
    run = replay(store, "codex-exec", CODEX, tmp_path)
    assert run.report.ok and run.report.skipped == {} and run.warnings == []
    assert run.report.events == 19
    trace = run.trace
    assert trace.agent_name == "codex" and trace.status == "completed"
    assert trace.session_id == "01a229b9-a903-78c1-b289-f02dcbb94ff4"
    assert trace.output.startswith("Done. I listed the directory")
    assert run.kinds() == [
        ("error", "warning"),
        ("error", "warning"),
        ("error", "warning"),
        ("thought", "message"),
        ("tool_call", "Bash"),
        ("thought", "message"),
        ("tool_call", "Bash"),
        ("thought", "message"),
        ("tool_call", "apply_patch"),
        ("thought", "message"),
        ("tool_call", "Bash"),
        ("output", "final_answer"),
        ("llm_call", "turn 1"),
    ]
    steps = trace.steps
    # warnings are error steps, but the run is not failed
    assert "dangerously-bypass-hook-trust" in (steps[0].error or "")
    assert steps[3].output == "Let me do that."
    assert steps[4].input == {"command": "ls -la"}  # as Codex's hooks show it
    assert steps[4].metadata["original_name"] == "command_execution"
    assert "notes.txt" in steps[4].output and steps[4].error is None
    assert steps[6].output.startswith("TODO:")
    assert steps[8].input == {
        "changes": [{"path": "/home/dev/codex-plain/work/summary.txt", "kind": "add"}]
    }
    failed = steps[10]
    assert failed.input == {"command": "cat does_not_exist.txt"}
    assert failed.error == f"exit code 1: {FAILED_CAT}"
    assert failed.metadata["exit_code"] == 1 and failed.output == FAILED_CAT + "\n"
    assert [s.error for s in steps if s.step_type == "tool_call"].count(None) == 3
    assert steps[12].tokens_used == 9800 and trace.total_tokens == 9800
    assert all(not s.metadata.get("is_open") for s in steps)


def test_codex_turn_failed_fails_the_trace(store: Store, tmp_path: Path) -> None:
    stream = jsonl(
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "hmm"}},
        {"type": "error", "message": "stream disconnected"},
        {"type": "turn.failed", "error": {"message": "model overloaded"}},
    )
    run = replay(store, "codex-exec", stream, tmp_path)
    assert run.trace.status == "failed" and run.trace.error == "model overloaded"
    assert run.kinds() == [
        ("thought", "reasoning"),
        ("error", "stream error"),
        ("error", "turn 1 failed"),
    ]


def test_codex_mcp_call_and_unknown_items(store: Store, tmp_path: Path) -> None:
    call = {
        "id": "i1",
        "type": "mcp_tool_call",
        "server": "fs",
        "tool": "read",
        "arguments": {"path": "/x"},
        "result": None,
        "error": None,
        "status": "in_progress",
    }
    stream = jsonl(
        {"type": "thread.started", "thread_id": "t-2"},
        {"type": "item.started", "item": call},
        {
            "type": "item.completed",
            "item": {**call, "status": "failed", "error": {"message": "no such file"}},
        },
        {"type": "item.completed", "item": {"id": "i2", "type": "hologram"}},
        {"type": "item.completed", "item": {"id": "i3", "type": "hologram"}},
        {"type": "mystery.event"},
        {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 2}},
    )
    run = replay(store, "codex-exec", stream, tmp_path)
    tool = run.trace.steps[0]
    assert (tool.name, tool.input, tool.error) == ("mcp__fs__read", {"path": "/x"}, "no such file")
    assert run.report.skipped == {
        "unknown codex-exec item type 'hologram'": 2,
        "unknown codex-exec event type 'mystery.event'": 1,
    }
    assert run.trace.total_tokens == 7 and run.trace.status == "completed"


# --- gemini stream-json ----------------------------------------------------------------------


@pytest.mark.parametrize("fixture", GEMINI, ids=["plain", "otel"])
def test_gemini_stream_fixture_maps_onto_steps(store: Store, tmp_path: Path, fixture: Path) -> None:
    run = replay(store, "gemini-stream", fixture, tmp_path)
    assert run.report.ok and run.report.skipped == {} and run.warnings == []
    trace = run.trace
    assert trace.agent_name == "gemini-cli" and trace.status == "completed"
    assert trace.input.startswith("List the files in this directory")
    assert trace.session_id and trace.metadata["model"] == "auto"
    assert run.kinds() == [
        ("thought", "message"),
        ("tool_call", "run_shell_command"),
        ("thought", "message"),
        ("tool_call", "read_file"),
        ("thought", "message"),
        ("tool_call", "write_file"),
        ("thought", "message"),
        ("tool_call", "run_shell_command"),
        ("output", "final_answer"),
        ("llm_call", "gemini-3.5-flash-lite"),
        ("llm_call", "gemini-3.8-flash"),
    ]
    steps = trace.steps
    assert steps[1].input == {"command": "ls -la", "description": "Run ls -la"}
    assert steps[1].error is None and "notes.txt" in steps[1].output
    assert steps[1].caused_by_step == 1
    assert steps[3].input["file_path"].endswith("/work/notes.txt")
    assert steps[5].input["content"].startswith("Summary written by the mock model.")
    # the shell reported success, but the command failed: read from its output
    failed = steps[7]
    assert failed.input["command"] == "cat does_not_exist.txt"
    assert failed.error == FAILED_CAT and failed.output == FAILED_CAT
    assert failed.metadata["status"] == "success"
    assert failed.metadata["failure_inferred_from_output"] is True
    # the two streamed chunks of the answer are one step
    assert steps[8].output == (
        "Done. I listed the directory, read notes.txt, wrote summary.txt, and confirmed "
        "that does_not_exist.txt is missing."
    )
    assert trace.output == steps[8].output
    assert [s.tokens_used for s in steps[9:]] == [2330, 13900]
    assert steps[10].model == "gemini-3.8-flash"
    assert trace.total_tokens == 16230
    # times are the events' own
    assert trace.started_at.startswith("2026-11-29T23:5")
    assert steps[1].duration_ms is not None and steps[1].duration_ms < 1000


def test_gemini_deltas_merge_and_tool_errors(store: Store, tmp_path: Path) -> None:
    t = "2026-01-01T00:00:0{}.000Z".format
    stream = jsonl(
        {"type": "init", "timestamp": t(0), "session_id": "s", "model": "m"},
        {
            "type": "message",
            "timestamp": t(1),
            "role": "assistant",
            "content": "Thin",
            "delta": True,
        },
        {
            "type": "message",
            "timestamp": t(2),
            "role": "assistant",
            "content": "king",
            "delta": True,
        },
        {
            "type": "tool_use",
            "timestamp": t(3),
            "tool_name": "read_file",
            "tool_id": "r1",
            "parameters": {"file_path": "x"},
        },
        {
            "type": "tool_result",
            "timestamp": t(4),
            "tool_id": "r1",
            "status": "error",
            "error": {"type": "not_found", "message": "File not found: x"},
        },
        {"type": "error", "timestamp": t(5), "severity": "warning", "message": "loop detected"},
        {
            "type": "message",
            "timestamp": t(6),
            "role": "assistant",
            "content": "Bye",
            "delta": True,
        },
        {
            "type": "result",
            "timestamp": t(7),
            "status": "success",
            "stats": {"total_tokens": 12, "input_tokens": 10, "output_tokens": 2},
        },
    )
    run = replay(store, "gemini-stream", stream, tmp_path)
    steps = run.trace.steps
    assert run.kinds() == [
        ("thought", "message"),
        ("tool_call", "read_file"),
        ("error", "warning"),
        ("output", "final_answer"),
        ("llm_call", "m"),
    ]
    assert steps[0].output == "Thinking" and steps[0].duration_ms == 1000.0
    assert steps[1].error == "File not found: x"
    assert run.trace.status == "completed" and run.trace.total_tokens == 12
    assert run.trace.input is None


def test_gemini_result_error_fails_the_trace(store: Store, tmp_path: Path) -> None:
    stream = jsonl(
        {"type": "init", "session_id": "s2", "model": "m"},
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "result", "status": "error", "error": {"type": "api", "message": "quota"}},
    )
    run = replay(store, "gemini-stream", stream, tmp_path)
    assert (run.trace.status, run.trace.error, run.trace.input) == ("failed", "quota", "hi")


# --- claude stream-json ----------------------------------------------------------------------


def test_claude_stream_fixture_maps_onto_steps(store: Store, tmp_path: Path) -> None:
    run = replay(store, "claude-stream", CLAUDE, tmp_path)
    assert run.report.ok and run.report.skipped == {} and run.warnings == []
    trace = run.trace
    assert trace.agent_name == "claude-code" and trace.agent_version == "2.1.332"
    assert trace.session_id == "54bf8201-626e-46cc-b9e5-a41d6f56c56b"
    assert trace.status == "completed" and trace.total_cost_usd == pytest.approx(0.0418)
    assert trace.total_tokens == 9290  # the result's usage, not the sum of partial lines
    assert trace.output.startswith("Done. I listed the directory")
    turn = [("llm_call", "claude-opus-5-5"), ("thought", "message")]
    assert run.kinds() == [
        *turn,
        ("tool_call", "Bash"),
        *turn,
        ("tool_call", "Read"),
        *turn,
        ("tool_call", "Write"),
        *turn,
        ("tool_call", "Bash"),
        ("llm_call", "claude-opus-5-5"),
        ("output", "final_answer"),
    ]
    steps = trace.steps
    llm = [s for s in steps if s.step_type == "llm_call"]
    # one reply spans two lines sharing a message id: its usage is counted once
    assert [s.tokens_used for s in llm] == [1401, 1601, 1801, 2001, 2201]
    assert llm[0].metadata["message_id"] == "msg_mock106ec4ddb0b1408c9f145414"
    assert llm[0].output == {"tool_calls": ["Bash"]}
    assert steps[2].input == {"command": "ls -la", "description": "Run ls -la"}
    assert steps[2].caused_by_step == 1 and steps[2].error is None
    assert steps[3].caused_by_step == 3  # the next reply follows the tool's result
    failed = steps[11]
    assert failed.input["command"] == "cat does_not_exist.txt"
    assert failed.error == f"Exit code 1\n{FAILED_CAT}"
    assert steps[13].output == trace.output
    assert all(s.ended_at is not None for s in steps if s.step_type in ("llm_call", "tool_call"))


def test_claude_subagent_steps_nest_under_the_agent_tool_call(store: Store, tmp_path: Path) -> None:
    run = replay(store, "claude-stream", CLAUDE_SUBAGENT, tmp_path)
    assert run.report.ok and run.report.skipped == {}
    steps = run.trace.steps
    agent = next(s for s in steps if s.name == "Agent")
    nested = [s for s in steps if s.parent_step == agent.step_number]
    assert [(s.step_type, s.name) for s in nested] == [
        ("llm_call", "claude-opus-5-5"),
        ("tool_call", "Bash"),
        ("llm_call", "claude-opus-5-5"),
        ("tool_call", "Read"),
    ]
    assert agent.output and "Subagent" in agent.output
    assert run.trace.output == "The subagent reports three TODO items in notes.txt."


def test_claude_error_result_fails_the_trace(store: Store, tmp_path: Path) -> None:
    stream = jsonl(
        {"type": "system", "subtype": "init", "session_id": "s", "model": "m"},
        {
            "type": "result",
            "subtype": "error_max_turns",
            "is_error": True,
            "usage": {"input_tokens": 3, "output_tokens": 1},
        },
    )
    run = replay(store, "claude-stream", stream, tmp_path)
    assert (run.trace.status, run.trace.error) == ("failed", "error_max_turns")
    assert run.trace.total_tokens == 4


# --- shared behaviour ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "default"),
    [("codex-exec", "codex"), ("gemini-stream", "gemini-cli"), ("claude-stream", "claude-code")],
)
def test_agent_name_option_overrides_the_default(
    store: Store, tmp_path: Path, fmt: str, default: str
) -> None:
    source = {"codex-exec": CODEX, "gemini-stream": GEMINI[0], "claude-stream": CLAUDE}[fmt]
    assert replay(store, fmt, source, tmp_path).trace.agent_name == default
    named = replay(store, fmt, source, tmp_path, agent_name="mine")
    assert named.trace.agent_name == "mine"


def test_malformed_lines_in_a_stream_are_counted(store: Store, tmp_path: Path) -> None:
    stream = CODEX.read_bytes().replace(b'{"type":"turn.started"}', b"garbage{")
    run = replay(store, "codex-exec", stream, tmp_path)
    assert run.report.malformed == 1 and run.report.malformed_samples[0][0] == "line 5"
    assert run.trace.status == "completed"


def test_a_stream_cut_short_is_finalized_as_timeout(store: Store, tmp_path: Path) -> None:
    head = b"".join(CODEX.read_bytes().splitlines(keepends=True)[:9])
    run = replay(store, "codex-exec", head, tmp_path)
    assert run.trace.status == "timeout"
    assert run.kinds()[-1] == ("thought", "message")


@pytest.mark.parametrize(
    ("command", "output", "failure"),
    [
        ("cat does_not_exist.txt", FAILED_CAT, FAILED_CAT),
        ("ls -la", "total 20\n-rw-r--r-- 1 root root 45 notes.txt", None),
        ("grep x y", "Command: grep x y\nOutput: (empty)\nExit Code: 2", "exit code 2"),
        ("true", "Output: ok\nExit Code: 0", None),
        (
            "frobnicate",
            "bash: line 1: frobnicate: command not found",
            "bash: line 1: frobnicate: command not found",
        ),
        ("/usr/bin/cat x", "cat: x: Permission denied", "cat: x: Permission denied"),
        ("echo 'cat: fine'", "cat: fine", None),
        (None, "", None),
    ],
)
def test_shell_failure_reads_the_output(command: Any, output: str, failure: str | None) -> None:
    """Gemini reports a failed shell command as a success: the failure is read from the
    output (an exit code line, or the program's or shell's own diagnostic first)."""
    assert shell_failure(command, output) == failure
