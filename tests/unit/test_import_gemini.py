"""Gemini CLI chat recordings (``import --format gemini-chat``, auto-detected): the real
recordings give the same trace the Gemini hook path gives; the log's update records (last copy
of an id wins, ``$set``, ``$rewindTo``) and unfinished sessions are read as Gemini reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS
from harnesskit import payloads, replay_hooks, tool_calls, traces_by_format

from agent_replay.clock import FixedClock
from agent_replay.services.capture import gemini_chat
from agent_replay.services.capture.importer import detect_format, import_file, import_path
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json

FOLDERS = ("gemini-cli/plain", "gemini-cli/otel", "gemini-cli/enforce")


def chat_file(folder: str) -> Path:
    (found,) = sorted((HARNESS / folder / "chats").rglob("session-*.jsonl"))
    return found


def comparable(step: dict[str, Any]) -> tuple[Any, ...]:
    """What a step must agree on across the hook and import paths."""
    tokens = {k: v for k, v in step["metadata"].items() if k.endswith("_tokens")}
    shown = step["input"] if step["step_type"] != "llm_call" else None
    return (
        step["step_type"],
        step["name"],
        shown,
        step["output"],
        step["error"],
        step["tokens_used"],
        step["model"],
        tokens,
    )


@pytest.mark.parametrize("folder", FOLDERS[:2])
def test_a_chat_recording_gives_the_trace_the_hook_path_gives(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch, clock: FixedClock, folder: str
) -> None:
    """Same steps in the same order, same tool inputs, outputs and failures, same tokens and
    models, same input, output, status and session; only the llm_call inputs differ (the hook
    sees the request, the recording only the conversation)."""
    replay_hooks(monkeypatch, store_dir, payloads(folder))
    path = chat_file(folder)
    assert detect_format(path) == "gemini-chat"
    result = import_file(store, path, clock=clock)
    assert result.status == "imported" and result.unknown_records == 0, result
    traces = traces_by_format(store)
    hook, imported = traces["gemini-cli-hook"], traces["gemini-chat"]
    for key in ("agent_name", "session_id", "status", "input", "output", "total_tokens"):
        assert imported[key] == hook[key], key
    assert imported["metadata"]["model"] == hook["metadata"]["model"]
    assert [comparable(s) for s in imported["steps"]] == [comparable(s) for s in hook["steps"]]
    failed = [s for s in tool_calls(imported) if s["error"]]
    assert len(failed) == 1 and failed[0]["error"].startswith("Exit code 1")


def test_a_blocked_call_carries_the_guards_reason_as_on_the_hook_path(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch, clock: FixedClock
) -> None:
    """The enforce capture: write_file was denied by the guard; the recording's "Tool
    execution blocked: ..." is unwrapped to the reason the hook gave."""
    path = chat_file("gemini-cli/enforce")
    trace = trace_json(store, str(import_file(store, path, clock=clock).trace_id))
    blocked = next(s for s in tool_calls(trace) if s["name"] == "write_file")
    assert blocked["error"] == (
        'Blocked by agent-replay guard: policy "no-summary-write" (deny): '
        "e2e: summary.txt must not be written"
    )
    assert blocked["output"] is None
    assert blocked["metadata"]["harness_error"].startswith("Tool execution blocked: ")
    assert trace["status"] == "completed"


def test_folder_import_of_the_gemini_tmp_tree(store: Store, clock: FixedClock) -> None:
    """``~/.gemini/tmp`` as a folder: each session once; a second walk adds nothing."""
    first = import_path(store, HARNESS / "gemini-cli", clock=clock)
    chats = [f for f in first.files if f.format == "gemini-chat"]
    assert len(chats) == len(FOLDERS) and all(f.status == "imported" for f in chats)
    again = import_path(store, HARNESS / "gemini-cli", clock=clock)
    assert again.sessions == 0 and again.present == len(FOLDERS)


# --- the update log, record by record ------------------------------------------------------

SID = "0b7c2f5e-1111-4222-8333-944455556666"


def header(**fields: Any) -> dict[str, Any]:
    return {
        "sessionId": SID,
        "projectHash": "ab" * 32,
        "startTime": "2026-01-01T10:00:00.000Z",
        "lastUpdated": "2026-01-01T10:00:00.000Z",
        "kind": "main",
        **fields,
    }


def at(seconds: float) -> str:
    return f"2026-01-01T10:00:{seconds:06.3f}Z"


def user(mid: str, seconds: float, text: str) -> dict[str, Any]:
    return {"id": mid, "timestamp": at(seconds), "type": "user", "content": [{"text": text}]}


def gemini(mid: str, seconds: float, text: str, **fields: Any) -> dict[str, Any]:
    tokens = {"input": 100, "output": 10, "cached": 0, "thoughts": 0, "tool": 0, "total": 110}
    return {
        "id": mid,
        "timestamp": at(seconds),
        "type": "gemini",
        "content": text,
        "thoughts": [],
        "tokens": tokens,
        "model": "gemini-2.5-flash",
        **fields,
    }


def shell_call(cid: str, command: str, seconds: float, *, output: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": cid,
        "name": "run_shell_command",
        "args": {"command": command},
        "status": "success" if output is not None else "executing",
        "timestamp": at(seconds),
    }
    if output is not None:
        response = {"output": output}
        call["result"] = [{"functionResponse": {"id": cid, "name": "x", "response": response}}]
        call["resultDisplay"] = output
    return call


def results(mid: str, seconds: float, cid: str) -> dict[str, Any]:
    part = {"functionResponse": {"id": cid, "name": "run_shell_command", "response": {}}}
    return {"id": mid, "timestamp": at(seconds), "type": "user", "content": [part]}


