"""Secret redaction: what is redacted, what is left alone, and that the recorder applies it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.services.limits import cap_value
from agent_replay.services.recorder import TraceRecorder
from agent_replay.services.redact import redact_capped, redact_text, redact_value
from agent_replay.store.trace_detail import get_trace


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123", "anthropic_key"),
        ("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx12", "openai_key"),
        ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "google_key"),
        ("aws AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        ("token ghp_" + "a" * 36, "github_token"),
        ("xoxb-123456789012-abcdefghij", "slack_token"),
        ("sk_live_abcdefghijklmnop1234", "stripe_key"),
        ("hf_" + "b" * 34, "huggingface_token"),
        ("Authorization: Bearer abcdefghijklmnop1234", "bearer_token"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "private_key"),
        ("postgres://bob:hunter2pass@db:5432/app", "url_password"),
        ('config: api_key: "abcd1234efgh"', "secret_assignment"),
    ],
)
def test_secrets_become_redaction_markers(text: str, kind: str) -> None:
    """Each kind of secret is replaced by [REDACTED:<kind>], and its value is gone."""
    out = redact_text(text)
    assert f"[REDACTED:{kind}]" in out
    secret = text.split()[-1].strip('"')
    if kind not in ("url_password", "bearer_token", "private_key", "secret_assignment"):
        assert secret not in out


def test_url_password_keeps_user_and_host() -> None:
    """Only the password of a URL is hidden."""
    assert redact_text("postgres://bob:hunter2pass@db:5432/app") == (
        "postgres://bob:[REDACTED:url_password]@db:5432/app"
    )


@pytest.mark.parametrize(
    "text",
    ["the token count: 12345678", "password_hash", "sk-learn is a library", "tokens_used=12"],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    """Words that merely mention secrets are not redacted."""
    assert redact_text(text) == text


def test_values_of_secret_named_keys_are_redacted() -> None:
    """Strings under keys like api_key/password/Authorization are hidden; numbers stay."""
    value = {"api_key": "zzz", "tokens_used": 5, "x": [{"password": "p"}], "Authorization": "B"}
    assert redact_value(value) == {
        "api_key": "[REDACTED:secret_field]",
        "tokens_used": 5,
        "x": [{"password": "[REDACTED:secret_field]"}],
        "Authorization": "[REDACTED:secret_field]",
    }


def test_hostile_input_is_redacted_in_linear_time() -> None:
    """Long adversarial strings don't make the patterns backtrack."""
    for text in (
        "sk-" + "a" * 200_000 + "!",
        "a://" + "b" * 100_000 + ":" * 100_000,
        "eyJ" * 60_000,
    ):
        start = time.perf_counter()
        redact_text(text)
        assert time.perf_counter() - start < 1.0


def test_recorder_redacts_by_default(store) -> None:
    """The capture engine writes no secret it was given, unless told not to redact."""
    rec = TraceRecorder(store, lenient=True)
    tid = rec.start_trace("bot", input={"cmd": "export KEY=sk-ant-api03-abcdefghijklmnopqrstuvwx"})
    rec.step(tid, {"step_type": "tool_call", "output": "Bearer abcdefghijklmnopqrstu", "name": "x"})
    trace = get_trace(store, tid)
    assert "sk-ant" not in str(trace.input)
    assert trace.steps[0].output == "Bearer [REDACTED:bearer_token]"
    raw = TraceRecorder(store, lenient=True, redact=False)
    tid2 = raw.start_trace("bot", input="sk-ant-api03-abcdefghijklmnopqrstuvwx")
    assert get_trace(store, tid2).input == "sk-ant-api03-abcdefghijklmnopqrstuvwx"


def test_dotted_attribute_names_count_as_secret_keys() -> None:
    """OpenTelemetry-style dotted names (db.password, ...authorization) are redacted by key."""
    out = redact_value({"db.password": "x1", "http.request.header.authorization": "Basic x"})
    assert set(out.values()) == {"[REDACTED:secret_field]"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "secret_assignment"),
        ("DATABASE_PASSWORD=s3cr3t-pass!", "secret_assignment"),
        ("MY_API_KEY=abcdef123456", "secret_assignment"),
        ("DB_PASS=hunter22", "secret_assignment"),
        ("export GITHUB_TOKEN=ghp_" + "A1b2" * 9, "github_token"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "basic_auth"),
        ("curl -u alice:Sup3rSecret https://api.example.com", "curl_password"),
        ("mysql -u root -pMyS3cretPW -h db", "mysql_password"),
        ("glpat-" + "x1Y2z3" * 4, "gitlab_token"),
        ("npm_" + "a1B2c3D4e5" * 3 + "a1B2c3", "npm_token"),
        ("key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY alone", "aws_secret_key"),
    ],
)
def test_the_forms_the_issue_found_unredacted_are_caught(text: str, expected: str) -> None:
    assert f"[REDACTED:{expected}]" in redact_text(text)


def test_placeholders_never_nest_and_redacting_twice_changes_nothing() -> None:
    once = redact_text("clone https://deploy:ghp_" + "Z9" * 18 + "@github.com/org/repo.git")
    assert once == "clone https://deploy:[REDACTED:github_token]@github.com/org/repo.git"
    assert redact_text(once) == once
    assert redact_value({"a": once}) == {"a": once}


