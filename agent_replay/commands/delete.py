"""``agent-replay delete``: remove traces with everything attached, then reclaim space."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import dir_option, json_option


@click.command(name="delete")
@click.argument("trace_ids", metavar="ID...", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Show what would be deleted; delete nothing.")
@dir_option
@json_option
def command(
    trace_ids: tuple[str, ...], dry_run: bool, store_dir: Path | None, as_json: bool
) -> int:
    """Delete traces by id (or unique prefix): their steps, decisions, snapshots, evals, tags
    and annotations go with them. Forks of a deleted trace are traces of their own and stay.

    Every id is resolved before anything is deleted: an unknown or ambiguous one deletes
    nothing. Freed space is given back to the file system (SQLite) or vacuumed (PostgreSQL).

    \b
    Examples:
      agent-replay delete trc_abc123
      agent-replay delete abc def --dry-run
      agent-replay list --status failed --json | jq -r '.[].id' | xargs agent-replay delete
    """
    from agent_replay.commands._common import emit_json, open_existing
    from agent_replay.commands.prune import echo_report
    from agent_replay.services.prune import remove, resolve_ids

    with open_existing(store_dir) as store:
        ids = resolve_ids(store, trace_ids)
        report = remove(store, ids, dry_run=dry_run)
    if as_json:
        emit_json(report.to_json())
    else:
        echo_report(report, listed=True)
    return 0
