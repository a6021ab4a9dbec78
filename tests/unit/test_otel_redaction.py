"""The receiver redacts before anything is queued, and its shortcut (one redaction of the
joined text and a key probe instead of one call per string) decides exactly as redacting
every value would."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from otelkit import otlp_payload, span, traces_payload

from agent_replay.services.otel import normalize
from agent_replay.services.otel.protocol import parse_request
from agent_replay.services.redact import identity, redact_value

SECRETS = [
    "sk-ant-" + "a1B2" * 10,
    "sk-proj-" + "Q9r8" * 8,
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "ghp_" + "x" * 36,
    "Bearer " + "abcdefghijklmnop1234",
    "postgres://admin:hunter2secret@db.local/app",
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
    "password=correcthorsebattery",
]


def decoded(payload_body: bytes, content_type: str = "application/json") -> list[dict[str, Any]]:
    request = parse_request("traces", content_type, payload_body)
    return normalize.spans_from(request, identity).spans


def clean_spans() -> list[dict[str, Any]]:
    return decoded(otlp_payload("0018").body) + decoded(otlp_payload("0010").body)


def test_clean_spans_need_no_redaction() -> None:
    spans = clean_spans()
    assert not normalize.might_hold_secrets(spans, redact_value)
    assert [redact_value(s) for s in spans] == spans


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s[:10])
@pytest.mark.parametrize("where", ["attribute", "event", "status", "nested", "resource"])
def test_a_secret_anywhere_is_found_and_redacted_like_redact_value(secret: str, where: str) -> None:
    spans = clean_spans()
    target = spans[3]
    if where == "attribute":
        target["attributes"]["note"] = f"see {secret} here"
    elif where == "event":
        target["events"].append({"name": "log", "time_ns": 1, "attributes": {"msg": secret}})
    elif where == "status":
        target["status"]["message"] = secret
    elif where == "nested":
        target["attributes"]["config"] = {"list": ["a", {"deep": secret}]}
    else:
        target["resource"] = {**target["resource"], "service.namespace": secret}
    original = copy.deepcopy(spans)
    assert normalize.might_hold_secrets(spans, redact_value)
    out = normalize._redacted(spans, redact_value)
    assert out == [redact_value(s) for s in original]
    assert secret not in str(out)


def test_a_key_that_names_a_secret_is_redacted_even_when_short() -> None:
    spans = clean_spans()
    spans[0]["attributes"]["db_password"] = "abc"  # too short for any text pattern
    assert normalize.might_hold_secrets(spans, redact_value)
    out = normalize._redacted(spans, redact_value)
    assert out[0]["attributes"]["db_password"] == "[REDACTED:secret_field]"
    assert out[1:] == spans[1:]


def test_no_redact_keeps_everything() -> None:
    body = traces_payload(span("1", "1", "chat", {"api_key": SECRETS[0]})).body
    (item,) = decoded(body)
    assert not normalize.might_hold_secrets([item], identity)
    assert item["attributes"]["api_key"] == SECRETS[0]
