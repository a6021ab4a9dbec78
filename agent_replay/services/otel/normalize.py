"""Decoded OTLP messages -> plain, JSON-ready span and log-record dicts (what is staged).

A span keeps its ids (hex), name, kind, times (Unix ns), status, attributes, events, scope and
a few resource attributes. A log record is kept only when the trace builder knows its event
(harness and GenAI events, see ``semconv.log_event``); the rest of a harness's chatter (hook
timings, plugin loads, startup stats) is counted and dropped. Secrets are redacted here, before
anything is queued for the store.

Both decodings are read: ``opentelemetry-proto`` messages (protobuf, and JSON on the reference
path) and the OTLP/JSON bindings' messages (``opentelemetry.proto_json``), which give the same
items. ``decode`` is the entry point: body in, items out.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from agent_replay.services.otel import semconv
from agent_replay.services.otel.protocol import hex_id, parse_request
from agent_replay.services.redact import Redactor, identity
from agent_replay.trace.io import canonical_json

# Resource attributes worth keeping on every item (the rest, e.g. a process's whole command
# line, would be copied onto every span for nothing).
_RESOURCE_KEYS = (
    "service.name",
    "service.version",
    "service.namespace",
    "service.instance.id",
    "session.id",
    "deployment.environment",
    "deployment.environment.name",
)


def _scope(scope: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if scope is None:  # absent in a JSON-bindings message
        return out
    if scope.name:
        out["name"] = scope.name
    if scope.version:
        out["version"] = scope.version
    return out


def _texts_and_keys(value: Any, texts: list[str], keys: set[str]) -> None:
    if isinstance(value, str):
        texts.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            keys.add(key)
            _texts_and_keys(item, texts, keys)
    elif isinstance(value, list):
        for item in value:
            _texts_and_keys(item, texts, keys)


def might_hold_secrets(items: list[dict[str, Any]], redact: Redactor) -> bool:
    """Whether redacting ``items`` could change anything, asked of ``redact`` itself in two
    calls instead of one per string (redaction is the receiver's costliest step otherwise).

    Every string is joined on newlines and redacted once: the patterns match within a string,
    so a secret in any string changes the joined text (a match across two strings is only a
    false alarm). Every key is probed once with a one-character value, which only a key that
    names a secret (``api_key``, ``password``) replaces.
    """
    if redact is identity:
        return False
    texts: list[str] = []
    keys: set[str] = set()
    _texts_and_keys(items, texts, keys)
    joined = "\n".join(texts)
    if redact(joined) != joined:
        return True
    return any(_names_a_secret(key, redact) for key in keys)


_KEY_VERDICTS: dict[tuple[int, str], bool] = {}


def _names_a_secret(key: str, redact: Redactor) -> bool:
    """Whether ``redact`` replaces any value under this key; attribute names repeat across
    spans, so the answer is remembered (a bounded cache)."""
    memo = (id(redact), key)
    verdict = _KEY_VERDICTS.get(memo)
    if verdict is None:
        probe = {key: "x"}
        verdict = bool(redact(probe) != probe)
        if len(_KEY_VERDICTS) > 50_000:
            _KEY_VERDICTS.clear()
        _KEY_VERDICTS[memo] = verdict
    return verdict


def _redacted(items: list[dict[str, Any]], redact: Redactor) -> list[dict[str, Any]]:
    """``items`` redacted (only those that might hold a secret are walked)."""
    if not items or not might_hold_secrets(items, redact):
        return items
    return [redact(item) if might_hold_secrets([item], redact) else item for item in items]


@dataclass
class Decoded:
    """What one export request carried, ready for the writer."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    rejected: int = 0
    """Items that can't be kept (a span without a valid trace or span id)."""
    ignored: int = 0
    """Log records of events the builder doesn't map (accepted and dropped)."""


_INT64 = 1 << 63
_UINT64 = 1 << 64


class Unrepresentable(ValueError):
    """A JSON-bindings message holds a number the ``opentelemetry-proto`` field can't (an
    int64 attribute or a fixed64 time out of range): the reference path must decide."""


# The keys of a span item and its parts, probed for secret names once per request like the
# attribute names (none names a secret; checked anyway, as the generic walk would).
_SPAN_KEYS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "start_ns",
    "end_ns",
    "status",
    "code",
    "message",
    "attributes",
    "events",
    "time_ns",
    "resource",
    "scope",
    "version",
)


def decode(signal: str, media: str, body: bytes, redact: Redactor) -> Decoded:
    """The items of an export request's body (``signal``: traces, logs or metrics), redacted.

    Raises:
        ProtocolError: 415 for a media type other than OTLP's two, 400 for a malformed body.
    """
    message = parse_request(signal, media, body)
    try:
        return _items(signal, message, redact)
    except Unrepresentable:
        return _items(signal, parse_request(signal, media, body, reference=True), redact)


