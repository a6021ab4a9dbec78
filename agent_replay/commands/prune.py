"""``agent-replay prune``: delete traces older than an age (retention), then reclaim space."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import dir_option, json_option
from agent_replay.commands._filters import STATUSES


@click.command(name="prune")
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE",
    help="Delete traces started before this: 30d, 12h, 2w, or a date (2026-01-01).",
)
@click.option(
    "--status",
    "statuses",
    type=click.Choice(STATUSES),
    multiple=True,
    help="Only traces with this status (repeatable; default: any but running).",
)
@click.option(
    "--keep-tagged",
    "keep_tags",
    multiple=True,
    metavar="TAG",
    help="Keep traces with this tag (repeatable).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be deleted; delete nothing.")
@dir_option
@json_option
def command(
    older_than: str,
    statuses: tuple[str, ...],
    keep_tags: tuple[str, ...],
    dry_run: bool,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Delete the traces started before --older-than, with their steps, decisions,
    snapshots, evals, tags and annotations, then give the space back.

    Running traces are kept unless --status running is given: a long session's trace
    started long ago and may still be written to.

    \b
    Examples:
      agent-replay prune --older-than 30d --dry-run
      agent-replay prune --older-than 90d --keep-tagged golden --keep-tagged incident
      agent-replay prune --older-than 7d --status completed --status timeout
    """
    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import emit_json, open_existing, parse_since
    from agent_replay.services.prune import prunable, remove

    cutoff = parse_since(older_than, SystemClock().now(), "--older-than")
    assert cutoff is not None
    show = sys.stderr.isatty() and not as_json

    def progress(done: int, total: int) -> None:
        if show:
            click.echo(f"\r  deleted {done:,}/{total:,} traces…", err=True, nl=False)

    with open_existing(store_dir) as store:
        ids = prunable(store, before_ms=cutoff, statuses=statuses, keep_tags=keep_tags)
        report = remove(store, ids, dry_run=dry_run, progress=progress)
    report.cutoff_ms = cutoff
    if show and ids and not dry_run:
        click.echo("", err=True)
    if as_json:
        import datetime as dt

        from agent_replay.trace.base import canonical_time

        when = dt.datetime.fromtimestamp(cutoff / 1000, dt.UTC)
        emit_json({**report.to_json(), "cutoff": canonical_time(when)})
    else:
        echo_report(report, listed=dry_run)
    return 0


def echo_report(report: Any, *, listed: bool) -> None:
    """What a delete or prune did (or would do), for people."""
    from agent_replay.commands._common import fmt_int

    counts = report.counts
    verb = "would delete" if report.dry_run else "deleted"
    if not report.ids:
        click.echo("nothing to delete", err=True)
        return
    if listed:
        for trace_id in report.ids[:50]:
            click.echo(f"  {trace_id}")
        if len(report.ids) > 50:
            click.echo(f"  … and {len(report.ids) - 50:,} more")
    click.echo(
        f"{verb} {fmt_int(counts.traces)} trace(s): {fmt_int(counts.steps)} steps, "
        f"{fmt_int(counts.decisions)} decisions, {fmt_int(counts.snapshots)} snapshots, "
        f"{fmt_int(counts.evals)} evals, {fmt_int(counts.tags)} tags, "
        f"{fmt_int(counts.annotations)} annotations"
    )
    reclaimed = report.reclaimed
    if reclaimed is not None and reclaimed.freed is not None and reclaimed.method != "none":
        click.echo(f"reclaimed {reclaimed.freed / 1_048_576:.1f} MB ({reclaimed.method})")
