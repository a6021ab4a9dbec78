"""One vocabulary: the real captures of one session through the hook, the stream (``record
--format``), the importer and ``otel serve`` give the same steps (names, links, tokens, cost),
the same tool names and inputs, and a call a guard blocked or a permission check refused
carries the same error (the hook's or the harness's reason) on every path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS
from harnesskit import (
    DENY_SUMMARY,
    payloads,
    relocate,
    replay_hooks,
    tool_calls,
    traces_by_format,
)
from otelkit import harness_payloads, post_all, receiving
from otelkit import traces as otel_traces

from agent_replay.clock import FixedClock
from agent_replay.entry import main
from agent_replay.services.capture import vocabulary
from agent_replay.services.capture.importer import import_path
from agent_replay.store.db import Store

GUARD_REASON = (
    'Blocked by agent-replay guard: policy "no-summary-write" (deny): '
    "e2e: summary.txt must not be written"
)
HOOK = {"claude": "claude-code-hook", "codex": "codex-hook", "gemini": "gemini-cli-hook"}
IMPORT = {"claude": "claude-transcript", "codex": "codex-rollout", "gemini": "gemini-chat"}
STREAM = {"claude": "claude-stream", "codex": "codex-exec", "gemini": "gemini-stream"}
FOLDER = {"claude": "claude-code", "codex": "codex", "gemini": "gemini-cli"}
STREAM_FILE = {
    "claude": "stream-json.jsonl",
    "codex": "exec-json.jsonl",
    "gemini": "stream-json.jsonl",
}
SESSION_FILES = {"claude": "transcript", "codex": "rollout", "gemini": "chats"}


def record_stream(store_dir: Path, harness: str, capture: str) -> None:
    """``agent-replay record --format ...`` of the capture's stream, as a user pipes it."""
    source = HARNESS / FOLDER[harness] / capture / STREAM_FILE[harness]
    with source.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "agent_replay", "record", "--format", STREAM[harness]],
            stdin=stdin,
            capture_output=True,
            env={**os.environ, "AGENT_REPLAY_DIR": str(store_dir)},
            timeout=60,
        )
    assert done.returncode == 0, done.stderr


def three_paths(
    store: Store,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: FixedClock,
    harness: str,
    capture: str,
    tmp_path: Path,
    *,
    enforce: bool = False,
) -> dict[str, dict[str, Any]]:
    """The same session through the hook (its session file where the payloads say it is),
    the stream and the importer: the three traces, keyed hook/stream/import."""
    folder = f"{FOLDER[harness]}/{capture}"
    if enforce:
        assert main(DENY_SUMMARY) == 0
    replay_hooks(monkeypatch, store_dir, relocate(folder, tmp_path / "home"), enforce=enforce)
    record_stream(store_dir, harness, capture)
    report = import_path(store, HARNESS / folder / SESSION_FILES[harness], clock=clock)
    assert report.sessions == 1 and not report.failed
    found = traces_by_format(store)
    return {
        "hook": found[HOOK[harness]],
        "stream": found[STREAM[harness]],
        "import": found[IMPORT[harness]],
    }


def calls(trace: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(s["name"], s["input"]) for s in tool_calls(trace)]


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_one_session_has_one_vocabulary_on_every_path(
    store: Store,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: FixedClock,
    tmp_path: Path,
    harness: str,
) -> None:
    """The plain captures: the tool names and inputs of the hook, the stream and the import
    agree (Codex's shell is ``Bash`` with the command line on all three; the exec stream
    carries no patch text, only the changed files)."""
    paths = three_paths(store, store_dir, monkeypatch, clock, harness, "plain", tmp_path)
    hook = calls(paths["hook"])
    assert len(hook) == 4
    assert calls(paths["import"]) == hook
    stream = calls(paths["stream"])
    if harness == "codex":
        assert hook[0] == ("Bash", {"command": "ls -la"})
        assert hook[2][0] == "apply_patch" and hook[2][1]["command"].startswith("*** Begin")
        assert stream[2][0] == "apply_patch" and "changes" in stream[2][1]
        stream[2] = hook[2]
        originals = [s["metadata"].get("original_name") for s in tool_calls(paths["import"])]
        assert originals == ["exec_command", "exec_command", None, "exec_command"]
    assert stream == hook
    failed = [[s["step_number"] for s in tool_calls(t) if s["error"]] for t in paths.values()]
    assert all(len(f) == 1 for f in failed)


