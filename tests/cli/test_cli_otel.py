"""``agent-replay otel serve`` as a real process: it prints where it listens, records what
exporters post, and on Ctrl-C (SIGINT) or SIGTERM writes everything it accepted before it
exits 0; a non-loopback host warns; a busy port is a usage error; it stays headless."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from captures import FIXTURES
from probe import AI_SDKS, TUI, probe

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

LISTENING = re.compile(r"listening on http://(\S+):(\d+) ")


def payloads() -> list[tuple[str, bytes, dict[str, str]]]:
    """Every fixture payload as (path, body, headers)."""
    out = []
    for file in sorted((FIXTURES / "otlp").iterdir()):
        headers = {
            "Content-Type": "application/x-protobuf" if file.suffix == ".pb" else "application/json"
        }
        if file.suffix == ".gz":
            headers["Content-Encoding"] = "gzip"
        out.append(
            ("/v1/logs" if "_logs" in file.name else "/v1/traces", file.read_bytes(), headers)
        )
    for harness in ("claude-code", "gemini-cli"):
        folder = FIXTURES / "harness" / harness / "otel" / "otlp"
        for line in (folder / "index.jsonl").read_text().splitlines():
            entry = json.loads(line)
            body = (folder / entry["file"]).read_bytes()
            out.append((entry["path"], body, {"Content-Type": "application/json"}))
    return out


class Server:
    """A running ``agent-replay otel serve`` process."""

    def __init__(self, store_dir: Path, *args: str) -> None:
        env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir)}
        if "--grpc-port" not in args:  # the default, 4317, is one port for all test workers
            args = ("--grpc-port", "0", *args)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agent_replay", "otel", "serve", "--port", "0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stderr is not None
        self.lines: list[str] = []
        while True:
            line = self.process.stderr.readline()
            if not line:
                raise AssertionError(f"the server exited: {''.join(self.lines)}")
            self.lines.append(line)
            match = LISTENING.search(line)
            if match:
                self.host, self.port = match.group(1), int(match.group(2))
                break

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, "".join(self.lines) + err


@pytest.fixture
def server(store_dir: Path) -> Iterator[Server]:
    running = Server(store_dir)
    yield running
    if running.process.poll() is None:
        running.process.kill()
        running.process.communicate()


def rows(store_dir: Path, sql: str) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(f"file:{store_dir / 'traces.db'}?mode=ro", uri=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_stopping_writes_everything_accepted(server: Server, store_dir: Path, sig: int) -> None:
    """Every fixture posted, then the signal right away: exit 0 and every accepted span and
    record is in the store, built into its trace."""
    statuses = [server.post(*p) for p in payloads()]
    assert set(statuses) == {200}
    code, err = server.stop(sig)
    assert code == 0, err
    assert "stopping: writing everything received" in err
    assert re.search(r"stopped: 78 span\(s\) and \d+ log record\(s\) accepted in 24 request", err)
    assert rows(store_dir, "SELECT COUNT(*) FROM otel_spans") == [(78,)]
    assert rows(store_dir, "SELECT COUNT(*) FROM traces") == [(29,)]
    sessions = dict(
        rows(
            store_dir,
            "SELECT agent_name, total_tokens FROM traces WHERE agent_name IN "
            "('claude-code', 'gemini-cli')",
        )
    )
    assert sessions == {"claude-code": 9290, "gemini-cli": 16230}


def test_listens_on_loopback_by_default_without_warning(server: Server) -> None:
    assert server.host == "127.0.0.1"
    code, err = server.stop()
    assert code == 0
    assert "warning" not in err


def test_a_non_loopback_host_warns(store_dir: Path) -> None:
    running = Server(store_dir, "--host", "0.0.0.0")
    code, err = running.stop(signal.SIGTERM)
    assert code == 0
    assert "warning: listening on 0.0.0.0, not loopback" in err


def free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return int(probe_socket.getsockname()[1])


def test_grpc_exports_land_and_the_port_is_announced(store_dir: Path) -> None:
    """The SDK's OTLP/gRPC exporter (what most SDKs default to) at --grpc-port: the spans are
    in the store after a graceful stop."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    port = free_port()
    running = Server(store_dir, "--grpc-port", str(port))
    assert running.process.stderr is not None  # the line after "listening on"
    assert f"OTLP/gRPC on 127.0.0.1:{port}" in running.process.stderr.readline()
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}", insecure=True, timeout=10)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("tests").start_as_current_span(
        "invoke_agent grpc_agent",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "grpc_agent"},
    ):
        pass
    provider.shutdown()
    code, err = running.stop()
    assert code == 0, err
    assert rows(store_dir, "SELECT agent_name FROM traces") == [("grpc_agent",)]


@pytest.mark.parametrize("option", ["--port", "--grpc-port"])
def test_a_busy_port_is_a_usage_error(store_dir: Path, option: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--port": "0", "--grpc-port": "0", option: str(port)}
        result = subprocess.run(
            [sys.executable, "-m", "agent_replay", "otel", "serve", *sum(ports.items(), ())],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env={**os.environ, "AGENT_REPLAY_DIR": str(store_dir)},
            timeout=60,
            check=False,
        )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert option in result.stderr


def test_no_redact_keeps_secrets(store_dir: Path) -> None:
    key = "sk-proj-" + "Z9y8" * 8
    span = {
        "traceId": "0" * 31 + "1",
        "spanId": "0" * 15 + "1",
        "name": "chat m",
        "startTimeUnixNano": "1800000000000000000",
        "endTimeUnixNano": "1800000001000000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.input.messages", "value": {"stringValue": f"use {key}"}},
        ],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    for flags, kept in (((), False), (("--no-redact",), True)):
        folder = store_dir / str(kept)
        running = Server(folder, *flags)
        assert running.post("/v1/traces", body, {"Content-Type": "application/json"}) == 200
        assert running.stop()[0] == 0
        (stored,) = rows(folder, "SELECT input FROM steps")
        assert (key in str(stored[0])) is kept
        staged = rows(folder, "SELECT data FROM otel_spans")
        assert (key in str(staged)) is kept  # the staging table is redacted too


