"""``agent-replay run -- CMD``: real child processes. Exit status propagation, signals (killed
children, forwarded SIGTERM/SIGINT/SIGHUP), an instrumented child's events, stdio passthrough,
commands that can't start, and headless imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from probe import probe

Cli = Any  # the `cli` fixture: cli(*args) -> Result(code, out, err)
Proc = Any  # the `proc` fixture: proc(*args, input=...) -> CompletedProcess

PY = sys.executable
HEAVY = ("textual", "rich", "anthropic", "openai", "google")


def only_trace(cli: Cli) -> dict[str, Any]:
    listed = cli("list", "--json")
    assert listed.code == 0, listed.err
    [trace] = listed.json()
    shown = cli("show", trace["id"], "--json")
    assert shown.code == 0, shown.err
    return shown.json()  # type: ignore[no-any-return]


def test_exit_0_completes_the_trace(proc: Proc, cli: Cli, tmp_path: Path) -> None:
    result = proc("run", "--", PY, "-c", "print('hello')", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello\n" and result.stderr == ""
    trace = only_trace(cli)
    assert trace["status"] == "completed" and trace["error"] is None
    assert trace["agent_name"] == Path(PY).name
    assert trace["input"] == f"{PY} -c 'print('\"'\"'hello'\"'\"')'"
    meta = trace["metadata"]
    assert meta["argv"] == [PY, "-c", "print('hello')"] and meta["cwd"] == str(tmp_path)
    assert meta["exit_code"] == 0 and meta["duration_ms"] > 0
    assert trace["ended_at"] is not None and trace["total_duration_ms"] is not None


def test_exit_code_is_propagated_and_fails_the_trace(proc: Proc, cli: Cli) -> None:
    result = proc("run", "--agent-name", "flaky", "--tags", "ci,x", "--", PY, "-c", "exit(3)")
    assert result.returncode == 3
    trace = only_trace(cli)
    assert (trace["agent_name"], trace["tags"]) == ("flaky", ["ci", "x"])
    assert (trace["status"], trace["error"]) == ("failed", "exited with code 3")
    assert trace["metadata"]["exit_code"] == 3


def test_a_child_killed_by_a_signal(proc: Proc, cli: Cli) -> None:
    """``run`` exits 128 + N, as a shell reports a signal death (137 for SIGKILL)."""
    result = proc("run", "--", PY, "-c", "import os; os.kill(os.getpid(), 9)")
    assert result.returncode == 128 + 9
    trace = only_trace(cli)
    assert (trace["status"], trace["error"]) == ("failed", "killed by signal SIGKILL")
    assert trace["metadata"]["signal"] == "SIGKILL" and "exit_code" not in trace["metadata"]


CHILD_WAITS = """
import pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
def handler(number, frame):
    marker.write_text(signal.Signals(number).name)
    sys.exit(7)
for name in ("SIGTERM", "SIGINT", "SIGHUP"):
    signal.signal(getattr(signal, name), handler)
marker.with_suffix(".ready").write_text("ready")
time.sleep(60)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_sent_to_run_are_forwarded_to_the_child(
    store_dir: Path, cli: Cli, tmp_path: Path, signum: int
) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD_WAITS)
    marker = tmp_path / "got.txt"
    wrapper = subprocess.Popen(
        [PY, "-m", "agent_replay", "run", "--", PY, str(script), str(marker)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "AGENT_REPLAY_DIR": str(store_dir)},
    )
    deadline = time.monotonic() + 30
    while not marker.with_suffix(".ready").exists():
        assert time.monotonic() < deadline and wrapper.poll() is None, wrapper.communicate()
        time.sleep(0.02)
    wrapper.send_signal(signum)
    out, err = wrapper.communicate(timeout=30)
    assert wrapper.returncode == 7, err
    assert marker.read_text() == signal.Signals(signum).name
    trace = only_trace(cli)
    assert (trace["status"], trace["error"]) == ("failed", "exited with code 7")


INSTRUMENTED = """
import json, os
path = os.environ["AGENT_REPLAY_EVENTS"]
def emit(**event):
    with open(path, "a") as f:
        f.write(json.dumps({"v": 1, **event}) + "\\n")
emit(type="trace_start", agent_name="inner", metadata={"model": "m1"})
emit(type="step", step_type="thought", name="plan", output="look it up")
emit(type="step_start", step_type="tool_call", name="lookup", input={"id": 7}, call_id="c1")
emit(type="step_end", call_id="c1", output={"status": "shipped"}, tokens_used=5)
emit(type="trace_start", trace_id="side", agent_name="helper")
emit(type="step", trace_id="side", step_type="thought")
emit(type="trace_end", output="It shipped.", total_tokens=42)
print(os.environ["AGENT_REPLAY_TRACE_ID"], os.environ["AGENT_REPLAY_DIR"], path)
"""


