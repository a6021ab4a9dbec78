"""OTLP receiver throughput: `agent-replay otel serve` against baselines, side by side.

Budget (DESIGN.md, "Performance budgets"): at least 5,000 spans/s landed in the store, with
every accepted span landing.

What runs:
1. Requests: the trace payloads of ``tests/fixtures/otlp`` (GenAI current and deprecated forms,
   OpenInference, OpenLLMetry, openai-v2; protobuf, JSON and gzip-compressed JSON), cycled, each
   copy with fresh trace and span ids (so every request is new data, built into new traces).
   All bodies are made before timing.
2. For 1 and 4 concurrent clients (threads, one keep-alive connection each, speaking HTTP/1.1
   by hand unless ``--client http.client``: see ``CLIENT``), ``--runs`` times:
   - ours: the real CLI, ``agent-replay otel serve --port 0`` in a fresh store (it announces
     itself once its writer process is up); the clients post every request; "accepted" is
     spans / time until the last response; "landed" is spans / time until the store holds
     every span, built into its trace (polled read-only, cheaply: see ``wait_landed``); "CPU"
     is the CPU time the server and its writer process used meanwhile, per span (``/proc``);
   - baseline: the same clients against a stdlib ``ThreadingHTTPServer`` (HTTP/1.1 keep-alive)
     whose handler reads the body and answers 200 — the transport's ceiling;
   - durable: the same server committing each body to SQLite (WAL, ``synchronous=FULL``)
     before answering — what durable acknowledgement alone costs on this disk.
3. The same with only the protobuf payloads, then only the JSON ones (4 clients): OTLP/JSON
   decoding (the OpenTelemetry JSON bindings' ``from_dict``) costs more than protobuf's.
4. The storage ceiling: a stdlib process inserting the same spans' rows (staging, traces,
   steps) with one ``executemany`` per table in one transaction, into a store made by
   ``agent-replay init``.
After every run of ours the store is checked: every accepted span staged, one trace per
OTel trace id. Medians are reported.

Run by hand: ``.venv/bin/python bench/otlp.py [--runs 3] [--cycles 200] [--client raw]``.
Exits 1 when the landed rate misses the goal or an accepted span is missing.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from otlp_baselines import RECEIVER, executemany_rate  # noqa: E402

GOAL_SPANS_PER_S = 5_000
GOAL_RATIO = 0.5
"""DESIGN.md: landed spans/s >= 1/2 of the no-op receiver's accepted rate (issue 17)."""
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "otlp"
PYCACHE = Path("/tmp/agent-replay-bench/pycache")
LISTENING = re.compile(r"listening on http://(\S+):(\d+) ")


