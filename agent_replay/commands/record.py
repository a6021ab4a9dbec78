"""``agent-replay record``: record a live JSONL event stream from stdin (native protocol v1, or a
harness's stream format), committing events as they arrive.

Headless: never imports Textual, Rich or an AI SDK.
"""

from __future__ import annotations

import gc
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import dir_option, emit_json, json_option, safe, split_tags

FORMATS = ("native", "codex-exec", "gemini-stream", "claude-stream")


@click.command(name="record")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="native",
    show_default=True,
    help="What stdin carries: agent-replay's native events, `codex exec --json`, "
    "`gemini -p --output-format stream-json` or `claude -p --output-format stream-json`.",
)
@click.option(
    "--agent-name",
    default=None,
    help="Agent name of traces whose events don't give one (default for the stream "
    "formats: codex, gemini-cli, claude-code).",
)
@click.option("--tags", default=None, help="Comma-separated tags to add to every trace.")
@click.option(
    "--leave-open",
    is_flag=True,
    help="Leave traces still open at the end of the stream running (default: timeout).",
)
@click.option("--no-redact", is_flag=True, help="Store secrets as they are (no redaction).")
@dir_option
@json_option
def command(
    fmt: str,
    agent_name: str | None,
    tags: str | None,
    leave_open: bool,
    no_redact: bool,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Record a JSONL event stream read from stdin, as it arrives.

    Native protocol v1 is one JSON object a line with "v": 1, a "type"
    (trace_start, step_start, step_end, step, decision, snapshot, trace_end)
    and the producer's "trace_id". Events are committed as they arrive, in
    transactions of at most 100 ms, so killing the recorder loses at most the
    last 100 ms of what it read. A trace still open when the stream ends is
    finalized as timeout (unless --leave-open). Secrets are redacted before
    anything is written (--no-redact turns it off).

    Unknown event types and fields are skipped with a warning on stderr (once
    per kind, counted at the end). Exit 0 when every line was recorded; 1 when
    any line was malformed (not a JSON event) or an event was rejected (e.g. an
    unknown trace_id); 2 on a usage error; 130 (or 128+signal) when interrupted,
    after committing what was read and finalizing the open traces.

    \b
    Examples:
      my-agent --emit-events | agent-replay record --tags nightly
      codex exec --json "fix the tests" | agent-replay record --format codex-exec
      gemini -p "summarize" --output-format stream-json | agent-replay record --format gemini-stream
      claude -p "hi" --output-format stream-json --verbose \\
        | agent-replay record --format claude-stream
      agent-replay record --json < events.jsonl
    """
    from agent_replay.commands._common import open_or_create, redaction
    from agent_replay.services.capture.events import EventEngine
    from agent_replay.services.capture.pump import FdReader, Interrupted, NativeSink, finish, pump

    # A batch holds thousands of short-lived, acyclic dicts (events, steps, rows): with the
    # default thresholds the cyclic collector rescans the whole heap every few hundred
    # events (a tenth of the CPU). Freeze what is loaded now and collect less often, as
    # `otel serve` does.
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)

    def warn(message: str) -> None:
        click.echo(f"agent-replay record: {safe(message)}", err=True)

    store = open_or_create(store_dir)
    engine = EventEngine(
        store,
        redact=redaction(no_redact, store_dir),
        tags=split_tags(tags),
        default_agent_name=agent_name,
        source_format=fmt,
        warn=warn,
    )
    if fmt == "native":
        sink: Any = NativeSink(engine)
    else:
        from agent_replay.services.capture.streams import make_sink

        sink = make_sink(fmt, engine, agent_name=agent_name)
    stdin_fd, release = _stdin_fd()
    reader = FdReader(stdin_fd)

    def on_signal(signum: int, frame: Any) -> None:
        reader.interrupted = signum
        if reader.waiting:
            raise Interrupted(signum)

    # Handlers can only be set from the main thread (an embedding app may call us from another).
    handled = [signal.SIGINT, signal.SIGTERM]
    in_main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, on_signal) for sig in handled} if in_main else {}
    try:
        pump(reader, sink)
    except Interrupted:
        pass  # waiting for input: nothing was in flight
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        release()
    report = finish(sink, leave_open=leave_open)
    store.close()

    if as_json:
        emit_json(report.as_json())
    else:
        _print_summary(report)
    if reader.interrupted is not None:
        click.echo("agent-replay record: interrupted; what was read is recorded", err=True)
        return 128 + reader.interrupted
    return 0 if report.ok else 1


def _stdin_fd() -> tuple[int, Callable[[], None]]:
    """stdin's file descriptor, read with ``os.read`` as events arrive. A stdin without one
    (an in-process test runner's buffer) is spooled to a temporary file first."""
    try:
        return sys.stdin.fileno(), lambda: None
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        data = getattr(sys.stdin, "buffer", sys.stdin).read()
        spool = tempfile.TemporaryFile()
        spool.write(data.encode() if isinstance(data, str) else data)
        spool.seek(0)
        return spool.fileno(), spool.close


def _print_summary(report: Any) -> None:
    """The human summary: one line on stdout, details of problems and warnings on stderr."""
    line = (
        f"recorded {report.events:,} event(s): {len(report.traces):,} trace(s), "
        f"{report.steps:,} step(s)"
    )
    if report.timed_out:
        line += f"; {len(report.timed_out):,} finalized as timeout"
    if report.left_open:
        line += f"; {len(report.left_open):,} left open"
    click.echo(line)
    if report.malformed:
        shown = ", ".join(where for where, _ in report.malformed_samples)
        more = " …" if report.malformed > len(report.malformed_samples) else ""
        click.echo(f"  {report.malformed:,} malformed line(s): {shown}{more}", err=True)
    if report.rejected:
        click.echo(f"  {report.rejected:,} event(s) rejected:", err=True)
        for where, reason in report.rejected_samples:
            click.echo(f"    {where}: {safe(reason)}", err=True)
    for kind, count in report.skipped.items():
        click.echo(f"  skipped {safe(kind)}: {count:,}×", err=True)
    if report.repairs:
        click.echo(f"  {report.repairs:,} value(s) repaired or dropped (lenient)", err=True)
