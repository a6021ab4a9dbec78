"""``otel serve`` speaks OTLP/HTTP: the right status for every kind of bad request (with a
``google.rpc.Status`` body in the request's encoding), caps on body and decompressed size, chunked
bodies, partial success, backpressure, and it keeps serving after each refusal."""

from __future__ import annotations

import gzip
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf.json_format import Parse
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from otelkit import JSON, PROTOBUF, Client, count, otlp_payload, receiving, traces

from agent_replay.services.otel.server import OtelReceiver
from agent_replay.store.db import Store

CAP = 64 * 1024


Served = tuple[OtelReceiver, Client, Store]


@pytest.fixture
def served(store_dir: Path) -> Iterator[Served]:
    """A receiver with small caps (64 KiB as sent, 256 KiB decompressed)."""
    with receiving(store_dir, max_body=CAP, max_decompressed=4 * CAP) as running:
        yield running


def still_serving(receiver: OtelReceiver, client: Client) -> None:
    """A valid request right after: 200, and it lands."""
    reply = client.post(otlp_payload("0005"))
    assert reply.status == 200, reply.body
    assert receiver.flush(timeout=30)


def status_of(body: bytes, media: str) -> Status:
    status = Status()
    if media == JSON:
        Parse(body.decode(), status)
    else:
        status.ParseFromString(body)
    return status


@pytest.mark.parametrize(
    ("path", "body", "content_type", "expected", "words"),
    [
        ("/v1/traces", b"\x0a\xff\xff\xff\xff\x0f", PROTOBUF, 400, "malformed protobuf"),
        ("/v1/traces", b'{"resourceSpans": [', JSON, 400, "malformed JSON"),
        ("/v1/traces", b"[1, 2]", JSON, 400, "JSON object"),
        ("/v1/traces", b'{"resourceSpans": 7}', JSON, 400, "malformed OTLP/JSON"),
        ("/v1/logs", b'{"resourceLogs": [{"scopeLogs": "x"}]}', JSON, 400, "malformed"),
        ("/v1/traces", b"{}", "text/plain", 415, "unsupported Content-Type"),
        ("/v1/traces", b"{}", "", 415, "unsupported Content-Type"),
        ("/v1/spans", b"{}", JSON, 404, "no OTLP endpoint"),
        ("/", b"{}", PROTOBUF, 404, "no OTLP endpoint"),
    ],
    ids=[
        "bad-protobuf",
        "bad-json",
        "json-array",
        "json-wrong-shape",
        "logs-wrong-shape",
        "text-plain",
        "no-content-type",
        "unknown-path",
        "root",
    ],
)
def test_bad_requests_get_their_status_and_the_server_keeps_serving(
    served: Served,
    path: str,
    body: bytes,
    content_type: str,
    expected: int,
    words: str,
) -> None:
    """400 malformed, 415 other content types, 404 other paths; a Status body says why."""
    receiver, client, _ = served
    headers = {"Content-Type": content_type} if content_type else {}
    reply = client.request("POST", path, body, headers)
    assert reply.status == expected
    media = PROTOBUF if content_type == PROTOBUF else JSON
    assert reply.headers["content-type"] == media
    assert words in status_of(reply.body, media).message
    still_serving(receiver, client)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_other_methods_are_not_allowed(served: Served, method: str) -> None:
    """405 with ``Allow: POST`` on an OTLP path."""
    receiver, client, _ = served
    reply = client.request(method, "/v1/traces", None, {"Content-Type": JSON})
    assert reply.status == 405
    assert reply.headers["allow"] == "POST"
    still_serving(receiver, client)


def test_oversized_body_is_refused_before_it_is_read(
    served: Served,
) -> None:
    """413 over the cap (Content-Length says so): the connection is closed, nothing lands."""
    receiver, client, store = served
    reply = client.request("POST", "/v1/traces", b"x" * (CAP + 1), {"Content-Type": PROTOBUF})
    assert reply.status == 413
    assert reply.headers["connection"] == "close"
    assert "cap" in status_of(reply.body, PROTOBUF).message
    assert count(store, "otel_spans") == 0
    still_serving(receiver, client)


def test_oversized_chunked_body_is_refused(served: Served) -> None:
    """413 once a chunked body passes the cap, without keeping the rest; the client, still
    sending 4 MB (more than the socket buffers hold), gets the answer, not a reset or a broken
    pipe (the receiver drops what follows before it closes)."""
    receiver, client, _ = served
    chunks = iter([b"x" * 40_000] * 100)
    reply = client.request("POST", "/v1/traces", chunks, {"Content-Type": JSON}, chunked=True)
    assert reply.status == 413
    assert "cap" in status_of(reply.body, JSON).message
    still_serving(receiver, client)


