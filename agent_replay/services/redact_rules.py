"""The secret rules: what ``redact`` finds, each rule a kind, a pattern and its needles.

Each pattern is anchored on a distinctive prefix or context and uses bounded quantifiers only,
so every rule runs in linear time on any input. A rule runs only when one of its needles (lower
case) occurs in the lower-cased text; a rule without needles runs on every text long enough.
``group`` is the part of the match that is the secret (the rest, e.g. ``password=``, is kept).

Why our own rules and not ``detect-secrets`` (Yelp, 1.5.0): run with its default plugins on
the secret corpus of ``tests/unit/test_secret_corpus.py`` (43 secrets x 5 embeddings, 198
texts) it found 37 of 43 and took ~10x as long (514 ms against 49 ms). It missed exactly the
forms this project was faulted for: prefixed env-style names (``DATABASE_PASSWORD=``,
``DB_PASS=``, ``MY_API_KEY=``), a connection string's ``Password=``, ``mysql -pPW`` and a
service-account key inside JSON text. It also reports findings (line by line, per plugin, with
entropy scans) rather than rewriting text, so the placeholder engine here would be needed
anyway. Its keyword list informed the assignment rule (names containing KEY, SECRET, TOKEN,
PASSWORD, PASS, PWD, CREDENTIAL). Not a dependency.

Stdlib only: the hook's fast path redacts a payload before it is queued.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache, lru_cache
from typing import NamedTuple

_B = r"(?:(?<=\\[nrt])|(?<![A-Za-z0-9_]))"
"""A token's left boundary: not after a word character, or right after a JSON escape (``\\n``,
``\\t``, ``\\r``), so a token after an escaped newline in JSON text is still found."""
_E = r"(?![A-Za-z0-9_])"


class Rule(NamedTuple):
    """One kind of secret."""

    kind: str
    """The placeholder's kind: ``[REDACTED:<kind>]``."""
    source: str
    """The pattern (compiled on first use: the hook pays only for the rules it needs)."""
    needles: tuple[str, ...]
    """Lower-case texts one of which must occur for the rule to run (empty: always)."""
    group: int = 0
    """The group that holds the secret."""
    check: Callable[[str], bool] | None = None
    """A last test of the secret's text (``None``: every match is a secret)."""
    bounded: bool = False
    """The match must start at a token boundary (``starts_token``); tested after the match,
    so the pattern can begin with its literal prefix, which the regex engine skips to."""
    at_needles: bool = False
    """Every match starts with one of ``needles`` (in any case): in ASCII text the pattern
    is tried only where one occurs (see ``redact.find_secrets``)."""

    @property
    def pattern(self) -> re.Pattern[str]:
        """The compiled pattern."""
        return _compiled(self.source)


@cache
def _compiled(source: str) -> re.Pattern[str]:
    return re.compile(source)


def _rule(
    kind: str,
    pattern: str,
    needles: tuple[str, ...],
    group: int = 0,
    check: Callable[[str], bool] | None = None,
    *,
    at_needles: bool = False,
) -> Rule:
    bounded = pattern.startswith(_B)
    return Rule(kind, pattern.removeprefix(_B), needles, group, check, bounded, at_needles)


def starts_token(text: str, start: int) -> bool:
    """Whether a token starting at ``start`` stands alone on its left: at the start, after a
    character that is not a letter, digit or underscore, or right after a JSON escape
    (``\\n``, ``\\t``, ``\\r``)."""
    if start == 0:
        return True
    before = text[start - 1]
    if not (before.isascii() and (before.isalnum() or before == "_")):
        return True
    return before in "nrt" and start >= 2 and text[start - 2] == "\\"


def _few_slashes(text: str) -> bool:
    """A 40-character run that is a path (several slashes, or a leading one) is not a key."""
    return text.count("/") <= 2 and not text.startswith("/")


_NAME_WORDS = r"(?:key|secret|token|passw(?:or)?d|pass|pwd|credential)"

