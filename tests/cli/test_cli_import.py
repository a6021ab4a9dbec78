"""``agent-replay import``: every real transcript and rollout in tests/fixtures through the
command, re-import skipping, the summary and ``--json``, exit codes, headless imports, and flat
memory on a large transcript."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS
from probe import AI_SDKS, TUI, probe

Cli = Callable[..., Any]


def harness() -> Path:
    return HARNESS


SCRIPTED = ("plain", "otel", "subagent")
"""The captures of the scripted session (the denied/enforce ones refuse a call)."""


def session_files(passes: tuple[str, ...] = SCRIPTED) -> list[Path]:
    """The Claude Code transcripts (not the subagent files) and Codex rollouts of these
    capture passes."""
    claude = [
        p
        for p in HARNESS.glob("claude-code/*/transcript/projects/*/*.jsonl")
        if "subagents" not in p.parts and p.parts[-5] in passes
    ]
    codex = [
        p for p in HARNESS.glob("codex/*/rollout/sessions/*/*/*/*.jsonl") if p.parts[-7] in passes
    ]
    return sorted(claude) + sorted(codex)


def every_session() -> list[Path]:
    """Every session file in the fixtures: transcripts, rollouts and Gemini chat recordings."""
    everything = ("plain", "otel", "otel-enhanced", "subagent", "denied", "enforce")
    return session_files(everything) + sorted(HARNESS.glob("gemini-cli/*/chats/*/*/chats/*.jsonl"))


SESSIONS = session_files()


@pytest.mark.parametrize(
    "path", SESSIONS or [None], ids=[p.parent.name for p in SESSIONS] or ["missing"]
)
def test_every_fixture_session_imports_through_the_command(cli: Cli, path: Path | None) -> None:
    """Each transcript/rollout imports as one trace of the scripted session: 4 tool calls, the
    `cat does_not_exist.txt` one failed, a final answer; ``show --json`` reads it back."""
    if path is None:
        harness()
        return
    result = cli("import", path, "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["ok"] is True and report["sessions"] == 1 and report["unknown_records"] == 0
    (entry,) = report["files"]
    expected_format = "codex-rollout" if "codex" in path.parts else "claude-transcript"
    assert entry["format"] == expected_format and entry["status"] == "imported"
    assert entry["trace_status"] == "completed"

    trace = cli("show", entry["trace_id"], "--json").json()
    assert trace["session_id"] == entry["session_id"]
    assert trace["agent_name"] == ("codex" if expected_format == "codex-rollout" else "claude-code")
    top = [s for s in trace["steps"] if s["parent_step"] is None]
    tools = [s for s in top if s["step_type"] == "tool_call"]
    if "subagent" in path.parts:
        assert [t["name"] for t in tools] == ["Agent"]
        nested = [s for s in trace["steps"] if s["parent_step"] == tools[0]["step_number"]]
        assert [s["name"] for s in nested if s["step_type"] == "tool_call"] == ["Bash", "Read"]
    else:
        assert len(tools) == 4
        failed = [t for t in tools if t["error"]]
        assert len(failed) == 1 and failed[0] is tools[3]
        assert failed[0]["input"]["command"] == "cat does_not_exist.txt"
        assert "does_not_exist.txt" in failed[0]["error"]
    assert top[-1]["step_type"] == "output" and top[-1]["output"] == trace["output"]
    assert trace["metadata"]["source"]["format"] == expected_format
    assert trace["total_tokens"] > 0


def test_a_folder_imports_every_session_and_a_second_run_adds_nothing(cli: Cli) -> None:
    """The whole fixtures folder: every session imported (Claude Code, Codex and Gemini CLI),
    other .jsonl files ignored (not failures); importing it again skips them all and says so."""
    folder = harness()
    count = len(every_session())
    assert count >= 10
    first = cli("import", folder)
    assert first.code == 0, first.err
    assert f"imported {count} session(s) (" in first.out
    assert "skipped 0 already present;" in first.out
    assert "0 unknown record(s) skipped" in first.out
    assert "ignored" in first.out
    second = cli("import", folder)
    assert second.code == 0
    assert f"imported 0 session(s) (0 steps); skipped {count} already present" in second.out
    assert "nothing new to import" in second.out
    listed = cli("list", "--json").json()
    assert len(listed) == count
    assert {t["agent_name"] for t in listed} == {"claude-code", "codex", "gemini-cli"}


def test_json_summary_lists_each_file(cli: Cli, tmp_path: Path) -> None:
    """``--json`` prints the totals and one entry per file read."""
    folder = tmp_path / "claude-code"
    for name in SCRIPTED:
        shutil.copytree(harness() / "claude-code" / name, folder / name)
    report = cli("import", folder, "--json", "--tags", "imported,claude").json()
    assert report["sessions"] == 3 and report["steps"] == 33 and report["failed"] == 0
    assert report["already_present"] == 0 and report["unknown_records"] == 0
    imported = [f for f in report["files"] if f["status"] == "imported"]
    assert {f["session_id"] for f in imported} == {
        "54bf8201-626e-46cc-b9e5-a41d6f56c56b",
        "2859795b-db92-4875-87cd-19512a3e477d",
        "ad21e131-9359-4148-9efe-f4f66af6f4cd",
    }
    tagged = cli("list", "--tag", "claude", "--json").json()
    assert len(tagged) == 3
    again = cli("import", folder, "--json").json()
    assert again["sessions"] == 0 and again["already_present"] == 3


def test_a_file_that_is_not_a_session_fails_with_exit_1(cli: Cli) -> None:
    """A hooks capture given by name is not a transcript: exit 1, ``ok: false``."""
    hooks = harness() / "claude-code" / "plain" / "hooks.jsonl"
    result = cli("import", hooks, "--json")
    assert result.code == 1
    report = result.json()
    assert report["ok"] is False and report["failed"] == 1
    assert report["error"] == "1 file(s) could not be imported" and report["hints"]
    assert (
        "not a Claude Code transcript, Codex rollout or Gemini CLI chat recording"
        in (report["files"][0]["error"])
    )
    text = cli("import", hooks)
    assert text.code == 1 and "failed" in text.err


def test_a_forced_format_that_does_not_match_fails(cli: Cli) -> None:
    """``--format claude-transcript`` on a Codex rollout finds no transcript records: exit 1."""
    rollout = next(harness().glob("codex/*/rollout/sessions/*/*/*/*.jsonl"))
    result = cli("import", rollout, "--format", "claude-transcript", "--json")
    assert result.code == 1
    assert "no claude-transcript records" in result.json()["files"][0]["error"]
    forced = cli("import", rollout, "--format", "codex-rollout")
    assert forced.code == 0 and "imported 1 session(s)" in forced.out


def test_an_unreadable_file_fails_and_the_rest_still_import(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file the process cannot read is a failure (exit 1); the other sessions still land."""
    source = next(harness().glob("codex/*/rollout/sessions/*/*/*/*.jsonl"))
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / source.name).write_bytes(source.read_bytes())
    locked = folder / "rollout-locked.jsonl"
    locked.write_text('{"type": "session_meta", "payload": {}}\n', encoding="utf-8")
    locked.chmod(0)
    if os.access(locked, os.R_OK):  # root reads anything: refuse this one file by hand
        real_open = Path.open

        def refuse(self: Path, *args: Any, **kwargs: Any) -> Any:
            if self.name == locked.name:
                raise PermissionError(13, "Permission denied", str(self))
            return real_open(self, *args, **kwargs)

        monkeypatch.setattr(Path, "open", refuse)
    try:
        result = cli("import", folder, "--json")
    finally:
        locked.chmod(0o600)
    assert result.code == 1
    report = result.json()
    assert report["sessions"] == 1 and report["failed"] == 1
    failed = [f for f in report["files"] if f["status"] == "failed"]
    assert failed[0]["path"].endswith("rollout-locked.jsonl")
    assert "cannot read" in failed[0]["error"]