def test_a_large_body_refused_unread_still_gets_its_answer(served: Served) -> None:
    """A 4 MB body over the cap (Content-Length says so) and one of an unknown content type:
    the client sends all of it and reads the 413 / 415, every time."""
    receiver, client, _ = served
    big = b"x" * (4 * 1024 * 1024)
    for _ in range(3):
        reply = client.request("POST", "/v1/traces", big, {"Content-Type": PROTOBUF})
        assert reply.status == 413
        reply = client.request("POST", "/v1/traces", big, {"Content-Type": "text/plain"})
        assert reply.status == 415
    still_serving(receiver, client)


def test_gzip_bomb_is_refused(served: Served) -> None:
    """A small gzip body that inflates past the decompressed cap: 413, memory stays bounded."""
    receiver, client, _ = served
    bomb = gzip.compress(b"\0" * (50 * 1024 * 1024))
    assert len(bomb) < CAP
    reply = client.request(
        "POST", "/v1/traces", bomb, {"Content-Type": PROTOBUF, "Content-Encoding": "gzip"}
    )
    assert reply.status == 413
    assert "decompressed" in status_of(reply.body, PROTOBUF).message
    still_serving(receiver, client)


@pytest.mark.parametrize(
    ("body", "encoding", "expected"),
    [
        (b"not gzip at all", "gzip", 400),
        (gzip.compress(b'{"resourceSpans": []}')[:-9], "gzip", 400),
        (b"{}", "br", 415),
    ],
    ids=["corrupt-gzip", "truncated-gzip", "brotli"],
)
def test_bad_compression(served: Served, body: bytes, encoding: str, expected: int) -> None:
    """Corrupt or truncated gzip is malformed (400); an unknown coding is unsupported (415)."""
    receiver, client, _ = served
    reply = client.request(
        "POST", "/v1/traces", body, {"Content-Type": JSON, "Content-Encoding": encoding}
    )
    assert reply.status == expected
    still_serving(receiver, client)


def test_gzip_body_with_several_members(served: Served) -> None:
    """A gzip body made of two members is one body (as the gzip format allows)."""
    receiver, client, store = served
    text = otlp_payload("0005").body
    half = len(text) // 2
    body = gzip.compress(text[:half]) + gzip.compress(text[half:])
    reply = client.request(
        "POST", "/v1/traces", body, {"Content-Type": JSON, "Content-Encoding": "gzip"}
    )
    assert reply.status == 200
    assert receiver.flush(timeout=30)
    assert count(store, "otel_spans") == 5


def test_chunked_body_without_content_length(served: Served) -> None:
    """Transfer-Encoding: chunked and no Content-Length (as Gemini CLI sends): accepted."""
    receiver, client, store = served
    body = otlp_payload("0005").body
    pieces = iter([body[i : i + 1000] for i in range(0, len(body), 1000)])
    reply = client.request("POST", "/v1/traces", pieces, {"Content-Type": JSON}, chunked=True)
    assert reply.status == 200
    assert receiver.flush(timeout=30)
    (trace,) = traces(store)
    assert trace["agent_name"] == "weather_agent"


def test_success_answers_in_the_request_encoding(
    served: Served,
) -> None:
    """A protobuf request gets a protobuf ExportTraceServiceResponse; a JSON one, JSON."""
    _, client, _ = served
    reply = client.post(otlp_payload("0001"))
    assert reply.status == 200
    assert reply.headers["content-type"] == PROTOBUF
    response = ExportTraceServiceResponse()
    response.ParseFromString(reply.body)
    assert not response.HasField("partial_success")
    reply = client.post(otlp_payload("0006"))
    assert reply.headers["content-type"] == JSON
    logs_response = ExportLogsServiceResponse()
    Parse(reply.body.decode(), logs_response)
    assert not logs_response.HasField("partial_success")


def _with_broken_ids() -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.ParseFromString(otlp_payload("0001").body)
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].span_id = b"\0" * 8  # all zeros: invalid
    spans[1].trace_id = b"\x01\x02"  # the wrong size
    return request


