"""Importing Claude Code transcripts: every real transcript in tests/fixtures (plain, otel,
subagent), then hand-built transcripts for what the fixtures don't show (thinking, cache tokens,
API errors, interrupted sessions, several turns, unknown and broken lines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS

from agent_replay.clock import FixedClock
from agent_replay.services.capture import claude_transcript
from agent_replay.services.capture.importer import detect_format, import_file, import_path
from agent_replay.services.capture.session_writer import SessionWriter
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json

FIXTURES = HARNESS / "claude-code"
SCRIPTED_TOOLS = ["Bash", "Read", "Write", "Bash"]


def fixture_transcript(name: str) -> Path:
    """The main transcript of one fixture pass."""
    folder = FIXTURES / name / "transcript" / "projects"
    files = sorted(folder.glob("*/*.jsonl"))
    assert files, f"no transcript under {folder}"
    return files[0]


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def steps_of(trace: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [s for s in trace["steps"] if all(s.get(k) == v for k, v in match.items())]


# --- the real transcripts ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["plain", "otel"])
def test_fixture_transcript_becomes_one_trace_of_the_scripted_session(
    store: Store, clock: FixedClock, name: str
) -> None:
    """The scripted session: the prompt, 5 replies, 4 tool calls (the `cat` failing), a final
    answer."""
    path = fixture_transcript(name)
    lines = raw_lines(path)
    result = import_file(store, path, clock=clock)
    assert result.status == "imported" and result.unknown_records == 0
    trace = trace_json(store, str(result.trace_id))

    session = path.stem
    prompt = next(line["message"]["content"] for line in lines if line.get("type") == "user")
    stamps = [line["timestamp"] for line in lines if "timestamp" in line]
    assert trace["agent_name"] == "claude-code"
    assert trace["agent_version"] == "2.1.332"
    assert trace["session_id"] == session
    assert trace["input"] == prompt
    assert trace["status"] == "completed" and trace["error"] is None
    assert trace["started_at"] == min(stamps) and trace["ended_at"] == max(stamps)
    assert trace["metadata"]["source"] == {
        "format": "claude-transcript",
        "version": "2.1.332",
        "path": str(path.resolve()),
    }
    assert trace["metadata"]["cwd"].startswith("/home/dev/")
    column = execute(store, "SELECT source_format FROM traces WHERE id = ?", [trace["id"]])
    assert column.fetchone()[0] == "claude-transcript"

    kinds = [(s["step_type"], s["name"]) for s in trace["steps"]]
    expected: list[tuple[str, str]] = [("thought", "user_prompt")]
    for tool in SCRIPTED_TOOLS:
        expected += [("llm_call", "claude-opus-5-5"), ("tool_call", tool)]
    expected += [("llm_call", "claude-opus-5-5"), ("output", "final_answer")]
    assert kinds == expected

    tools = steps_of(trace, step_type="tool_call")
    assert tools[0]["input"]["command"] == "ls -la"
    assert tools[1]["input"]["file_path"].endswith("/notes.txt")
    assert "buy milk" in tools[1]["output"]
    assert tools[2]["input"]["file_path"].endswith("/summary.txt")
    failed = tools[3]
    assert failed["input"]["command"] == "cat does_not_exist.txt"
    assert "No such file or directory" in failed["error"]
    assert failed["output"] is None
    assert [t["error"] is None for t in tools] == [True, True, True, False]
    for tool in tools:  # each call is caused by the reply that made it, and timed
        assert tool["caused_by_step"] == tool["step_number"] - 1
        assert tool["duration_ms"] is not None and tool["duration_ms"] > 0

    final_text = next(
        b["text"]
        for line in reversed(lines)
        if line.get("type") == "assistant"
        for b in line["message"]["content"]
        if b["type"] == "text"
    )
    assert trace["output"] == final_text
    assert trace["steps"][-1]["output"] == final_text
    assert trace["total_cost_usd"] == pytest.approx(cost_state(path)["totalCostUSD"])


@pytest.mark.parametrize("name", ["plain", "otel", "subagent"])
def test_usage_is_counted_once_per_message_id(store: Store, clock: FixedClock, name: str) -> None:
    """Each API reply (several lines, one message.id) is one llm_call with its usage once; the
    trace's total matches Claude Code's own cost-state tally."""
    path = fixture_transcript(name)
    lines = raw_lines(path)
    for sub in sorted((path.parent / path.stem / "subagents").glob("*.jsonl")):
        lines += raw_lines(sub)
    usage: dict[str, dict[str, Any]] = {}
    for line in lines:
        if line.get("type") == "assistant":
            usage[line["message"]["id"]] = line["message"]["usage"]
    assert len(usage) < sum(1 for line in lines if line.get("type") == "assistant")

    result = import_file(store, path, clock=clock)
    trace = trace_json(store, str(result.trace_id))
    calls = steps_of(trace, step_type="llm_call")
    assert sorted(c["metadata"]["message_id"] for c in calls) == sorted(usage)
    for call in calls:
        counted = usage[call["metadata"]["message_id"]]
        assert call["tokens_used"] == counted["input_tokens"] + counted["output_tokens"]
        assert call["metadata"]["cache_read_input_tokens"] == counted["cache_read_input_tokens"]
        assert call["model"] == "claude-opus-5-5"
    tally = cost_state(path)["modelUsage"]["claude-opus-5-5"]
    assert trace["total_tokens"] == tally["inputTokens"] + tally["outputTokens"]


def cost_state(path: Path) -> dict[str, Any]:
    """Claude Code's own tally of the session (its last ``cost-state`` line)."""
    return [line for line in raw_lines(path) if line.get("type") == "cost-state"][-1]


