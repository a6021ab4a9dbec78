"""Latency `agent-replay proxy` adds: per request and per streamed chunk, against a direct
connection to the same upstream, side by side in one run.

Goals (issue 21): at most 5 ms added per request, at most 1 ms added per streamed chunk.

What runs:
1. An upstream in a process of its own (stdlib ``ThreadingHTTPServer``, HTTP/1.1 keep-alive)
   speaking Anthropic Messages: a plain request gets a ~1 KB message; a streamed one gets
   ``--events`` SSE events, one flushed chunk each, ``--gap-ms`` apart, each carrying the
   upstream's ``CLOCK_MONOTONIC`` time at the moment it was written (the same clock for every
   process on the machine).
2. The real CLI, ``agent-replay proxy --port 0 --upstream anthropic=…`` in a fresh store,
   recording everything (the writer thread included).
3. One client (this process, ``http.client``, one keep-alive connection per side), in
   alternating rounds: ``--requests`` plain requests timed end to end, and ``--streams``
   streamed requests whose events are timed from the upstream's write to their arrival here.
   Direct and proxied rounds alternate, so load changes hit both.
4. Added latency = median(proxied) - median(direct), per request and per chunk (p95 too), and
   the proxy's CPU time per request (``/proc``). At the end the proxy is stopped (SIGTERM) and
   the store must hold one step per proxied exchange.

Run by hand: ``.venv/bin/python bench/proxy.py [--requests 300] [--streams 40] [--events 40]``.
Exits 1 when a goal is missed or an exchange was not recorded.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_REQUEST_MS = 5.0
GOAL_CHUNK_MS = 1.0
LISTENING = re.compile(r"listening on http://(\S+):(\d+)")

UPSTREAM = r"""
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
EVENTS, GAP = int(sys.argv[1]), float(sys.argv[2]) / 1000
MESSAGE = json.dumps({"id": "msg_1", "type": "message", "role": "assistant",
    "model": "claude-3-5-haiku-20241022", "content": [{"type": "text", "text": "x" * 800}],
    "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 100, "output_tokens": 200}}).encode()

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as a real API server: each event leaves at once
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(MESSAGE)))
            self.end_headers()
            self.wfile.write(MESSAGE)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(EVENTS):
            data = {"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": "tok "}, "t": time.monotonic_ns()}
            piece = f"event: content_block_delta\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            time.sleep(GAP)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

server = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

REQUEST = json.dumps(
    {
        "model": "claude-3-5-haiku-20241022",
        "max_tokens": 256,
        "system": "You are a benchmark." * 20,
        "messages": [{"role": "user", "content": "Say something long. " * 30}],
    }
)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def plain_round(host: str, port: int, count: int, stream: bool = False) -> list[float]:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    body = json.loads(REQUEST)
    times = []
    payload = json.dumps({**body, "stream": stream}).encode()  # bytes: one send() with the headers
    for _ in range(count):
        t0 = time.perf_counter()
        conn.request(
            "POST",
            "/v1/messages",
            body=payload,
            headers={"Content-Type": "application/json", "x-api-key": "bench"},
        )
        conn.getresponse().read()
        times.append((time.perf_counter() - t0) * 1000)
    conn.close()
    return times


