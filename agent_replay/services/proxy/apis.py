"""What the provider APIs look like on the wire: routing and the request side (the request
hash replay matches on, a request's first prompt). Reading replies is ``replies``; the answers
the proxy writes itself (error bodies, ``--override``) are ``answers``.

Four APIs are recorded (everything else is forwarded untouched and not recorded):

- Anthropic Messages: ``POST …/v1/messages`` (SSE when ``"stream": true``);
- OpenAI Chat Completions: ``POST …/chat/completions`` (SSE when ``"stream": true``);
- OpenAI Responses: ``POST …/responses`` (SSE when ``"stream": true``);
- Gemini: ``POST …/models/{model}:generateContent`` and ``:streamGenerateContent`` (SSE with
  ``alt=sse``, else one JSON array sent piece by piece).

A request is routed to a provider by an explicit prefix (``/anthropic``, ``/openai``,
``/gemini``), else by the API its path names, else by its headers (``x-api-key`` or
``anthropic-version``: Anthropic; ``x-goog-api-key``, ``?key=`` or ``/v1beta``: Gemini;
else OpenAI).

The request hash that replay matches on covers what decides a model's answer — the model,
the messages (system prompt included) and the tool definitions — plus the API and whether it
streams (a streamed recording can't answer a plain request). Sampling settings, metadata and
headers are left out, so a re-run in a new session (new ids in ``metadata``) still matches.

Pure functions over bytes and JSON; stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

Provider = Literal["anthropic", "openai", "gemini"]
ApiKind = Literal["messages", "chat", "responses", "generate", "other"]

PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai", "gemini")
DEFAULT_UPSTREAMS: dict[Provider, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "gemini": "https://generativelanguage.googleapis.com",
}
"""The real APIs (``--upstream NAME=URL`` replaces one)."""

PRICE_PROVIDERS: dict[Provider, str] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "gemini": "google",
}
"""Our provider names -> genai-prices provider ids."""

_PREFIXES: dict[str, Provider] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "gemini": "gemini",
    "google": "gemini",
}
_GEMINI_CALL = re.compile(
    r"/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)

# Query parameters that carry credentials (Gemini's ?key=): forwarded, never recorded.
_SECRET_QUERY = frozenset({"key", "api_key", "apikey", "access_token", "token"})

# Request fields that decide the answer, per API (see the module doc).
_HASHED: dict[ApiKind, tuple[str, ...]] = {
    "messages": ("model", "system", "messages", "tools"),
    "chat": ("model", "messages", "tools", "functions"),
    "responses": ("model", "instructions", "input", "tools"),
    "generate": ("systemInstruction", "contents", "tools"),
}


@dataclass(frozen=True)
class Route:
    """Where a request goes and what it is."""

    provider: Provider
    kind: ApiKind
    """The API (``other``: forwarded untouched, not recorded)."""
    path: str
    """The upstream path and query (an explicit provider prefix removed)."""
    model: str | None = None
    """The model named by the path (Gemini)."""
    streams: bool = False
    """Whether the path asks for a stream (Gemini's ``streamGenerateContent``)."""

    @property
    def recorded(self) -> bool:
        """Whether exchanges on this route become steps."""
        return self.kind != "other"

    @property
    def shown_path(self) -> str:
        """The path and query as recorded: credentials in the query removed."""
        return public_path(self.path)


def route(method: str, path_qs: str, headers: Mapping[str, str]) -> Route:
    """Route a request (see the module doc).

    Args:
        method: the HTTP method.
        path_qs: the path with its query string, as received.
        headers: the request headers (case-insensitive mapping).
    """
    parts = urlsplit(path_qs)
    path, query = parts.path, parts.query
    provider: Provider | None = None
    head, _, rest = path.lstrip("/").partition("/")
    if head.lower() in _PREFIXES:
        provider = _PREFIXES[head.lower()]
        path = "/" + rest
    upstream_path = path + (f"?{query}" if query else "")
    kind: ApiKind = "other"
    model: str | None = None
    streams = False
    if method.upper() == "POST":
        gemini = _GEMINI_CALL.search(path)
        if gemini is not None:
            kind, model = "generate", gemini.group("model")
            streams = gemini.group("method") == "streamGenerateContent"
            provider = provider or "gemini"
        elif path.endswith("/messages") and "/v1/" in path + "/":
            kind = "messages"
            provider = provider or "anthropic"
        elif path.endswith("/chat/completions"):
            kind = "chat"
            provider = provider or "openai"
        elif path.endswith("/responses"):
            kind = "responses"
            provider = provider or "openai"
    if provider is None:
        provider = _provider_from_headers(headers, path, query)
    return Route(provider, kind, upstream_path, model, streams)


def _provider_from_headers(headers: Mapping[str, str], path: str, query: str) -> Provider:
    if "x-api-key" in headers or "anthropic-version" in headers:
        return "anthropic"
    if (
        "x-goog-api-key" in headers
        or path.startswith("/v1beta")
        or any(k == "key" for k, _ in parse_qsl(query))
    ):
        return "gemini"
    return "openai"


def public_path(path_qs: str) -> str:
    """A path and query with credential parameters (``?key=…``) removed."""
    parts = urlsplit(path_qs)
    if not parts.query:
        return parts.path
    kept = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k.lower() not in _SECRET_QUERY
    ]
    return parts.path + (f"?{urlencode(kept)}" if kept else "")


