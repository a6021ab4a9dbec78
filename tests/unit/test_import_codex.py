"""Importing Codex CLI rollouts: the real rollout in tests/fixtures, then hand-built rollouts
in the older forms Codex has written (the ``shell`` tool with JSON outputs, no turn events, no
envelope at all) and the endings a session can have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS

from agent_replay.clock import FixedClock
from agent_replay.services.capture import codex_rollout
from agent_replay.services.capture.importer import detect_format, import_file
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json

FIXTURES = HARNESS / "codex"


def fixture_rollouts() -> list[Path]:
    """Every rollout of the scripted session (the enforce capture's differs: a blocked call)."""
    files = sorted(FIXTURES.glob("plain/rollout/sessions/*/*/*/rollout-*.jsonl"))
    assert files, f"no rollouts under {FIXTURES}"
    return files


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def steps_of(trace: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [s for s in trace["steps"] if all(s.get(k) == v for k, v in match.items())]


def test_every_fixture_rollout_becomes_the_scripted_session(
    store: Store, clock: FixedClock
) -> None:
    """The scripted session: 5 responses, 4 tool calls (the `cat` failing), a final answer."""
    for path in fixture_rollouts():
        lines = raw_lines(path)
        meta = lines[0]["payload"]
        assert detect_format(path) == "codex-rollout"
        result = import_file(store, path, clock=clock)
        assert result.status == "imported" and result.unknown_records == 0, result
        trace = trace_json(store, str(result.trace_id))

        assert trace["agent_name"] == "codex"
        assert trace["agent_version"] == meta["cli_version"] == "0.171.0"
        assert trace["session_id"] == meta["id"]
        assert trace["status"] == "completed" and trace["error"] is None
        prompt = next(
            line["payload"]["item"]["content"][0]["text"]
            for line in lines
            if line["payload"].get("item", {}).get("type") == "UserMessage"
        )
        assert trace["input"] == prompt
        assert trace["metadata"]["cwd"] == meta["cwd"]
        assert trace["metadata"]["model_provider"] == "mock"
        assert trace["metadata"]["git"] == meta["git"]
        assert trace["metadata"]["source"] == {
            "format": "codex-rollout",
            "version": "0.171.0",
            "path": str(path.resolve()),
        }
        column = execute(store, "SELECT source_format FROM traces WHERE id = ?", [trace["id"]])
        assert column.fetchone()[0] == "codex-rollout"
        assert trace["started_at"] == meta["timestamp"]
        assert trace["ended_at"] == lines[-1]["timestamp"]

        kinds = [(s["step_type"], s["name"]) for s in trace["steps"]]
        expected: list[tuple[str, str]] = [("thought", "user_prompt")]
        for tool in ["Bash", "Bash", "apply_patch", "Bash"]:
            expected += [("llm_call", "gpt-5.5"), ("tool_call", tool)]
        expected += [("llm_call", "gpt-5.5"), ("output", "final_answer")]
        assert kinds == expected

        tools = steps_of(trace, step_type="tool_call")
        assert [t["input"] for t in tools if t["name"] == "Bash"] == [
            {"command": "ls -la"},
            {"command": "cat notes.txt"},
            {"command": "cat does_not_exist.txt"},
        ]
        assert tools[0]["metadata"]["original_name"] == "exec_command"
        assert "notes.txt" in tools[0]["output"] and "Chunk ID" not in tools[0]["output"]
        assert tools[1]["output"] == "TODO:\n- buy milk\n- fix bug #42\n- write tests\n"
        assert tools[2]["input"]["command"].startswith("*** Begin Patch")
        assert "summary.txt" in tools[2]["output"]
        failed = tools[3]
        assert failed["error"] == "exit code 1: cat: does_not_exist.txt: No such file or directory"
        assert failed["metadata"]["exit_code"] == 1
        assert [t["error"] is None for t in tools] == [True, True, True, False]
        for tool in tools:
            assert tool["caused_by_step"] == tool["step_number"] - 1
            assert tool["duration_ms"] is not None and tool["duration_ms"] > 0

        usages = [
            line["payload"]["info"]["last_token_usage"]
            for line in lines
            if line["payload"].get("type") == "token_count"
        ]
        calls = steps_of(trace, step_type="llm_call")
        assert [c["tokens_used"] for c in calls] == [
            u["input_tokens"] - u["cached_input_tokens"] + u["output_tokens"] for u in usages
        ]
        assert all(c["model"] == "gpt-5.5" for c in calls)
        final = [line for line in lines if line["payload"].get("type") == "token_count"][-1]
        assert (
            trace["total_tokens"] == final["payload"]["info"]["total_token_usage"]["total_tokens"]
        )
        answer = lines[-1]["payload"]["last_agent_message"]
        assert trace["output"] == answer == calls[-1]["output"]
        assert trace["steps"][-1]["output"] == answer


# --- hand-built rollouts ------------------------------------------------------------------------

SID = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"


def at(seconds: float) -> str:
    return f"2026-01-01T10:00:{seconds:06.3f}Z"


def rec(record_type: str, seconds: float, **payload: Any) -> dict[str, Any]:
    return {"timestamp": at(seconds), "type": record_type, "payload": payload}


def meta(seconds: float = 0, **extra: Any) -> dict[str, Any]:
    return rec(
        "session_meta",
        seconds,
        id=SID,
        timestamp=at(seconds),
        cwd="/w",
        originator="codex_cli_rs",
        cli_version="0.30.0",
        git={"commit_hash": "abc123", "branch": "main"},
        **extra,
    )


def event(event_type: str, seconds: float, **fields: Any) -> dict[str, Any]:
    return rec("event_msg", seconds, type=event_type, **fields)


def item(kind: str, seconds: float, **fields: Any) -> dict[str, Any]:
    return rec("response_item", seconds, type=kind, **fields)


def said(role: str, text: str, seconds: float) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return item("message", seconds, role=role, content=[{"type": part, "text": text}])


def tokens(seconds: float, total: int, **last: int) -> dict[str, Any]:
    usage = {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 10, **last}
    return event(
        "token_count",
        seconds,
        info={"total_token_usage": {"total_tokens": total}, "last_token_usage": usage},
    )


def shell(call_id: str, command: list[str], seconds: float) -> dict[str, Any]:
    arguments = json.dumps({"command": command, "workdir": "/w"})
    return item("function_call", seconds, name="shell", arguments=arguments, call_id=call_id)


def write(folder: Path, records: list[Any], name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"rollout-2026-01-01T10-00-00-{SID}.jsonl")
    rows = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def run(store: Store, clock: FixedClock, path: Path) -> dict[str, Any]:
    outcome = import_file(store, path, clock=clock)
    assert outcome.status == "imported", outcome
    trace = trace_json(store, str(outcome.trace_id))
    trace["_result"] = outcome
    return trace


def older_session(*tail: dict[str, Any]) -> list[dict[str, Any]]:
    """A mid-2025 rollout: the ``shell`` tool, JSON outputs, no turn events."""
    return [
        meta(),
        said("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>", 0.1),
        said("user", "run the tests", 0.2),
        event("user_message", 0.2, message="run the tests", kind="plain"),
        rec("turn_context", 0.3, cwd="/w", model="gpt-5-codex"),
        item("reasoning", 1, summary=[{"type": "summary_text", "text": "**Run pytest**"}]),
        event("agent_reasoning", 1, text="**Run pytest**"),
        shell("c1", ["bash", "-lc", "pytest -q"], 1.1),
        tokens(1.2, 1050, input_tokens=1000, cached_input_tokens=800, output_tokens=50),
        item(
            "function_call_output",
            2,
            call_id="c1",
            output=json.dumps({"output": "1 failed", "metadata": {"exit_code": 1}}),
        ),
        said("assistant", "One test fails.", 3),
        event("agent_message", 3, message="One test fails."),
        tokens(3.1, 2260, input_tokens=1200, output_tokens=10),
        *tail,
    ]


def test_an_older_rollout_with_the_shell_tool(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """The ``shell`` tool's argv and JSON output; reasoning as a thought; cached input tokens
    left out of ``tokens_used``; the prompt from the event, not the injected context."""
    trace = run(store, clock, write(tmp_path, older_session()))
    assert [(s["step_type"], s["name"]) for s in trace["steps"]] == [
        ("thought", "user_prompt"),
        ("llm_call", "gpt-5-codex"),
        ("thought", "reasoning"),
        ("tool_call", "Bash"),
        ("llm_call", "gpt-5-codex"),
        ("output", "final_answer"),
    ]
    asked, first, thought, tool, second, answer = trace["steps"]
    assert trace["input"] == "run the tests" and first["input"] == "run the tests"
    assert asked["input"] == "run the tests"  # one prompt step, not the injected context
    assert thought["output"] == "**Run pytest**" and thought["caused_by_step"] == 2
    assert tool["input"] == {"command": "pytest -q"}
    assert tool["metadata"]["tool_options"] == {"workdir": "/w"}
    assert tool["metadata"]["original_name"] == "shell"
    assert tool["output"] == "1 failed" and tool["error"] == "exit code 1: 1 failed"
    assert first["tokens_used"] == 250
    assert first["metadata"]["cached_input_tokens"] == 800
    assert second["tokens_used"] == 1210
    assert answer["output"] == "One test fails." == trace["output"]
    assert trace["status"] == "completed"  # no turn events: it ended on an answer
    assert trace["metadata"]["git"] == {"commit_hash": "abc123", "branch": "main"}
    assert trace["agent_version"] == "0.30.0"


def test_the_oldest_rollouts_without_an_envelope(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """Early rollouts: a header line, then bare response items and state records."""
    records = [
        {"id": SID, "timestamp": at(0), "instructions": None},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<x/>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "yo"}],
        },
    ]
    path = write(tmp_path, records, "rollout-old.jsonl")
    assert detect_format(path) == "codex-rollout"
    trace = run(store, clock, path)
    assert trace["session_id"] == SID
    assert trace["input"] == "hi" and trace["output"] == "yo"
    assert trace["status"] == "completed"


def test_an_error_event_fails_the_trace(store: Store, clock: FixedClock, tmp_path: Path) -> None:
    """A turn ending on an ``error`` event fails the trace, with an error step."""
    records = [
        meta(),
        event("task_started", 0.1),
        event("user_message", 0.2, message="go"),
        event("error", 1, message="stream disconnected before completion"),
        event("task_complete", 1.1, last_agent_message=None),
    ]
    trace = run(store, clock, write(tmp_path, records))
    assert trace["status"] == "failed"
    assert trace["error"] == "stream disconnected before completion"
    assert [s["step_type"] for s in trace["steps"]] == ["thought", "error"]


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param([shell("c9", ["sleep", "99"], 2)], id="open-call"),
        pytest.param([said("assistant", "Working", 2)], id="turn-never-completed"),
        pytest.param(
            [said("assistant", "Working", 2), event("turn_aborted", 3, reason="interrupted")],
            id="aborted",
        ),
    ],
)
def test_a_rollout_ending_mid_turn_is_a_timeout(
    store: Store, clock: FixedClock, tmp_path: Path, tail: list[dict[str, Any]]
) -> None:
    """A started turn never completed (killed, interrupted, still running): ``timeout``."""
    records = [meta(), event("task_started", 0.1), event("user_message", 0.2, message="go")]
    trace = run(store, clock, write(tmp_path, [*records, *tail]))
    assert trace["status"] == "timeout" and "mid-turn" in trace["error"]
    for tool in steps_of(trace, step_type="tool_call"):
        assert tool["error"] == codex_rollout.NO_RESULT
        assert tool["input"] == {"command": "sleep 99"}
        assert tool["metadata"]["tool_options"] == {"workdir": "/w"}


