"""``agent-replay hook``: record a harness hook payload (the full path).

The common case never gets here: ``agent_replay.entry`` answers ``hook`` from the stdlib-only
fast path (queue the payload, make sure a drainer runs). This module serves ``--help``,
``--sync``, and the first payload into a store that must be created or migrated first.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_replay.commands._common import dir_option


@click.command(name="hook")
@click.option(
    "--dialect",
    type=click.Choice(["auto", "claude", "codex", "gemini"]),
    default="auto",
    show_default=True,
    help="The harness that sends the payload (auto-detected from its fields).",
)
@click.option("--no-input", is_flag=True, help="Drop prompt text, tool inputs and tool outputs.")
@click.option("--no-redact", is_flag=True, help="Keep secrets in the recorded text.")
@click.option(
    "--sync", is_flag=True, help="Record before returning (slower; for scripts and debugging)."
)
@dir_option
def command(
    dialect: str, no_input: bool, no_redact: bool, sync: bool, store_dir: Path | None
) -> int:
    """Record one hook payload from stdin: Claude Code, Codex CLI or Gemini CLI.

    Register it for every hook event of your harness. Each invocation finds its trace by the
    payload's session_id; tool calls are paired with their results by the harness's call id.
    It returns in a few milliseconds: the payload is queued and a background drainer records
    it. In capture mode it always exits 0 and prints nothing; problems are logged to
    .agent-replay/logs/agent-replay.log.

    \b
    Claude Code (.claude/settings.json), for each event (PreToolUse, PostToolUse,
    PostToolUseFailure, UserPromptSubmit, SubagentStart, SubagentStop, Stop, SessionStart,
    SessionEnd, ...):
      {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
          {"type": "command", "command": "agent-replay hook"}]}]}}
    Codex CLI (~/.codex/hooks.json): the same shape, for SessionStart, UserPromptSubmit,
    PreToolUse, PostToolUse, SubagentStart, SubagentStop, Stop, SessionEnd.
    Gemini CLI (.gemini/settings.json, with "hooksConfig": {"enabled": true}): for
    SessionStart, BeforeAgent, BeforeModel, AfterModel, BeforeTool, AfterTool, AfterAgent,
    SessionEnd.

    \b
    Examples:
      echo '{"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}' \\
        | agent-replay hook --sync
      agent-replay hook --no-input      (keep prompts and tool I/O out of the store)
    """
    from agent_replay.commands._common import open_or_create, resolve_store_dir
    from agent_replay.services.capture.hook_drain import drain_with_lock
    from agent_replay.services.capture.hook_inbox import enqueue, log_error

    folder = resolve_store_dir(store_dir)
    payload = sys.stdin.read()
    if not payload.strip():
        log_error(folder, "empty payload on stdin; nothing recorded")
        return 0
    options = {"dialect": dialect, "no_input": no_input, "redact": not no_redact, "sync": sync}
    try:
        with open_or_create(folder) as store:
            db_file = store.path
        assert db_file is not None
        enqueue(db_file, payload, options)
        drain_with_lock(folder)
    except Exception as exc:  # noqa: BLE001 - capture must never fail the harness
        log_error(folder, f"{type(exc).__name__}: {exc}")
    return 0
