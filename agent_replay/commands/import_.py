"""``agent-replay import PATH``: Claude Code transcripts, Codex rollouts and Gemini CLI chat
recordings, one trace a session."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_replay.commands._common import dir_option, emit_json, json_option, safe, split_tags

# The importer's FORMATS, spelled out: commands import no services at module level.
FORMATS = ("claude-transcript", "codex-rollout", "gemini-chat")


@click.command(name="import")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="The files' format (default: detected per file from its first lines).",
)
@click.option("--tags", default=None, help="Comma-separated tags to add to every trace.")
@click.option("--no-redact", is_flag=True, help="Keep secrets as they are (default: redacted).")
@dir_option
@json_option
def command(
    path: Path,
    fmt: str | None,
    tags: str | None,
    no_redact: bool,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Import agent sessions from PATH: a Claude Code transcript, Codex rollout or Gemini CLI
    chat recording, or a folder of them (searched recursively, e.g. ~/.claude/projects,
    ~/.codex/sessions or ~/.gemini/tmp).

    Each session becomes one trace: prompts, replies (tokens counted once per API
    reply), thinking, tool calls with their results (failed ones marked), subagents nested
    under the call that spawned them, and the final answer. Sessions already in the store
    (same format and session id) are skipped, so importing a folder again adds only new
    sessions. Records the importer does not know are skipped and counted, never fatal.
    Secrets are redacted unless --no-redact.

    A trace is failed when its session ended on an error, timeout when the file ends
    mid-turn (interrupted, killed, or still running), completed otherwise.

    Exit 0 on success, 1 if a file could not be imported at all, 2 on a usage error.

    \b
    Examples:
      agent-replay import ~/.claude/projects
      agent-replay import ~/.codex/sessions --tags codex
      agent-replay import ~/.gemini/tmp
      agent-replay import ~/.claude/projects/-home-me-app/SESSION.jsonl --json
      agent-replay import rollout.jsonl --format codex-rollout --no-redact
    """
    from agent_replay.commands._common import open_or_create, redaction
    from agent_replay.errors import UsageError
    from agent_replay.services.capture.importer import import_path

    path = path.expanduser()
    if not path.exists():
        raise UsageError(
            f"no such file or folder: {path}",
            hints=["give a session .jsonl file or a folder such as ~/.claude/projects"],
        )
    show_progress = sys.stderr.isatty() and not as_json
    current = {"label": ""}

    def on_file(index: int, total: int, file: Path) -> None:
        current["label"] = f"file {index:,}/{total:,}"
        if show_progress:
            click.echo(f"\r\x1b[K  {current['label']}…", err=True, nl=False)

    def progress(steps: int) -> None:
        if show_progress:
            click.echo(f"\r\x1b[K  {current['label']}: {steps:,} steps…", err=True, nl=False)

    store = open_or_create(store_dir)
    try:
        report = import_path(
            store,
            path,
            fmt=fmt,
            tags=split_tags(tags),
            redact=redaction(no_redact, store_dir),
            on_file=on_file,
            progress=progress,
        )
    finally:
        if show_progress:
            click.echo("\r\x1b[K", err=True, nl=False)
        store.close()

    if as_json:
        emit_json(report.to_json())
    else:
        imported = [f for f in report.files if f.status == "imported"]
        for result in imported[:50]:
            click.echo(
                f"  {result.trace_id}  {result.trace_status:<9}  {result.steps:>6,} steps  "
                f"{safe(result.path)}"
            )
        if len(imported) > 50:
            click.echo(f"  … and {len(imported) - 50:,} more")
        if not report.files:
            click.echo(f"no session files (*.jsonl) under {safe(path)}")
        else:
            nothing_new = report.sessions == 0 and report.present and not report.failed
            click.echo(
                f"imported {report.sessions:,} session(s) ({report.steps:,} steps); "
                f"skipped {report.present:,} already present; "
                f"{report.unknown_records:,} unknown record(s) skipped"
                + (f"; {report.empty:,} empty file(s)" if report.empty else "")
                + (f"; ignored {report.ignored:,} other .jsonl file(s)" if report.ignored else "")
                + (" — nothing new to import" if nothing_new else "")
            )
        for failure in report.failed[:50]:
            click.echo(f"  failed {safe(failure.path)}: {safe(failure.error)}", err=True)
        if len(report.failed) > 50:
            click.echo(f"  … and {len(report.failed) - 50:,} more failures", err=True)
    return 1 if report.failed else 0