def stream_round(host: str, port: int, count: int) -> list[float]:
    """Per-event latency (ms) from the upstream's write to its arrival here."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    payload = json.dumps({**json.loads(REQUEST), "stream": True}).encode()
    delays = []
    for _ in range(count):
        conn.request(
            "POST",
            "/v1/messages",
            body=payload,
            headers={"Content-Type": "application/json", "x-api-key": "bench"},
        )
        response = conn.getresponse()
        buffer = b""
        while True:
            piece = response.read1(65536)
            now = time.monotonic_ns()
            if not piece:
                break
            buffer += piece
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if line.startswith(b"data: "):
                        delays.append((now - json.loads(line[6:])["t"]) / 1e6)
    conn.close()
    return delays


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(len(ordered) * 0.95)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="plain requests per side")
    parser.add_argument("--streams", type=int, default=40, help="streamed requests per side")
    parser.add_argument("--events", type=int, default=40, help="events per stream")
    parser.add_argument("--gap-ms", type=float, default=2.0, help="pause between events")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    args = parser.parse_args()

    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    store = Path(tempfile.mkdtemp(prefix="agent-replay-bench-proxy-"))
    upstream = subprocess.Popen(
        [sys.executable, "-c", UPSTREAM, str(args.events), str(args.gap_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert upstream.stdout is not None
    up_port = int(upstream.stdout.readline())
    cli = [str(Path(sys.executable).with_name("agent-replay"))]
    if not Path(cli[0]).exists():
        cli = [sys.executable, "-m", "agent_replay"]
    proxy = subprocess.Popen(
        [
            *cli,
            "proxy",
            "--port",
            "0",
            "--upstream",
            f"anthropic=http://127.0.0.1:{up_port}",
            "--dir",
            str(store),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proxy.stderr is not None
    lines = []
    while True:
        line = proxy.stderr.readline()
        lines.append(line)
        if not line:
            raise SystemExit(f"the proxy exited: {''.join(lines)}")
        match = LISTENING.search(line)
        if match:
            proxy_port = int(match.group(2))
            break
    try:
        sides = {"direct": up_port, "proxy": proxy_port}
        plain: dict[str, list[float]] = {"direct": [], "proxy": []}
        chunks: dict[str, list[float]] = {"direct": [], "proxy": []}
        # Warm-up (not timed): connections, the proxy's first write, the price table.
        for port in sides.values():
            plain_round("127.0.0.1", port, 20)
            stream_round("127.0.0.1", port, 2)
        cpu_before = cpu_seconds(proxy.pid)
        per_round = max(1, args.requests // args.rounds), max(1, args.streams // args.rounds)
        for index in range(args.rounds):
            order = ("direct", "proxy") if index % 2 == 0 else ("proxy", "direct")
            for name in order:
                plain[name] += plain_round("127.0.0.1", sides[name], per_round[0])
                chunks[name] += stream_round("127.0.0.1", sides[name], per_round[1])
        cpu = cpu_seconds(proxy.pid) - cpu_before
    finally:
        proxy.send_signal(signal.SIGTERM)
        _, err = proxy.communicate(timeout=120)
        upstream.kill()
        upstream.wait()
    proxied = len(plain["proxy"]) + per_round[1] * args.rounds
    expected = proxied + 20 + 2
    db = sqlite3.connect(f"file:{store / 'traces.db'}?mode=ro", uri=True)
    steps = db.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    db.close()

    req_direct, req_proxy = statistics.median(plain["direct"]), statistics.median(plain["proxy"])
    chunk_direct, chunk_proxy = (
        statistics.median(chunks["direct"]),
        statistics.median(chunks["proxy"]),
    )
    added_request = req_proxy - req_direct
    added_chunk = chunk_proxy - chunk_direct
    print(
        f"plain requests: {len(plain['direct'])} per side; streams: "
        f"{per_round[1] * args.rounds} per side x {args.events} events "
        f"({len(chunks['proxy'])} proxied events timed)"
    )
    print(f"{'':24}{'direct':>10}{'proxy':>10}{'added':>10}")
    print(f"{'request median (ms)':24}{req_direct:10.2f}{req_proxy:10.2f}{added_request:10.2f}")
    print(
        f"{'request p95 (ms)':24}{p95(plain['direct']):10.2f}{p95(plain['proxy']):10.2f}"
        f"{p95(plain['proxy']) - p95(plain['direct']):10.2f}"
    )
    print(f"{'chunk median (ms)':24}{chunk_direct:10.3f}{chunk_proxy:10.3f}{added_chunk:10.3f}")
    print(
        f"{'chunk p95 (ms)':24}{p95(chunks['direct']):10.3f}{p95(chunks['proxy']):10.3f}"
        f"{p95(chunks['proxy']) - p95(chunks['direct']):10.3f}"
    )
    print(f"proxy CPU: {cpu * 1000 / proxied:.2f} ms per proxied request (recording included)")
    print(f"recorded: {steps} step(s) of {expected} exchange(s)")
    ok_request = added_request <= GOAL_REQUEST_MS
    ok_chunk = added_chunk <= GOAL_CHUNK_MS
    print(
        f"added per request {added_request:.2f} ms (goal <= {GOAL_REQUEST_MS}): "
        f"{'PASS' if ok_request else 'MISS'}"
    )
    print(
        f"added per chunk {added_chunk:.3f} ms (goal <= {GOAL_CHUNK_MS}): "
        f"{'PASS' if ok_chunk else 'MISS'}"
    )
    if steps != expected:
        print("MISS: not every exchange was recorded", err[-500:])
        return 1
    return 0 if ok_request and ok_chunk else 1


if __name__ == "__main__":
    raise SystemExit(main())