def steps(trace: dict[str, Any], *, drop: Any = lambda _step: False) -> list[tuple[Any, ...]]:
    """Each step as (type, name, tokens, cost, the position of its cause), the steps ``drop``
    picks left out; a cause left out is followed to its own cause."""
    kept = [s for s in trace["steps"] if not drop(s)]
    position = {s["step_number"]: i for i, s in enumerate(kept)}
    by_number = {s["step_number"]: s for s in trace["steps"]}

    def cause(step: dict[str, Any]) -> int | None:
        number = step.get("caused_by_step")
        while number is not None and number not in position:
            number = by_number[number].get("caused_by_step")
        return position.get(number) if number is not None else None

    return [
        (s["step_type"], s["name"], s["tokens_used"], s["metadata"].get("cost_usd"), cause(s))
        for s in kept
    ]


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_the_hook_and_the_import_give_the_same_steps(
    store: Store,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: FixedClock,
    tmp_path: Path,
    harness: str,
) -> None:
    """The plain captures: every step alike, in order: the prompt (``user_prompt``), each model
    call named after its model with its tokens and cost, caused by the tool call it answers,
    each tool call caused by its model call, the answer (``final_answer``) caused by the last
    model call."""
    paths = three_paths(store, store_dir, monkeypatch, clock, harness, "plain", tmp_path)
    hook = steps(paths["hook"])
    assert steps(paths["import"]) == hook
    assert [(kind, name) for kind, name, *_ in hook if kind != "tool_call"][:2] == [
        ("thought", vocabulary.PROMPT_STEP),
        ("llm_call", paths["hook"]["steps"][1]["model"]),
    ]
    assert hook[-1][:2] == ("output", vocabulary.ANSWER_STEP)
    for i, (kind, _name, tokens, cost, cause) in enumerate(hook):
        if kind == "llm_call":
            assert tokens and cost
            assert cause is None if i == 1 else hook[cause][0] == "tool_call"
        elif kind in ("tool_call", "output"):
            assert cause is not None and hook[cause][0] == "llm_call"


OTLP_SESSION_FILES = {
    "claude": "claude-code/otel/transcript",
    "codex": "codex/otel/rollout",
    "gemini": "gemini-cli/otel/chats",
}


def otlp_only(step: dict[str, Any]) -> bool:
    """What only OTLP sees: the permission checks, Gemini CLI's routing call and its
    scheduler's spans."""
    return (
        step["step_type"] == "decision"
        or step["metadata"].get("role") == "utility_router"
        or step["name"] == "schedule_tool_calls"
    )


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_otlp_gives_the_steps_of_the_import(
    store: Store, clock: FixedClock, tmp_path: Path, harness: str
) -> None:
    """The otel captures: the session exported over OTLP and its session file imported give
    the same steps, links, tokens and cost, besides what only OTLP sees (``otlp_only``).
    Codex CLI exports no answer text: its trace has no ``final_answer``."""
    report = import_path(store, HARNESS / OTLP_SESSION_FILES[harness], clock=clock)
    assert report.sessions == 1 and not report.failed
    (imported,) = traces_by_format(store).values()
    with receiving(tmp_path / "otel") as (receiver, client, otel_store):
        post_all(client, receiver, harness_payloads(FOLDER[harness]))
        (otlp,) = otel_traces(otel_store)
    expected = steps(imported)
    if harness == "codex":
        assert expected[-1][:2] == ("output", vocabulary.ANSWER_STEP)
        expected = expected[:-1]
    got = steps(otlp, drop=otlp_only)
    assert [s[:3] for s in got] == [s[:3] for s in expected]
    assert [s[4] for s in got] == [s[4] for s in expected]
    assert [s[3] for s in got] == pytest.approx([s[3] for s in expected])


@pytest.mark.sqlite_only  # hook --enforce decides against the local SQLite file
@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_a_guard_block_carries_the_guards_reason_on_every_path(
    store: Store,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: FixedClock,
    tmp_path: Path,
    harness: str,
) -> None:
    """The enforce captures (the guard denied writing summary.txt): the hook's drainer, the
    stream and the import all record the blocked call with the reason the harness was given
    (the harness's own wrapper in metadata); Codex's exec stream never shows the call."""
    paths = three_paths(
        store, store_dir, monkeypatch, clock, harness, "enforce", tmp_path, enforce=True
    )
    for path, trace in paths.items():
        blocked = [s for s in tool_calls(trace) if "guard" in (s["error"] or "")]
        if harness == "codex" and path == "stream":
            assert blocked == [] and len(tool_calls(trace)) == 3
            continue
        assert [s["error"] for s in blocked] == [GUARD_REASON], path
        assert blocked[0]["name"] in ("Write", "apply_patch", "write_file")
        if path != "hook":
            assert blocked[0]["metadata"]["harness_error"] != GUARD_REASON
    hook = paths["hook"]
    assert [s["name"] for s in hook["steps"] if s["step_type"] == "guard_check"] == [
        "no-summary-write"
    ]


