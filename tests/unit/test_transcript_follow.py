"""Hook traces as rich as imports: the drainer follows the session file each payload names
(Claude Code transcript, Codex rollout) and records the model's calls from it.

The real captures are replayed through ``agent-replay hook`` with their session files placed
where the payloads say (a temp HOME): once with the whole file already written, and once as a
live session writes it — the file growing line by line between payloads, in the order the
harness wrote both, a line cut in half at times, a record of an unknown kind in between. Either
way the hook trace's ``llm_call`` steps, tokens and cost are those of ``import`` of the same
file, tool calls are not doubled, and a subagent nests with its own totals."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS
from harnesskit import payloads, relocate, replay_hooks, tool_calls, traces_by_format

from agent_replay.clock import FixedClock
from agent_replay.entry import main
from agent_replay.services.capture.importer import import_path
from agent_replay.services.capture.transcript_follow import CALL_WAIT_S
from agent_replay.services.hook.drain import drain
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.trace.base import normalize_time

HOOK = {"claude-code": "claude-code-hook", "codex": "codex-hook", "gemini-cli": "gemini-cli-hook"}
IMPORT = {"claude-code": "claude-transcript", "codex": "codex-rollout", "gemini-cli": "gemini-chat"}
SESSION_FILES = {"claude-code": "transcript", "codex": "rollout", "gemini-cli": "chats"}


def llm_calls(trace: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What a model call must agree on across the hook and import paths."""
    return [
        (
            s["model"],
            s["tokens_used"],
            s["metadata"].get("cost_usd"),
            s["output"],
            {k: v for k, v in s["metadata"].items() if k.endswith("_tokens")},
        )
        for s in trace["steps"]
        if s["step_type"] == "llm_call"
    ]


def hook_and_import(
    store: Store, folder: str, clock: FixedClock
) -> tuple[dict[str, Any], dict[str, Any]]:
    report = import_path(store, HARNESS / folder / SESSION_FILES[folder.split("/")[0]], clock=clock)
    assert report.sessions == 1 and not report.failed
    found = traces_by_format(store)
    harness = folder.split("/")[0]
    return found[HOOK[harness]], found[IMPORT[harness]]


@pytest.mark.parametrize("folder", ["claude-code/plain", "codex/plain", "gemini-cli/plain"])
def test_the_hook_trace_has_the_imports_model_calls(
    store: Store,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: FixedClock,
    tmp_path: Path,
    folder: str,
) -> None:
    """Model, tokens (cache tokens too), cost and text of every call, and the trace's totals,
    as ``import`` gives them; the four tool calls once each, after the prompt."""
    replay_hooks(monkeypatch, store_dir, relocate(folder, tmp_path / "home"))
    hook, imported = hook_and_import(store, folder, clock)
    calls = llm_calls(hook)
    assert len(calls) == 5 and all(c[1] and c[2] for c in calls)
    assert calls == llm_calls(imported)
    assert hook["total_tokens"] == imported["total_tokens"]
    assert hook["total_cost_usd"] == pytest.approx(imported["total_cost_usd"])
    assert len(tool_calls(hook)) == 4
    assert hook["steps"][0]["name"] == "user_prompt"
    assert hook["status"] == "completed" and hook["metadata"]["model"] == calls[0][0]
    if folder.startswith("claude"):
        assert (hook["total_tokens"], round(hook["total_cost_usd"], 4)) == (9290, 0.0418)
    elif folder.startswith("codex"):
        assert hook["total_tokens"] == 9800