def test_json_held_in_a_string_is_redacted_as_a_value() -> None:
    """A token after an escaped newline in JSON text (an OTLP message attribute) is found,
    and the text stays the JSON it was."""
    token = "sk-ant-api03-" + "q" * 40
    attribute = json.dumps([{"role": "user", "content": f"line one\nkey: {token}"}])
    redacted = redact_value({"gen_ai.input.messages": attribute})["gen_ai.input.messages"]
    assert token not in redacted
    assert json.loads(redacted) == [
        {"role": "user", "content": "line one\nkey: [REDACTED:anthropic_key]"}
    ]


def test_non_secrets_stay_intact() -> None:
    text = (
        "commit 3f786850e387550fdab836ed7e6dc881de23001b id 123e4567-e89b-12d3-a456-426614174000 "
        "png iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ" + "A" * 300 + " max_tokens=1024 "
        "tokens_used=12 password_hash monkey business /Users/Jane/Projects2024/src/app/main"
    )
    assert redact_text(text) == text


def test_deep_values_are_redacted_without_recursion() -> None:
    value: Any = "ghp_" + "k" * 36
    for _ in range(5000):
        value = {"a": [value]}
    out = redact_value(value)
    for _ in range(5000):
        out = out["a"][0]
    assert out == "[REDACTED:github_token]"


class _Text(str):
    pass


class _Object(dict):  # type: ignore[type-arg]
    pass


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def test_the_recorders_one_walk_caps_and_redacts_as_the_two_walks_do() -> None:
    """``redact_capped`` (the recorder's redactor) gives what capping then redacting gives:
    long texts, containers at and past the depth cap (under a secret-named key too), str and
    dict subclasses, JSON held in a string, secrets and non-secrets."""
    token = "ghp_" + "a" * 36
    cap = 1024
    values: list[Any] = [
        "plain words only",
        f"export GITHUB_TOKEN={token}",
        {"password": "hunter2hunter2", "note": f"see {token}", "n": 3, "ok": True},
        {"api_key": _nested(120, "x"), "deep": _nested(99, token), "deeper": _nested(101, "y")},
        [_nested(100, token), _nested(98, [token]), None, 1.5],
        {"text": "word " * 400 + token, "list": ["word " * 400 + token]},
        {"token": _Text("abcdefgh12345"), "sub": _Object(a=_Text(token)), "s": _Text("hi")},
        _Object(password="abcdef123456", inner=[_Text(token)]),
        _Text(token),
        json.dumps({"authorization": "Bearer abcdefghijklmnop1234", "x": [token]}),
        {"[REDACTED:secret_field]": "[REDACTED:github_token]", "key": "[REDACTED:api_key]"},
    ]
    at_the_cap: Any = {"token": {"x": 1}, "other": [1]}  # its values become depth markers
    for _ in range(99):
        at_the_cap = [at_the_cap]
    values.append(at_the_cap)
    for value in values:
        assert redact_capped(value, cap) == redact_value(cap_value(value, cap))


# --- rules matched only where their needles occur --------------------------------------------

_FRAGMENTS = [
    *("key", "KEY", "Secret", "tOkEn", "password", "passwd", "PASS", "pwd", "credential"),
    *("api", "_", "-", ".", "=", ":", " ", '"', "'", '\\"', "\\", "{", "}", ",", ";", "\n"),
    *("$x", "true", "null", "12345", "hunter2hunter2", "s3cr3t-value", "export ", "*", "x" * 70),
]


@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=30).map("".join))
@settings(max_examples=400, deadline=None)
def test_a_rule_tried_at_its_needles_matches_what_finditer_matches(text: str) -> None:
    """``secret_assignment`` is matched only where one of its words occurs (ASCII text): the
    same matches, in the same places, as its pattern scanning every position."""
    from agent_replay.services.redact import _at_needles
    from agent_replay.services.redact_rules import RULES

    (rule,) = [r for r in RULES if r.kind == "secret_assignment"]
    assert rule.at_needles
    expected = [m.span(1) for m in rule.pattern.finditer(text)]
    assert [m.span(1) for m in _at_needles(rule, text)] == expected


@pytest.mark.parametrize(
    "text",
    [
        "credent\u0131al=hunter2hunter2 and a key",  # dotless i: matches i case-insensitively
        "\u017fecret: 'hunter2hunter2' and a key",  # long s
        "\u212aEY=hunter2hunter2 token",  # Kelvin sign
    ],
)
def test_a_non_ascii_letter_that_matches_an_ascii_one_still_redacts(text: str) -> None:
    """Outside ASCII, lower-casing does not line up with the regex's case-insensitivity, so
    the rule scans the whole text: the secret is found all the same."""
    assert "hunter2hunter2" not in redact_text(text)


@given(
    st.lists(
        st.one_of(
            st.sampled_from(["A" * 40, "b/+9" * 10, "x" * 39, " ", "-", "é", "\ud800", "\n"]),
            st.text(alphabet="aZ09/+ _.=é", max_size=50),
        ),
        max_size=12,
    ).map("".join)
)
@settings(max_examples=400, deadline=None)
def test_the_bare_key_precheck_is_the_regex_it_replaces(text: str) -> None:
    """40 base64 characters in a row, found by translating bytes: what
    ``re.search("[A-Za-z0-9/+]{40}")`` says, for any text (non-ASCII, lone surrogates)."""
    import re

    from agent_replay.services.redact import _maybe_bare

    assert _maybe_bare(text) == (re.search(r"[A-Za-z0-9/+]{40}", text) is not None)