def write(tmp_path: Path, records: list[Any]) -> Path:
    path = tmp_path / "chats" / f"session-2026-01-01T10-00-{SID[:8]}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(store: Store, clock: FixedClock, path: Path) -> dict[str, Any]:
    result = import_file(store, path, clock=clock)
    assert result.status == "imported", result
    trace = trace_json(store, str(result.trace_id))
    trace["_result"] = result
    return trace


def test_the_last_copy_of_a_message_wins_and_rewinds_keep_what_happened(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """A reply written first bare, then with its tool call and result (Gemini appends the
    whole message again); a rewound turn stays in the trace and the rewind is counted."""
    call = shell_call("c1", "ls", 2.5, output="a.txt")
    records = [
        header(),
        {"$set": {"messages": [user("ctx", 0.5, "<session_context>\nstuff")]}},
        user("u1", 1, "list files"),
        gemini("g1", 2, "Listing."),
        {"$set": {"lastUpdated": at(2)}},
        gemini("g1", 2, "Listing.", toolCalls=[call]),
        results("u2", 3, "c1"),
        gemini("g2", 4, "One file: a.txt."),
        {"$rewindTo": "g2"},
        user("u3", 5, "again"),
        gemini("g3", 6, "Still a.txt."),
        {"$set": {"lastUpdated": at(6), "summary": "listing files"}},
    ]
    trace = run(store, clock, write(tmp_path, records))
    assert [(s["step_type"], s["name"]) for s in trace["steps"]] == [
        ("thought", "user_prompt"),
        ("llm_call", "gemini-2.5-flash"),
        ("tool_call", "run_shell_command"),
        ("llm_call", "gemini-2.5-flash"),
        ("output", "final_answer"),
        ("thought", "user_prompt"),
        ("llm_call", "gemini-2.5-flash"),
        ("output", "final_answer"),
    ]
    prompt, first, tool = trace["steps"][:3]
    assert trace["input"] == "list files" == prompt["input"]
    assert tool["input"] == {"command": "ls"}
    assert tool["output"] == {"llmContent": "a.txt", "returnDisplay": "a.txt"}
    assert tool["caused_by_step"] == first["step_number"] and tool["error"] is None
    assert first["tokens_used"] == 110 and first["started_at"] == at(1)
    assert first["metadata"]["input_tokens"] == 100 and first["metadata"]["output_tokens"] == 10
    assert trace["output"] == "Still a.txt." and trace["status"] == "completed"
    assert trace["metadata"]["rewinds"] == 1 and trace["metadata"]["summary"] == "listing files"
    assert trace["session_id"] == SID and trace["total_tokens"] == 330
    assert trace["_result"].unknown_records == 0


def test_a_recording_ending_mid_turn_is_a_timeout_with_the_call_open(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """A tool call still executing when the file ends: no result, the trace timed out."""
    call = shell_call("c1", "sleep 99", 2.5, output=None)
    records = [header(), user("u1", 1, "wait"), gemini("g1", 2, "", toolCalls=[call])]
    trace = run(store, clock, write(tmp_path, records))
    (tool,) = tool_calls(trace)
    assert tool["error"] == gemini_chat.NO_RESULT and tool["metadata"]["incomplete"] is True
    assert trace["status"] == "timeout" and trace["error"] == gemini_chat.MID_TURN


def test_thoughts_cached_tokens_errors_and_unknown_records(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """Thoughts become thought steps; non-zero cache/thought counts are kept; a session that
    ends on an error message failed; unknown records and a torn last line are counted."""
    thought = {"subject": "Plan", "description": "read it", "timestamp": at(1.5)}
    tokens = {"input": 900, "output": 20, "cached": 600, "thoughts": 40, "tool": 0, "total": 960}
    records = [
        header(),
        user("u1", 1, "read it"),
        gemini("g1", 2, "Reading.", thoughts=[thought], tokens=tokens),
        {"id": "i1", "timestamp": at(2.5), "type": "info", "content": "notice"},
        {"type": "hologram"},
        {"id": "e1", "timestamp": at(3), "type": "error", "content": "quota exceeded"},
        '{"id": "g2", "timestamp": "2026-01-01T',
    ]
    trace = run(store, clock, write(tmp_path, records))
    kinds = [(s["step_type"], s["name"]) for s in trace["steps"]]
    assert kinds == [
        ("thought", "user_prompt"),
        ("llm_call", "gemini-2.5-flash"),
        ("thought", "thinking"),
        ("error", "error"),
    ]
    llm, thinking = trace["steps"][1:3]
    assert thinking["output"] == "Plan: read it" and thinking["caused_by_step"] == 2
    assert llm["metadata"]["cached_input_tokens"] == 600
    assert llm["metadata"]["thoughts_tokens"] == 40 and "tool_tokens" not in llm["metadata"]
    assert trace["status"] == "failed" and trace["error"] == "quota exceeded"
    assert trace["_result"].skipped == {"hologram": 1, "unreadable line": 1}


def test_other_files_are_not_taken_for_chat_recordings(tmp_path: Path) -> None:
    """Detection: a Claude Code transcript line or an unrelated JSONL file is not a chat."""
    claude = tmp_path / "c.jsonl"
    claude.write_text(json.dumps({"type": "user", "sessionId": SID, "uuid": "u"}) + "\n")
    assert detect_format(claude) == "claude-transcript"
    other = tmp_path / "o.jsonl"
    other.write_text(json.dumps({"id": "x", "type": "user"}) + "\n")
    assert detect_format(other) is None
