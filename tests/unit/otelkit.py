"""Helpers shared by the ``otel serve`` tests (imported as ``otelkit``, like ``tuikit``): the
real fixture payloads, a receiver on a free loopback port, and a small HTTP client."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from captures import FIXTURES

from agent_replay.services.otel.server import OtelReceiver
from agent_replay.store.core import execute
from agent_replay.store.db import Store, ensure_database
from agent_replay.store.trace_detail import trace_json

OTLP = FIXTURES / "otlp"
HARNESS = FIXTURES / "harness"
JSON = "application/json"
PROTOBUF = "application/x-protobuf"


@dataclass
class Payload:
    """One recorded OTLP/HTTP request: where it went, its body and headers."""

    name: str
    path: str
    body: bytes
    headers: dict[str, str]


def otlp_payload(name: str) -> Payload:
    """A file of ``fixtures/otlp`` (by its number, e.g. ``"0005"``) as the request it was."""
    (file,) = OTLP.glob(f"{name}-*")
    headers = {"Content-Type": PROTOBUF if file.suffix == ".pb" else JSON}
    if file.suffix == ".gz":
        headers["Content-Encoding"] = "gzip"
    signal = "logs" if "_logs" in file.name else "traces"
    return Payload(file.name, f"/v1/{signal}", file.read_bytes(), headers)


def harness_payloads(harness: str, capture: str = "otel") -> list[Payload]:
    """Every OTLP POST a harness made (``claude-code``, ``gemini-cli`` or ``codex``; the
    ``otel`` capture, or another such as ``otel-enhanced``), in order."""
    folder = HARNESS / harness / capture / "otlp"
    out = []
    for line in (folder / "index.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        sent = {k.lower(): v for k, v in entry["headers"].items()}
        headers = {"Content-Type": sent["content-type"]}
        body = (folder / entry["file"]).read_bytes()
        out.append(Payload(f"{harness}/{entry['file']}", entry["path"], body, headers))
    return out


def all_payloads() -> list[Payload]:
    """Every fixture payload: all of ``fixtures/otlp`` and both harnesses' posts."""
    names = sorted(p.name.split("-", 1)[0] for p in OTLP.iterdir())
    return [
        *(otlp_payload(n) for n in names),
        *harness_payloads("claude-code"),
        *harness_payloads("gemini-cli"),
    ]


@dataclass
class Reply:
    """An HTTP response: status, headers (lowercased names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes


class Client:
    """A keep-alive HTTP/1.1 client for one receiver."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.connection = http.client.HTTPConnection(host, port, timeout=30)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        *,
        chunked: bool = False,
    ) -> Reply:
        try:
            self.connection.request(
                method, path, body=body, headers=headers or {}, encode_chunked=chunked
            )
            response = self.connection.getresponse()
            reply = Reply(
                response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
            )
        except (ConnectionError, http.client.HTTPException):
            self.connection.close()
            raise
        if reply.headers.get("connection", "").lower() == "close":
            self.connection.close()  # the next request opens a new connection
        return reply

    def post(self, payload: Payload) -> Reply:
        return self.request("POST", payload.path, payload.body, payload.headers)

    def close(self) -> None:
        self.connection.close()


@contextmanager
def receiving(store_dir: Path, **options: Any) -> Iterator[tuple[OtelReceiver, Client, Store]]:
    """A receiver on a free loopback port recording into ``store_dir``; stopped (drained) on
    exit. Yields the receiver, a client, and the store (for reading)."""
    store = ensure_database(store_dir)
    assert store.path is not None
    receiver = OtelReceiver(store.path, port=0, **options)
    host, port = receiver.start()
    client = Client(host, port)
    try:
        yield receiver, client, store
    finally:
        client.close()
        receiver.stop()
        store.close()


def post_all(client: Client, receiver: OtelReceiver, payloads: list[Payload]) -> None:
    """POST each payload (asserting 200) and wait until the writer has written them."""
    for payload in payloads:
        reply = client.post(payload)
        assert reply.status == 200, (payload.name, reply.status, reply.body)
    assert receiver.flush(timeout=60)


def traces(store: Store) -> list[dict[str, Any]]:
    """Every stored trace (full JSON), oldest first."""
    ids = [r[0] for r in execute(store, "SELECT id FROM traces ORDER BY started_at_ms, id")]
    return [trace_json(store, i) for i in ids]


def by_otel_id(store: Store, otel_trace_id: str) -> dict[str, Any]:
    """The trace built from one OTel trace id."""
    row = execute(store, "SELECT id FROM traces WHERE otel_trace_id = ?", [otel_trace_id])
    (trace_id,) = row.fetchone()
    return trace_json(store, trace_id)