def test_an_instrumented_child_lands_its_steps_in_the_trace(
    proc: Proc, cli: Cli, store_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(INSTRUMENTED)
    result = proc("run", "--", PY, str(script))
    assert result.returncode == 0, result.stderr
    trace_id, handed_dir, events = result.stdout.split()
    assert Path(handed_dir) == store_dir.resolve()
    assert Path(events) == store_dir.resolve() / "events" / f"{trace_id}.jsonl"
    assert not Path(events).exists()  # every line recorded: the file is removed
    listed = {t["id"]: t for t in cli("list", "--json").json()}
    assert set(listed) >= {trace_id} and len(listed) == 2
    trace = cli("show", trace_id, "--json").json()
    assert trace["status"] == "completed" and trace["output"] == "It shipped."
    assert trace["total_tokens"] == 42
    assert trace["metadata"]["model"] == "m1" and trace["metadata"]["exit_code"] == 0
    assert trace["metadata"]["producer_trace_start"] == {"agent_name": "inner"}
    assert trace["agent_name"] == Path(PY).name  # the run's own name stays
    assert [(s["step_type"], s["name"], s["output"]) for s in trace["steps"]] == [
        ("thought", "plan", "look it up"),
        ("tool_call", "lookup", {"status": "shipped"}),
    ]
    [side] = [t for t in listed.values() if t["id"] != trace_id]
    assert side["agent_name"] == "helper" and side["status"] == "timeout"


def test_bad_lines_from_the_child_are_reported_and_the_file_kept(
    proc: Proc, cli: Cli, tmp_path: Path
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(
        "import os\nopen(os.environ['AGENT_REPLAY_EVENTS'], 'a').write('not json\\n')\n"
    )
    result = proc("run", "--", PY, str(script))
    assert result.returncode == 0
    assert "1 malformed line(s)" in result.stderr and "kept at" in result.stderr
    kept = Path(result.stderr.rsplit("kept at ", 1)[1].strip())
    assert kept.read_text() == "not json\n"
    assert only_trace(cli)["status"] == "completed"


def test_stdio_passes_through_untouched(proc: Proc) -> None:
    code = (
        "import sys; data = sys.stdin.read(); "
        "sys.stdout.write(data.upper()); sys.stderr.write('to stderr\\n')"
    )
    result = proc("run", "--", PY, "-c", code, input="hello\nworld\n")
    assert result.returncode == 0
    assert result.stdout == "HELLO\nWORLD\n"
    assert result.stderr == "to stderr\n"


def test_a_command_that_cannot_be_started(proc: Proc, cli: Cli, tmp_path: Path) -> None:
    result = proc("run", "--", "no-such-command-for-agent-replay")
    assert result.returncode == 127
    assert "command not found: no-such-command-for-agent-replay" in result.stderr
    trace = only_trace(cli)
    assert (trace["status"], trace["error"]) == (
        "failed",
        "command not found: no-such-command-for-agent-replay",
    )
    script = tmp_path / "not-executable.sh"
    script.write_text("echo hi\n")
    assert proc("run", "--", str(script)).returncode == 126


def test_run_without_a_command_is_a_usage_error(proc: Proc) -> None:
    result = proc("run", "--tags", "x")
    assert result.returncode == 2
    assert "no command to run" in result.stderr


def test_options_after_the_command_belong_to_the_command(proc: Proc) -> None:
    result = proc("run", PY, "-c", "import sys; print(sys.argv[1:])", "--tags", "x")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['--tags', 'x']\n"


def test_the_command_line_is_redacted_unless_no_redact(proc: Proc, cli: Cli) -> None:
    secret = "sk-" + "Z9" * 12
    assert proc("run", "--", PY, "-c", "pass", f"--key={secret}").returncode == 0
    trace = only_trace(cli)
    assert secret not in json.dumps(trace)
    assert "[REDACTED:openai_key]" in trace["input"]


def test_run_runs_without_importing_tui_or_ai_sdks(store_dir: Path, tmp_path: Path) -> None:
    """After really running an instrumented child, textual, rich and the AI SDKs are not in
    sys.modules."""
    script = tmp_path / "agent.py"
    script.write_text(INSTRUMENTED)
    result = probe(argv=["run", "--", PY, str(script)], banned=HEAVY, store_dir=store_dir)
    assert (result.code, result.loaded) == (0, []), result.stderr
