"""``agent-replay setup claude|codex|gemini``: register agent-replay's hooks with a harness."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agent_replay.commands._common import emit_json, json_option

if TYPE_CHECKING:  # the services are imported when the command runs
    from agent_replay.services.setup import Change


@click.command(name="setup")
@click.argument("harness", type=click.Choice(["claude", "codex", "gemini"]))
@click.option(
    "--enforce",
    is_flag=True,
    help="Register `agent-replay hook --enforce` on the pre-tool event (guard policies).",
)
@click.option(
    "--user",
    "scope",
    flag_value="user",
    default=True,
    help="Your user settings (~/.claude, ~/.codex, ~/.gemini): every project. Default.",
)
@click.option(
    "--project",
    "scope",
    flag_value="project",
    help="This project's settings (.claude/, .codex/, .gemini/ in the current folder).",
)
@click.option(
    "--command",
    "hook_command",
    metavar="CMD",
    default=None,
    help="How the harness runs agent-replay (default: this agent-replay's absolute path, "
    "so a virtualenv off the harness's PATH still works).",
)
@click.option("--dry-run", is_flag=True, help="Print the change; write nothing.")
@click.option("--remove", is_flag=True, help="Take agent-replay's hooks out again.")
@json_option
def command(
    harness: str,
    enforce: bool,
    scope: str,
    hook_command: str | None,
    dry_run: bool,
    remove: bool,
    as_json: bool,
) -> int:
    """Register agent-replay's hooks in HARNESS's settings, for every event the recording
    uses (with --enforce, the pre-tool event decides calls against the guard policies).

    The settings are merged, not replaced: other hooks and settings stay as they are, and
    running it again changes nothing. Before a file changes, a copy is kept beside it
    (<file>.agent-replay-<time>.bak); the change is printed as a diff. --remove takes
    agent-replay's hooks out and leaves the rest.

    Codex CLI runs hooks only after you trust them: start `codex`, choose "Trust all and
    continue" at "Hooks need review" (or /hooks); `codex exec` never asks (trust them once
    interactively, or pass --dangerously-bypass-hook-trust). Untrusted, they are skipped
    silently. `agent-replay doctor` checks.

    Exit 0 on success, 2 on a usage error (a settings file that is not JSON is never
    rewritten).

    \b
    Examples:
      agent-replay setup claude
      agent-replay setup claude --enforce --project
      agent-replay setup codex --dry-run
      agent-replay setup codex --command "uvx agent-replay"
      agent-replay setup gemini --remove
    """
    from agent_replay.services import setup

    change, settings = setup.plan(
        harness, scope=scope, enforce=enforce, remove=remove, command=hook_command
    )
    if not dry_run:
        setup.apply(change, settings)
    if as_json:
        emit_json({**change.to_json(), "dry_run": dry_run})
        return 0
    _report(change, dry_run=dry_run, remove=remove)
    return 0


def _report(change: Change, *, dry_run: bool, remove: bool) -> None:
    from agent_replay.commands._common import safe

    label = change.harness.label
    where = safe(str(change.path))
    if not change.changed:
        state = "not registered" if remove else "already set up"
        click.echo(f"{label}: {state} in {where}; nothing to change")
    else:
        verb = "would update" if dry_run else "updated"
        click.echo(f"{label}: {verb} {where}")
        click.echo(safe(change.diff, multiline=True).rstrip("\n"))
        if change.backup is not None:
            click.echo(f"backup: {safe(str(change.backup))}")
    if change.events:
        enforce = f" ({change.harness.pre_tool} with --enforce)" if change.enforce else ""
        click.echo(f"agent-replay hook registered for {len(change.events)} events{enforce}")
    elif remove:
        click.echo("agent-replay's hooks are not registered there")
    for note in change.notes:
        click.echo("")
        click.echo(note)
