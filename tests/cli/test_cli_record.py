"""``agent-replay record``: a real process reading stdin. Summaries and exit codes, warnings,
options, the stream formats, headless imports, and what survives SIGKILL and SIGINT."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS
from probe import probe

Cli = Any  # the `cli` fixture: cli(*args) -> Result(code, out, err)
Proc = Any  # the `proc` fixture: proc(*args, input=...) -> CompletedProcess


HEAVY = ("textual", "rich", "anthropic", "openai", "google")


def ev(kind: str, trace_id: str | None = "p1", **fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"v": 1, "type": kind, **fields}
    if trace_id is not None:
        event["trace_id"] = trace_id
    return event


def stream(*events: Any) -> str:
    return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events)


def traces(cli: Cli) -> list[dict[str, Any]]:
    result = cli("list", "--json")
    assert result.code == 0, result.err
    return result.json()  # type: ignore[no-any-return]


def show(cli: Cli, trace_id: str) -> dict[str, Any]:
    result = cli("show", trace_id, "--json")
    assert result.code == 0, result.err
    return result.json()  # type: ignore[no-any-return]


BASIC = stream(
    ev("trace_start", agent_name="bot", input={"q": "hi"}),
    ev("step_start", step_type="tool_call", name="search", call_id="c1"),
    ev("step_end", call_id="c1", output="found"),
    ev("step", step_type="output", output="bye"),
    ev("trace_end", output="bye"),
)


def test_record_writes_the_stream_and_prints_a_summary(proc: Proc, cli: Cli) -> None:
    result = proc("record", input=BASIC)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "recorded 5 event(s): 1 trace(s), 2 step(s)\n"
    assert result.stderr == ""
    [trace] = traces(cli)
    full = show(cli, trace["id"])
    assert (full["agent_name"], full["status"], full["output"]) == ("bot", "completed", "bye")
    assert [(s["step_type"], s["output"]) for s in full["steps"]] == [
        ("tool_call", "found"),
        ("output", "bye"),
    ]


def test_record_json_summary(proc: Proc) -> None:
    result = proc("record", "--json", input=BASIC + stream(ev("trace_start", "p2", agent_name="b")))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["ok"] is True and summary["events"] == 6 and summary["steps"] == 2
    assert len(summary["traces"]) == 2 and len(summary["timed_out"]) == 1
    assert summary["malformed"] == {"count": 0, "first": []}
    assert summary["rejected"] == {"count": 0, "first": []}


def test_malformed_lines_exit_1_with_their_line_numbers(proc: Proc) -> None:
    result = proc("record", input=stream(ev("trace_start", agent_name="a"), "{oops", "[]", "x"))
    assert result.returncode == 1
    assert "line 2: malformed: not valid JSON" in result.stderr
    assert "3 malformed line(s): line 2, line 3, line 4" in result.stderr
    assert result.stdout.startswith("recorded 1 event(s): 1 trace(s)")


def test_rejected_events_exit_1(proc: Proc) -> None:
    result = proc("record", "--json", input=stream(ev("step", "nobody", step_type="thought")))
    assert result.returncode == 1
    summary = json.loads(result.stdout)
    assert summary["ok"] is False and summary["rejected"]["count"] == 1
    assert "unknown trace_id 'nobody'" in summary["rejected"]["first"][0]["reason"]


def test_unknown_types_and_fields_warn_once_and_count_at_the_end(proc: Proc) -> None:
    events = [ev("trace_start", agent_name="a")] + [ev("ping")] * 4 + [ev("trace_end", x=1)]
    result = proc("record", input=stream(*events))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("unknown event type 'ping' skipped") == 1
    assert "skipped unknown event type 'ping': 4×" in result.stderr
    assert "skipped unknown field 'x' in trace_end: 1×" in result.stderr


def test_tags_and_the_open_trace_at_the_end(proc: Proc, cli: Cli) -> None:
    result = proc(
        "record", "--tags", "nightly, ci", input=stream(ev("trace_start", agent_name="a"))
    )
    assert result.returncode == 0, result.stderr
    assert "1 finalized as timeout" in result.stdout
    [trace] = traces(cli)
    assert trace["status"] == "timeout" and trace["tags"] == ["nightly", "ci"]


def test_leave_open_keeps_the_trace_running(proc: Proc, cli: Cli) -> None:
    result = proc("record", "--leave-open", input=stream(ev("trace_start", agent_name="a")))
    assert result.returncode == 0 and "1 left open" in result.stdout
    assert traces(cli)[0]["status"] == "running"


SECRET = "ghp_" + "A" * 36


def test_secrets_are_redacted_unless_no_redact(proc: Proc, cli: Cli) -> None:
    events = stream(
        ev("trace_start", agent_name="a", input=f"token {SECRET}"),
        ev("step", step_type="thought", output={"password": "hunter2hunter2"}),
    )
    assert proc("record", input=events).returncode == 0
    assert proc("record", "--no-redact", input=events.replace("p1", "p2")).returncode == 0
    by_redaction = {}
    for trace in traces(cli):
        full = show(cli, trace["id"])
        by_redaction[SECRET in json.dumps(full)] = full
    assert set(by_redaction) == {True, False}
    redacted = by_redaction[False]
    assert redacted["input"] == "token [REDACTED:github_token]"
    assert redacted["steps"][0]["output"] == {"password": "[REDACTED:secret_field]"}
    assert by_redaction[True]["steps"][0]["output"] == {"password": "hunter2hunter2"}


@pytest.mark.parametrize(
    ("fmt", "fixture", "agent", "steps"),
    [
        ("codex-exec", "codex/plain/exec-json.jsonl", "codex", 13),
        ("gemini-stream", "gemini-cli/plain/stream-json.jsonl", "gemini-cli", 11),
        ("claude-stream", "claude-code/plain/stream-json.jsonl", "claude-code", 14),
    ],
)
def test_stream_formats(
    proc: Proc, cli: Cli, fmt: str, fixture: str, agent: str, steps: int
) -> None:
    source = HARNESS / fixture
    result = proc("record", "--format", fmt, input=source.read_text())
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    [trace] = traces(cli)
    assert (trace["agent_name"], trace["status"], trace["step_count"]) == (
        agent,
        "completed",
        steps,
    )
    full = show(cli, trace["id"])
    failed = [s for s in full["steps"] if s["step_type"] == "tool_call" and s["error"]]
    assert len(failed) == 1 and "does_not_exist.txt" in failed[0]["error"]


def test_an_unknown_format_is_a_usage_error(proc: Proc) -> None:
    result = proc("record", "--format", "xml", input="")
    assert result.returncode == 2
    assert "'xml' is not one of" in result.stderr


def test_empty_input_records_nothing(proc: Proc) -> None:
    result = proc("record")
    assert result.returncode == 0 and result.stdout.startswith("recorded 0 event(s)")


# --- headless ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "source"),
    [
        (["record"], None),
        (["record", "--format", "codex-exec"], "codex/plain/exec-json.jsonl"),
        (["record", "--format", "gemini-stream"], "gemini-cli/plain/stream-json.jsonl"),
        (["record", "--format", "claude-stream"], "claude-code/plain/stream-json.jsonl"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_record_runs_without_importing_tui_or_ai_sdks(
    store_dir: Path, tmp_path: Path, argv: list[str], source: str | None
) -> None:
    """After really recording a stream, textual, rich and the AI SDKs are not in sys.modules."""
    if source is None:
        path = tmp_path / "events.jsonl"
        path.write_text(BASIC)
    else:
        path = HARNESS / source
    with path.open("rb") as stdin:
        result = probe(argv=argv, banned=HEAVY, store_dir=store_dir, stdin=stdin)
    assert (result.code, result.loaded) == (0, []), result.stderr
    assert "recorded" in result.stdout


# --- killed and interrupted --------------------------------------------------------------


def _spawn_record(store_dir: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "agent_replay", "record", "--dir", str(store_dir), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "AGENT_REPLAY_DIR": str(store_dir)},
    )


def _line(n: int) -> bytes:
    return (
        json.dumps(ev("step", step_type="thought", name=f"s{n}", output="x" * 40)).encode() + b"\n"
    )


def _stored_names(store_dir: Path) -> list[str]:
    """Step names in order, read from a second connection (WAL: never blocks the writer)."""
    if not (store_dir / "traces.db").exists():
        return []
    connection = sqlite3.connect(f"file:{store_dir / 'traces.db'}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT name FROM steps ORDER BY step_number").fetchall()
    except sqlite3.OperationalError:  # not migrated yet
        return []
    finally:
        connection.close()
    return [r[0] for r in rows]


def _wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def test_sigkill_loses_at_most_the_last_window(store_dir: Path) -> None:
    """Events are committed as they arrive: after SIGKILL mid-stream the store opens clean,
    holds a gap-free prefix of the stream, and nothing written well before the kill is lost
    (the window is 100 ms; the slack below covers a loaded test machine)."""
    recorder = _spawn_record(store_dir)
    assert recorder.stdin is not None
    recorder.stdin.write(json.dumps(ev("trace_start", agent_name="killed")).encode() + b"\n")
    # Phase 1: a slow trickle; each piece is committed once input pauses.
    n = 0
    for _ in range(20):
        recorder.stdin.write(b"".join(_line(n + i) for i in range(15)))
        recorder.stdin.flush()
        n += 15
        time.sleep(0.01)
    _wait_for(lambda: len(_stored_names(store_dir)) == n)
    # Phase 2: a steady stream (well within the recorder's pace, even on a loaded machine),
    # with the write time of every event; then a burst, and SIGKILL right after it.
    written: list[tuple[int, float]] = []
    stop = threading.Event()

    def writer() -> None:
        nonlocal n
        assert recorder.stdin is not None
        try:
            while not stop.is_set():
                recorder.stdin.write(b"".join(_line(n + i) for i in range(10)))
                recorder.stdin.flush()
                n += 10
                written.append((n, time.monotonic()))
                time.sleep(0.01)
            recorder.stdin.write(b"".join(_line(n + i) for i in range(3000)))
            recorder.stdin.flush()
            n += 3000
        except (BrokenPipeError, OSError):
            pass

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    # committed while the stream is still running, not at its end
    _wait_for(lambda: len(_stored_names(store_dir)) > 400)
    time.sleep(1.5)
    stop.set()
    time.sleep(0.05)  # the burst is on its way
    killed_at = time.monotonic()
    recorder.send_signal(signal.SIGKILL)
    recorder.wait(timeout=20)
    thread.join(timeout=20)
    assert recorder.returncode == -signal.SIGKILL

    connection = sqlite3.connect(store_dir / "traces.db")
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        connection.close()
    names = _stored_names(store_dir)
    assert names == [f"s{i}" for i in range(len(names))]  # a prefix, no holes
    # Everything written well before the kill had been read and committed (the window is
    # 100 ms; the slack covers a loaded test machine).
    settled = [count for count, at in written if at < killed_at - 1.0]
    assert settled and len(names) >= settled[-1]
    # and the store opens (and migrates) clean through the CLI
    listed = subprocess.run(
        [sys.executable, "-m", "agent_replay", "list", "--json", "--dir", str(store_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [trace] = json.loads(listed.stdout)
    # The recorder died without ending it: the reader finalizes it (no orphan left running).
    assert trace["status"] == "timeout" and trace["step_count"] == len(names)
    assert (
        trace["error"] == f"the record process (pid {recorder.pid}) exited without ending the trace"
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_record_commits_what_it_read_and_finalizes(
    store_dir: Path, signum: int
) -> None:
    recorder = _spawn_record(store_dir)
    assert recorder.stdin is not None
    recorder.stdin.write(stream(ev("trace_start", agent_name="a")).encode())
    recorder.stdin.write(b"".join(_line(i) for i in range(5)))
    recorder.stdin.flush()
    _wait_for(lambda: len(_stored_names(store_dir)) == 5)
    recorder.send_signal(signum)
    out, err = recorder.communicate(timeout=30)
    assert recorder.returncode == 128 + signum, err
    assert b"recorded 6 event(s): 1 trace(s), 5 step(s); 1 finalized as timeout" in out
    assert b"interrupted" in err
    connection = sqlite3.connect(store_dir / "traces.db")
    try:
        status = connection.execute("SELECT status FROM traces").fetchall()
    finally:
        connection.close()
    assert status == [("timeout",)]
