"""``agent-replay otel serve``: a local OTLP/HTTP receiver recording into the store.

Headless: the services are imported inside the callback; never Textual or Rich.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import click

from agent_replay.commands._common import dir_option


@click.group(name="otel")
def command() -> None:
    """Receive OpenTelemetry (OTLP/HTTP) traces and logs.

    Point any OpenTelemetry exporter at `agent-replay otel serve` and its GenAI spans
    (OpenTelemetry GenAI conventions, OpenInference, OpenLLMetry) and the Claude Code and
    Gemini CLI telemetry events become agent-replay traces.

    \b
    Examples:
      agent-replay otel serve
      agent-replay otel serve --port 4318 --dir ./.agent-replay
    """


@command.command(name="serve")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=4318,
    show_default=True,
    help="TCP port of OTLP/HTTP (0 picks a free one and prints it).",
)
@click.option(
    "--grpc-port",
    type=click.IntRange(0, 65535),
    default=4317,
    show_default=True,
    help="TCP port of OTLP/gRPC (0 turns gRPC off).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but loopback exposes the receiver (no auth).",
)
@click.option(
    "--ack-timeout",
    type=click.FloatRange(min=0.1, max=600),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a request may wait for its data to be on disk before it gets 503 "
    "(retryable) instead of 200.",
)
@click.option("--no-redact", is_flag=True, help="Keep secrets in the recorded text.")
@dir_option
def serve(
    port: int,
    grpc_port: int,
    host: str,
    ack_timeout: float,
    no_redact: bool,
    store_dir: Path | None,
) -> int:
    """Run an OTLP receiver (HTTP and gRPC) that records what exporters send.

    Accepts POST /v1/traces and /v1/logs in OTLP/protobuf and OTLP/JSON, gzip-compressed or
    not (/v1/metrics is accepted and dropped), and the same over OTLP/gRPC (TraceService,
    LogsService; MetricsService dropped) on --grpc-port. Spans become steps of the trace of
    their agent root (invoke_agent / invoke_workflow; a span tree without one becomes a trace
    of its own); Claude Code and Gemini CLI log events become one trace per session.
    Redelivered batches add nothing; spans arriving out of order merge into one trace.
    A request is answered 200 only once its data is committed to the store (fsync'd) by the
    writer process, which commits whatever arrived meanwhile together; one that can't be
    made durable within --ack-timeout gets 503 with Retry-After, which exporters retry.
    Ctrl-C (or SIGTERM) stops the server after writing everything received. Exits 0 then, 1 if
    something could not be written.

    \b
    Exporters (OTLP/HTTP, base URL):
      export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318
      export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf      (or http/json)
    Exporters (OTLP/gRPC, most SDKs' default):
      export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317
      export OTEL_EXPORTER_OTLP_PROTOCOL=grpc
    Claude Code: CLAUDE_CODE_ENABLE_TELEMETRY=1 OTEL_LOGS_EXPORTER=otlp plus the two above.
    Gemini CLI (settings.json): "telemetry": {"enabled": true, "target": "local",
      "otlpEndpoint": "http://127.0.0.1:4318", "otlpProtocol": "http"}

    \b
    Examples:
      agent-replay otel serve
      agent-replay otel serve --port 0 --grpc-port 0 --dir /tmp/otel-store
      agent-replay otel serve --host 0.0.0.0      (reachable from other machines: warns)
    """
    from agent_replay.commands._common import open_or_create, redaction, resolve_store_dir
    from agent_replay.errors import UsageError
    from agent_replay.services.otel.server import GrpcBindError, OtelReceiver, is_loopback

    # The receiver allocates many short-lived, acyclic dicts (decoded spans, steps): with the
    # default thresholds the cyclic collector rescans the whole heap every few requests.
    # Freeze what is loaded now and collect less often; this process only serves.
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    folder = resolve_store_dir(store_dir)
    with open_or_create(folder) as store:
        db_file = store.path if store.path is not None else store.target  # a file or a URL

    def say(line: str) -> None:
        click.echo(line, err=True)
        sys.stderr.flush()

    receiver = OtelReceiver(
        db_file,
        host=host,
        port=port,
        grpc_port=grpc_port or None,
        ack_timeout_s=ack_timeout,
        redact=redaction(no_redact, store_dir),
        log=lambda line: say(f"otel serve: {line}"),
        error_log=folder / "logs" / "agent-replay.log",
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # Handlers first: a Ctrl-C from the moment the server listens stops it gracefully.
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except ValueError:  # not the main thread (embedded use): KeyboardInterrupt stops it
            break
    try:
        try:
            receiver.start()
        except GrpcBindError:
            raise UsageError(
                f"cannot listen on {host}:{grpc_port} for OTLP/gRPC: the port is in use or the "
                "address is not this machine's",
                hints=["pick another port with --grpc-port (0 turns gRPC off)"],
            ) from None
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                hints=["pick another port with --port (0 picks a free one)"],
            ) from None
        try:
            # Announce the server once it can write too: the writer process takes a moment to
            # start (requests arriving meanwhile only wait in its queue).
            deadline = time.monotonic() + 10.0
            while not receiver.writer.wait_ready(0.05):
                if stop.is_set() or time.monotonic() > deadline:
                    break
            if not is_loopback(host):
                say(
                    f"warning: listening on {host}, not loopback: anyone who can reach this "
                    "port can write traces into your store (there is no authentication)"
                )
            say(f"agent-replay otel serve: listening on {receiver.url} (POST /v1/traces, /v1/logs)")
            if receiver.grpc_port is not None:
                grpc_host = f"[{host.strip('[]')}]" if ":" in host else host
                say(f"  OTLP/gRPC on {grpc_host}:{receiver.grpc_port} (TraceService, LogsService)")
            say(f"  recording into {db_file}; Ctrl-C to stop")
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            say("stopping: writing everything received...")
            complete = receiver.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    stats, written = receiver.stats, receiver.writer.stats
    say(
        f"stopped: {stats.spans} span(s) and {stats.log_records} log record(s) accepted in "
        f"{stats.requests} request(s); {len(written.trace_ids)} trace(s) written"
        + (f"; {stats.rejected} span(s) rejected" if stats.rejected else "")
        + (f"; {stats.refused} request(s) refused" if stats.refused else "")
    )
    if not complete or written.build_errors:
        say(
            f"some data could not be written ({written.build_errors} build error(s)); "
            f"details in {folder / 'logs' / 'agent-replay.log'}"
        )
        return 1
    return 0