def test_exit_codes_from_execution_events_and_failed_patches(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """``exec_command_end`` and ``patch_apply_end`` say whether a call failed when its output
    doesn't; ``local_shell_call`` is a shell call too."""
    local = item(
        "local_shell_call",
        1,
        call_id="c1",
        status="completed",
        action={"type": "exec", "command": ["ls", "-a b"]},
    )
    patch = item("custom_tool_call", 3, call_id="c2", name="apply_patch", input="*** Begin")
    records = [
        meta(),
        event("task_started", 0.1),
        event("user_message", 0.2, message="go"),
        local,
        event("exec_command_end", 1.5, call_id="c1", exit_code=2),
        item("function_call_output", 2, call_id="c1", output="ls: bad option"),
        patch,
        event("patch_apply_end", 3.5, call_id="c2", success=False),
        item("custom_tool_call_output", 4, call_id="c2", output="patch rejected"),
        said("assistant", "Both failed.", 5),
        event("task_complete", 6, last_agent_message="Both failed."),
    ]
    trace = run(store, clock, write(tmp_path, records))
    shell_step, patch_step = steps_of(trace, step_type="tool_call")
    assert shell_step["name"] == "Bash" and shell_step["input"] == {"command": "ls '-a b'"}
    assert shell_step["error"] == "exit code 2: ls: bad option"
    assert patch_step["error"] == "the tool failed: patch rejected"
    assert trace["status"] == "completed" and trace["output"] == "Both failed."


def test_repeated_token_counts_count_once(store: Store, clock: FixedClock, tmp_path: Path) -> None:
    """A second ``token_count`` with the same totals (rate-limit updates) adds nothing."""
    records = [
        meta(),
        event("task_started", 0.1),
        event("user_message", 0.2, message="go"),
        said("assistant", "Hi.", 1),
        tokens(1.1, 110),
        tokens(1.2, 110),
        event("task_complete", 2, last_agent_message="Hi."),
    ]
    trace = run(store, clock, write(tmp_path, records))
    assert trace["total_tokens"] == 110
    assert [s["tokens_used"] for s in steps_of(trace, step_type="llm_call")] == [110]


def test_unknown_records_are_skipped_and_counted(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """New record, item and event kinds, broken lines and stray outputs never stop an import."""
    records = [
        meta(),
        rec("brand_new_record", 0.1, x=1),
        item("hologram_call", 0.2),
        event("telepathy", 0.3),
        "{broken",
        item("function_call_output", 0.4, call_id="nobody", output="?"),
        event("user_message", 0.5, message="go"),
        said("assistant", "ok", 1),
    ]
    trace = run(store, clock, write(tmp_path, records))
    assert trace["_result"].skipped == {
        "brand_new_record": 1,
        "response_item hologram_call": 1,
        "event_msg telepathy": 1,
        "unreadable line": 1,
        "tool output without its call": 1,
    }
    assert trace["status"] == "completed" and trace["output"] == "ok"


def test_the_session_id_falls_back_to_the_file_name(tmp_path: Path) -> None:
    """Without a ``session_meta``, the UUID that ends the rollout's name is the session id."""
    path = write(tmp_path, [event("user_message", 0, message="go")])
    assert codex_rollout.peek_session_id(path) == SID
