"""The baselines of bench/otlp.py: stdlib receivers (no-op, durable) and the storage ceiling.

Each runs as its own process (``python -c``), so it shares the machine with the clients as
``otel serve`` does.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

RECEIVER = r"""
import sqlite3, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

db = None
if len(sys.argv) > 1:  # the durable floor: commit each body before answering
    db = sqlite3.connect(sys.argv[1], isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=wal"); db.execute("PRAGMA synchronous=full")
    db.execute("CREATE TABLE IF NOT EXISTS bodies (data BLOB)")
lock = threading.Lock()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if db is not None:
            with lock:  # one fsync'd commit per request before it is answered
                db.execute("INSERT INTO bodies VALUES (?)", (body,))
        media = self.headers.get("Content-Type", "application/json")
        out = b"{}" if media == "application/json" else b""
        self.send_response(200)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *args):
        pass

class Server(ThreadingHTTPServer):
    daemon_threads = True

server = Server(("127.0.0.1", 0), Handler)
print(f"listening on http://127.0.0.1:{server.server_address[1]} ", file=sys.stderr, flush=True)
server.serve_forever()
"""
"""The baseline receivers: ``python -c RECEIVER`` reads each body and answers 200 (the no-op);
``python -c RECEIVER DB`` first commits the body to SQLite (WAL, ``synchronous=FULL``:
fsync'd), as ours acknowledges only what is on disk: the durable floor. What it costs over the
no-op is what durability costs on this disk, whatever the receiver."""


# --- the storage ceiling ----------------------------------------------------------------------

EXECUTEMANY = r"""
import json, sqlite3, sys, time
rows = json.load(open(sys.argv[2]))
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=wal"); db.execute("PRAGMA synchronous=normal")
began = time.perf_counter()
db.execute("BEGIN IMMEDIATE")
db.executemany("INSERT INTO otel_spans (otel_trace_id, span_id, group_key, received_ms, data) "
               "VALUES (?, ?, ?, 0, ?)", rows["spans"])
db.executemany("INSERT INTO traces (id, agent_name, status, started_at_ms, otel_trace_id, "
               "metadata, step_count, created_at_ms) VALUES (?, ?, 'completed', 0, ?, ?, ?, 0)",
               rows["traces"])
db.executemany("INSERT INTO steps (id, trace_id, step_number, step_type, name, started_at, "
               "started_at_ms, ended_at, duration_ms, tokens_used, model, metadata) "
               "VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)", rows["steps"])
db.execute("COMMIT")
print(time.perf_counter() - began)
"""


def executemany_rate(
    requests: list[tuple[bytes, dict[str, str]]], spans: int, folder: Path, env: dict[str, str]
) -> float:
    """Spans/s of a stdlib process inserting the same spans' rows in one transaction
    (``env``: the benchmark's environment, for ``agent-replay init``)."""
    from google.protobuf.json_format import MessageToDict

    span_rows, trace_rows, step_rows = [], [], []
    for body, headers in requests:
        if headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if headers["Content-Type"] == "application/x-protobuf":
            message = ExportTraceServiceRequest()
            message.ParseFromString(body)
            data = MessageToDict(message)
        else:
            data = json.loads(body)
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                by_trace: dict[str, list[dict[str, Any]]] = {}
                for s in ss["spans"]:
                    by_trace.setdefault(s["traceId"], []).append(s)
                for trace_id, items in by_trace.items():
                    tid = f"trc_{len(trace_rows)}"
                    trace_rows.append(
                        [tid, "agent", trace_id, json.dumps({"n": len(items)}), len(items)]
                    )
                    for number, s in enumerate(items, start=1):
                        text = json.dumps(s)
                        span_rows.append([trace_id, s["spanId"], f"t:{trace_id}", text])
                        step_rows.append(
                            [
                                f"stp_{len(step_rows)}",
                                tid,
                                number,
                                "llm_call",
                                s["name"],
                                "2026-01-01T00:00:00.000Z",
                                "2026-01-01T00:00:01.000Z",
                                1000.0,
                                10,
                                "m",
                                text,
                            ]
                        )
    folder.mkdir(parents=True, exist_ok=True)
    rows_file = folder / "rows.json"
    rows_file.write_text(json.dumps({"spans": span_rows, "traces": trace_rows, "steps": step_rows}))
    store = folder / "store"
    subprocess.run(
        [sys.executable, "-m", "agent_replay", "init", "--dir", str(store)],
        check=True,
        capture_output=True,
        env=env,
    )
    out = subprocess.run(
        [sys.executable, "-c", EXECUTEMANY, str(store / "traces.db"), str(rows_file)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return spans / float(out.stdout.strip())
