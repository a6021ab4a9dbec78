"""``agent-replay hook``: record a harness hook payload (the full path).

The common case never gets here: ``agent_replay.entry`` answers ``hook`` from the stdlib-only
fast path (queue the payload, make sure a drainer runs; with ``--enforce``, decide the call
first: ``services/hook/enforce``). This module serves ``--help``, ``--sync``, the first
payload into a store of an older schema (migrated here first), and ``--enforce`` into a
store that must be created or migrated first.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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
@click.option(
    "--enforce",
    is_flag=True,
    help="Also decide pre-tool events against the guard policies and answer the harness "
    "(deny, ask for review, warn). See `agent-replay guard --help`.",
)
@click.option(
    "--plain",
    is_flag=True,
    help="With --enforce: answer with exit code 2 and a reason on stderr instead of the "
    "harness's JSON (for harnesses without structured hook output).",
)
@dir_option
def command(
    dialect: str,
    no_input: bool,
    no_redact: bool,
    sync: bool,
    enforce: bool,
    plain: bool,
    store_dir: Path | None,
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
    Guardrails: register `agent-replay hook --enforce` for the pre-tool event (PreToolUse,
    Gemini's BeforeTool) in place of `agent-replay hook`. The proposed call is decided
    against the enabled policies (`agent-replay guard list`) and answered in the harness's
    dialect: deny blocks it, require_review asks (Claude Code) or blocks with "review
    required" (Codex CLI, Gemini CLI: their hooks cannot ask), warn shows a message and
    allows. Every matched decision is recorded as a guard_check step. If the policies cannot
    be read, the call is denied (fail closed). A guardrail, not a security boundary.

    \b
    Examples:
      echo '{"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}' \\
        | agent-replay hook --sync
      agent-replay hook --no-input      (keep prompts and tool I/O out of the store)
      agent-replay hook --enforce       (capture, and enforce the guard policies)
      agent-replay hook --enforce --plain   (block with exit 2 + stderr, no JSON)
    """
    from agent_replay.commands._common import redaction, resolve_db_url, resolve_store_dir
    from agent_replay.paths import db_path
    from agent_replay.services.hook.drain import drain_with_lock
    from agent_replay.services.hook.inbox import (
        enqueue,
        ensure_drainer,
        log_error,
        spool,
    )
    from agent_replay.store.db import open_store

    if plain and not enforce:
        raise click.UsageError("--plain only applies with --enforce")
    folder = resolve_store_dir(store_dir)
    raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
    options = {
        "dialect": dialect,
        "no_input": no_input,
        "redact": redaction(no_redact, store_dir),
        "sync": sync,
    }
    # A team store: the local store spools the payload (see services/hook/inbox.spool).
    options["db_url"] = resolve_db_url() or ""
    spool(options)
    if enforce:
        return _enforce(folder, raw, options, plain=plain)
    payload = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    if not payload.strip():
        log_error(folder, "empty payload on stdin; nothing recorded")
        return 0
    try:
        with open_store(db_path(folder), create=True):
            pass
        enqueue(db_path(folder), payload, options)
        if sync:
            drain_with_lock(folder)
        else:
            ensure_drainer(folder)  # the session's drainer records it; never wait for it here
    except Exception as exc:  # noqa: BLE001 - capture must never fail the harness
        log_error(folder, f"{type(exc).__name__}: {exc}")
    return 0


def _enforce(folder: Path, raw: bytes | str, options: dict[str, Any], *, plain: bool) -> int:
    """``--enforce`` on the full path: create or migrate the store, decide, capture, answer.

    The same decision as the fast path (``services/hook/enforce``): a payload that cannot be
    read, a store that cannot be opened or read, and policies that vanished fail closed;
    anything unexpected while deciding too. Capture problems are logged and never change
    the answer; post-tool and other events are never blocked.
    """
    from agent_replay.services.hook import enforce

    dialect = str(options["dialect"])
    incoming = None
    try:
        incoming = enforce.read_payload(raw, dialect)
        return _enforce_read(folder, incoming, options, plain=plain)
    except Exception as exc:  # noqa: BLE001 - whatever failed, a tool call is refused, closed
        enforce.log_traceback(folder)
        if incoming is not None and not incoming.guarded:
            return 0
        from agent_replay.services.guard.decide import undecidable

        harness = incoming.harness if incoming else (dialect if dialect != "auto" else "claude")
        reply = enforce.answer(undecidable(f"{type(exc).__name__}: {exc}"), harness, plain=plain)
        return reply.emit(sys.stdout, sys.stderr)


def _enforce_read(folder: Path, incoming: Any, options: dict[str, Any], *, plain: bool) -> int:
    from agent_replay.paths import db_path
    from agent_replay.services.guard.decide import failure, undecidable
    from agent_replay.services.hook import enforce
    from agent_replay.services.hook.drain import drain_with_lock
    from agent_replay.services.hook.inbox import enqueue, log_error

    if not incoming.text.strip():
        log_error(folder, "empty payload on stdin; nothing recorded")
        return 0
    harness = incoming.harness
    if incoming.problem is not None:
        if not incoming.guarded:
            return 0
        log_error(folder, f"guard refused a payload: {incoming.problem}")
        return enforce.answer(undecidable(incoming.problem), harness, plain=plain).emit(
            sys.stdout, sys.stderr
        )
    if incoming.guarded:
        vanished = enforce.vanished_policies(folder, db_path(folder))
        if vanished is not None:  # before creating a fresh, empty store in its place
            log_error(folder, f"guard refused a call: {vanished.reason}")
            return enforce.answer(vanished, harness, plain=plain).emit(sys.stdout, sys.stderr)
    opened = True
    try:
        from agent_replay.store.db import open_store

        with open_store(db_path(folder), create=True):  # the local store (a spool for a URL)
            pass
    except Exception:  # noqa: BLE001 - decided below: a store that cannot open fails closed
        enforce.log_traceback(folder)
        opened = False
    reply = None
    queued = dict(options)
    if incoming.guarded:
        try:
            if opened:
                step = enforce.proposed_step(incoming.payload)
                evaluation = enforce.evaluate_file(db_path(folder), step)
            else:
                evaluation = failure("the store cannot be opened; see its log")
        except Exception as exc:  # noqa: BLE001 - deciding failed: fail closed
            enforce.log_traceback(folder)
            evaluation = failure(f"{type(exc).__name__}: {exc}")
        reply = enforce.answer(evaluation, harness, plain=plain)
        if evaluation.matched:
            queued["guard"] = enforce.guard_record(evaluation, reply, harness)
    if opened:
        try:
            enqueue(db_path(folder), incoming.text, queued)
            if queued.get("sync"):
                drain_with_lock(folder)
            else:
                from agent_replay.services.hook.inbox import ensure_drainer

                ensure_drainer(folder)  # the session's drainer records it
        except Exception as exc:  # noqa: BLE001 - capture never changes the answer
            log_error(folder, f"{type(exc).__name__}: {exc}")
    if reply is None:
        return 0
    return reply.emit(sys.stdout, sys.stderr)
