"""``agent-replay list``: one line a trace, newest first, with filters and sorts."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import POSITIVE, dir_option, json_option
from agent_replay.commands._filters import build_filter, filter_options


@click.command(name="list")
@filter_options
@click.option("--limit", type=POSITIVE, default=50, show_default=True)
@dir_option
@json_option
def command(
    status: str | None,
    agent: str | None,
    tag: str | None,
    since: str | None,
    session: str | None,
    label: str | None,
    sort: str,
    limit: int,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """List traces: id, agent, status, steps, tokens, duration, started. Forks are marked ⑂.

    \b
    Examples:
      agent-replay list
      agent-replay list --status failed --since 7d
      agent-replay list --agent support-bot --sort tokens --limit 10 --json
    """
    from agent_replay.commands._common import (
        STATUS_COLORS,
        Painter,
        emit_json,
        fmt_int,
        fmt_ms,
        fmt_time,
        open_current,
        print_table,
        safe,
        truncate,
        use_color,
    )
    from agent_replay.store.queries import list_traces

    filters = build_filter(status, agent, tag, since, session, label)
    with open_current(store_dir) as store:
        page = list_traces(store, filters, sort=sort, limit=limit)
    if as_json:
        emit_json([item.to_json() for item in page.items])
        return 0
    if not page.items:
        click.echo("no traces match", err=True)
        return 0
    paint = Painter(use_color())
    rows = []
    for item in page.items:
        data = item.data
        rows.append(
            [
                item.id + (" ⑂" if item.is_fork else ""),
                truncate(safe(data["agent_name"]), 32),
                paint(data["status"], STATUS_COLORS.get(data["status"])),
                fmt_int(item.step_count),
                fmt_int(data["total_tokens"]),
                fmt_ms(data["total_duration_ms"]),
                fmt_time(data["started_at"]),
            ]
        )
    print_table(
        ["ID", "AGENT", "STATUS", "STEPS", "TOKENS", "DURATION", "STARTED"],
        rows,
        right={3, 4, 5},
    )
    return 0