def test_an_empty_file_imports_nothing_and_succeeds(cli: Cli, tmp_path: Path) -> None:
    """A session file still empty (just created) is reported, not an error."""
    empty = tmp_path / "rollout-empty.jsonl"
    empty.write_bytes(b"")
    result = cli("import", empty)
    assert result.code == 0
    assert "imported 0 session(s)" in result.out and "1 empty file(s)" in result.out


@pytest.mark.parametrize(
    "argv",
    [["import"], ["import", "/no/such/place"], ["import", ".", "--format", "gemini"]],
    ids=["no-path", "missing-path", "bad-format"],
)
def test_usage_errors_exit_2(cli: Cli, argv: list[str]) -> None:
    """A missing or non-existent PATH, or an unknown format, is a usage error."""
    result = cli(*argv)
    assert result.code == 2
    assert "error:" in result.err


def test_a_missing_path_under_json_prints_the_error_object(cli: Cli) -> None:
    """Under ``--json`` a usage error still prints ``{"ok": false, ...}`` on stdout."""
    result = cli("import", "/no/such/place", "--json")
    assert result.code == 2
    assert result.json() == {
        "ok": False,
        "error": "no such file or folder: /no/such/place",
        "hints": ["give a session .jsonl file or a folder such as ~/.claude/projects"],
    }


def test_import_never_loads_textual_rich_or_an_ai_sdk(store_dir: Path) -> None:
    """Importing the fixtures in a fresh interpreter leaves the TUI and AI SDKs unloaded."""
    argv = ["import", str(harness()), "--json"]
    result = probe(argv=argv, banned=(*TUI, *AI_SDKS), store_dir=store_dir)
    assert (result.code, result.loaded) == (0, []), result.stderr


