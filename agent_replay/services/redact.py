"""Secret redaction, applied on every capture path before anything is written.

Secrets become ``[REDACTED:<kind>]``. The patterns are anchored on distinctive prefixes and
bounded character classes, so each runs in linear time on any input (no nested quantifiers).
Stdlib only: the hook's drainer and the recorder share it.

Kinds: ``private_key`` (PEM blocks), ``anthropic_key``, ``openai_key``, ``google_key``,
``aws_access_key``, ``github_token``, ``slack_token``, ``stripe_key``, ``huggingface_token``,
``jwt``, ``bearer_token`` (``Authorization: Bearer …``/``Bearer …``), ``url_password``
(``scheme://user:password@host`` keeps the user and host), ``secret_assignment``
(``api_key=…``, ``"password": "…"``-style assignments of a value).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private_key",
        re.compile(
            # The body can't contain "-" (except in Proc-Type:/DEK-Info: headers), so a scan
            # never runs past the next dash: linear even on a flood of BEGIN lines.
            r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----(?:[^-]|-(?=Type:|Info:)){0,20000}"
            r"-----END (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----"
        ),
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("google_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("bearer_token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9_\-\.=~+/]{16,}")),
]
# user:password@ inside a URL: keep the scheme, user and host; hide the password.
_URL_PASSWORD = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]{0,20}://[^\s:/@]{1,256}:)([^\s@/]{1,256})@")
# key = value / "key": "value" for names that say "secret".
_ASSIGNMENT = re.compile(
    r"(?i)(\b(?:api[_-]?key|secret|password|passwd|token|access[_-]?key)[\"']?\s{0,3}[:=]\s{0,3}[\"']?)"
    r"([^\s\"',;}{]{8,})"
)
# Literal needles per pattern: a pattern runs only when one of its needles is in the text, so
# ordinary text costs a few substring checks instead of a pass of every regex.
_NEEDLES: dict[str, tuple[str, ...]] = {
    "private_key": ("PRIVATE KEY",),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "google_key": ("AIza",),
    "aws_access_key": ("AKIA", "ASIA"),
    "github_token": ("gh", "github_pat_"),
    "slack_token": ("xox",),
    "stripe_key": ("_live_", "_test_"),
    "huggingface_token": ("hf_",),
    "jwt": ("eyJ",),
    "bearer_token": ("earer", "EARER"),
}
_ASSIGNMENT_NEEDLES = ("ey", "EY", "Ey", "ecret", "ECRET", "assw", "ASSW", "oken", "OKEN")


# One search for any needle at all: most strings have none and return at once.
_ANY_NEEDLE = re.compile(
    "|".join(
        re.escape(n)
        for n in sorted(
            {*(n for ns in _NEEDLES.values() for n in ns), "://", *_ASSIGNMENT_NEEDLES},
            key=len,
            reverse=True,
        )
    )
)


def redact_text(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``."""
    if len(text) < 8 or not _ANY_NEEDLE.search(text):  # no secret is shorter than 8
        return text
    for kind, pattern in _PATTERNS:
        if any(needle in text for needle in _NEEDLES[kind]):
            text = pattern.sub(f"[REDACTED:{kind}]", text)
    if "://" in text:
        text = _URL_PASSWORD.sub(r"\1[REDACTED:url_password]@", text)
    if not any(needle in text for needle in _ASSIGNMENT_NEEDLES):
        return text
    return _ASSIGNMENT.sub(
        lambda m: (
            m.group(0)
            if m.group(2).startswith("[REDACTED:")
            else f"{m.group(1)}[REDACTED:secret_assignment]"
        ),
        text,
    )


_SECRET_KEYS = re.compile(
    r"(?i)^(?:.*[_.\-])?(?:api[_-]?key|secret|password|passwd|token|access[_-]?key|authorization)$"
)


def redact_value(value: Any) -> Any:
    """A JSON value with secrets redacted in every string, and the whole value of keys that
    name a secret (``api_key``, ``password``, ``Authorization``, …) when it is a string."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(item, str) and isinstance(key, str) and _SECRET_KEYS.match(key) and item:
                out[key] = item if item.startswith("[REDACTED:") else "[REDACTED:secret_field]"
            else:
                out[key] = redact_value(item)
        return out
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    return value


Redactor = Callable[[Any], Any]


def identity(value: Any) -> Any:
    """The no-op redactor (``--no-redact``)."""
    return value
