"""``agent-replay tui [TRACE_ID]`` and ``agent-replay dashboard``: the full-screen app.

Textual is imported only inside the callbacks (it costs ~200 ms; headless commands never pay).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import dir_option
from agent_replay.errors import EXIT_USAGE


def _served_in_a_browser() -> bool:
    """Whether this process is the app behind ``agent-replay web`` (textual-serve starts it with
    Textual's web driver, talking over pipes rather than a terminal)."""
    return "web_driver" in os.environ.get("TEXTUAL_DRIVER", "")


def run_app(
    store_dir: Path | None,
    *,
    trace_id: str | None = None,
    mode: str = "traces",
    bundle: Path | None = None,
    **app_options: Any,
) -> int:
    """Open the app on the store (creating an empty one, which shows how to load data), or on
    a ``bundle`` file, read-only (``agent-replay open``).

    ``app_options`` go to ``make_app`` (``dashboard_refresh``, ``watch_filter``, ...).
    """
    ctx = click.get_current_context()
    if not (sys.stdin.isatty() and sys.stdout.isatty()) and not _served_in_a_browser():
        root = ctx.find_root()
        click.echo(root.get_help())
        click.echo("\nerror: the app needs a terminal; use a subcommand instead", err=True)
        return EXIT_USAGE
    from agent_replay.commands._common import open_or_create, store_label

    if bundle is not None:
        from agent_replay.services.bundle import open_bundle

        store = open_bundle(bundle)
        label = f"{bundle.name} (read-only)"
    else:
        store = open_or_create(store_dir)
        label = store_label(store_dir)  # the directory, or the team store's URL (masked)
    if trace_id is not None:
        from agent_replay.store.trace_detail import resolve_trace_id

        trace_id = resolve_trace_id(store, trace_id)
    from agent_replay.app import make_app  # deferred: Textual, TUI only

    app = make_app(
        store, initial_trace=trace_id, initial_mode=mode, store_label=label, **app_options
    )
    return int(app.run() or 0)


@click.command(name="tui")
@click.argument("trace_id", metavar="[TRACE_ID]", required=False)
@dir_option
def command(trace_id: str | None, store_dir: Path | None) -> int:
    """Open the full-screen app (the same as running agent-replay with no arguments).

    With TRACE_ID (or a unique prefix), open that trace's step timeline directly.
    Needs a terminal: without one it prints help and exits 2.

    \b
    Examples:
      agent-replay tui
      agent-replay tui trc_demo2
    """
    return run_app(store_dir, trace_id=trace_id)
