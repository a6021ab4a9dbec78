"""OTLP/HTTP wire format: request bodies in, export responses and error statuses out.

Decoding uses the official OpenTelemetry message classes:

- ``application/x-protobuf``: the ``opentelemetry-proto`` messages' ``ParseFromString``;
- ``application/json``: the OpenTelemetry project's OTLP/JSON bindings
  (``opentelemetry-proto-json``, generated from the same ``.proto`` files, and written for
  OTLP/JSON: hex ids, integers as numbers or strings), about 7x faster than the generic
  ``google.protobuf.json_format`` mapping. A body those bindings can't read as it stands is
  decoded again by the reference path, ``json_format`` into the ``opentelemetry-proto``
  messages, after the OTLP/JSON fix-ups the generic mapping doesn't know (hex ids, not
  base64): proto field names (``resource_spans``), enum names (``"SPAN_KIND_SERVER"``) and
  anything malformed go there, so what is accepted and the 400 answers are the reference
  mapping's.

Bodies may be gzip- or deflate-compressed; decompression is incremental and stops at a limit,
so a small bomb can't expand into memory.

Stdlib and protobuf only; never imports the store or anything heavy.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

JSON = "application/json"
PROTOBUF = "application/x-protobuf"

SIGNALS: dict[str, tuple[type[Message], type[Message]]] = {
    "traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
    "metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}
"""Signal name (the path's last part: ``/v1/traces``) -> (request message, response message)."""

# gRPC status codes carried in the error body (google.rpc.Status.code).
INVALID_ARGUMENT = 3
NOT_FOUND = 5
RESOURCE_EXHAUSTED = 8
UNIMPLEMENTED = 12
UNAVAILABLE = 14


class ProtocolError(Exception):
    """A request the receiver refuses: the HTTP status to answer and why.

    Args:
        status: the HTTP status code (400, 413, 415, ...).
        message: a short explanation, sent back in the ``Status`` body.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


GRPC_CODE = {400: INVALID_ARGUMENT, 404: NOT_FOUND, 405: UNIMPLEMENTED, 413: RESOURCE_EXHAUSTED}


def media_type(content_type: str | None) -> str:
    """The bare media type of a ``Content-Type`` header (``application/json; charset=utf-8``
    -> ``application/json``); empty when absent."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo a ``Content-Encoding``, never producing more than ``limit`` bytes.

    Args:
        body: the request body as received.
        encoding: the header's value (``gzip``, ``deflate``, ``identity`` or none).
        limit: the most decompressed bytes accepted.

    Raises:
        ProtocolError: 415 for an unsupported coding, 413 past ``limit``, 400 for a corrupt or
            truncated stream.
    """
    coding = (encoding or "identity").strip().lower()
    if coding in ("", "identity"):
        if len(body) > limit:
            raise ProtocolError(413, f"body over the {limit}-byte limit")
        return body
    if coding in ("gzip", "x-gzip"):
        wbits = 16 + zlib.MAX_WBITS
    elif coding == "deflate":
        wbits = 32 + zlib.MAX_WBITS  # zlib-wrapped (or gzip) deflate, header auto-detected
    else:
        raise ProtocolError(415, f"unsupported Content-Encoding {encoding!r} (use gzip)")
    out = bytearray()
    pending = body
    try:
        while True:
            inflater = zlib.decompressobj(wbits)
            while pending:
                # Ask for one byte more than still allowed: getting it means the limit is passed.
                out += inflater.decompress(pending, limit - len(out) + 1)
                if len(out) > limit:
                    raise ProtocolError(413, f"decompressed body over the {limit}-byte limit")
                if inflater.eof:
                    break
                if inflater.unconsumed_tail == pending:  # no progress: a stalled stream
                    break
                pending = inflater.unconsumed_tail
            if not inflater.eof:
                raise ProtocolError(400, f"truncated {coding} body")
            pending = inflater.unused_data
            if not pending.strip(b"\0"):  # gzip allows several members; padding ends it
                return bytes(out)
    except zlib.error as exc:
        raise ProtocolError(400, f"corrupt {coding} body: {exc}") from None


# --- requests ---------------------------------------------------------------------------------

# Where OTLP/JSON carries hex ids (bytes fields, which the generic JSON mapping reads as base64).
_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
_CONTAINERS = {
    "traces": (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), "spans"),
    "logs": (("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), "logRecords"),
}


def _hex_to_base64(item: dict[str, Any]) -> None:
    for key in _ID_KEYS:
        value = item.get(key)
        if isinstance(value, str) and value:
            try:
                item[key] = base64.b64encode(bytes.fromhex(value)).decode()
            except ValueError:
                pass  # not hex: leave it for the JSON mapping (base64) to accept or refuse


def _fix_json_ids(data: dict[str, Any], signal: str) -> None:
    """Rewrite OTLP/JSON's hex ids as the base64 the protobuf JSON mapping expects."""
    if signal not in _CONTAINERS:
        return
    outer_keys, inner_keys, leaf = _CONTAINERS[signal]
    for outer_key in outer_keys:
        for resource in _dicts(data.get(outer_key)):
            for inner_key in inner_keys:
                for scope in _dicts(resource.get(inner_key)):
                    for item in _dicts(scope.get(leaf) or scope.get("log_records")):
                        _hex_to_base64(item)
                        for link in _dicts(item.get("links")):
                            _hex_to_base64(link)


def _dicts(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array (anything else: none; the JSON mapping reports it)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# The OTLP/JSON bindings' request classes (``from_dict``) of the signals whose items are kept.
# Without opentelemetry-proto-json installed, OTLP/JSON takes the reference path (slower).
_JSON_CLASSES: dict[str, Any] = {}
try:
    from opentelemetry.proto_json.collector.logs.v1 import logs_service as _json_logs
    from opentelemetry.proto_json.collector.trace.v1 import trace_service as _json_traces
except ImportError:  # pragma: no cover - a dependency of the package
    pass
else:
    _JSON_CLASSES = {
        "traces": _json_traces.ExportTraceServiceRequest,
        "logs": _json_logs.ExportLogsServiceRequest,
    }

# A JSON object key with an underscore: in OTLP/JSON only a proto field name (``trace_id``,
# which the reference mapping accepts and the bindings don't know) or an unknown field. User
# data never is a key (attribute names are ``"key"`` values), and a key-like text inside a
# string value has escaped quotes, so it doesn't match. Anchored on the underscore (rarer
# than quotes, so the scan is fast); it matches every such key, and a few more harmlessly.
_SNAKE_KEY = re.compile(rb'_[A-Za-z0-9_]*"\s*:')


def parse_request(signal: str, media: str, body: bytes, *, reference: bool = False) -> Any:
    """Decode an export request of ``signal`` (traces, logs, metrics) from its body.

    Protobuf gives an ``opentelemetry-proto`` message. JSON gives an OTLP/JSON bindings
    message (``opentelemetry.proto_json``) when they read the body as it stands, else (or with
    ``reference``) the ``opentelemetry-proto`` message of the reference ``json_format`` path.

    Raises:
        ProtocolError: 415 for a media type other than OTLP's two, 400 for a malformed body.
    """
    if media == PROTOBUF:
        message = SIGNALS[signal][0]()
        try:
            message.ParseFromString(body)
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise ProtocolError(400, f"malformed protobuf {signal} request: {exc}") from None
        return message
    if media == JSON:
        try:
            data = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(400, f"malformed JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ProtocolError(400, f"a {signal} request must be a JSON object")
        bindings = _JSON_CLASSES.get(signal)
        if bindings is not None and not reference and not _SNAKE_KEY.search(body):
            try:
                return bindings.from_dict(data)
            except (ValueError, TypeError, AttributeError, RecursionError):
                pass  # the reference mapping decides: it accepts more, or says what is wrong
        return _parse_json_reference(signal, data)
    raise ProtocolError(
        415, f"unsupported Content-Type {media or '(none)'!r}: use {PROTOBUF} or {JSON}"
    )


def _parse_json_reference(signal: str, data: dict[str, Any]) -> Message:
    """OTLP/JSON through ``google.protobuf.json_format`` into the ``opentelemetry-proto``
    message (after turning hex ids into the base64 the generic mapping expects)."""
    message = SIGNALS[signal][0]()
    _fix_json_ids(data, signal)
    try:
        json_format.ParseDict(data, message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise ProtocolError(400, f"malformed OTLP/JSON {signal} request: {exc}") from None
    return message


# --- responses --------------------------------------------------------------------------------


def _status_class() -> Callable[..., Message]:
    """``google.rpc.Status`` (code, message), built in a private descriptor pool.

    OTLP/HTTP error bodies are this message. Defining its two fields here keeps
    googleapis-common-protos out of the dependencies, and a private pool can't clash with that
    package's own definition when both are loaded (the OTLP exporters load it).
    """
    pool = descriptor_pool.DescriptorPool()
    proto = descriptor_pb2.FileDescriptorProto(
        name="agent_replay/otel/google_rpc_status.proto", package="google.rpc", syntax="proto3"
    )
    status = proto.message_type.add(name="Status")
    field = descriptor_pb2.FieldDescriptorProto
    status.field.add(
        name="code", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL, json_name="code"
    )
    status.field.add(
        name="message",
        number=2,
        type=field.TYPE_STRING,
        label=field.LABEL_OPTIONAL,
        json_name="message",
    )
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status"))


Status = _status_class()


def encode(message: Message, media: str) -> bytes:
    """A message in the request's encoding (OTLP/JSON renders int64 as strings, as required)."""
    if media == JSON:
        return json_format.MessageToJson(message, indent=None).encode()
    return message.SerializeToString()


@dataclass
class Outcome:
    """How many items of a request could not be kept, and why (``partial_success``)."""

    rejected: int = 0
    message: str = ""


def export_response(signal: str, outcome: Outcome) -> Message:
    """The ``Export*ServiceResponse`` of a signal, with ``partial_success`` when items were
    rejected (left unset on full success, as the specification asks)."""
    response = SIGNALS[signal][1]()
    if outcome.rejected or outcome.message:
        partial = response.partial_success  # type: ignore[attr-defined]
        field = {"traces": "rejected_spans", "logs": "rejected_log_records"}.get(
            signal, "rejected_data_points"
        )
        setattr(partial, field, outcome.rejected)
        partial.error_message = outcome.message
    return response


def error_body(status: int, message: str, media: str) -> tuple[bytes, str]:
    """The ``Status`` body of an error response and its content type (JSON unless the request
    was protobuf)."""
    code = GRPC_CODE.get(status, UNAVAILABLE if status >= 500 else INVALID_ARGUMENT)
    reply = Status(code=code, message=message)
    kind = PROTOBUF if media == PROTOBUF else JSON
    return encode(reply, kind), kind


def hex_id(raw: bytes, size: int) -> str | None:
    """A trace (16-byte) or span (8-byte) id as lowercase hex; ``None`` when absent, the wrong
    size, or all zeros (invalid per the specification)."""
    if len(raw) != size or not raw.strip(b"\0"):
        return None
    return binascii.hexlify(raw).decode()
