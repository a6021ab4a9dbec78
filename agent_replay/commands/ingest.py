"""``agent-replay ingest FILE|-``: load traces, all-or-nothing per trace, with a summary."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click

from agent_replay.commands._common import dir_option, emit_json, json_option, safe, split_tags
from agent_replay.errors import UsageError

# How many ingested trace ids the text summary lists (``--json`` gives them all).
SHOWN_IDS = 20


def _detect_format(path: str, head: bytes) -> str:
    """The format from the extension, else from the content: an array, or an object that spans
    several lines, is a JSON document; a first line that parses alone means JSONL."""
    lower = path.lower()
    if lower.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if lower.endswith(".json"):
        return "json"
    stripped = head.lstrip()
    if stripped.startswith(b"["):
        return "json"
    first_line = stripped.split(b"\n", 1)[0]
    from agent_replay.trace.io import loads

    try:
        loads(first_line)
        return "jsonl"
    except ValueError:
        return "json"


class _Peeked:
    """A byte stream with its first lines read ahead (to sniff the format)."""

    def __init__(self, stream: IO[bytes], head: bytes) -> None:
        self.stream = stream
        self.head = head

    def __iter__(self) -> Iterator[bytes]:
        yield from self.head.splitlines(keepends=True)
        yield from self.stream

    def read(self) -> bytes:
        return self.head + self.stream.read()


def _stored_ids(store_dir: Path | None) -> Any:
    """For ``--dry-run``: a lookup of ids already stored, read without writing anything
    (``None`` when there is no store, or it needs a migration a dry run must not apply)."""
    from agent_replay.commands._common import store_target
    from agent_replay.errors import StoreError
    from agent_replay.store.db import is_db_url, open_store
    from agent_replay.store.migrations import pending
    from agent_replay.store.writes import existing_trace_ids

    target = store_target(store_dir)  # the local file, or a team store's URL
    if not is_db_url(target) and not target.exists():
        return None
    try:
        store = open_store(target, create=False, migrate=False)
    except StoreError as exc:
        if is_db_url(target) and exc.message.startswith("no agent-replay store"):
            return None  # no team store there yet (a server that can't be reached raises)
        raise
    if pending(store.db):
        store.close()
        return None
    return lambda ids: existing_trace_ids(store, ids)


def _merge(path: Path, dry_run: bool, store_dir: Path | None, as_json: bool) -> int:
    """``ingest BUNDLE``: the bundle's traces the store does not hold yet."""
    from agent_replay.commands._common import open_or_create
    from agent_replay.services.bundle import merge_bundle

    store = None if dry_run else open_or_create(store_dir)
    known = _stored_ids(store_dir) if dry_run else None
    try:
        report = merge_bundle(store, path, dry_run=dry_run, known_ids=known)
    finally:
        if store is not None:
            store.close()
    ok = not report.rejected
    if as_json:
        emit_json(
            {
                "ok": ok,
                "dry_run": dry_run,
                "bundle": str(path),
                "ingested": report.ingested,
                "present": report.present,
                "steps": report.steps,
                "rejected": [
                    {
                        "where": r.where,
                        "reason": r.reason,
                        "problems": [{"path": p, "message": m} for p, m in r.problems],
                    }
                    for r in report.rejected
                ],
            }
        )
        return 0 if ok else 1
    verb = "would ingest" if dry_run else "ingested"
    click.echo(
        f"{verb} {len(report.ingested):,} trace(s), {report.steps:,} step(s) from the bundle"
        + (f"; {len(report.present):,} already present" if report.present else "")
        + (f"; rejected {len(report.rejected):,}" if report.rejected else "")
    )
    for rejection in report.rejected[:50]:
        click.echo(f"  rejected {safe(rejection.where)}: {safe(rejection.reason)}", err=True)
        for where, message in rejection.problems:
            click.echo(f"    {safe(where) or '(trace)'}: {safe(message)}", err=True)
    return 0 if ok else 1


def _items(source: Any, fmt: str) -> Iterator[tuple[str, Any]]:
    from agent_replay.trace.io import iter_json_document, iter_jsonl

    if fmt == "jsonl":
        for number, obj in iter_jsonl(source):
            yield f"line {number}", obj
    else:
        for number, obj in iter_json_document(source):
            yield ("file" if number == 0 else f"trace {number}"), obj