RULES: tuple[Rule, ...] = (
    _rule(
        "private_key",
        # The body can't contain "-" (except in Proc-Type:/DEK-Info: headers), so a scan never
        # runs past the next dash: linear even on a flood of BEGIN lines.
        r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----(?:[^-]|-(?=Type:|Info:)){0,20000}"
        r"-----END (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----",
        ("private key",),
    ),
    _rule("anthropic_key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,300}", ("sk-ant-",)),
    _rule(
        "openai_key",
        _B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,300}",
        ("sk-",),
    ),
    _rule("google_key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E, ("aiza",)),
    _rule(
        "aws_access_key",
        _B + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}" + _E,
        ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
    ),
    _rule(
        "github_token",
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        ("gh", "github_pat_"),
    ),
    _rule(
        "gitlab_token",
        _B + r"gl(?:pat|dt|rt|ptt|oas|cbt|imt|ft|soat|agent)-[0-9A-Za-z_\-]{20,255}",
        ("gl",),
    ),
    _rule(
        "slack_token",
        _B + r"(?:xox[abposr]-[A-Za-z0-9\-]{10,255}|xapp-[0-9]-[A-Za-z0-9\-]{10,255})",
        ("xox", "xapp-"),
    ),
    _rule(
        "slack_webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{20,200}",
        ("hooks.slack.com",),
    ),
    _rule(
        "stripe_key",
        _B + r"(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,255}|whsec_[A-Za-z0-9]{24,255})",
        ("_live_", "_test_", "whsec_"),
    ),
    _rule("npm_token", _B + r"npm_[A-Za-z0-9]{36}" + _E, ("npm_",)),
    _rule("pypi_token", _B + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,500}", ("pypi-",)),
    _rule("huggingface_token", _B + r"hf_[A-Za-z0-9]{30,255}", ("hf_",)),
    _rule(
        "jwt",
        _B + r"eyJ[A-Za-z0-9_\-]{8,4096}\.eyJ[A-Za-z0-9_\-]{8,8192}\.[A-Za-z0-9_\-]{8,4096}",
        ("eyj",),
    ),
    _rule(
        "azure_key",
        # A storage account key: 64 random bytes in base64 (86 characters and "==").
        # The first branch swallows longer base64 runs whole (base64 data), so the scan skips
        # them in one step instead of trying every position inside them.
        r"[A-Za-z0-9+/=]{89,}|(?<![A-Za-z0-9+/])([A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])",
        ("==",),
        1,
    ),
    _rule("azure_sas", r"[?&]sig=([A-Za-z0-9%/+=]{20,200})", ("sig=",), 1),
    _rule(
        "bearer_token",
        r"(?i)\bbearer\s{1,10}([A-Za-z0-9_\-\.=~+/]{16,4096})",
        ("bearer",),
        1,
    ),
    _rule(
        "basic_auth",
        r"(?i)\bauthorization\\?[\"']?\s{0,3}[:=]\s{0,3}\\?[\"']?basic\s{1,10}([A-Za-z0-9+/=]{8,1024})",
        ("basic",),
        1,
    ),
    _rule(
        "url_password",
        # From "://" (the scheme does not matter, and a literal start is what the scan skips to).
        r"://[^\s:/@\"'\\]{1,256}:([^\s@/\"'\\]{1,256})@",
        ("://",),
        1,
    ),
    _rule(
        "curl_password",
        r"\b(?:curl|wget|http)\b[^\n]{0,500}?\s(?:-u|--user|--http-password)(?:\s{1,5}|=)"
        r"['\"]?[^\s'\":]{0,256}:([^\s'\"]{1,256})",
        ("-u", "--user", "--http-password"),
        1,
    ),
    _rule(
        "mysql_password",
        r"\bmysql(?:dump|admin|sh)?\b[^\n]{0,300}?\s-p([^\s'\"-][^\s'\"]{0,255})",
        ("mysql",),
        1,
    ),
    _rule(
        "secret_assignment",
        # NAME=value, export NAME=value, name: value, "name": "value" (also JSON-escaped) for
        # names containing key, secret, token, password, pass, pwd or credential.
        # The match starts at the name's word (what precedes it in the name does not change
        # the value), so the scan skips to the letters that can begin one.
        r"(?i)" + _NAME_WORDS + r"[A-Za-z0-9_.\-]{0,64}\\?[\"']?\s{0,3}[:=]\s{0,3}\\?[\"']?"
        r"((?![\"'\\$<{\[*]|true\b|false\b|null\b|none\b|\d+(?![^\s\"',;}{\\]))"
        r"[^\s\"',;}{\\]{6,4096})",
        ("key", "secret", "token", "pass", "pwd", "credential"),
        1,
        # The pattern starts with one of these words (_NAME_WORDS). Python's regex engine
        # has no fast scan for a case-insensitive alternation: finditer tried every position
        # of a request's text (~0.8 ms for 2.7 KB of OTLP attributes).
        at_needles=True,
    ),
    _rule(
        "aws_secret_key",
        # The secret access key itself: 40 base64 characters with upper case, lower case and a
        # digit, standing alone (a git SHA is lower-case hex; base64 data is a longer run).
        # (The first branch swallows longer runs whole, as for azure_key.)
        r"[A-Za-z0-9/+=]{41,}|(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[A-Z])"
        r"(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[0-9])([A-Za-z0-9/+]{40})"
        r"(?![A-Za-z0-9/+=])",
        (),
        1,
        check=_few_slashes,
    ),
)
"""Every rule, most specific first: where two matches start at the same place, the longer
wins, then the earlier rule."""

ALL_NEEDLES: tuple[str, ...] = tuple(sorted({n for rule in RULES for n in rule.needles}))

_SECRET_KEY = (
    r"(?i)^(?:.*[_.\-])?(?:api[_-]?key|apikey|secret|secret[_-]?key|client[_-]?secret|"
    r"private[_-]?key(?:[_-]?id)?|access[_-]?key(?:[_-]?id)?|secret[_-]?access[_-]?key|"
    r"password|passwd|pwd|pass|passphrase|token|access[_-]?token|refresh[_-]?token|"
    r"auth[_-]?token|id[_-]?token|session[_-]?token|credentials?|authorization|cookie|"
    r"x[_-]api[_-]key)$"
)


@lru_cache(maxsize=4096)
def secret_key(key: str) -> bool:
    """Whether an object key names a secret, so its whole string value is hidden (``api_key``,
    ``password``, ``Authorization``, a service account's ``private_key_id``, ...)."""
    return _compiled(_SECRET_KEY).match(key) is not None
