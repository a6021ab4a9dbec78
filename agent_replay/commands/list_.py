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
    from agent_replay.commands._common import open_current
    from agent_replay.commands.list_text import write_list
    from agent_replay.store.queries import list_traces

    filters = build_filter(status, agent, tag, since, session, label)
    with open_current(store_dir) as store:
        page = list_traces(store, filters, sort=sort, limit=limit)
    write_list(page, as_json)
    return 0