@pytest.mark.parametrize("media", [PROTOBUF, JSON])
def test_spans_without_valid_ids_are_rejected_in_a_partial_success(
    served: Served, media: str
) -> None:
    """200 with partial_success.rejected_spans: the other spans land."""
    receiver, client, store = served
    request = _with_broken_ids()
    if media == PROTOBUF:
        body = request.SerializeToString()
    else:
        from google.protobuf.json_format import MessageToDict

        data = MessageToDict(request)
        for span in data["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            for key in ("traceId", "spanId", "parentSpanId"):
                if key in span:  # OTLP/JSON ids are hex
                    import base64

                    span[key] = base64.b64decode(span[key]).hex()
        body = json.dumps(data).encode()
    reply = client.request("POST", "/v1/traces", body, {"Content-Type": media})
    assert reply.status == 200
    response = ExportTraceServiceResponse()
    if media == PROTOBUF:
        response.ParseFromString(reply.body)
    else:
        assert json.loads(reply.body)["partialSuccess"]["rejectedSpans"] == "2"  # int64: text
        Parse(reply.body.decode(), response)
    assert response.partial_success.rejected_spans == 2
    assert "trace id or span id" in response.partial_success.error_message
    assert receiver.flush(timeout=30)
    assert count(store, "otel_spans") == 3


def test_empty_requests_are_fine(served: Served) -> None:
    """An empty export (no body, or ``{}``) is a success with nothing to write."""
    _, client, store = served
    assert client.request("POST", "/v1/traces", b"", {"Content-Type": PROTOBUF}).status == 200
    assert client.request("POST", "/v1/logs", b"{}", {"Content-Type": JSON}).status == 200
    assert count(store, "traces") == 0


def test_metrics_are_accepted_and_dropped(served: Served) -> None:
    """/v1/metrics answers 200 (no exporter errors) and records nothing; a malformed body is
    still a 400."""
    receiver, client, store = served
    body = b'{"resourceMetrics": []}'
    assert client.request("POST", "/v1/metrics", body, {"Content-Type": JSON}).status == 200
    assert client.request("POST", "/v1/metrics", b"{", {"Content-Type": JSON}).status == 400
    assert receiver.flush(timeout=30)
    assert count(store, "traces") == 0


def test_content_type_parameters_are_ignored(served: Served) -> None:
    """``application/json; charset=utf-8`` is JSON."""
    _, client, _ = served
    payload = otlp_payload("0005")
    reply = client.request(
        "POST", "/v1/traces", payload.body, {"Content-Type": "application/json; charset=utf-8"}
    )
    assert reply.status == 200


def test_full_queue_answers_503_and_accepted_items_still_land(store_dir: Path) -> None:
    """While the store is locked by another writer nothing can be made durable: queued
    requests wait, then get a retryable 503 (Retry-After), and once the queue is full the
    rest are refused at once; when the lock is gone, what was queued is written and a retry
    gets 200 once its items are on disk."""
    with receiving(store_dir, max_pending=12, ack_timeout_s=0.3) as (receiver, client, store):
        locker = sqlite3.connect(store.path, timeout=5)
        locker.execute("BEGIN IMMEDIATE")
        try:
            replies = [client.post(otlp_payload("0005")) for _ in range(4)]
            replies += [client.post(otlp_payload("0001")) for _ in range(2)]
        finally:
            locker.rollback()
            locker.close()
        # 5 spans a request and room for 12: two requests are queued (not yet durable), the
        # rest refused; none is acknowledged while nothing reaches the disk.
        assert [r.status for r in replies] == [503] * 6
        assert {r.headers.get("retry-after") for r in replies} == {"1"}
        assert receiver.flush(timeout=60)  # the queued requests' items reach the disk
        reply = client.post(otlp_payload("0010"))  # the exporter's retry
        assert reply.status == 200
        # Acknowledged means written: no flush needed to read it.
        landed = {t["metadata"]["otel"]["trace_ids"][0] for t in traces(store)}
    assert landed == {"23c11c66e93ed00bec72a044ccf095d2", "c98a46ec1658fe2539bd86a0cb09906c"}


def test_requests_in_progress_finish_during_shutdown(store_dir: Path) -> None:
    """Stopping waits for requests being handled, then drains the queue: all accepted land."""
    with receiving(store_dir) as (receiver, client, store):
        results: list[int] = []

        def send() -> None:
            other = Client(*receiver.address)
            for _ in range(20):
                try:
                    results.append(other.post(otlp_payload("0005")).status)
                except OSError:
                    break
            other.close()

        thread = threading.Thread(target=send)
        thread.start()
        time.sleep(0.05)
        assert receiver.stop()
        thread.join()
        assert results and set(results) <= {200, 503}
        accepted = results.count(200)
        assert count(store, "otel_spans") == 5  # the same ids each time
        assert receiver.stats.spans == 5 * accepted
