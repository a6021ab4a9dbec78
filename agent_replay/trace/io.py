"""Reading traces from JSON and JSONL files, and the canonical JSON encoding used everywhere.

orjson is used for speed (ingest and export are JSON-bound); its output is compact UTF-8.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any


class JsonLineError(ValueError):
    """A line (or file) that is not valid JSON; ``where`` names it (``line 12``)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: not valid JSON ({reason})")
        self.where = where
        self.reason = reason


def dumps(value: Any) -> str:
    """Compact JSON text of a value (the store's payload encoding)."""
    return orjson.dumps(value).decode()


def dumps_bytes(value: Any, *, indent: bool = False) -> bytes:
    """JSON bytes, optionally indented two spaces (human ``--json`` output)."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0)


def loads(text: str | bytes) -> Any:
    """Decode JSON text."""
    return orjson.loads(text)


def canonical_json(value: Any) -> bytes:
    """Canonical JSON: sorted keys, compact, UTF-8. Equal values give equal bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def input_hash(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of a trace input; pairs runs of the same input."""
    import hashlib  # deferred: only writers need it, and read paths start faster without

    return hashlib.sha256(canonical_json(value)).hexdigest()


def iter_jsonl(stream: IO[bytes]) -> Iterator[tuple[int, Any | JsonLineError]]:
    """Yield ``(line_number, object)`` per non-blank line; bad lines yield a ``JsonLineError``."""
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        try:
            yield number, orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            yield number, JsonLineError(f"line {number}", str(exc))


def iter_json_document(stream: IO[bytes]) -> Iterator[tuple[int, Any | JsonLineError]]:
    """Yield the traces of a JSON document: one object, or an array of them (index from 1)."""
    data = stream.read()
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        yield 0, JsonLineError("file", str(exc))
        return
    if isinstance(value, list):
        yield from enumerate(value, start=1)
    else:
        yield 1, value
