"""``agent-replay open FILE``: browse a bundle (or any store file) in the app, read-only.

Headless until the app starts: the file is checked and opened read-only here, and the app is
started through ``commands.tui.run_app`` (the one module allowed to import it).
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command(name="open")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("trace_id", metavar="[TRACE_ID]", required=False)
def command(file: Path, trace_id: str | None) -> int:
    """Open the bundle FILE in the app, read-only (optionally on TRACE_ID).

    A bundle comes from `agent-replay export ID... --format bundle --output FILE`. Nothing
    in it can be changed from here (forking, evaluating, annotating and deleting are refused
    with a message); to work on its traces, merge them into your store with
    `agent-replay ingest FILE`. Needs a terminal.

    \b
    Examples:
      agent-replay open handoff.bundle
      agent-replay open handoff.bundle trc_demo2
    """
    from agent_replay.commands.tui import run_app
    from agent_replay.errors import UsageError
    from agent_replay.services.bundle import open_bundle

    if not file.is_file():
        raise UsageError(f"no such file: {file}")
    open_bundle(file).close()  # a file that is no bundle is an error here, terminal or not
    return run_app(None, trace_id=trace_id, bundle=file)