def subagent_totals(trace: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The Agent call and the model calls nested under it (directly or through the hook's
    subagent step)."""
    steps = {s["step_number"]: s for s in trace["steps"]}
    (agent,) = [s for s in tool_calls(trace) if s["name"] == "Agent"]

    def under(step: dict[str, Any]) -> bool:
        parent = step["parent_step"]
        while parent is not None:
            if parent == agent["step_number"]:
                return True
            parent = steps[parent]["parent_step"]
        return False

    return agent, [s for s in trace["steps"] if s["step_type"] == "llm_call" and under(s)]


def assert_subagent_nests(trace: dict[str, Any]) -> None:
    agent, nested = subagent_totals(trace)
    assert len(nested) == 3
    assert agent["tokens_used"] is None  # not Claude's totalTokens (its last call: 1,950)
    assert agent["metadata"]["subagent_tokens"] == sum(s["tokens_used"] for s in nested) == 5170
    assert agent["metadata"]["subagent_cost_usd"] == pytest.approx(
        sum(s["metadata"].get("cost_usd") for s in nested)
    )
    assert trace["total_tokens"] == 8280


def test_a_subagent_nests_with_its_own_totals(
    store: Store,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: FixedClock,
    tmp_path: Path,
) -> None:
    """The subagent capture: the session's 8,280 tokens (not the 1,950 of the subagent's last
    call), the subagent's three calls under the Agent call, which carries their totals — on
    the hook path and on import alike."""
    replay_hooks(monkeypatch, store_dir, relocate("claude-code/subagent", tmp_path / "home"))
    hook, imported = hook_and_import(store, "claude-code/subagent", clock)
    assert llm_calls(hook) == llm_calls(imported)
    assert_subagent_nests(hook)
    assert_subagent_nests(imported)
    (subagent,) = [s for s in hook["steps"] if str(s["name"]).startswith("subagent:")]
    assert subagent["parent_step"] == subagent_totals(hook)[0]["step_number"]
    assert subagent_totals(hook)[0]["metadata"]["subagent_cost_usd"] == pytest.approx(
        subagent_totals(imported)[0]["metadata"]["subagent_cost_usd"]
    )


# --- a live session: the file grows between payloads ------------------------------------------


def _lines_with_times(path: Path) -> list[tuple[str | None, bytes]]:
    out = []
    for raw in path.read_bytes().splitlines(keepends=True):
        try:
            stamp = json.loads(raw).get("timestamp")
        except ValueError:
            stamp = None
        out.append((normalize_time(stamp) if isinstance(stamp, str) else None, raw))
    return out


class LiveFiles:
    """The capture's session files, written out as the harness wrote them: before each hook
    payload, every line stamped no later than the hook's arrival (lines without a stamp go
    with the line before them)."""

    def __init__(self, folder: str, home: Path) -> None:
        self.items = relocate(folder, home)
        self.envelopes = [
            json.loads(line)
            for line in (HARNESS / folder / "hooks.jsonl").read_text("utf-8").splitlines()
        ]
        self.files: dict[Path, list[tuple[str | None, bytes]]] = {}
        for item in self.items:
            path = Path(item.get("transcript_path") or "")
            if path.is_file() and path not in self.files:
                self.files[path] = _lines_with_times(path)
                folder_of_agents = path.parent / path.stem / "subagents"
                for agent in sorted(folder_of_agents.glob("agent-*.jsonl")):
                    self.files[agent] = _lines_with_times(agent)
        self.written = dict.fromkeys(self.files, 0)
        self.metas: dict[Path, bytes] = {}
        for path in self.files:
            path.write_bytes(b"")
            meta = path.with_name(f"{path.stem}.meta.json")
            if meta.exists():  # appears with the subagent's first line, as Claude writes it
                self.metas[meta] = meta.read_bytes()
                meta.unlink()

    def write_until(self, at: str, *, cut: bool = False) -> None:
        for path, lines in self.files.items():
            done = self.written[path]
            with path.open("ab") as stream:
                while done < len(lines) and (lines[done][0] is None or lines[done][0] <= at):
                    stream.write(lines[done][1])
                    done += 1
                if cut and done < len(lines):
                    stream.write(lines[done][1][:40])  # a line the harness is still writing
                    lines[done] = (lines[done][0], lines[done][1][40:])
            self.written[path] = done
            meta = path.with_name(f"{path.stem}.meta.json")
            if done and meta in self.metas and not meta.exists():
                meta.write_bytes(self.metas[meta])

    def add(self, noise: bytes) -> None:
        """Lines the capture does not have, in every file not in the middle of a line."""
        for path in self.files:
            if path.read_bytes().endswith(b"\n"):
                with path.open("ab") as stream:
                    stream.write(noise)

    def finish(self) -> None:
        self.write_until("9999")


def replay_live(
    monkeypatch: pytest.MonkeyPatch, store_dir: Path, folder: str, home: Path, noise: bytes
) -> LiveFiles:
    live = LiveFiles(folder, home)
    for number, (envelope, item) in enumerate(zip(live.envelopes, live.items, strict=True)):
        live.write_until(normalize_time(envelope["received_at"]), cut=number % 3 == 2)
        if number == 4:
            live.add(noise)
        replay_hooks(monkeypatch, store_dir, [item])
    return live


NOISE = b'{"type": "a-record-kind-from-a-newer-version", "uuid": "x"}\nnot json at all\n'


@pytest.mark.sqlite_only  # the reading is under test; the whole-file tests cover both stores
@pytest.mark.parametrize("folder", ["claude-code/subagent", "codex/plain"])
def test_a_live_session_followed_payload_by_payload(
    store: Store,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: FixedClock,
    tmp_path: Path,
    folder: str,
) -> None:
    """Each payload reads only what the file gained since the last one (the offsets end at the
    files' sizes; a half-written line waits), unknown and unreadable records are skipped and
    counted, and the trace is the import's: each model call before the tool calls it made, a
    live subagent's calls under the hook's subagent step."""
    live = replay_live(monkeypatch, store_dir, folder, tmp_path / "home", NOISE)
    live.finish()
    (hook,) = traces_by_format(store).values()
    state = json.loads(execute(store, "SELECT state FROM hook_follow").fetchone()[0])
    assert state["skipped"] and sum(state["skipped"].values()) >= 2
    sizes = {str(p): p.stat().st_size for p in live.files}
    assert {p: o for p, o in state["offsets"].items() if o == sizes[p]}, state["offsets"]
    for path in live.files:  # the import reads the capture's own lines
        path.write_bytes(path.read_bytes().replace(NOISE, b""))
    _, imported = hook_and_import(store, folder, clock)
    assert llm_calls(hook) == llm_calls(imported)
    assert len(tool_calls(hook)) == len(tool_calls(imported))
    for call in tool_calls(hook):
        cause = call["caused_by_step"]
        assert cause is not None and hook["steps"][cause - 1]["step_type"] == "llm_call"
    if folder.endswith("subagent"):
        agent, nested = subagent_totals(hook)
        assert agent["metadata"]["subagent_tokens"] == 5170 and hook["total_tokens"] == 8280
        parents = {hook["steps"][s["parent_step"] - 1]["name"] for s in nested}
        assert parents == {"subagent:general-purpose"}


def test_without_a_readable_file_the_hook_trace_is_the_payloads(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The payloads name a transcript that is not on this machine: nothing is followed, and
    the trace has the hook's steps only."""
    replay_hooks(monkeypatch, store_dir, payloads("claude-code/plain"))
    (hook,) = traces_by_format(store).values()
    assert [s["step_type"] for s in hook["steps"]].count("llm_call") == 0
    assert execute(store, "SELECT COUNT(*) FROM hook_follow").fetchone()[0] == 0


def test_no_input_keeps_tokens_and_cost_but_no_text(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``hook --no-input``: the model calls are counted and priced; no prompt or reply text
    reaches the store, not even in the follower's saved state."""
    items = relocate("claude-code/plain", tmp_path / "home")
    replay_hooks(monkeypatch, store_dir, items, args=("--no-input",))
    (hook,) = traces_by_format(store).values()
    calls = [s for s in hook["steps"] if s["step_type"] == "llm_call"]
    assert len(calls) == 5 and all(
        s["tokens_used"] and s["metadata"].get("cost_usd") for s in calls
    )
    assert all(s["output"] is None and s["input"] is None for s in calls)
    (state,) = execute(store, "SELECT state FROM hook_follow").fetchone()
    assert "summary.txt" not in state


def test_a_session_the_proxy_records_is_not_followed(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``agent-replay proxy`` joined the hook's trace (its model calls carry
    ``metadata.proxy``): the transcript is not read, so no call is recorded twice."""
    from agent_replay.services.recorder import TraceRecorder

    items = relocate("claude-code/plain", tmp_path / "home")
    start = next(i for i, p in enumerate(items) if p["hook_event_name"] == "SessionStart")
    replay_hooks(monkeypatch, store_dir, items[: start + 1])
    (trace_id,) = [r[0] for r in execute(store, "SELECT id FROM traces").fetchall()]
    with store.write():
        TraceRecorder(store, lenient=True).step(
            trace_id,
            {"step_type": "llm_call", "name": "chat", "metadata": {"proxy": {"pid": 1}}},
        )
    replay_hooks(monkeypatch, store_dir, items[start + 1 :])
    (hook,) = traces_by_format(store).values()
    assert [s["step_type"] for s in hook["steps"]].count("llm_call") == 1
    assert len(tool_calls(hook)) == 4


def queue_hook(monkeypatch: pytest.MonkeyPatch, item: dict[str, Any]) -> None:
    """``agent-replay hook`` with the payload on stdin: queued for the drainer, not drained."""
    monkeypatch.setenv("AGENT_REPLAY_HOOK_NO_SPAWN", "1")
    raw = json.dumps(item).encode("utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    assert main(["hook"]) == 0


@pytest.mark.sqlite_only  # the reading is under test; the whole-file tests cover both stores
@pytest.mark.parametrize("folder", ["claude-code/plain", "codex/plain"])
def test_a_reply_written_after_its_tool_hook_fired_still_comes_first(
    store: Store,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    folder: str,
) -> None:
    """The real Claude Code now and then writes a reply's line only after the PreToolUse of
    the call it asked for fired: the detached drainer waits for the line (outside any
    transaction, briefly), so the model call is still recorded first and causes the call."""
    live = LiveFiles(folder, tmp_path / "home")
    late = None
    for envelope, item in zip(live.envelopes, live.items, strict=True):
        at = normalize_time(envelope["received_at"])
        if late is None and item["hook_event_name"] == "PreToolUse":
            late = item["tool_use_id"]  # this call's reply reaches the file 80 ms late
            queue_hook(monkeypatch, item)
            writer = threading.Timer(0.08, live.write_until, args=(at,))
            writer.start()
            drain(store, store_dir=store_dir, await_calls=True)
            writer.join()
        else:
            live.write_until(at)
            replay_hooks(monkeypatch, store_dir, [item])
    live.finish()
    (hook,) = traces_by_format(store).values()
    calls = tool_calls(hook)
    assert late and len(calls) == 4
    for call in calls:
        cause = call["caused_by_step"]
        assert cause is not None and hook["steps"][cause - 1]["step_type"] == "llm_call"


@pytest.mark.sqlite_only
def test_a_reply_that_never_comes_holds_the_drainer_only_briefly(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A session file that never gets the call's line (the harness died, a tool no reply
    names): the wait ends after ``CALL_WAIT_S`` and the tool call is recorded anyway."""
    live = LiveFiles("claude-code/plain", tmp_path / "home")
    for envelope, item in zip(live.envelopes, live.items, strict=True):
        if item["hook_event_name"] == "PreToolUse":
            queue_hook(monkeypatch, item)
            began = time.monotonic()
            drain(store, store_dir=store_dir, await_calls=True)
            waited = time.monotonic() - began
            break
        live.write_until(normalize_time(envelope["received_at"]))
        replay_hooks(monkeypatch, store_dir, [item])
    assert CALL_WAIT_S <= waited < CALL_WAIT_S + 5
    (hook,) = traces_by_format(store).values()
    assert [c["name"] for c in tool_calls(hook)] == ["Bash"]


@pytest.mark.sqlite_only
def test_a_payload_naming_a_fifo_as_its_session_file_does_not_hold_the_drainer(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A hostile (or broken) PreToolUse whose ``transcript_path`` is a FIFO named like a
    transcript: opening it for the wait would block forever; the drainer records it at once."""
    (item,) = [p for p in payloads("claude-code/plain") if p["hook_event_name"] == "PreToolUse"][:1]
    fifo = tmp_path / "2859795b-db92-4875-87cd-19512a3e477d.jsonl"
    os.mkfifo(fifo)
    queue_hook(monkeypatch, {**item, "transcript_path": str(fifo)})
    began = time.monotonic()
    drain(store, store_dir=store_dir, await_calls=True)
    assert time.monotonic() - began < CALL_WAIT_S
    (hook,) = traces_by_format(store).values()
    assert [c["name"] for c in tool_calls(hook)] == ["Bash"]
