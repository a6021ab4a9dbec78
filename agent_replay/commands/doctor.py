"""``agent-replay doctor``: check that capture works here, and say how to fix what doesn't."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_replay.commands._common import dir_option, emit_json, json_option

if TYPE_CHECKING:  # the services are imported when the command runs
    from agent_replay.services.doctor import Report


@click.command(name="doctor")
@dir_option
@json_option
def command(store_dir: Path | None, as_json: bool) -> int:
    """Check capture on this machine: for each harness found (Claude Code, Codex CLI,
    Gemini CLI), its version, whether agent-replay's hooks are registered (user and project
    settings) and, for Codex CLI, trusted, and the last payload the store received from it;
    for the store, payloads waiting to be recorded, the last logged error, and the records
    the importers skipped as unknown (a harness writing a newer format). Each problem comes
    with its fix.

    Exit 0 when nothing is wrong, 1 when a problem was found.

    \b
    Examples:
      agent-replay doctor
      agent-replay doctor --json
    """
    from agent_replay.commands._common import resolve_store_dir, store_target
    from agent_replay.services.doctor import diagnose
    from agent_replay.store.db import open_store

    folder = resolve_store_dir(store_dir)
    target = store_target(store_dir)
    exists = not isinstance(target, Path) or target.exists()
    if exists:
        with open_store(target, create=False) as store:
            report = diagnose(store, folder)
    else:
        report = diagnose(None, folder)
    if as_json:
        emit_json(report.to_json())
    else:
        _print(report, exists)
    return 0 if report.ok else 1


def _print(report: Report, store_exists: bool) -> None:
    from agent_replay.commands._common import safe

    for harness in report.harnesses:
        version = safe(harness.version) if harness.version else "version unknown"
        where = safe(harness.binary) if harness.binary else "not on PATH"
        click.echo(f"{harness.label}: {version} ({where})")
        for reg in harness.registrations:
            if reg.error:
                state = f"unreadable: {safe(reg.error)}"
            elif not reg.events:
                state = "no agent-replay hooks" if reg.exists else "no file"
            else:
                state = f"hooks for {len(reg.events)} events"
                if reg.enforce:
                    state += ", enforcing"
                if reg.trusted is not None:
                    state += f", trusted {reg.trusted}/{reg.handlers}"
            click.echo(f"  {reg.scope:<8} {safe(str(reg.path))}: {state}")
        last = harness.last_payload
        if last:
            click.echo(
                f"  last payload {safe(last['at'])}: {safe(last['last_step'] or '')} "
                f"(session {safe(last['session_id'])}, {last['trace_id']})"
            )
        elif store_exists:
            click.echo("  no payload received yet")
        for problem in harness.problems:
            click.echo(f"  ✗ {safe(problem.problem)}")
            click.echo(f"    fix: {safe(problem.fix)}")
    created = "" if store_exists else " (not created yet)"
    click.echo(f"store: {safe(report.store or '-')}{created}")
    if report.pending_payloads:
        click.echo(f"  {report.pending_payloads} hook payload(s) waiting to be recorded")
    if report.last_log_error:
        click.echo(f"  last log line: {safe(report.last_log_error)}")
    for problem in report.problems:
        click.echo(f"✗ {safe(problem.problem)}")
        click.echo(f"  fix: {safe(problem.fix)}")
    click.echo("ok" if report.ok else "problems found")