@click.command(name="ingest")
@click.argument("file", metavar="FILE|-")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "jsonl"]),
    default=None,
    help="Input format (default: from the extension, else detected).",
)
@click.option("--tags", default=None, help="Comma-separated tags to add to every trace.")
@click.option("--dry-run", is_flag=True, help="Validate only; write nothing (not even the store).")
@click.option("--no-redact", is_flag=True, help="Store secrets as they are (default: redacted).")
@dir_option
@json_option
def command(
    file: str,
    fmt: str | None,
    tags: str | None,
    dry_run: bool,
    no_redact: bool,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Load traces from FILE (JSON: one trace or an array; JSONL: one trace a line; a bundle
    from `export --format bundle`), or - for stdin.

    Secrets (API keys, tokens, passwords, private keys) are redacted before anything is
    written, unless --no-redact. Each trace is validated strictly and written
    all-or-nothing; invalid traces are reported with every problem and its path, and the
    rest still load. Exit 1 if any trace was rejected. A bundle is merged: its traces the
    store already holds are left as they are (reported as present), so merging it twice
    adds nothing.

    \b
    Examples:
      agent-replay ingest traces.jsonl --tags nightly,prod
      agent-replay export --format jsonl | agent-replay ingest - --dir other/
      agent-replay ingest run.json --dry-run
      agent-replay ingest failing-run.bundle
    """
    from agent_replay.commands._common import open_or_create, redaction
    from agent_replay.services.ingest import ingest_many

    if file != "-" and fmt is None:
        from agent_replay.services.bundle import is_bundle

        if is_bundle(Path(file)):
            if tags:
                raise UsageError("--tags does not apply to a bundle (its traces keep their tags)")
            return _merge(Path(file), dry_run, store_dir, as_json)
    if file == "-":
        raw: IO[bytes] = sys.stdin.buffer
        name = "<stdin>"
    else:
        path = Path(file)
        if not path.is_file():
            raise UsageError(f"no such file: {file}")
        raw = path.open("rb")
        name = file
    try:
        # The first non-blank line decides (a JSONL line can be far longer than any buffer).
        head = b""
        if fmt is None:
            while not head.strip():
                line = raw.readline()
                if not line:
                    break
                head += line
        chosen = fmt or _detect_format(name if file != "-" else "", head)
        source = _Peeked(raw, head)
        show_progress = sys.stderr.isatty() and not as_json

        def progress(traces: int, steps: int) -> None:
            if show_progress:
                click.echo(f"\r  {traces:,} traces, {steps:,} steps…", err=True, nl=False)

        store = None if dry_run else open_or_create(store_dir)
        known = _stored_ids(store_dir) if dry_run else None
        report = ingest_many(
            store,
            _items(source, chosen),
            tags=split_tags(tags),
            dry_run=dry_run,
            progress=progress,
            known_ids=known,
            redact=redaction(no_redact, store_dir),
        )
        if show_progress and report.ingested:
            click.echo("", err=True)
    finally:
        if raw is not sys.stdin.buffer:
            raw.close()

    ok = not report.rejected
    if as_json:
        emit_json(
            {
                "ok": ok,
                "dry_run": dry_run,
                "ingested": report.ingested,
                "steps": report.steps,
                "rejected": [
                    {
                        "where": r.where,
                        "reason": r.reason,
                        "problems": [{"path": p, "message": m} for p, m in r.problems],
                    }
                    for r in report.rejected
                ],
            }
        )
    else:
        verb = "would ingest" if dry_run else "ingested"
        click.echo(
            f"{verb} {len(report.ingested):,} trace(s), {report.steps:,} step(s)"
            + (f"; rejected {len(report.rejected):,}" if report.rejected else "")
        )
        for trace_id in report.ingested[:SHOWN_IDS]:
            click.echo(f"  {trace_id}")
        if len(report.ingested) > SHOWN_IDS:
            more = len(report.ingested) - SHOWN_IDS
            click.echo(f"  … and {more:,} more (--json lists every id)")
        for rejection in report.rejected[:50]:
            click.echo(f"  rejected {rejection.where}:", err=True)
            if rejection.problems:
                for where, message in rejection.problems:
                    click.echo(f"    {safe(where) or '(trace)'}: {safe(message)}", err=True)
            else:
                click.echo(f"    {safe(rejection.reason)}", err=True)
        if len(report.rejected) > 50:
            click.echo(f"  … and {len(report.rejected) - 50} more", err=True)
    return 0 if ok else 1
