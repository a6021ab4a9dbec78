"""``agent-replay redact``: apply today's redaction rules to what is already stored."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import dir_option, json_option
from agent_replay.commands._filters import which_options


@click.command(name="redact")
@click.option("--dry-run", is_flag=True, help="Count what would be redacted; change nothing.")
@which_options
@dir_option
@json_option
def command(
    dry_run: bool,
    status: str | None,
    agent: str | None,
    tag: str | None,
    since: str | None,
    session: str | None,
    label: str | None,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Redact secrets already in the store, with today's rules, and reclaim the space.

    For a store written before a rule existed (or with --no-redact): every text of the
    traces, steps, decisions, snapshots, evals and annotations (of the traces the filters
    select; all of them without filters, then also the spooled hook payloads and OTLP
    staging rows) is redacted as every writer redacts it, the full-text index rebuilt, and
    the freed pages given back (VACUUM, WAL truncated), so the old text is gone from the
    file. Prints the secrets found per kind.

    \b
    Examples:
      agent-replay redact --dry-run
      agent-replay redact
      agent-replay redact --since 7d --agent support-bot --json
    """
    from agent_replay.commands._common import emit_json, fmt_int, open_existing
    from agent_replay.commands._filters import build_filter
    from agent_replay.services.redact_store import scrub

    filters = build_filter(status, agent, tag, since, session, label)
    filtered = any(v is not None for v in (status, agent, tag, since, session, label))
    show = sys.stderr.isatty() and not as_json

    def progress(table: str, rows: int) -> None:
        if show:
            click.echo(f"\r  {table}: {rows:,} rows…", err=True, nl=False)

    with open_existing(store_dir) as store:
        ids = _trace_ids(store, filters) if filtered else None
        report = scrub(store, ids, dry_run=dry_run, progress=progress)
    if show:
        click.echo("", err=True)
    if as_json:
        emit_json(report.to_json())
        return 0
    total = sum(report.kinds.values())
    verb = "would redact" if dry_run else "redacted"
    if not total:
        click.echo("no secrets found")
        return 0
    rows = sum(report.rows.values())
    click.echo(f"{verb} {fmt_int(total)} secret(s) in {fmt_int(rows)} row(s):")
    for kind, count in sorted(report.kinds.items(), key=lambda item: (-item[1], item[0])):
        click.echo(f"  {kind:<20} {fmt_int(count)}")
    if report.file_bytes is not None:
        before, after = report.file_bytes
        click.echo(f"reclaimed space (vacuum): {before:,} -> {after:,} bytes")
    return 0


def _trace_ids(store: Any, filters: Any) -> list[str]:
    from agent_replay.store.queries import where_sql
    from agent_replay.store.transfer import trace_ids

    where, params = where_sql(store, filters)
    return trace_ids(store, where, params)
