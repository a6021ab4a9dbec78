"""Bounds on what one captured value may cost: a size cap per text value and a nesting cap.

A producer can send a 120 MB tool output or a value nested a thousand levels deep. Stored as
they are, one such value bloats the store, holds the write lock for seconds (every other
writer waits) and can't even be encoded (the JSON encoder stops at 255 levels). Every capture
path goes through the recorder, which passes values through ``cap_value`` before redaction and
validation: a text longer than the cap (default 1 MiB, ``AGENT_REPLAY_MAX_VALUE_BYTES``) keeps
its beginning and ends with a marker giving the original size and SHA-256 digest; a container
nested deeper than ``MAX_DEPTH`` is replaced by a marker text.

Stdlib only (the hook's drainer may use it): never imports the store, pydantic or Textual.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from typing import Any

ENV_MAX_VALUE_BYTES = "AGENT_REPLAY_MAX_VALUE_BYTES"
DEFAULT_MAX_VALUE_BYTES = 1 << 20
# Deeper containers are replaced (the store's JSON encoder refuses more than 255 levels, and
# the value sits inside a step's or trace's fields).
MAX_DEPTH = 100
MARKER = "[truncated by agent-replay:"
# A run of token characters at the end of a cut (see ``cap_text``).
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.:~]{1,512}$")
# The smallest cap accepted (the marker itself needs room).
MIN_VALUE_BYTES = 1024


def max_value_bytes() -> int:
    """The configured cap (``AGENT_REPLAY_MAX_VALUE_BYTES``; an unusable setting is ignored)."""
    text = os.environ.get(ENV_MAX_VALUE_BYTES, "").strip()
    if text.isdigit() and int(text) >= MIN_VALUE_BYTES:
        return int(text)
    return DEFAULT_MAX_VALUE_BYTES


def cap_text(text: str, max_bytes: int) -> str:
    """``text`` if it fits in ``max_bytes`` (UTF-8), else its beginning plus a marker with the
    original size and digest."""
    if len(text) * 4 <= max_bytes:  # the common case: can't be over, no encoding needed
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    digest = hashlib.sha256(data).hexdigest()
    marker = f"…{MARKER} {len(data)} bytes, sha256:{digest}]"
    keep = data[: max(0, max_bytes - len(marker.encode()))].decode("utf-8", "ignore")
    # The cut may fall inside a secret, and a secret's first few characters match no
    # redaction rule: the word-like run the cut ends in goes too.
    tail = _TOKEN_TAIL.search(keep, max(0, len(keep) - 512))  # (from the end: linear)
    if tail is not None:
        keep = keep[: tail.start()]
    return keep + marker


def _deep_marker(value: Any) -> str:
    try:
        data = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    except (RecursionError, TypeError, ValueError):
        return f"{MARKER} nested deeper than {MAX_DEPTH} levels]"
    digest = hashlib.sha256(data).hexdigest()
    return f"{MARKER} nested deeper than {MAX_DEPTH} levels, {len(data)} bytes, sha256:{digest}]"


def cap_value(value: Any, max_bytes: int = DEFAULT_MAX_VALUE_BYTES, _depth: int = 0) -> Any:
    """A JSON value with every over-long text and over-deep container replaced (a new value
    where something changed; the same objects otherwise)."""
    cls = value.__class__
    if cls is str:
        return cap_text(value, max_bytes)
    if cls is dict:
        if _depth >= MAX_DEPTH:
            return _deep_marker(value)
        out = {}
        changed = False
        for key, item in value.items():
            capped = cap_value(item, max_bytes, _depth + 1)
            changed = changed or capped is not item
            out[key] = capped
        return out if changed else value
    if cls is list:
        if _depth >= MAX_DEPTH:
            return _deep_marker(value)
        items = [cap_value(item, max_bytes, _depth + 1) for item in value]
        if any(a is not b for a, b in zip(items, value, strict=True)):
            return items
        return value
    if isinstance(value, str | dict | list):  # subclasses: as their base
        return cap_value(
            str(value) if isinstance(value, str) else type(value).__base__(value),  # type: ignore[misc]
            max_bytes,
            _depth,
        )
    return value


def cap_payload_text(text: str, max_bytes: int | None = None) -> str:
    """A JSON document (a hook payload) with its values capped, re-encoded; other text capped
    as text. Text within the cap is returned as it is (the common case costs one ``len``)."""
    limit = max_bytes or max_value_bytes()
    if len(text) <= limit // 4:
        return text
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return cap_text(text, limit)
    return json.dumps(cap_value(parsed, limit), ensure_ascii=False)


def capped(redactor: Callable[[Any], Any], max_bytes: int) -> Callable[[Any], Any]:
    """``redactor`` applied to the capped value (capping first: redaction never scans more
    than the cap of any text)."""

    def apply(value: Any) -> Any:
        return redactor(cap_value(value, max_bytes))

    return apply
