"""Decoded OTLP messages -> plain, JSON-ready span and log-record dicts (what is staged).

A span keeps its ids (hex), name, kind, times (Unix ns), status, attributes, events, scope and
a few resource attributes. A log record is kept only when the trace builder knows its event
(harness and GenAI events, see ``semconv.log_event``); the rest of a harness's chatter (hook
timings, plugin loads, startup stats) is counted and dropped. Secrets are redacted here, before
anything is queued for the store.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_replay.services.otel import semconv
from agent_replay.services.otel.protocol import hex_id
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


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a JSON value (bytes become base64 text)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)


def attributes(items: Iterable[Any]) -> dict[str, Any]:
    """OTLP ``KeyValue`` attributes as a dict (a repeated key keeps its last value)."""
    return {kv.key: any_value(kv.value) for kv in items}


def _resource(resource: Any) -> dict[str, Any]:
    attrs = attributes(resource.attributes)
    return {k: attrs[k] for k in _RESOURCE_KEYS if k in attrs}


def _scope(scope: Any) -> dict[str, str]:
    out = {}
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


def spans_from(request: Any, redact: Redactor) -> Decoded:
    """The spans of an ``ExportTraceServiceRequest``."""
    out = Decoded()
    for resource_spans in request.resource_spans:
        resource = _resource(resource_spans.resource)
        for scope_spans in resource_spans.scope_spans:
            scope = _scope(scope_spans.scope)
            for span in scope_spans.spans:
                trace_id = hex_id(span.trace_id, 16)
                span_id = hex_id(span.span_id, 8)
                if trace_id is None or span_id is None:
                    out.rejected += 1
                    continue
                item: dict[str, Any] = {
                    "trace_id": trace_id,
                    "span_id": span_id,
                    "parent_span_id": hex_id(span.parent_span_id, 8),
                    "name": span.name,
                    "kind": span.kind,
                    "start_ns": span.start_time_unix_nano,
                    "end_ns": span.end_time_unix_nano,
                    "status": {"code": span.status.code, "message": span.status.message},
                    "attributes": attributes(span.attributes),
                    "events": [
                        {
                            "name": event.name,
                            "time_ns": event.time_unix_nano,
                            "attributes": attributes(event.attributes),
                        }
                        for event in span.events
                    ],
                    "resource": resource,
                    "scope": scope,
                }
                out.spans.append(item)
    out.spans = _redacted(out.spans, redact)
    return out


def logs_from(request: Any, redact: Redactor) -> Decoded:
    """The log records of an ``ExportLogsServiceRequest`` that the trace builder maps."""
    out = Decoded()
    for resource_logs in request.resource_logs:
        resource = _resource(resource_logs.resource)
        for scope_logs in resource_logs.scope_logs:
            scope = _scope(scope_logs.scope)
            for record in scope_logs.log_records:
                attrs = attributes(record.attributes)
                body = any_value(record.body) if record.HasField("body") else None
                event_name = getattr(record, "event_name", "") or ""
                event = semconv.log_event(event_name, attrs, body, scope, resource)
                if event is None:
                    out.ignored += 1
                    continue
                item: dict[str, Any] = {
                    "event": event,
                    "time_ns": record.time_unix_nano or record.observed_time_unix_nano,
                    "observed_ns": record.observed_time_unix_nano,
                    "severity": record.severity_number,
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