# --- memory stays flat on a large transcript -----------------------------------------------------

_FILE_BODY = "".join(
    f"{i:5d}\tsource line {i} of the file the agent read: x = {i};\n" for i in range(300)
)


def write_large_transcript(path: Path, megabytes: int) -> int:
    """A realistic Claude Code transcript of about ``megabytes`` MB: the agent reads file after
    file (text line + tool_use line sharing a message id, a ~20 KB Read result carrying the
    file twice, bookkeeping lines), each with fresh ids. Returns the number of tool calls."""
    session = str(uuid.uuid4())
    base = {"sessionId": session, "version": "2.1.332", "cwd": "/w", "gitBranch": "main"}
    target, size, calls, tick = megabytes * 1_000_000, 0, 0, 0
    with path.open("w", encoding="utf-8") as out:

        def emit(kind: str, **fields: Any) -> None:
            nonlocal size, tick
            tick += 1
            stamp = f"2026-01-01T{tick // 3_600_000:02d}:{tick // 60_000 % 60:02d}:"
            stamp += f"{tick // 1000 % 60:02d}.{tick % 1000:03d}Z"
            row = {**base, "type": kind, "uuid": str(uuid.uuid4()), "timestamp": stamp, **fields}
            text = json.dumps(row) + "\n"
            out.write(text)
            size += len(text)

        emit("user", message={"role": "user", "content": "Read every file."})
        while size < target:
            calls += 1
            message, tool = f"msg_{uuid.uuid4().hex}", f"toolu_{uuid.uuid4().hex}"
            usage = {"input_tokens": 900, "cache_read_input_tokens": 500, "output_tokens": 60}
            for block in (
                {"type": "text", "text": "Let me read the next file."},
                {"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": tool}},
            ):
                emit(
                    "assistant",
                    message={
                        "id": message,
                        "role": "assistant",
                        "model": "claude-opus-5-5",
                        "content": [block],
                        "usage": usage,
                    },
                )
            result = {"type": "tool_result", "tool_use_id": tool, "content": _FILE_BODY}
            emit(
                "user",
                message={"role": "user", "content": [result]},
                toolUseResult={"type": "text", "file": {"content": _FILE_BODY}},
            )
            emit("attachment", attachment={"type": "date", "date": "2026-01-01"})
        emit(
            "assistant",
            message={
                "id": "msg_last",
                "role": "assistant",
                "model": "claude-opus-5-5",
                "content": [{"type": "text", "text": "Done."}],
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )
    return calls


# The store's SQLite page cache (64 MB) is bounded by design and would fill on the larger
# import only; shrinking it in the child isolates what the importer itself holds.
#
# The peak is the child's own VmHWM: ``getrusage(RUSAGE_SELF).ru_maxrss`` is no good here, as
# Linux carries the high-water mark of the forked copy of the parent across ``exec``, so a child
# of a 480 MB pytest worker "peaks" at 480 MB whatever it does.
MEASURE = """
import json, sys
from agent_replay.store import db
db.PRAGMAS["cache_size"] = -2000
from agent_replay.cli import main
code = main(["import", sys.argv[1], "--no-redact", "--json"])
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(json.dumps({"code": code, "rss_kb": int(hwm[0].split()[1])}))
"""


def peak_rss_mb(path: Path, store: Path) -> tuple[float, dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "AGENT_REPLAY_DIR": str(store)},
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    *report_lines, last = result.stdout.strip().splitlines()
    measured = json.loads(last)
    assert measured["code"] == 0
    return measured["rss_kb"] / 1024, json.loads("\n".join(report_lines))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's VmHWM")
def test_memory_stays_flat_on_a_large_transcript(tmp_path: Path) -> None:
    """Importing 10 MB and 50 MB transcripts peaks at about the same RSS:
    the file is streamed and only open calls and the current reply are held. (Redaction is
    off to keep the test fast; it holds nothing between lines.)"""
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    write_large_transcript(small, 10)
    calls = write_large_transcript(large, 50)
    small_rss, _ = peak_rss_mb(small, tmp_path / "store-small")
    large_rss, report = peak_rss_mb(large, tmp_path / "store-large")
    assert report["sessions"] == 1
    # The prompt, an llm_call and a Read per file, the last reply and its answer.
    assert report["steps"] == 1 + 2 * calls + 2
    # Flatness is the growth from 10 MB to 50 MB (holding the file would add well over 40 MB);
    # the absolute figure also holds the interpreter, the libraries and SQLite's caches.
    assert large_rss - small_rss < 20, f"RSS grew {small_rss:.0f} -> {large_rss:.0f} MB"
    assert large_rss < 120, f"peak RSS {large_rss:.0f} MB"