def by_session(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The traces of a session, oldest first."""
    rows = execute(
        store,
        "SELECT id FROM traces WHERE session_id = ? ORDER BY started_at_ms, id",
        [session_id],
    )
    return [trace_json(store, r[0]) for r in rows.fetchall()]


def shape(trace: dict[str, Any]) -> list[tuple[str, str | None, int | None]]:
    """A trace's steps as (type, name, parent step) triples."""
    return [(s["step_type"], s["name"], s["parent_step"]) for s in trace["steps"]]


def count(store: Store, table: str) -> int:
    """Rows in a table."""
    return int(execute(store, f"SELECT COUNT(*) FROM {table}").fetchone()[0])


# --- synthetic OTLP/JSON requests -------------------------------------------------------------

BASE_NS = 1_800_000_000_000_000_000  # 2027-01-15T08:00:00Z


def any_value(value: Any) -> dict[str, Any]:
    """A JSON value as an OTLP/JSON ``AnyValue`` (int64 as text, as the spec says)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": kvs(value)}}
    return {"stringValue": str(value)}


def kvs(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v)} for k, v in attrs.items()]


def span(
    trace: str,
    span_id: str,
    name: str,
    attrs: dict[str, Any] | None = None,
    *,
    parent: str = "",
    start: float = 0.0,
    end: float | None = None,
    error: str | None = None,
    events: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An OTLP/JSON span; ``trace``/``span_id`` are short hex stems padded to full size and
    times are seconds after ``BASE_NS``."""
    end = start + 1.0 if end is None else end
    out: dict[str, Any] = {
        "traceId": trace.rjust(32, "0"),
        "spanId": span_id.rjust(16, "0"),
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(BASE_NS + int(start * 1e9)),
        "endTimeUnixNano": str(BASE_NS + int(end * 1e9)),
        "attributes": kvs(attrs or {}),
        "status": {"code": 2, "message": error} if error else {"code": 1},
    }
    if parent:
        out["parentSpanId"] = parent.rjust(16, "0")
    if events:
        out["events"] = [
            {
                "name": e["name"],
                "timeUnixNano": str(BASE_NS),
                "attributes": kvs(e.get("attributes", {})),
            }
            for e in events
        ]
    return out


def traces_body(*spans: dict[str, Any], service: str = "test-app", **resource: Any) -> bytes:
    """An OTLP/JSON ``ExportTraceServiceRequest`` body."""
    attrs = {"service.name": service, **resource}
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": kvs(attrs)},
                    "scopeSpans": [{"scope": {"name": "tests"}, "spans": list(spans)}],
                }
            ]
        }
    ).encode()


def log_record(
    attrs: dict[str, Any],
    *,
    at: float = 0.0,
    body: Any = None,
    trace: str = "",
    span_id: str = "",
    event_name: str = "",
) -> dict[str, Any]:
    """An OTLP/JSON log record (times in seconds after ``BASE_NS``)."""
    out: dict[str, Any] = {
        "timeUnixNano": str(BASE_NS + int(at * 1e9)),
        "observedTimeUnixNano": str(BASE_NS + int(at * 1e9)),
        "attributes": kvs(attrs),
    }
    if body is not None:
        out["body"] = any_value(body)
    if trace:
        out["traceId"] = trace.rjust(32, "0")
    if span_id:
        out["spanId"] = span_id.rjust(16, "0")
    if event_name:
        out["eventName"] = event_name
    return out


def logs_body(
    *records: dict[str, Any], service: str = "test-app", scope: str = "tests", **resource: Any
) -> bytes:
    """An OTLP/JSON ``ExportLogsServiceRequest`` body."""
    attrs = {"service.name": service, **resource}
    return json.dumps(
        {
            "resourceLogs": [
                {
                    "resource": {"attributes": kvs(attrs)},
                    "scopeLogs": [{"scope": {"name": scope}, "logRecords": list(records)}],
                }
            ]
        }
    ).encode()


def traces_payload(*spans: dict[str, Any], **resource: Any) -> Payload:
    return Payload(
        "synthetic", "/v1/traces", traces_body(*spans, **resource), {"Content-Type": JSON}
    )


def logs_payload(*records: dict[str, Any], **resource: Any) -> Payload:
    return Payload("synthetic", "/v1/logs", logs_body(*records, **resource), {"Content-Type": JSON})


def build(*payloads: Payload, redact: bool = True) -> list[dict[str, Any]]:
    """The traces the receiver would build from these payloads, without HTTP or a store: the
    same decoding, grouping, building and lenient validation, as a pure pipeline (traces
    sorted by start)."""
    from agent_replay.services.otel import normalize
    from agent_replay.services.otel.build import Group, build_trace, otel_trace_group
    from agent_replay.services.otel.protocol import parse_request
    from agent_replay.services.redact import identity, redact_value

    spans: list[dict[str, Any]] = []
    logs: list[dict[str, Any]] = []
    for payload in payloads:
        signal = payload.path.rsplit("/", 1)[1]
        message = parse_request(signal, payload.headers["Content-Type"], payload.body)
        redactor = redact_value if redact else identity
        decoded = (normalize.spans_from if signal == "traces" else normalize.logs_from)(
            message, redactor
        )
        spans += decoded.spans
        logs += decoded.logs
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for item in spans:
        by_trace.setdefault(item["trace_id"], []).append(item)
    groups: dict[str, Any] = {}
    for trace_id, items in by_trace.items():
        key = otel_trace_group(trace_id, items)
        groups.setdefault(key, Group(key)).spans.extend(items)
    for record in logs:
        key = None
        if record.get("trace_id"):
            key = next(
                (
                    k
                    for k, g in groups.items()
                    if any(s["trace_id"] == record["trace_id"] for s in g.spans)
                ),
                None,
            )
        key = (
            key
            or record.get("session_key")
            or (f"t:{record['trace_id']}" if record.get("trace_id") else None)
        )
        if key:
            groups.setdefault(key, Group(key)).logs.append(record)
    from agent_replay.services.derive import derive_trace
    from agent_replay.trace.validate import validate_trace

    valid = []
    for group in groups.values():
        data = build_trace(group)
        if data is not None:
            model = validate_trace(data, lenient=True).trace
            derive_trace(model)  # totals, as the writer's ``prepare`` derives them
            valid.append(model.model_dump())
    return sorted(valid, key=lambda t: (t["started_at"] or "", t["id"]))
