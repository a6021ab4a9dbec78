"""``agent-replay export``: traces as JSON or JSONL, streamed (memory stays flat)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO

import click

from agent_replay.commands._common import dir_option
from agent_replay.commands._filters import build_filter, filter_options


@click.command(name="export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "jsonl", "golden"]),
    default="jsonl",
    show_default=True,
    help="json: one array; jsonl: one trace a line; golden: a golden dataset for `check`.",
)
@filter_options
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here instead of stdout (atomically: complete or not at all).",
)
@dir_option
def command(
    fmt: str,
    status: str | None,
    agent: str | None,
    tag: str | None,
    since: str | None,
    session: str | None,
    label: str | None,
    sort: str,
    limit: int | None,
    output: Path | None,
    store_dir: Path | None,
) -> int:
    """Export full traces (steps, decisions, snapshots, evals) in the format ingest reads.

    \b
    Examples:
      agent-replay export --output all.jsonl
      agent-replay export --format json --status failed --since 7d -o failed.json
      agent-replay export --tag nightly | gzip > nightly.jsonl.gz
      agent-replay export --format golden --tag golden --status completed -o golden.json
    """
    from agent_replay.commands._common import open_existing
    from agent_replay.errors import UsageError
    from agent_replay.store.queries import iter_trace_json
    from agent_replay.trace.io import dumps_bytes

    if output is not None and not output.resolve().parent.is_dir():
        raise UsageError(f"--output {output}: directory {output.parent} does not exist")
    filters = build_filter(status, agent, tag, since, session, label)
    if fmt == "golden":  # run fingerprints for `check` (forks left out): services/golden.py
        from agent_replay.services.golden import export_golden

        with open_existing(store_dir) as store:
            count = export_golden(store, filters, output, sort=sort, limit=limit)
        if count == 0:
            click.echo("warning: no runs matched; `check` refuses an empty golden set", err=True)
        if output is not None:
            click.echo(f"exported {count:,} golden run(s) to {output}", err=True)
        return 0
    with open_existing(store_dir) as store:
        traces = iter_trace_json(store, filters, sort=sort, limit=limit)
        tmp: Path | None = None
        if output is None:
            stream: IO[bytes] = sys.stdout.buffer
        else:
            tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
            stream = tmp.open("wb")
        count = 0
        progress = sys.stderr.isatty() and output is not None
        try:
            if fmt == "json":
                stream.write(b"[")
            for trace in traces:
                if fmt == "json":
                    stream.write((b",\n" if count else b"\n") + dumps_bytes(trace))
                else:
                    stream.write(dumps_bytes(trace) + b"\n")
                count += 1
                if progress and count % 1000 == 0:
                    click.echo(f"\r  {count:,} traces…", err=True, nl=False)
            if fmt == "json":
                stream.write(b"\n]\n" if count else b"]\n")
            stream.flush()
            if tmp is not None and output is not None:
                stream.close()
                os.replace(tmp, output)
                tmp = None
        finally:
            if tmp is not None:
                stream.close()
                tmp.unlink(missing_ok=True)
    if output is not None:
        click.echo(f"exported {count:,} trace(s) to {output}", err=True)
    return 0