def upstream_url(base: str, path_qs: str) -> str:
    """The upstream URL for a request path. A base ending in the path's leading version
    segment (``https://api.openai.com/v1`` + ``/v1/chat/completions``) doesn't repeat it."""
    base = base.rstrip("/")
    first = "/" + path_qs.lstrip("/").split("/", 1)[0]
    if first not in ("/", "") and base.endswith(first) and first.startswith("/v1"):
        base = base[: -len(first)]
    return base + path_qs


# --- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedRequest:
    """A model request, read."""

    body: dict[str, Any]
    model: str | None
    stream: bool
    hash: str
    """The canonical request hash replay matches on (see the module doc)."""


_INT64 = 2**63 - 1


def _bounded_int(digits: str) -> int | str:
    """An integer the store can hold (64-bit, as the trace format's JSON encoder), else its
    digits as text: a request may carry any JSON number, and losing the step over one would
    lose the exchange (the upstream still gets the bytes as sent)."""
    if len(digits) > 20:
        return digits
    value = int(digits)
    return value if -_INT64 - 1 <= value <= _INT64 else digits


def loads_json(text: str | bytes) -> Any:
    """``json.loads`` with out-of-range integers kept as their digits (see ``_bounded_int``)."""
    return json.loads(text, parse_int=_bounded_int)


def parse_request(route: Route, raw: bytes) -> ParsedRequest:
    """Read a model request.

    Raises:
        ValueError: the body is not a JSON object (the message says why).
    """
    try:
        body = loads_json(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ValueError(f"the request body is a JSON {type(body).__name__}, not an object")
    model = route.model if route.kind == "generate" else body.get("model")
    if not isinstance(model, str):
        model = None
    stream = route.streams if route.kind == "generate" else body.get("stream") is True
    return ParsedRequest(body, model, stream, request_hash(route.kind, body, model, stream))


def request_hash(kind: ApiKind, body: dict[str, Any], model: str | None, stream: bool) -> str:
    """The canonical hash of a request: sha256 over the sorted-key JSON of the API, the model,
    whether it streams, and the API's message and tool fields."""
    picked = {key: body.get(key) for key in _HASHED.get(kind, ()) if body.get(key) is not None}
    picked.update(api=kind, model=model, stream=stream)
    text = json.dumps(picked, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def first_prompt(kind: ApiKind, body: dict[str, Any]) -> str | None:
    """The text of the last user turn of a request (a trace's input when it starts)."""
    turns: list[Any] = []
    if kind in ("messages", "chat"):
        turns = [
            m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"
        ]
        if not turns:
            return None
        return _text_of(turns[-1].get("content"))
    if kind == "responses":
        items = body.get("input")
        if isinstance(items, str):
            return items
        turns = [i for i in items or [] if isinstance(i, dict) and i.get("role") == "user"]
        return _text_of(turns[-1].get("content")) if turns else None
    if kind == "generate":
        turns = [
            c
            for c in body.get("contents") or []
            if isinstance(c, dict) and c.get("role", "user") == "user"
        ]
        if not turns:
            return None
        return _text_of(turns[-1].get("parts"))
    return None


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            b["text"]
            for b in content
            if isinstance(b, dict)
            and isinstance(b.get("text"), str)
            and b.get("type") in (None, "text", "input_text")
        ]
        return "\n".join(texts) or None
    return None
