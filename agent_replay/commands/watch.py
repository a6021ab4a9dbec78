"""``agent-replay watch [--session S] [--agent A]``: the app, opened on the live watch.

Textual is imported only inside the callback (it costs ~200 ms; headless commands never pay).
"""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import dir_option


@click.command(name="watch")
@click.option("--session", default=None, help="Only traces of this session id.")
@click.option("--agent", default=None, help="Only traces of this agent name.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1, max=10.0),
    default=0.5,
    show_default=True,
    help="Seconds between polls of the store.",
)
@dir_option
def command(session: str | None, agent: str | None, interval: float, store_dir: Path | None) -> int:
    """Watch running traces live: steps appear as the store records them.

    Running traces are listed first, then the ones that finished last, each with its agent,
    status, steps, tokens and last activity. The selected trace's steps stream in on the
    right, errors in red and blocked guard checks in yellow; the view follows the newest
    step until you move up (f toggles following). Enter opens the trace's timeline.

    Record into the same store from another terminal (`agent-replay run -- CMD`, the hook,
    or the TraceRecorder SDK). Needs a terminal: without one it prints help and exits 2.

    \b
    Examples:
      agent-replay watch
      agent-replay watch --session 4f1c2d9e
      agent-replay watch --agent support-bot --interval 1
    """
    from agent_replay.commands.tui import run_app
    from agent_replay.store.live import LiveFilter

    return run_app(
        store_dir,
        mode="watch",
        watch_filter=LiveFilter(session=session, agent=agent),
        watch_interval=interval,
    )