def test_claudes_permission_refusal_is_its_reason_on_every_path(
    store: Store,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: FixedClock,
    tmp_path: Path,
) -> None:
    """The denied capture (Write not allowed in ``-p`` mode): Claude Code's own words, not a
    generic error, from the hook path too (read from the transcript the payloads name)."""
    paths = three_paths(store, store_dir, monkeypatch, clock, "claude", "denied", tmp_path)
    errors = {
        path: [s["error"] for s in tool_calls(trace) if s["name"] == "Write"]
        for path, trace in paths.items()
    }
    (reason,) = errors["import"]
    assert reason.startswith("Claude requested permissions to write to ")
    assert reason.endswith("but you haven't granted it yet.")
    assert errors == {"hook": [reason], "stream": [reason], "import": [reason]}


def test_without_its_session_file_the_hook_path_says_no_result(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The payloads' transcript is not on this machine: the refused call is closed with the
    generic error, never with a guess."""
    replay_hooks(monkeypatch, store_dir, payloads("claude-code/denied"))
    (hook,) = traces_by_format(store).values()
    (write,) = [s for s in tool_calls(hook) if s["name"] == "Write"]
    assert write["error"].startswith("no result recorded")


@pytest.mark.parametrize(
    ("harness", "text", "reason"),
    [
        ("claude", "PreToolUse:Write hook error: Blocked: no", "Blocked: no"),
        ("codex", "Command blocked by PreToolUse hook: stop. Command: rm -rf x", "stop"),
        ("gemini", "Tool execution blocked: not here", "not here"),
        ("claude", "Exit code 1\ncat: x: No such file", None),
        ("codex", "Command blocked by PreToolUse hook:   ", None),
        ("gemini", "Tool execution blocked: not here", "not here"),
    ],
)
def test_refusal_texts_unwrap_to_the_hooks_reason(
    harness: str, text: str, reason: str | None
) -> None:
    found = vocabulary.refusal(harness, text)
    assert (found[0] if found else None) == reason
    if found:
        assert found[1]["harness_error"] == text


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("exec_command", {"cmd": "ls", "workdir": "/w"}, ("Bash", {"command": "ls"})),
        ("shell", {"command": ["bash", "-lc", "echo 'a b'"]}, ("Bash", {"command": "echo 'a b'"})),
        ("shell", {"command": ["ls", "-a b"]}, ("Bash", {"command": "ls '-a b'"})),
        ("command_execution", {"command": "/bin/zsh -c 'x; y'"}, ("Bash", {"command": "x; y"})),
        ("Bash", {"command": "ls -la"}, ("Bash", {"command": "ls -la"})),
        ("apply_patch", "*** Begin Patch", ("apply_patch", {"command": "*** Begin Patch"})),
        ("apply_patch", {"input": "*** P"}, ("apply_patch", {"command": "*** P"})),
        ("web_search", {"q": 1}, ("web_search", {"q": 1})),
    ],
)
def test_codex_tool_calls_in_the_canonical_form(
    name: str, arguments: Any, expected: tuple[str, Any]
) -> None:
    tool = vocabulary.canonical_tool("codex", name, arguments)
    assert (tool.name, tool.input) == expected
    renamed = name != expected[0]
    assert tool.metadata.get("original_name") == (name if renamed else None)
    if name == "exec_command":
        assert tool.metadata["tool_options"] == {"workdir": "/w"}


def test_other_harnesses_keep_their_names() -> None:
    for harness in ("claude", "gemini"):
        tool = vocabulary.canonical_tool(harness, "exec_command", {"cmd": "ls"})
        assert (tool.name, tool.input, tool.metadata) == ("exec_command", {"cmd": "ls"}, {})


def test_gemini_cli_calls_cost_the_same_through_otlp_as_through_the_hook(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Tokens and cost are one vocabulary too: each model call of Gemini CLI's OTLP export
    (its ``api_response`` telemetry, ``input_token_count``…) is priced as the hook path prices
    the same call; the export also has the routing call, which no hook sees. The prompt's
    step has the hook's name."""
    replay_hooks(monkeypatch, store_dir, relocate("gemini-cli/plain", tmp_path / "home"))
    hook = traces_by_format(store)["gemini-cli-hook"]
    with receiving(tmp_path / "otel") as (receiver, client, otel_store):
        post_all(client, receiver, harness_payloads("gemini-cli"))
        (otlp,) = otel_traces(otel_store)

    def calls(trace: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [
            (s["model"], s["tokens_used"], s["metadata"].get("cost_usd"))
            for s in trace["steps"]
            if s["step_type"] == "llm_call" and s["metadata"].get("role") != "utility_router"
        ]

    assert otlp["steps"][0]["name"] == hook["steps"][0]["name"] == "user_prompt"
    assert len(calls(hook)) == 5
    assert all(cost for _, _, cost in calls(hook))
    assert calls(otlp) == calls(hook)
    (router,) = [s for s in otlp["steps"] if s["metadata"].get("role") == "utility_router"]
    assert router["metadata"]["cost_usd"] > 0
    assert otlp["total_cost_usd"] == pytest.approx(
        hook["total_cost_usd"] + router["metadata"]["cost_usd"]
    )