def test_subagent_steps_nest_under_the_agent_call_that_spawned_them(
    store: Store, clock: FixedClock
) -> None:
    """The subagent's transcript is imported in place, every step's parent the Agent call."""
    path = fixture_transcript("subagent")
    sub = raw_lines(next((path.parent / path.stem / "subagents").glob("agent-*.jsonl")))
    result = import_file(store, path, clock=clock)
    trace = trace_json(store, str(result.trace_id))

    spawner = steps_of(trace, step_type="tool_call", name="Agent")
    assert len(spawner) == 1
    agent = spawner[0]
    assert agent["input"]["prompt"] == sub[0]["message"]["content"]
    assert "Subagent report" in agent["output"]
    nested = steps_of(trace, parent_step=agent["step_number"])
    assert [(s["step_type"], s["name"]) for s in nested] == [
        ("llm_call", "claude-opus-5-5"),
        ("tool_call", "Bash"),
        ("llm_call", "claude-opus-5-5"),
        ("tool_call", "Read"),
        ("llm_call", "claude-opus-5-5"),
        ("output", "final_answer"),
    ]
    assert all(s["step_number"] > agent["step_number"] for s in nested)
    assert all(s["metadata"]["agent_id"] == "a1ff7aa87e749d621" for s in nested)
    assert nested[0]["input"] == sub[0]["message"]["content"]  # the subagent's task prompt
    assert nested[-1]["output"].startswith("Subagent report")
    top = [s for s in trace["steps"] if s["parent_step"] is None]
    assert [(s["step_type"], s["name"]) for s in top] == [
        ("thought", "user_prompt"),
        ("llm_call", "claude-opus-5-5"),
        ("tool_call", "Agent"),
        ("llm_call", "claude-opus-5-5"),
        ("output", "final_answer"),
    ]
    assert trace["output"] == "The subagent reports three TODO items in notes.txt."
    assert trace["status"] == "completed"