def _items(signal: str, message: Any, redact: Redactor) -> Decoded:
    if signal == "traces":
        return spans_from(message, redact)
    if signal == "logs":
        return logs_from(message, redact)
    return Decoded()


def _pb_value(value: Any, texts: list[str], keys: set[str]) -> Any:
    """An ``opentelemetry-proto`` ``AnyValue`` as a JSON value; its strings go to ``texts``
    and its map keys to ``keys`` (the redaction pre-check)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        text = value.string_value
        texts.append(text)
        return text
    if kind is None:
        return None
    if kind == "array_value":
        return [_pb_value(item, texts, keys) for item in value.array_value.values]
    if kind == "kvlist_value":
        out = {}
        for kv in value.kvlist_value.values:
            keys.add(kv.key)
            out[kv.key] = _pb_value(kv.value, texts, keys)
        return out
    if kind == "bytes_value":
        text = base64.b64encode(value.bytes_value).decode()
        texts.append(text)
        return text
    return getattr(value, kind)


def _pb_attributes(items: Iterable[Any], texts: list[str], keys: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in items:
        value = kv.value
        if value.WhichOneof("value") == "string_value":
            text = value.string_value
            texts.append(text)
            out[kv.key] = text
        else:
            out[kv.key] = _pb_value(value, texts, keys)
    keys.update(out)
    return out


def _json_value(value: Any, texts: list[str], keys: set[str]) -> Any:
    """An OTLP/JSON bindings ``AnyValue`` (at most one field set) as a JSON value, as
    ``_pb_value`` reads the protobuf one."""
    if value is None:
        return None
    text = value.string_value
    if text is not None:
        texts.append(text)
        return text
    number = value.int_value
    if number is not None:
        if not -_INT64 <= number < _INT64:
            raise Unrepresentable(f"int64 value out of range: {number}")
        return number
    if value.bool_value is not None:
        return value.bool_value
    if value.double_value is not None:
        return value.double_value
    if value.array_value is not None:
        return [_json_value(item, texts, keys) for item in value.array_value.values]
    if value.kvlist_value is not None:
        out = {}
        for kv in value.kvlist_value.values:
            keys.add(kv.key)
            out[kv.key] = _json_value(kv.value, texts, keys)
        return out
    if value.bytes_value is not None:
        text = base64.b64encode(value.bytes_value).decode()
        texts.append(text)
        return text
    return value.string_value_strindex


def _json_attributes(items: Iterable[Any], texts: list[str], keys: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in items:
        value = kv.value
        if value is not None and value.string_value is not None:
            text = value.string_value
            texts.append(text)
            out[kv.key] = text
        else:
            out[kv.key] = _json_value(value, texts, keys)
    keys.update(out)
    return out


def _time(value: int) -> int:
    """A fixed64 time of the JSON bindings, refused past the field's range."""
    if not 0 <= value < _UINT64:
        raise Unrepresentable(f"fixed64 value out of range: {value}")
    return value


def spans_from(request: Any, redact: Redactor) -> Decoded:
    """The spans of an ``ExportTraceServiceRequest`` (either decoding).

    Every string and map key of the items is gathered while they are built, so the redaction
    pre-check (``might_hold_secrets``, one ``redact`` call for the whole request) needs no
    second walk over them.
    """
    out = Decoded()
    texts: list[str] = []
    keys: set[str] = set(_SPAN_KEYS)
    protobuf = isinstance(request, Message)
    attributes_of = _pb_attributes if protobuf else _json_attributes
    for resource_spans in request.resource_spans:
        resource_message = resource_spans.resource
        attrs = (
            attributes_of(resource_message.attributes, [], set())
            if resource_message is not None
            else {}
        )
        resource = {k: attrs[k] for k in _RESOURCE_KEYS if k in attrs}
        _texts_and_keys(resource, texts, keys)
        for scope_spans in resource_spans.scope_spans:
            scope = _scope(scope_spans.scope)
            texts.extend(scope.values())
            for span in scope_spans.spans:
                trace_id = hex_id(span.trace_id, 16)
                span_id = hex_id(span.span_id, 8)
                if trace_id is None or span_id is None:
                    out.rejected += 1
                    continue
                parent_span_id = hex_id(span.parent_span_id, 8)
                status = span.status
                if protobuf:
                    kind = span.kind
                    start_ns, end_ns = span.start_time_unix_nano, span.end_time_unix_nano
                    code, message = status.code, status.message
                else:
                    kind = int(span.kind)
                    start_ns = _time(span.start_time_unix_nano)
                    end_ns = _time(span.end_time_unix_nano)
                    code, message = (int(status.code), status.message) if status else (0, "")
                texts.append(trace_id)
                texts.append(span_id)
                if parent_span_id is not None:
                    texts.append(parent_span_id)
                texts.append(span.name)
                texts.append(message)
                events = []
                for event in span.events:
                    texts.append(event.name)
                    time_ns = event.time_unix_nano
                    events.append(
                        {
                            "name": event.name,
                            "time_ns": time_ns if protobuf else _time(time_ns),
                            "attributes": attributes_of(event.attributes, texts, keys),
                        }
                    )
                item: dict[str, Any] = {
                    "trace_id": trace_id,
                    "span_id": span_id,
                    "parent_span_id": parent_span_id,
                    "name": span.name,
                    "kind": kind,
                    "start_ns": start_ns,
                    "end_ns": end_ns,
                    "status": {"code": code, "message": message},
                    "attributes": attributes_of(span.attributes, texts, keys),
                    "events": events,
                    "resource": resource,
                    "scope": scope,
                }
                out.spans.append(item)
    out.spans = _redacted_gathered(out.spans, texts, keys, redact)
    return out


