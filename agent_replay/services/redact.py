"""Secret redaction: the one redaction every writer applies before anything is written.

Secrets become ``[REDACTED:<kind>]`` (the rules and why they are ours: ``redact_rules``).
Redaction works on values, not encoded text:

- a string holding JSON (an OTLP message attribute, a tool's JSON output) is parsed, redacted
  structurally and re-encoded (only when something changed; otherwise it is kept byte for
  byte);
- an object key naming a secret (``api_key``, ``password``, ``Authorization``, ``private_key``)
  hides its whole string value (``secret_field``);
- every other string is searched by every rule at once and each match replaced in one pass,
  so overlapping rules never mangle a placeholder and placeholders never nest (an existing
  placeholder is left as it is: redacting twice changes nothing).

Values are walked without recursion, so any nesting depth is safe. Stdlib only: the hook's
fast path redacts a payload before it is queued, and the drainer, the recorder, ingest and the
OTLP receiver share this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agent_replay.services.redact_rules import ALL_NEEDLES, RULES, Rule, secret_key, starts_token

PLACEHOLDER = re.compile(r"\[REDACTED:[a-z_]{1,40}\]")
_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+"
_AS_RUNS = bytes(0x61 if byte in _BASE64 else 0x20 for byte in range(256))
"""Bytes translated: a base64 character to ``a``, any other byte to a space."""
_RUN_OF_40 = b"a" * 40


def _maybe_bare(text: str) -> bool:
    """The needle-less rules' cheap pre-check (the AWS secret key): whether ``text`` has 40
    base64 characters in a row. ``re.search("[A-Za-z0-9/+]{40}")`` tries every position (74 us
    for 2.7 KB); translating the UTF-8 bytes and looking for 40 ``a`` in a row is a few us
    (a non-ASCII character is non-ASCII bytes, which end a run as it does)."""
    data = text.encode("utf-8", "surrogatepass")
    return _RUN_OF_40 in data.translate(_AS_RUNS)


_NEEDLELESS = tuple(rule for rule in RULES if not rule.needles)
MIN_SECRET = 6
"""No secret is shorter (a shorter string is never searched)."""


def might_hold_secret(text: str) -> bool:
    """Whether any rule could match ``text`` (a fast pre-check: false means nothing to do)."""
    return bool(_active_rules(text))


def find_secrets(text: str, active: list[Rule] | None = None) -> list[tuple[int, int, str]]:
    """The secrets in ``text``: non-overlapping ``(start, end, kind)``, in order (``active``:
    the rules to apply, when the caller already knows them)."""
    active = _active_rules(text) if active is None else active
    if not active:
        return []
    taken = []
    if "[REDACTED:" in text:
        taken = [(m.start(), m.end()) for m in PLACEHOLDER.finditer(text)]
    found: list[tuple[int, int, int, str]] = []
    for order, rule in enumerate(active):
        if rule.at_needles and text.isascii():
            matches: Iterable[re.Match[str]] = _at_needles(rule, text)
        else:
            matches = rule.pattern.finditer(text)
        for match in matches:
            start, end = match.span(rule.group)
            if start >= end or (rule.check is not None and not rule.check(text[start:end])):
                continue
            if rule.bounded and not starts_token(text, match.start()):
                continue
            if not any(s < end and start < e for s, e in taken):
                found.append((start, -end, order, rule.kind))
    if not found:
        return []
    found.sort()
    spans: list[tuple[int, int, str]] = []
    reach = 0
    for start, neg_end, _, kind in found:
        if start >= reach:
            spans.append((start, -neg_end, kind))
            reach = -neg_end
    return spans


def _at_needles(rule: Rule, text: str) -> Iterator[re.Match[str]]:
    """``rule.pattern.finditer(text)`` for a rule whose every match starts with one of its
    needles, in ASCII ``text``: the pattern is matched only where a needle occurs in its lower
    case (which lines up with ``text`` in ASCII; in other text a non-ASCII letter can match an
    ASCII one case-insensitively, ``ı`` an ``i``, so it takes ``finditer``)."""
    lowered = text.lower()
    starts: set[int] = set()
    for needle in rule.needles:
        at = lowered.find(needle)
        while at >= 0:
            starts.add(at)
            at = lowered.find(needle, at + 1)
    pattern = rule.pattern
    end = 0
    for start in sorted(starts):
        if start < end:
            continue  # inside the last match: finditer resumes at its end
        match = pattern.match(text, start)
        if match is not None:
            yield match
            end = max(match.end(), start + 1)


_TRIVIAL = re.compile(r"[\d\s:.TZ+\-]*")
"""Numbers, times and dates: no secret is made of these characters alone."""
_PLAIN = re.compile(r"[A-Za-z\s]*")
"""Words and spaces only: only a letters-only access key id or bearer token could hide here."""
_PLAIN_RULES = tuple(r for r in RULES if r.kind in ("aws_access_key", "bearer_token"))


def _active_rules(text: str) -> list[Rule]:
    """The rules that could match ``text`` (their needles occur in it), most specific first."""
    if len(text) < MIN_SECRET or _TRIVIAL.fullmatch(text) is not None:
        return []
    if _PLAIN.fullmatch(text) is not None:  # the common case (prose): two cheap checks
        if "earer" in text or "EARER" in text or "A" in text:
            lowered = text.lower()
            return [r for r in _PLAIN_RULES if any(n in lowered for n in r.needles)]
        return []
    lowered = text.lower()
    present = [n for n in ALL_NEEDLES if n in lowered]
    if present:
        bare = _maybe_bare(text)
        return [
            r for r in RULES if (bare if not r.needles else any(n in present for n in r.needles))
        ]
    if _maybe_bare(text):
        return list(_NEEDLELESS)
    return []


def redact_text(text: str, active: list[Rule] | None = None) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]`` (one pass, no nesting)."""
    spans = find_secrets(text, active)
    if not spans:
        return text
    parts = []
    position = 0
    for start, end, kind in spans:
        parts.append(text[position:start])
        parts.append(f"[REDACTED:{kind}]")
        position = end
    parts.append(text[position:])
    return "".join(parts)