def test_folder_import_skips_subagent_files_and_reimport_adds_nothing(
    store: Store, clock: FixedClock
) -> None:
    """Walking the fixtures imports every session (not the subagent file on its own);
    a second walk finds them all present."""
    fixture_transcript("plain")
    found = FIXTURES.glob("*/transcript/projects/*/*.jsonl")
    sessions = len([p for p in found if p.parent.name != "subagents"])
    assert sessions >= 3
    first = import_path(store, FIXTURES, clock=clock)
    assert first.sessions == sessions and not first.failed
    assert all("subagents" not in f.path.parts for f in first.files if f.status == "imported")
    again = import_path(store, FIXTURES, clock=clock)
    assert again.sessions == 0 and again.present == sessions and not again.failed
    count = execute(store, "SELECT COUNT(*) FROM traces").fetchone()[0]
    assert count == sessions


def test_a_subagent_file_given_alone_is_present_when_its_parent_is(
    store: Store, clock: FixedClock
) -> None:
    """A subagent transcript carries its parent's session id: once the parent is imported,
    importing the subagent file by itself adds nothing."""
    path = fixture_transcript("subagent")
    import_file(store, path, clock=clock)
    sub = next((path.parent / path.stem / "subagents").glob("agent-*.jsonl"))
    assert detect_format(sub) == "claude-transcript"
    assert import_file(store, sub, clock=clock).status == "present"


# --- hand-built transcripts -------------------------------------------------------------------

SID = "0b7e8c1e-0000-4000-8000-000000000001"


def at(seconds: float) -> str:
    return f"2026-01-01T10:00:{seconds:06.3f}Z"


def line(kind: str, seconds: float | None, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"type": kind, "sessionId": SID, "version": "9.9.9", "cwd": "/w"}
    if seconds is not None:
        data["timestamp"] = at(seconds)
        data["uuid"] = f"u-{kind}-{seconds}"
    return {**data, **fields}


def prompt(text: str, seconds: float) -> dict[str, Any]:
    return line("user", seconds, message={"role": "user", "content": text})