_PLAIN_KEYS: dict[int, set[str]] = {}
"""Per redactor (by ``id``), keys known not to name a secret: a set difference then leaves
only the keys never seen before to probe."""


def _redacted_gathered(
    items: list[dict[str, Any]], texts: list[str], keys: set[str], redact: Redactor
) -> list[dict[str, Any]]:
    """``_redacted``, with the strings and keys of ``items`` already gathered."""
    if not items or redact is identity:
        return items
    joined = "\n".join(dict.fromkeys(texts))  # a string repeated is checked once
    if redact(joined) == joined and not _any_secret_key(keys, redact):
        return items
    return [redact(item) if might_hold_secrets([item], redact) else item for item in items]


def _any_secret_key(keys: set[str], redact: Redactor) -> bool:
    """Whether any of ``keys`` names a secret (``_names_a_secret``, asked of new keys only)."""
    plain = _PLAIN_KEYS.setdefault(id(redact), set())
    new = keys - plain
    if any(_names_a_secret(key, redact) for key in new):
        return True
    if len(plain) > 50_000:  # bounded, like the verdicts
        plain.clear()
    plain |= new
    return False


def logs_from(request: Any, redact: Redactor) -> Decoded:
    """The log records of an ``ExportLogsServiceRequest`` that the trace builder maps."""
    out = Decoded()
    protobuf = isinstance(request, Message)
    attributes_of = _pb_attributes if protobuf else _json_attributes
    texts: list[str] = []  # unused: log records take the generic redaction walk
    keys: set[str] = set()
    for resource_logs in request.resource_logs:
        resource_message = resource_logs.resource
        resource_attrs = (
            attributes_of(resource_message.attributes, texts, keys)
            if resource_message is not None
            else {}
        )
        resource = {k: resource_attrs[k] for k in _RESOURCE_KEYS if k in resource_attrs}
        for scope_logs in resource_logs.scope_logs:
            scope = _scope(scope_logs.scope)
            for record in scope_logs.log_records:
                attrs = attributes_of(record.attributes, texts, keys)
                if protobuf:
                    body = _pb_value(record.body, texts, keys) if record.HasField("body") else None
                    time_ns, observed_ns = record.time_unix_nano, record.observed_time_unix_nano
                else:
                    body = _json_value(record.body, texts, keys)
                    time_ns = _time(record.time_unix_nano)
                    observed_ns = _time(record.observed_time_unix_nano)
                event_name = getattr(record, "event_name", "") or ""
                event = semconv.log_event(event_name, attrs, body, scope, resource)
                if event is None:
                    out.ignored += 1
                    continue
                item: dict[str, Any] = {
                    "event": event,
                    "time_ns": time_ns or observed_ns,
                    "observed_ns": observed_ns,
                    "severity": int(record.severity_number),
                    "severity_text": record.severity_text,
                    "body": body,
                    "attributes": attrs,
                    "trace_id": hex_id(record.trace_id, 16),
                    "span_id": hex_id(record.span_id, 8),
                    "resource": resource,
                    "scope": scope,
                }
                # Identity for redelivery: the record as sent (before redaction, which could
                # make two different secrets equal).
                item["key"] = hashlib.sha256(canonical_json(item)).hexdigest()[:32]
                item["session_key"] = semconv.log_session_key(item)
                out.logs.append(item)
    out.logs = _redacted(out.logs, redact)
    return out