def bench_env() -> dict[str, str]:
    """Bytecode cached outside the tree, as an installed package runs (see bench/ingest.py)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


# --- requests ---------------------------------------------------------------------------------


class Template:
    """One fixture payload, re-emitted with fresh ids."""

    def __init__(self, file: Path) -> None:
        self.name = file.name
        self.gzip = file.suffix == ".gz"
        raw = file.read_bytes()
        if self.gzip:
            raw = gzip.decompress(raw)
        self.protobuf = file.suffix == ".pb"
        if self.protobuf:
            self.message = ExportTraceServiceRequest()
            self.message.ParseFromString(raw)
            spans = [
                s for rs in self.message.resource_spans for ss in rs.scope_spans for s in ss.spans
            ]
            self.spans = len(spans)
            self.traces = len({s.trace_id for s in spans})
        else:
            self.data = json.loads(raw)
            spans = [
                s
                for rs in self.data["resourceSpans"]
                for ss in rs["scopeSpans"]
                for s in ss["spans"]
            ]
            self.spans = len(spans)
            self.traces = len({s["traceId"] for s in spans})
        self.content_type = "application/x-protobuf" if self.protobuf else "application/json"

    def fresh(self) -> bytes:
        """The payload with every trace and span id replaced (parent links kept)."""
        new: dict[bytes, bytes] = {}

        def swap(old: bytes) -> bytes:
            if not old:
                return old
            if old not in new:
                new[old] = os.urandom(len(old))
            return new[old]

        if self.protobuf:
            message = ExportTraceServiceRequest()
            message.CopyFrom(self.message)
            for rs in message.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        s.trace_id = swap(s.trace_id)
                        s.span_id = swap(s.span_id)
                        s.parent_span_id = swap(s.parent_span_id)
            return message.SerializeToString()
        data = json.loads(json.dumps(self.data))
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if s.get(key):
                            s[key] = swap(bytes.fromhex(s[key])).hex()
        body = json.dumps(data).encode()
        return gzip.compress(body) if self.gzip else body

    def headers(self) -> dict[str, str]:
        out = {"Content-Type": self.content_type}
        if self.gzip:
            out["Content-Encoding"] = "gzip"
        return out


def make_requests(cycles: int) -> tuple[list[tuple[bytes, dict[str, str]]], int, int]:
    """(requests, spans, OTel traces): every fixture trace payload ``cycles`` times."""
    templates = [Template(f) for f in sorted(FIXTURES.iterdir()) if "_traces" in f.name]
    requests = []
    spans = traces = 0
    for _ in range(cycles):
        for template in templates:
            requests.append((template.fresh(), template.headers()))
            spans += template.spans
            traces += template.traces
    return requests, spans, traces


# --- servers ----------------------------------------------------------------------------------


def start(cmd: list[str]) -> tuple[subprocess.Popen[str], str, int]:
    process = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=bench_env(),
    )
    assert process.stderr is not None
    seen = []
    while True:
        line = process.stderr.readline()
        if not line:
            raise SystemExit(f"server did not start: {''.join(seen)}")
        seen.append(line)
        match = LISTENING.search(line)
        if match:
            return process, match.group(1), int(match.group(2))


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(2)  # SIGINT: ours drains and exits
    try:
        _, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
    return err


# --- clients ----------------------------------------------------------------------------------


CLIENT = "raw"
"""How the clients speak HTTP: ``raw`` (default), a minimal HTTP/1.1 exchange over a socket
(each request's bytes made before timing, the response read by its ``Content-Length``), so
the load generator takes little of the CPU the server under test shares with it; or
``http.client``, the stdlib client (about 100 µs of client CPU a request here)."""


def post_all(
    host: str, port: int, requests: list[tuple[bytes, dict[str, str]]], clients: int
) -> tuple[float, float, list[int]]:
    """Post every request over ``clients`` keep-alive connections; (start, end, statuses)."""
    statuses: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client(share: list[tuple[bytes, dict[str, str]]]) -> None:
        mine = _post_raw(host, port, share, barrier) if CLIENT == "raw" else []
        if CLIENT != "raw":
            connection = http.client.HTTPConnection(host, port, timeout=120)
            connection.connect()
            barrier.wait()
            for body, headers in share:
                connection.request("POST", "/v1/traces", body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                mine.append(response.status)
            connection.close()
        with lock:
            statuses.extend(mine)

    threads = [
        threading.Thread(target=client, args=(requests[i::clients],)) for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return began, time.perf_counter(), statuses


def _post_raw(
    host: str, port: int, share: list[tuple[bytes, dict[str, str]]], barrier: threading.Barrier
) -> list[int]:
    """POST each request on one keep-alive connection, HTTP/1.1 by hand; the statuses."""
    messages = []
    for body, headers in share:
        head = f"POST /v1/traces HTTP/1.1\r\nHost: {host}:{port}\r\nAccept-Encoding: identity\r\n"
        for name, value in headers.items():
            head += f"{name}: {value}\r\n"
        messages.append(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    sock = socket.create_connection((host, port), timeout=120)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    statuses = []
    pending = b""
    barrier.wait()
    try:
        for message in messages:
            sock.sendall(message)
            while b"\r\n\r\n" not in pending:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("the server closed the connection")
                pending += chunk
            head, _, pending = pending.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            statuses.append(int(lines[0].split()[1]))
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(pending) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("the server closed the connection")
                pending += chunk
            pending = pending[length:]
    finally:
        sock.close()
    return statuses


def landed(db_file: Path) -> tuple[int, int]:
    connection = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True, timeout=30)
    try:
        spans = connection.execute("SELECT COUNT(*) FROM otel_spans").fetchone()[0]
        traces = connection.execute("SELECT COUNT(*) FROM traces").fetchone()[0]
        return int(spans), int(traces)
    finally:
        connection.close()


def wait_landed(db_file: Path, spans: int) -> float:
    """Poll (every 5 ms) until the store holds ``spans`` staged spans; the time it does.

    One read-only connection and ``max(rowid)`` (staging only inserts, so on a fresh store it
    is the row count): the poll costs microseconds, not a connection and a table scan, so the
    observer takes little CPU from the two processes it observes. ``run_ours`` checks the
    real counts afterwards.
    """
    connection = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True, timeout=30)
    try:
        while True:
            count = connection.execute("SELECT max(rowid) FROM otel_spans").fetchone()[0]
            if (count or 0) >= spans:
                return time.perf_counter()
            time.sleep(0.005)
    finally:
        connection.close()


def cpu_seconds(pid: int) -> tuple[float, float] | None:
    """CPU seconds (user + system) used so far by a process and by its children (the writer
    process of ``otel serve``); ``None`` where ``/proc`` isn't there."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def used(process: int) -> float:
        fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    try:
        children = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            except OSError:
                continue
            children += [int(c) for c in text.split()]
        return used(pid), sum(used(c) for c in children)
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Run:
    """One run of ours: rates, and the server's CPU time per span (µs) while it ran."""

    accepted: float
    landed: float
    cpu_us: float | None = None
    """Server and writer process together, from the first request until every span landed."""
    writer_cpu_us: float | None = None


def run_ours(
    requests: list[tuple[bytes, dict[str, str]]],
    spans: int,
    traces: int,
    clients: int,
    folder: Path,
) -> Run:
    """Rates (accepted, landed spans/s) and CPU per span for one run in a fresh store."""
    process, host, port = start(
        [sys.executable, "-m", "agent_replay", "otel", "serve", "--port", "0", "--grpc-port", "0"]
        + ["--dir", str(folder)]
    )
    db_file = folder / "traces.db"
    try:
        before = cpu_seconds(process.pid)
        began, answered, statuses = post_all(host, port, requests, clients)
        if set(statuses) != {200}:
            raise SystemExit(f"ours refused requests: {sorted(set(statuses))}")
        done = wait_landed(db_file, spans)
        after = cpu_seconds(process.pid)
    finally:
        err = stop(process)
    got = landed(db_file)
    if got != (spans, traces):
        raise SystemExit(f"accepted {spans} spans / {traces} traces, stored {got}\n{err}")
    run = Run(spans / (answered - began), spans / (done - began))
    if before is not None and after is not None:
        run.cpu_us = 1e6 * (sum(after) - sum(before)) / spans
        run.writer_cpu_us = 1e6 * (after[1] - before[1]) / spans
    return run


def run_noop(
    requests: list[tuple[bytes, dict[str, str]]],
    spans: int,
    clients: int,
    durable_in: Path | None = None,
) -> float:
    """Spans/s the no-op receiver accepts (``durable_in``: the durable one, with its database
    in that folder)."""
    if durable_in is None:
        command = [sys.executable, "-c", RECEIVER]
    else:
        durable_in.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-c", RECEIVER, str(durable_in / "bodies.db")]
    process, host, port = start(command)
    try:
        began, answered, statuses = post_all(host, port, requests, clients)
        assert set(statuses) == {200}
    finally:
        process.kill()
        process.communicate()
    return spans / (answered - began)


# --- main -------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=200, help="copies of each payload")
    parser.add_argument(
        "--client",
        choices=("raw", "http.client"),
        default="raw",
        help="how the clients speak HTTP (see CLIENT)",
    )
    args = parser.parse_args()
    global CLIENT
    CLIENT = args.client

    requests, spans, traces = make_requests(args.cycles)
    print(f"python: {sys.executable} ({sys.version.split()[0]})")
    print(
        f"{len(requests)} requests = {args.cycles} x the {len(requests) // args.cycles} trace "
        f"payloads of fixtures/otlp, fresh ids each: {spans} spans, {traces} OTel traces"
    )
    print(f"{args.runs} runs each; every store checked for {spans} spans and {traces} traces")
    print(f"clients: {args.client}")
    print()
    results: dict[int, list[tuple[Run, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="otlp-bench-") as tmp:
        folder = Path(tmp)
        run_ours(requests[:20], *_count(requests[:20]), 1, folder / "warmup")  # untimed
        print(
            f"{'clients':>7} {'run':>4} {'accepted/s':>11} {'landed/s':>10} {'no-op/s':>10} "
            f"{'durable/s':>10} {'CPU us/span':>12} {'(writer)':>9} {'load':>5}"
        )
        for clients in (1, 4):
            got = results.setdefault(clients, [])
            for run in range(args.runs):
                ours = run_ours(requests, spans, traces, clients, folder / f"ours-{clients}-{run}")
                noop = run_noop(requests, spans, clients)
                durable = run_noop(requests, spans, clients, folder / f"durable-{clients}-{run}")
                got.append((ours, noop, durable))
                print(
                    f"{clients:>7} {run + 1:>4} {ours.accepted:>11,.0f} {ours.landed:>10,.0f} "
                    f"{noop:>10,.0f} {durable:>10,.0f} {_us(ours.cpu_us):>12} "
                    f"{_us(ours.writer_cpu_us):>9} {os.getloadavg()[0]:>5.2f}",
                    flush=True,
                )
        by_encoding = {}
        for name, json_only in (("protobuf", False), ("JSON", True)):
            chosen = [
                r for r in requests if (r[1]["Content-Type"] == "application/json") == json_only
            ]
            count_spans, count_traces = _count(chosen)
            runs = [
                run_ours(chosen, count_spans, count_traces, 4, folder / f"{name}-{run}")
                for run in range(args.runs)
            ]
            by_encoding[name] = (
                statistics.median(r.landed for r in runs),
                _median(r.cpu_us for r in runs),
                count_spans,
            )
        ceiling = executemany_rate(requests, spans, folder / "executemany", bench_env())

    print()
    print(f"medians, spans/s ({spans} spans a run); CPU: server + writer process, us per span")
    print(
        f"{'clients':>7} {'accepted':>10} {'landed':>10} {'no-op HTTP':>11} {'landed/no-op':>13} "
        f"{'durable':>8} {'landed/durable':>15} {'CPU us/span':>12}"
    )
    worst = float("inf")
    worst_ratio = float("inf")
    for clients, got in results.items():
        accepted = statistics.median(ours.accepted for ours, _, _ in got)
        landed_rate = statistics.median(ours.landed for ours, _, _ in got)
        noop = statistics.median(noop for _, noop, _ in got)
        durable = statistics.median(durable for _, _, durable in got)
        worst = min(worst, landed_rate)
        worst_ratio = min(worst_ratio, landed_rate / noop)
        print(
            f"{clients:>7} {accepted:>10,.0f} {landed_rate:>10,.0f} {noop:>11,.0f} "
            f"{landed_rate / noop:>13.2f} {durable:>8,.0f} {landed_rate / durable:>15.2f} "
            f"{_us(_median(ours.cpu_us for ours, _, _ in got)):>12}"
        )
    for name, (rate, cpu, count_spans) in by_encoding.items():
        print(
            f"{name} payloads only, 4 clients: {rate:,.0f} spans/s landed ({count_spans} spans), "
            f"CPU {_us(cpu)} us/span"
        )
    print(f"stdlib executemany of the same rows (one transaction): {ceiling:,.0f} spans/s")
    met = worst >= GOAL_SPANS_PER_S and worst_ratio >= GOAL_RATIO
    print(
        f"goals: >= {GOAL_SPANS_PER_S:,} spans/s landed and >= {GOAL_RATIO} of the no-op "
        f"receiver, every accepted span landing: {worst:,.0f} spans/s, {worst_ratio:.2f} -> "
        f"{'ok' if met else 'MISSED'}; load {os.getloadavg()[0]:.2f}"
    )
    return 0 if met else 1


def _median(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _count(requests: list[tuple[bytes, dict[str, str]]]) -> tuple[int, int]:
    """(spans, OTel traces) in some requests (for the warm-up)."""
    spans = 0
    trace_ids: set[str] = set()
    for body, headers in requests:
        if headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if headers["Content-Type"] == "application/x-protobuf":
            message = ExportTraceServiceRequest()
            message.ParseFromString(body)
            items = [
                s.trace_id.hex()
                for rs in message.resource_spans
                for ss in rs.scope_spans
                for s in ss.spans
            ]
        else:
            data = json.loads(body)
            items = [
                s["traceId"]
                for rs in data["resourceSpans"]
                for ss in rs["scopeSpans"]
                for s in ss["spans"]
            ]
        spans += len(items)
        trace_ids.update(items)
    return spans, len(trace_ids)


if __name__ == "__main__":
    sys.exit(main())