def reply(
    message_id: str, blocks: list[dict[str, Any]], seconds: float, **usage: int
) -> dict[str, Any]:
    counts = {"input_tokens": 100, "output_tokens": 20, **usage}
    message = {
        "id": message_id,
        "role": "assistant",
        "model": "claude-test",
        "content": blocks,
        "usage": counts,
    }
    return line("assistant", seconds, message=message, requestId=f"req-{message_id}")


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(tool_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def result(tool_id: str, content: Any, seconds: float, **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": content, **extra}
    return line("user", seconds, message={"role": "user", "content": [block]})


def write(folder: Path, records: list[Any], name: str = SID) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    rows = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def run(store: Store, clock: FixedClock, path: Path, **options: Any) -> dict[str, Any]:
    outcome = import_file(store, path, clock=clock, **options)
    assert outcome.status == "imported", outcome
    trace = trace_json(store, str(outcome.trace_id))
    trace["_result"] = outcome
    return trace


def test_merged_reply_counts_usage_once_and_reports_cache_tokens_apart(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """Three lines of one message.id (thinking, text, tool call) make one llm_call whose tokens
    are input + output once; cache tokens go to metadata, not into tokens_used."""
    cache = {"cache_creation_input_tokens": 50, "cache_read_input_tokens": 400}
    path = write(
        tmp_path,
        [
            prompt("go", 1),
            reply("m1", [{"type": "thinking", "thinking": "plan it"}], 2, **cache),
            reply("m1", [text("Checking.")], 2.1, **cache),
            reply("m1", [tool_use("t1", "Bash", command="ls")], 2.2, **cache),
            result("t1", "a.txt", 3),
            reply("m2", [text("Done.")], 4, input_tokens=200, output_tokens=5),
        ],
    )
    trace = run(store, clock, path)
    assert [(s["step_type"], s["name"]) for s in trace["steps"]] == [
        ("thought", "user_prompt"),
        ("llm_call", "claude-test"),
        ("thought", "thinking"),
        ("tool_call", "Bash"),
        ("llm_call", "claude-test"),
        ("output", "final_answer"),
    ]
    asked, first, thought, tool, second, answer = trace["steps"]
    assert asked["input"] == "go" and asked["started_at"] == at(1)
    assert first["tokens_used"] == 120
    assert first["metadata"]["cache_creation_input_tokens"] == 50
    assert first["metadata"]["cache_read_input_tokens"] == 400
    assert first["metadata"]["request_id"] == "req-m1"
    assert first["output"] == "Checking."
    assert first["input"] == "go"
    assert first["started_at"] == at(1) and first["ended_at"] == at(2.2)
    assert thought["output"] == "plan it" and thought["caused_by_step"] == first["step_number"]
    assert tool["output"] == "a.txt" and tool["duration_ms"] == 800
    assert second["tokens_used"] == 205 and second["caused_by_step"] == tool["step_number"]
    assert answer["output"] == "Done." and answer["caused_by_step"] == second["step_number"]
    assert trace["total_tokens"] == 325


def test_several_turns_give_an_answer_each_and_the_last_is_the_output(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """Each turn's closing reply is an output step; the next prompt is the next call's input."""
    path = write(
        tmp_path,
        [
            prompt("first?", 1),
            reply("m1", [text("One.")], 2),
            prompt("second?", 3),
            reply("m2", [text("Two.")], 4),
        ],
    )
    trace = run(store, clock, path)
    outputs = steps_of(trace, step_type="output")
    assert [o["output"] for o in outputs] == ["One.", "Two."]
    assert steps_of(trace, step_type="llm_call")[1]["input"] == "second?"
    assert trace["input"] == "first?" and trace["output"] == "Two."
    assert trace["status"] == "completed"


def test_an_api_error_at_the_end_fails_the_trace(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """Claude Code's synthetic API-error reply becomes an error step and fails the trace."""
    error = line(
        "assistant",
        2,
        isApiErrorMessage=True,
        message={"id": "e1", "model": "<synthetic>", "content": [text("API Error: 529")]},
    )
    trace = run(store, clock, write(tmp_path, [prompt("go", 1), error]))
    assert trace["status"] == "failed" and trace["error"] == "API Error: 529"
    assert [(s["step_type"], s["error"]) for s in trace["steps"]] == [
        ("thought", None),
        ("error", "API Error: 529"),
    ]


def test_a_failed_tool_does_not_fail_the_trace(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """An is_error result marks its tool step failed; the session still completed."""
    path = write(
        tmp_path,
        [
            prompt("go", 1),
            reply("m1", [tool_use("t1", "Bash", command="false")], 2),
            result("t1", [{"type": "text", "text": "Exit code 1"}], 3, is_error=True),
            reply("m2", [text("It failed.")], 4),
        ],
    )
    trace = run(store, clock, path)
    tool = steps_of(trace, step_type="tool_call")[0]
    assert tool["error"] == "Exit code 1" and tool["output"] is None
    assert trace["status"] == "completed"


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param([reply("m1", [tool_use("t1", "Bash", command="sleep 99")], 2)], id="open"),
        pytest.param(
            [
                reply("m1", [tool_use("t1", "Bash", command="ls")], 2),
                result("t1", "x", 3),
            ],
            id="unanswered-result",
        ),
        pytest.param([], id="unanswered-prompt"),
        pytest.param(
            [reply("m1", [text("Work")], 2), prompt("[Request interrupted by user]", 3)],
            id="interrupted",
        ),
    ],
)
def test_a_session_ending_mid_turn_is_a_timeout(
    store: Store, clock: FixedClock, tmp_path: Path, tail: list[dict[str, Any]]
) -> None:
    """No clean end (a call without result, nothing answered, an interrupt): ``timeout``."""
    trace = run(store, clock, write(tmp_path, [prompt("go", 1), *tail]))
    assert trace["status"] == "timeout"
    assert "mid-turn" in trace["error"]
    assert not steps_of(trace, step_type="output")
    for tool in steps_of(trace, step_type="tool_call"):
        if tool["output"] is None:
            assert tool["error"] == claude_transcript.NO_RESULT
            assert tool["metadata"]["incomplete"] is True


def test_unknown_broken_and_orphan_lines_are_skipped_and_counted(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """Unknown line kinds, lines that aren't JSON objects, odd shapes and results without their
    call are counted, never fatal; known bookkeeping lines are ignored silently."""
    path = write(
        tmp_path,
        [
            {"type": "summary", "summary": "old", "leafUuid": "x"},
            prompt("go", 1),
            {"type": "brand-new-kind", "sessionId": SID},
            "this is not json",
            "[1, 2]",
            line("attachment", 1.5, attachment={"type": "date"}),
            result("nobody", "lost", 1.6),
            line("assistant", 1.7, message="not an object"),
            reply("m1", [text("ok"), {"type": "server_tool_use", "id": "s1"}], 2),
        ],
    )
    trace = run(store, clock, path)
    assert trace["_result"].skipped == {
        "brand-new-kind": 1,
        "unreadable line": 2,
        "tool_result without its tool_use": 1,
        "assistant line without a message": 1,
        "assistant content block server_tool_use": 1,
    }
    assert trace["metadata"]["source"]["skipped_records"] == 6
    assert trace["status"] == "completed" and trace["output"] == "ok"


def test_a_file_with_only_bookkeeping_lines_is_empty(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """A transcript without any conversation (only summaries) imports nothing, not an error."""
    path = write(tmp_path, [{"type": "summary", "summary": "s", "leafUuid": "x"}])
    assert import_file(store, path, clock=clock).status == "empty"
    assert execute(store, "SELECT COUNT(*) FROM traces").fetchone()[0] == 0


def test_a_subagent_whose_call_never_returned_still_nests_under_it(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """The meta.json beside a subagent file names the spawning call: its steps nest there even
    when the transcript stops before the call's result."""
    path = write(
        tmp_path,
        [prompt("delegate", 1), reply("m1", [tool_use("tA", "Task", prompt="look")], 2)],
    )
    subagents = tmp_path / SID / "subagents"
    write(subagents, [prompt("look", 3), reply("s1", [text("found it")], 4)], "agent-abc")
    (subagents / "agent-abc.meta.json").write_text(
        json.dumps({"toolUseId": "tA", "agentType": "Explore"}), encoding="utf-8"
    )
    trace = run(store, clock, path)
    task = steps_of(trace, name="Task")[0]
    nested = steps_of(trace, parent_step=task["step_number"])
    assert [s["step_type"] for s in nested] == ["llm_call", "output"]
    assert nested[0]["metadata"]["agent_type"] == "Explore"
    assert task["error"] == claude_transcript.NO_RESULT
    assert trace["status"] == "timeout"


def test_sidechain_lines_in_the_main_file_nest_under_the_open_task(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """Older transcripts keep a Task's sidechain in the main file, marked ``isSidechain``."""
    path = write(
        tmp_path,
        [
            prompt("delegate", 1),
            reply("m1", [tool_use("tA", "Task", prompt="look")], 2),
            {**prompt("look", 3), "isSidechain": True},
            {**reply("s1", [tool_use("tB", "Read", file_path="/a")], 4), "isSidechain": True},
            {**result("tB", "content", 5), "isSidechain": True},
            {**reply("s2", [text("found")], 6), "isSidechain": True},
            result("tA", "found", 7),
            reply("m2", [text("It found it.")], 8),
        ],
    )
    trace = run(store, clock, path)
    task = steps_of(trace, name="Task")[0]
    nested = steps_of(trace, parent_step=task["step_number"])
    assert [(s["step_type"], s["name"]) for s in nested] == [
        ("llm_call", "claude-test"),
        ("tool_call", "Read"),
        ("llm_call", "claude-test"),
        ("output", "final_answer"),
    ]
    assert trace["output"] == "It found it." and trace["status"] == "completed"


def test_secrets_are_redacted_unless_turned_off(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """A key in a tool result is redacted by default and kept with ``redact=False``."""
    key = "sk-ant-" + "a1B2" * 8
    records = [
        prompt("go", 1),
        reply("m1", [tool_use("t1", "Bash", command="env")], 2),
        result("t1", f"ANTHROPIC_API_KEY={key}", 3),
        reply("m2", [text("ok")], 4),
    ]
    redacted = run(store, clock, write(tmp_path / "a", records))
    assert key not in json.dumps(redacted["steps"])
    assert "[REDACTED:" in steps_of(redacted, step_type="tool_call")[0]["output"]
    other = [json.loads(json.dumps(r).replace(SID, SID[:-1] + "2")) for r in records]
    kept = run(store, clock, write(tmp_path / "b", other, SID[:-1] + "2"), redact=False)
    assert key in steps_of(kept, step_type="tool_call")[0]["output"]


def test_a_failure_half_way_leaves_no_partial_trace(
    store: Store, clock: FixedClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If writing fails mid-file, the partial trace is removed (a later import retries it)."""
    path = write(
        tmp_path,
        [
            prompt("go", 1),
            reply("m1", [tool_use("t1", "Bash", command="ls")], 2),
            result("t1", "x", 3),
        ],
    )
    monkeypatch.setattr("agent_replay.services.capture.session_writer.COMMIT_EVERY_S", 0.0)

    def broken(self: SessionWriter, number: int, **fields: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(SessionWriter, "close_step", broken)
    outcome = import_file(store, path, clock=clock)
    assert outcome.status == "failed" and "disk on fire" in str(outcome.error)
    assert execute(store, "SELECT COUNT(*) FROM traces").fetchone()[0] == 0
    assert execute(store, "SELECT COUNT(*) FROM steps").fetchone()[0] == 0
    monkeypatch.undo()
    assert import_file(store, path, clock=clock).status == "imported"


def test_tags_are_added_to_every_imported_trace(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """``tags`` land on the trace like ingest's ``--tags``."""
    trace = run(
        store,
        clock,
        write(tmp_path, [prompt("go", 1), reply("m1", [text("ok")], 2)]),
        tags=["claude", "nightly"],
    )
    assert trace["tags"] == ["claude", "nightly"]


def test_the_file_name_is_the_session_id_of_a_resumed_transcript(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """A resumed session's file can open with lines copied from the session it resumed: the
    transcript's own name (its session id) identifies it, so it is not mistaken for the old."""
    old = prompt("earlier", 1)
    path = write(tmp_path, [{**old, "sessionId": "aaaaaaaa-0000-4000-8000-000000000000"}])
    assert claude_transcript.peek_session_id(path) == SID
    unnamed = write(tmp_path, [prompt("go", 1)], "notes")
    assert claude_transcript.peek_session_id(unnamed) == SID  # from its lines


def test_a_forced_format_ignores_other_files_in_a_folder(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """With ``fmt`` forced, a folder's files of another kind are ignored, not failures; the
    same file named on its own fails."""
    path = write(tmp_path, [prompt("go", 1), reply("m1", [text("ok")], 2)])
    other = tmp_path / "history.jsonl"
    other.write_text('{"display": "ls", "timestamp": 1}\n', encoding="utf-8")
    report = import_path(store, tmp_path, fmt="claude-transcript", clock=clock)
    assert {f.path.name: f.status for f in report.files} == {
        path.name: "imported",
        "history.jsonl": "ignored",
    }
    assert not report.failed
    alone = import_file(store, other, fmt="claude-transcript", clock=clock)
    assert alone.status == "failed" and alone.error == "no claude-transcript records in this file"
