"""Replaying the real harness captures through each capture path, for tests that compare them.

- ``payloads(folder)``: the hook payloads a CLI wrote, in order (``tests/fixtures/harness``).
- ``replay_hooks``: each payload through the real ``hook`` fast path in-process (``--enforce``
  on the pre-tool events when asked), then the drainer: what a live session records.
- ``relocate``: the capture's session files (transcript, rollout, chats) copied under a temp
  HOME and the payloads' paths rewritten to point there, so the hook path finds the harness's
  own files where the payloads say they are.
- ``traces_by_format``: the stored traces, keyed by ``source_format``.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS

from agent_replay.entry import main
from agent_replay.services.hook.drain import drain_with_lock
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json

PRE_TOOL = frozenset({"PreToolUse", "BeforeTool"})
DENY_SUMMARY = [
    "guard",
    "add",
    "--name",
    "no-summary-write",
    "--action",
    "deny",
    "--priority",
    "100",
    "--pattern",
    '{"step_type": "tool_call", "input_contains": "summary.txt"}',
    "--description",
    "e2e: summary.txt must not be written",
]
"""The policy the enforce captures ran with (``realcli/capture.py``'s DENY_POLICY)."""


def payloads(folder: str) -> list[dict[str, Any]]:
    """The payloads of ``tests/fixtures/harness/<folder>/hooks.jsonl``, in arrival order."""
    lines = (HARNESS / folder / "hooks.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["payload"] for line in lines if line.strip()]


def replay_hooks(
    monkeypatch: pytest.MonkeyPatch,
    store_dir: Path,
    items: list[dict[str, Any]],
    *,
    enforce: bool = False,
    args: tuple[str, ...] = (),
) -> list[str]:
    """Each payload through ``agent-replay hook`` (``--enforce`` on pre-tool events, and
    ``args``), then the drainer; returns what the hook printed for each payload (the guard's
    answers)."""
    monkeypatch.setenv("AGENT_REPLAY_HOOK_NO_SPAWN", "1")
    answers = []
    for item in items:
        raw = json.dumps(item).encode("utf-8")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
        out = io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        guarded = enforce and item.get("hook_event_name") in PRE_TOOL
        assert main(["hook", *args, *(["--enforce"] if guarded else [])]) == 0
        answers.append(out.getvalue())
    monkeypatch.setattr(sys, "stdout", sys.__stdout__)
    drain_with_lock(store_dir)
    return answers


SESSION_PATHS = ("transcript_path", "agent_transcript_path")


def relocate(folder: str, home: Path) -> list[dict[str, Any]]:
    """The capture's payloads with the session files they name (``transcript_path``) moved
    from the capture's machine (``/home/dev/<run>``) under ``home``, and the capture's copies
    of those files put there. Everything else in the payloads is left as the CLI wrote it."""
    source = HARNESS / folder
    items = payloads(folder)
    base = _capture_base(items)
    for item in items:
        for key in SESSION_PATHS:
            path = item.get(key)
            if isinstance(path, str) and path.startswith(base + "/"):
                item[key] = str(home / path[len(base) + 1 :])
                _place(source, Path(item[key]))
    return items


def _capture_base(items: list[dict[str, Any]]) -> str:
    for item in items:
        cwd = item.get("cwd")
        if isinstance(cwd, str) and cwd.startswith("/home/dev/"):
            return "/".join(cwd.split("/")[:4])  # /home/dev/<run>
    raise AssertionError("no /home/dev/<run> path in the payloads")


def _place(source: Path, target: Path) -> None:
    """Put the capture's copy of the session file named ``target`` at ``target``."""
    if target.exists():
        return
    found = next((p for p in source.rglob(target.name) if p.is_file()), None)
    if found is None:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(found, target)
    sibling = found.parent / found.stem  # Claude Code: <session>/subagents/ beside the file
    if sibling.is_dir():
        shutil.copytree(sibling, target.parent / target.stem, dirs_exist_ok=True)


def traces_by_format(store: Store) -> dict[str, dict[str, Any]]:
    """Every stored trace as ``show --json`` prints it, keyed by its ``source_format``."""
    rows = execute(store, "SELECT id, source_format FROM traces ORDER BY started_at_ms").fetchall()
    found: dict[str, dict[str, Any]] = {}
    for trace_id, fmt in rows:
        assert fmt not in found, f"two traces of {fmt}"
        found[fmt] = trace_json(store, trace_id)
    return found


def tool_calls(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The trace's tool_call steps, in order."""
    return [s for s in trace["steps"] if s["step_type"] == "tool_call"]