SERVE_UNTIL_INTERRUPTED = """
import os, signal, threading, time
from agent_replay.cli import main

def interrupt_once_serving():
    # The server installs its handler once it listens: Ctrl-C then means "stop gracefully".
    while signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt_once_serving, daemon=True).start()
code = main(["otel", "serve", "--port", "0", "--grpc-port", "0"])
"""


def test_serving_never_imports_textual_rich_or_ai_sdks(store_dir: Path) -> None:
    """A serve that really ran (and stopped on SIGINT) left the TUI and AI SDKs unimported."""
    result = probe(SERVE_UNTIL_INTERRUPTED, banned=(*TUI, *AI_SDKS), store_dir=store_dir)
    assert (result.code, result.loaded) == (0, []), result.stderr
    assert "listening on" in result.stderr


def test_every_acknowledged_trace_survives_a_sigkill(store_dir: Path) -> None:
    """Clients post fresh traces and remember each 2xx; the server is SIGKILLed mid-load and
    started again: every acknowledged trace is in the store, built (0 lost)."""
    import threading
    import uuid

    def body_of(trace_id: str) -> bytes:
        spans = [
            {
                "traceId": trace_id,
                "spanId": f"{n:016x}",
                "name": "work",
                "kind": 1,
                "startTimeUnixNano": "1767261600000000000",
                "endTimeUnixNano": "1767261601000000000",
            }
            for n in (1, 2)
        ]
        request = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}
        return json.dumps(request).encode()

    server = Server(store_dir)
    acked: list[str] = []
    stop = threading.Event()

    def client() -> None:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
        while not stop.is_set():
            trace_id = uuid.uuid4().hex
            body = body_of(trace_id)
            try:
                connection.request(
                    "POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"}
                )
                response = connection.getresponse()
                response.read()
            except OSError:
                return  # the server is gone
            if response.status == 200:
                acked.append(trace_id)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        while len(acked) < 40 and server.process.poll() is None:
            threading.Event().wait(0.01)
        server.process.kill()
        server.process.communicate()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert len(acked) >= 40
    again = Server(store_dir)  # restarted: it opens (and maps) what is there
    code, _ = again.stop()
    assert code == 0
    stored = {r[0] for r in rows(store_dir, "SELECT otel_trace_id FROM traces")}
    assert [t for t in acked if t not in stored] == []


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (its writer), from every thread's ``children`` list."""
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as children:
                found += [int(child) for child in children.read().split()]
        except FileNotFoundError:
            continue  # a thread that just ended
    return found


def _peak_mb(pid: int) -> int:
    """A process's peak resident memory (``VmHWM``), in MB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    raise AssertionError(f"no VmHWM for {pid}")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_decompression_bombs_stay_bounded_and_others_are_answered(store_dir: Path) -> None:
    """Four concurrent gzip bodies just under the decompression cap (a 63 MiB attribute in
    each, 64 KB on the wire): they take turns (the others wait, or get a retryable 503), the
    receiver and its writer stay under 500 MB, small requests are answered meanwhile, and a
    stored giant value is capped to 1 MiB with its size and digest."""
    import gzip
    import threading

    def body(trace_id: str, value: str) -> bytes:
        span = {
            "traceId": trace_id,
            "spanId": "0000000000000001",
            "name": "chat",
            "kind": 1,
            "startTimeUnixNano": "1767261600000000000",
            "endTimeUnixNano": "1767261601000000000",
            "attributes": [{"key": "gen_ai.completion", "value": {"stringValue": value}}],
        }
        request = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "t"}, "spans": [span]}]}]}
        return json.dumps(request).encode()

    giant = 63 * 1024 * 1024
    bomb = gzip.compress(body("b" * 32, "x" * giant), 9)
    server = Server(store_dir, "--ack-timeout", "2")  # a bomb waiting its turn: 503 soon
    try:
        gzipped = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        statuses: list[int] = []
        bombs = [
            threading.Thread(
                target=lambda: statuses.append(server.post("/v1/traces", bomb, gzipped))
            )
            for _ in range(4)
        ]
        for thread in bombs:
            thread.start()
        plain = {"Content-Type": "application/json"}
        small = [server.post("/v1/traces", body(f"{n:032x}", "hi"), plain) for n in range(1, 4)]
        for thread in bombs:
            thread.join()
        assert small == [200, 200, 200]
        assert 200 in statuses and set(statuses) <= {200, 503}
        writers = _children(server.process.pid)
        peak = _peak_mb(server.process.pid) + sum(_peak_mb(pid) for pid in writers)
        assert peak < 500, peak
    finally:
        code, _ = server.stop()
    assert code == 0
    # The span's attributes land in its step's metadata: the giant one capped, kept whole
    # up to 1 MiB, with its original size and digest.
    [(kept,)] = rows(
        store_dir,
        "SELECT metadata FROM steps WHERE trace_id IN "
        f"(SELECT id FROM traces WHERE otel_trace_id = '{'b' * 32}')",
    )
    assert len(kept) < 2 * 1024 * 1024 and f"{giant} bytes, sha256:" in kept
