"""``agent-replay run -- CMD...``: run a command as a traced child process.

Headless: never imports Textual, Rich or an AI SDK.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_replay.commands._common import dir_option, json_option, safe, split_tags


@click.command(
    name="run",
    context_settings={"allow_interspersed_args": False},
)
@click.option("--agent-name", default=None, help="The trace's agent name (default: the command).")
@click.option("--tags", default=None, help="Comma-separated tags to add to the trace.")
@click.option("--no-redact", is_flag=True, help="Store secrets as they are (no redaction).")
@dir_option
@json_option
@click.argument("cmd", nargs=-1, required=False, metavar="-- COMMAND [ARGS]...")
def command(
    agent_name: str | None,
    tags: str | None,
    no_redact: bool,
    store_dir: Path | None,
    as_json: bool,
    cmd: tuple[str, ...],
) -> int:
    """Run COMMAND and record it as a trace, whether or not it is instrumented.

    The trace is created before the command starts (status running, input the
    command line, metadata argv and cwd). The command gets AGENT_REPLAY_DIR,
    AGENT_REPLAY_TRACE_ID (the trace's id) and AGENT_REPLAY_EVENTS, a file it
    may append native protocol v1 events to (see `agent-replay record --help`);
    they are recorded live, and events without a trace_id go to this trace.
    Its stdin, stdout and stderr are its own, untouched. On a terminal, `run`
    ends with the id of the trace it wrote on stderr; --json prints, after the
    command's own output, one JSON object on stdout with "trace_id", "traces"
    (every trace recorded, the command's own included), "status", "error",
    "exit_status" and the events file's "events" summary.

    SIGTERM and SIGHUP sent to `run` are forwarded to the command, and so is
    SIGINT unless it came from the terminal, which already delivered it to the
    command. When the command exits the trace is finalized: exit 0 ->
    completed; non-zero -> failed "exited with code N"; killed -> failed
    "killed by signal SIGKILL"; metadata gets exit_code or signal and
    duration_ms.

    Exit status: the command's own: its exit code, or 128+N when a signal N
    killed it (137 for SIGKILL), as a shell reports it; 127 when the command
    is not found and 126 when it can't be executed (the trace is then
    finalized as failed); 2 for a usage error (e.g. no command).

    \b
    Examples:
      agent-replay run -- python my_agent.py --task refund
      agent-replay run --agent-name support-bot --tags nightly -- ./agent.sh
      agent-replay run -- codex exec "fix the failing test"
      agent-replay run --json -- ./agent.sh | tail -n 1 | jq -r .trace_id
    """
    if not cmd:
        raise click.UsageError("no command to run: agent-replay run [OPTIONS] -- COMMAND [ARGS]...")
    from agent_replay.commands._common import redaction, resolve_db_url, resolve_store_dir
    from agent_replay.services.capture.run import EXIT_NOT_FOUND, run_traced

    def warn(message: str) -> None:
        click.echo(f"agent-replay run: {safe(message)}", err=True)

    outcome = run_traced(
        cmd,
        store_dir=resolve_store_dir(store_dir),
        agent_name=agent_name,
        tags=split_tags(tags),
        redact=redaction(no_redact, store_dir),
        warn=warn,
        db_url=resolve_db_url(),
    )
    if outcome.returncode is None:
        warn(outcome.error or "the command could not be started")
        if outcome.exit_status == EXIT_NOT_FOUND:
            click.echo("  hint: check the command's name and $PATH", err=True)
    report = outcome.report
    if not report.ok:
        warn(
            f"{report.malformed:,} malformed line(s) and {report.rejected:,} rejected event(s) "
            f"in the events file; kept at {outcome.events_file}"
        )
    state = f"failed: {outcome.error}" if outcome.error else "completed"
    if sys.stderr.isatty():
        warn(f"recorded {outcome.trace_id} ({safe(state)})")
    if as_json:
        from agent_replay.trace.io import dumps_bytes

        traces = [outcome.trace_id, *(t for t in report.traces if t != outcome.trace_id)]
        summary = {
            "ok": outcome.exit_status == 0 and report.ok,
            "trace_id": outcome.trace_id,
            "traces": traces,
            "status": "failed" if outcome.error else "completed",
            "error": outcome.error,
            "exit_status": outcome.exit_status,
            "events": report.as_json(),
        }
        # One line: it follows the command's own output, and `tail -n 1` finds it.
        sys.stdout.flush()
        click.echo(dumps_bytes(summary).decode())
    return outcome.exit_status
