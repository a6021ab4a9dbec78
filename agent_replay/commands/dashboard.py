"""``agent-replay dashboard [--refresh N]``: the app, opened on the dashboard."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import dir_option


@click.command(name="dashboard")
@click.option(
    "--refresh",
    type=click.FloatRange(min=0.5, max=3600),
    default=5.0,
    show_default=True,
    help="Seconds between refreshes.",
)
@dir_option
def command(refresh: float, store_dir: Path | None) -> int:
    """Open the app on the dashboard: totals, charts, drill-down into the trace list.

    \b
    Examples:
      agent-replay dashboard
      agent-replay dashboard --refresh 2
    """
    from agent_replay.commands.tui import run_app

    return run_app(store_dir, mode="dashboard", dashboard_refresh=refresh)
