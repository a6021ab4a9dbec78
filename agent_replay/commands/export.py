"""``agent-replay export``: traces as JSON or JSONL, streamed (memory stays flat); a golden
set; a bundle (one SQLite file to hand over); one trace as a self-contained HTML page."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, Any

import click

from agent_replay.commands._common import POSITIVE, dir_option
from agent_replay.commands._filters import build_filter, filter_options


@click.command(name="export")
@click.argument("trace_ids", metavar="[ID]...", nargs=-1)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "jsonl", "golden", "bundle", "html"]),
    default="jsonl",
    show_default=True,
    help="json: one array; jsonl: one trace a line; golden: a golden dataset for `check`; "
    "bundle: one file holding the traces (open it with `open`, merge it with `ingest`); "
    "html: one trace as a self-contained web page.",
)
@filter_options
@click.option("--limit", type=POSITIVE, default=None, help="At most this many.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here instead of stdout (atomically: complete or not at all).",
)
@dir_option
def command(
    trace_ids: tuple[str, ...],
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
    """Export full traces (steps, decisions, snapshots, evals, annotations) in the format
    ingest reads: the traces named by ID (ids or unique prefixes), else those the filters
    match.

    --format bundle writes one self-contained file (a SQLite store holding just those traces,
    redacted, mode 0600) to hand to a teammate: `agent-replay open F` browses it read-only,
    `agent-replay ingest F` merges it. --format html writes one trace as a single web page
    (inline CSS and JavaScript, nothing fetched) with its timeline, step details, tree and
    decisions. --format golden --label good builds a golden set from hand-approved runs.

    \b
    Examples:
      agent-replay export --output all.jsonl
      agent-replay export --format json --status failed --since 7d -o failed.json
      agent-replay export --tag nightly | gzip > nightly.jsonl.gz
      agent-replay export --format golden --tag golden --status completed -o golden.json
      agent-replay export --format golden --label good -o golden.json
      agent-replay export trc_demo2 trc_demo4 --format bundle --output handoff.bundle
      agent-replay export trc_demo2 --format html --output run.html
    """
    from agent_replay.commands._common import open_current
    from agent_replay.errors import UsageError
    from agent_replay.store.queries import iter_trace_json
    from agent_replay.trace.io import dumps_bytes

    if output is not None and not output.resolve().parent.is_dir():
        raise UsageError(f"--output {output}: directory {output.parent} does not exist")
    filters = build_filter(status, agent, tag, since, session, label)
    given = [status, agent, tag, since, session, label, limit]
    if trace_ids and any(value is not None for value in given):
        raise UsageError("give trace ids or filters (--status, --tag, …), not both")
    if fmt == "bundle":
        return _bundle(trace_ids, filters, sort, limit, output, store_dir)
    if fmt == "html":
        return _html(trace_ids, output, store_dir)
    if trace_ids and fmt == "golden":
        raise UsageError("--format golden takes filters (--label good, --tag …), not ids")
    if trace_ids:
        return _export_ids(trace_ids, fmt, output, store_dir)
    if fmt == "golden":  # run fingerprints for `check` (forks left out): services/golden.py
        from agent_replay.services.golden import export_golden

        with open_current(store_dir) as store:
            count = export_golden(store, filters, output, sort=sort, limit=limit)
        if count == 0:
            click.echo("warning: no runs matched; `check` refuses an empty golden set", err=True)
        if output is not None:
            click.echo(f"exported {count:,} golden run(s) to {output}", err=True)
        return 0
    with open_current(store_dir) as store:
        traces = iter_trace_json(store, filters, sort=sort, limit=limit)
        tmp: Path | None = None
        if output is None:
            stream: IO[bytes] = sys.stdout.buffer
        else:
            tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
            flags = os.O_CREAT | os.O_TRUNC | os.O_WRONLY
            stream = os.fdopen(os.open(tmp, flags, 0o600), "wb")  # private, like the store
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


def _resolve(store: Any, trace_ids: tuple[str, ...]) -> list[str]:
    """Full ids for ids or prefixes, each once, in the order given (all checked first)."""
    from agent_replay.store.trace_detail import resolve_trace_id

    return list(dict.fromkeys(resolve_trace_id(store, text) for text in trace_ids))


def _write_atomically(output: Path, data: bytes) -> None:
    """``data`` to ``output`` (0600), complete or not at all."""
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)


def _export_ids(trace_ids: tuple[str, ...], fmt: str, output: Path | None, store_dir: Any) -> int:
    """``export ID... --format json|jsonl``: those traces, in the order given."""
    from agent_replay.commands._common import open_current
    from agent_replay.store.trace_detail import trace_json
    from agent_replay.trace.io import dumps_bytes

    with open_current(store_dir) as store:
        traces = [trace_json(store, trace_id) for trace_id in _resolve(store, trace_ids)]
    if fmt == "json":
        data = dumps_bytes(traces) + b"\n"
    else:
        data = b"".join(dumps_bytes(trace) + b"\n" for trace in traces)
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    _write_atomically(output, data)
    click.echo(f"exported {len(traces):,} trace(s) to {output}", err=True)
    return 0


def _bundle(
    trace_ids: tuple[str, ...],
    filters: Any,
    sort: str,
    limit: int | None,
    output: Path | None,
    store_dir: Any,
) -> int:
    """``export ID... --format bundle --output F``."""
    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import open_current
    from agent_replay.errors import UsageError
    from agent_replay.services.bundle import export_bundle
    from agent_replay.store.queries import iter_trace_ids

    if output is None:
        raise UsageError("--format bundle needs --output FILE (a bundle is a database file)")
    with open_current(store_dir) as store:
        if trace_ids:
            ids = _resolve(store, trace_ids)
        else:
            ids = list(iter_trace_ids(store, filters, sort=sort, limit=limit))
        if not ids:
            raise UsageError("no traces match: a bundle needs at least one")
        report = export_bundle(store, ids, output, clock=SystemClock())
    click.echo(
        f"bundled {len(report.traces):,} trace(s), {report.steps:,} step(s) into {output} "
        f"({report.bytes / 1024:,.0f} KB); open it with: agent-replay open {output}",
        err=True,
    )
    return 0


def _html(trace_ids: tuple[str, ...], output: Path | None, store_dir: Any) -> int:
    """``export ID --format html [--output F.html]``."""
    from agent_replay.commands._common import open_current
    from agent_replay.errors import UsageError
    from agent_replay.services.html_page import render_page
    from agent_replay.store.trace_detail import trace_json

    if len(trace_ids) != 1:
        raise UsageError("--format html exports one trace: give its ID")
    with open_current(store_dir) as store:
        (trace_id,) = _resolve(store, trace_ids)
        page = render_page(trace_json(store, trace_id)).encode()
    if output is None:
        sys.stdout.buffer.write(page)
        sys.stdout.buffer.flush()
        return 0
    _write_atomically(output, page)
    click.echo(f"exported {trace_id} to {output} (open it in any browser)", err=True)
    return 0