def redact_string(text: str) -> str:
    """A string value redacted: as JSON (parsed, redacted structurally, re-encoded) when it
    holds a JSON object or array, else as text."""
    active = _active_rules(text)
    if not active:
        return text
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            parsed = json.loads(stripped)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict | list):
            redacted = redact_value(parsed)
            if redacted == parsed:
                return text
            compact = '": ' not in stripped and '", ' not in stripped
            encoded = json.dumps(
                redacted, ensure_ascii=False, separators=(",", ":") if compact else None
            )
            return text[: len(text) - len(text.lstrip())] + encoded
    return redact_text(text, active)


def _secret_field(key: Any, item: Any) -> bool:
    return (
        isinstance(item, str)
        and bool(item)
        and isinstance(key, str)
        and secret_key(key)
        and PLACEHOLDER.fullmatch(item) is None
    )


_RECURSE = 200
"""Nesting walked by recursion (fast); deeper values continue with an explicit stack."""


def redact_value(value: Any) -> Any:
    """A JSON value with secrets redacted in every string (JSON held in strings included), and
    the whole string value of keys that name a secret. A new value; the input is not changed.
    Any nesting depth is safe."""
    return _walk(value, 0)


def _walk(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return redact_string(value) if len(value) >= MIN_SECRET else value
    if kind is not dict and kind is not list:
        if isinstance(value, str | dict | list):  # a subclass: the general walk
            return _walk_deep(value)
        return value
    if depth >= _RECURSE:
        return _walk_deep(value)
    if kind is list:
        return [_walk(item, depth + 1) for item in value]
    out = {}
    for key, item in value.items():
        if type(item) is str:
            if _secret_field(key, item):
                out[key] = "[REDACTED:secret_field]"
            else:
                out[key] = redact_string(item) if len(item) >= MIN_SECRET else item
        else:
            out[key] = _walk(item, depth + 1)
    return out


def _walk_deep(value: Any) -> Any:
    """``redact_value`` with an explicit stack (no recursion, any depth)."""
    if isinstance(value, str):
        return redact_string(value)
    if not isinstance(value, dict | list):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        node, parent, slot = stack.pop()
        if isinstance(node, str):
            parent[slot] = redact_string(node)
        elif isinstance(node, dict):
            copy: dict[Any, Any] = dict.fromkeys(node)
            parent[slot] = copy
            for key, item in node.items():
                if _secret_field(key, item):
                    copy[key] = "[REDACTED:secret_field]"
                elif isinstance(item, str | dict | list):
                    stack.append((item, copy, key))
                else:
                    copy[key] = item
        elif isinstance(node, list):
            items: list[Any] = list(node)
            parent[slot] = items
            for index, item in enumerate(node):
                if isinstance(item, str | dict | list):
                    stack.append((item, items, index))
        else:
            parent[slot] = node
    return root[0]


_limits: Any = None
"""``services.limits``, once ``redact_capped`` is first used (deferred: it loads ``hashlib``,
which the hook's fast path, redacting only, never needs)."""
MAX_DEPTH = 100
"""``limits.MAX_DEPTH`` (checked equal when ``limits`` is loaded)."""


def redact_capped(value: Any, max_bytes: int) -> Any:
    """``redact_value(limits.cap_value(value, max_bytes))`` in one walk instead of two (the
    recorder's redactor: every value is capped, then redacted; the result is the same)."""
    global _limits
    if _limits is None:
        from agent_replay.services import limits

        assert limits.MAX_DEPTH == MAX_DEPTH
        _limits = limits
    return _capped(value, max_bytes, 0)


def _capped(value: Any, max_bytes: int, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        if len(value) * 4 > max_bytes:
            value = _limits.cap_text(value, max_bytes)
        return redact_string(value) if len(value) >= MIN_SECRET else value
    if kind is list:
        if depth >= MAX_DEPTH:
            return _walk(_limits.cap_value(value, max_bytes, depth), 0)  # its marker, redacted
        return [_capped(item, max_bytes, depth + 1) for item in value]
    if kind is not dict:
        if isinstance(value, str | dict | list):  # a subclass: as the two walks take it
            return redact_value(_limits.cap_value(value, max_bytes, depth))
        return value
    if depth >= MAX_DEPTH:
        return _walk(_limits.cap_value(value, max_bytes, depth), 0)
    out = {}
    for key, item in value.items():
        kind = type(item)
        if kind is not str:
            if (kind is dict or kind is list) and depth + 1 < MAX_DEPTH:
                out[key] = _capped(item, max_bytes, depth + 1)
                continue
            if not isinstance(item, str | dict | list):
                out[key] = item
                continue
            # A container too deep (its marker text) or a subclass (as its base): capped as
            # ``cap_value`` does, then redacted as a field's value (the key may hide it).
            item = _limits.cap_value(item, max_bytes, depth + 1)
            if type(item) is not str:
                out[key] = redact_value(item)
                continue
        elif len(item) * 4 > max_bytes:
            item = _limits.cap_text(item, max_bytes)
        if _secret_field(key, item):
            out[key] = "[REDACTED:secret_field]"
        else:
            out[key] = redact_string(item) if len(item) >= MIN_SECRET else item
    return out


Redactor = Callable[[Any], Any]


def identity(value: Any) -> Any:
    """The no-op redactor (``--no-redact``)."""
    return value


def redact_payload_text(text: str) -> str:
    """A JSON document (a hook payload) redacted as a value and re-encoded; text that is not
    JSON is redacted as text. Unchanged text is returned as it is."""
    if len(text) < 1_000_000 and not might_hold_secret(text):  # (a big one is parsed at once)
        return text
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return redact_text(text)
    redacted = redact_value(parsed)
    return text if redacted == parsed else json.dumps(redacted, ensure_ascii=False)
