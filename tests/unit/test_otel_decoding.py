"""OTLP/JSON is decoded by the OpenTelemetry JSON bindings (``opentelemetry-proto-json``), with
``json_format`` into the ``opentelemetry-proto`` messages as the reference path: both give the
same items, what only the reference path reads (proto field names, enum names) still decodes,
and what it refuses is still a 400. The writer process survives being killed."""

from __future__ import annotations

import copy
import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message
from otelkit import JSON, all_payloads, count, otlp_payload, post_all, receiving, traces

from agent_replay.services.otel import normalize
from agent_replay.services.otel.protocol import ProtocolError, parse_request
from agent_replay.services.redact import redact_value

JSON_PAYLOADS = [
    p
    for p in all_payloads()
    if p.headers["Content-Type"] == JSON and not p.path.endswith("/metrics")
]


def _body(payload: Any) -> bytes:
    if payload.headers.get("Content-Encoding") == "gzip":
        return gzip.decompress(payload.body)
    return bytes(payload.body)


def _items(signal: str, body: bytes, *, reference: bool = False) -> normalize.Decoded:
    message = parse_request(signal, JSON, body, reference=reference)
    return normalize._items(signal, message, redact_value)


def _same(a: normalize.Decoded, b: normalize.Decoded) -> bool:
    return (a.spans, a.logs, a.rejected, a.ignored) == (b.spans, b.logs, b.rejected, b.ignored)


@pytest.mark.parametrize("payload", JSON_PAYLOADS, ids=lambda p: p.name)
def test_the_bindings_and_the_reference_path_give_the_same_items(payload: Any) -> None:
    """Every JSON fixture (traces and logs) is read by the bindings, item for item as
    ``json_format`` reads it."""
    signal = payload.path.rsplit("/", 1)[1]
    body = _body(payload)
    fast = parse_request(signal, JSON, body)
    assert not isinstance(fast, Message)  # the bindings read it as it stands
    assert _same(_items(signal, body), _items(signal, body, reference=True))


def _snake_case(value: Any) -> Any:
    """OTLP/JSON with proto field names (``resource_spans``), which ``json_format`` accepts."""
    if isinstance(value, list):
        return [_snake_case(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
        out[snake] = _snake_case(item)
    return out


def test_proto_field_names_still_decode() -> None:
    """``resource_spans``/``trace_id``... (proto names) give the same spans as camelCase."""
    body = _body(otlp_payload("0005"))
    snake = json.dumps(_snake_case(json.loads(body))).encode()
    assert b"resource_spans" in snake
    decoded = normalize.decode("traces", JSON, snake, redact_value)
    assert decoded.spans
    assert _same(decoded, normalize.decode("traces", JSON, body, redact_value))


def test_enum_names_still_decode() -> None:
    """``"kind": "SPAN_KIND_CLIENT"`` and ``"code": "STATUS_CODE_ERROR"`` (enum names, which
    ``json_format`` accepts) give the same spans as the numbers."""
    data = json.loads(_body(otlp_payload("0005")))
    span = data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["kind"] = 3
    span["status"] = {"code": 2, "message": "boom"}
    numbers = json.dumps(data).encode()
    span["kind"] = "SPAN_KIND_CLIENT"
    span["status"] = {"code": "STATUS_CODE_ERROR", "message": "boom"}
    names = json.dumps(data).encode()
    decoded = normalize.decode("traces", JSON, names, redact_value)
    assert decoded.spans[0]["kind"] == 3
    assert decoded.spans[0]["status"] == {"code": 2, "message": "boom"}
    assert _same(decoded, normalize.decode("traces", JSON, numbers, redact_value))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("startTimeUnixNano", -1),
        ("endTimeUnixNano", 2**64),
        ("attribute", 2**63),
        ("attribute", -(2**63) - 10**4),
        ("startTimeUnixNano", 2**70),
    ],
)
def test_numbers_out_of_range_are_refused(field: str, value: int) -> None:
    """What the ``opentelemetry-proto`` fields can't hold is a 400, as before."""
    data = json.loads(_body(otlp_payload("0005")))
    span = data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    if field == "attribute":
        span["attributes"].append({"key": "big", "value": {"intValue": value}})
    else:
        span[field] = value
    with pytest.raises(ProtocolError) as caught:
        normalize.decode("traces", JSON, json.dumps(data).encode(), redact_value)
    assert caught.value.status == 400
    assert "malformed OTLP/JSON traces request" in caught.value.message


def test_ids_the_bindings_cant_read_as_hex_take_the_reference_path() -> None:
    """A base64 span id (what the generic mapping expects) is read as before."""
    data = json.loads(_body(otlp_payload("0005")))
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    original = copy.deepcopy(spans[0])
    spans[0]["spanId"] = "AAAAAAAAAAE="  # 8 bytes, base64
    spans[0].pop("parentSpanId", None)
    decoded = normalize.decode("traces", JSON, json.dumps(data).encode(), redact_value)
    assert decoded.spans[0]["span_id"] == "0000000000000001"
    assert decoded.spans[0]["trace_id"] == original["traceId"].lower()


def test_a_killed_writer_process_is_restarted_and_nothing_accepted_is_lost(
    store_dir: Path,
) -> None:
    """The writer process dies: a new one is started and sent every unwritten batch."""
    payloads = [p for p in all_payloads() if not p.path.endswith("/metrics")]
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, payloads[:3])
        child = receiver.writer._child
        assert child is not None
        child.process.kill()
        post_all(client, receiver, payloads[3:])
        for _ in range(100):  # the new process is running
            if receiver.writer._child is not None and receiver.writer._child is not child:
                break
            time.sleep(0.05)
        assert receiver.flush(timeout=60)
        restarted = _shape(store)
    with receiving(store_dir.parent / "fresh") as (receiver, client, store):
        post_all(client, receiver, payloads)
        assert _shape(store) == restarted


def _shape(store: Any) -> tuple[Any, ...]:
    """What was written, without first-seen times: traces, their steps, staged items."""
    return (
        sorted(
            (t["id"], t["agent_name"], t["status"], [(s["id"], s["step_type"]) for s in t["steps"]])
            for t in traces(store)
        ),
        count(store, "otel_spans"),
        count(store, "otel_logs"),
    )
