"""``agent-replay push``: copy local traces to a team store (PostgreSQL), idempotently."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_replay.commands._common import dir_option, json_option
from agent_replay.commands._filters import build_filter, which_options


@click.command(name="push")
@click.option(
    "--to",
    "to_url",
    metavar="URL",
    default=None,
    help="The team store: postgresql://USER@HOST:PORT/DB[?schema=NAME] (default: --db-url, "
    "else $AGENT_REPLAY_DB_URL). A store directory works too.",
)
@click.option("--no-redact", is_flag=True, help="Copy rows as stored (default: redacted again).")
@which_options
@dir_option
@json_option
def command(
    to_url: str | None,
    no_redact: bool,
    status: str | None,
    agent: str | None,
    tag: str | None,
    since: str | None,
    session: str | None,
    label: str | None,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Copy traces from the local store (--dir, else the nearest .agent-replay/) to a team store.

    Idempotent by trace id: pushing again adds nothing, and a trace that changed since its
    last push (it grew, ended or was evaluated) is updated; evaluations made on the team
    store are kept. Hook payloads spooled while the team store was unreachable are
    delivered first. Every copied row is redacted with today's rules on the way (unless
    --no-redact). Progress goes to stderr.

    \b
    Examples:
      agent-replay push --to postgresql://ci@db.internal/agents
      AGENT_REPLAY_DB_URL=postgresql://db.internal/agents agent-replay push --since 7d
      agent-replay push --to postgresql://db.internal/agents?schema=team_a --tag nightly
    """
    from agent_replay.commands._common import (
        emit_json,
        fmt_int,
        redaction,
        resolve_db_url,
        resolve_store_dir,
        safe,
    )
    from agent_replay.errors import UsageError
    from agent_replay.paths import db_path
    from agent_replay.services.hook.drain import DrainReport, drain_with_lock
    from agent_replay.services.push import push
    from agent_replay.store.db import is_db_url, open_store

    target_ref = (to_url or "").strip() or resolve_db_url()
    if not target_ref:
        raise UsageError(
            "push needs a team store: --to URL, --db-url URL or $AGENT_REPLAY_DB_URL",
            hints=["e.g. agent-replay push --to postgresql://USER@HOST:5432/DB"],
        )
    folder = resolve_store_dir(store_dir)
    filters = build_filter(status, agent, tag, since, session, label)
    show = sys.stderr.isatty() and not as_json
    spooled = DrainReport()
    with open_store(db_path(folder), create=False) as source:
        from agent_replay.services.hook.drain import pending_count

        if pending_count(source):  # hook payloads spooled for a team store: deliver them
            drain_with_lock(folder, report=spooled)
        target_path = target_ref if is_db_url(target_ref) else Path(target_ref)
        with open_store(target_path, create=True) as target:

            def progress(done: int, total: int) -> None:
                if show:
                    click.echo(f"\r  pushing {done:,}/{total:,} traces…", err=True, nl=False)

            report = push(
                source,
                target,
                filters,
                progress=progress,
                redact=redaction(no_redact, store_dir),
            )
    if show:
        click.echo("", err=True)
    if as_json:
        emit_json(
            {
                **report.to_json(),
                "spooled": {"delivered": spooled.delivered, "left": spooled.stuck},
            }
        )
        return 0
    if spooled.delivered or spooled.stuck:
        left = f", {fmt_int(spooled.stuck)} still spooled" if spooled.stuck else ""
        click.echo(f"delivered {fmt_int(spooled.delivered)} spooled hook payload(s){left}")
        for label, error in spooled.unreachable.items():
            click.echo(f"  {safe(label)}: {safe(error)}", err=True)
    click.echo(
        f"pushed {fmt_int(len(report.new))} new and {fmt_int(len(report.updated))} updated "
        f"trace(s) ({fmt_int(report.steps)} steps) to {safe(report.target)}; "
        f"{fmt_int(report.unchanged)} unchanged"
    )
    return 0
