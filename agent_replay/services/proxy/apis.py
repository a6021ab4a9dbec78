"""What the provider APIs look like on the wire: routing, the request hash, reading replies.

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
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


def _loads(text: str | bytes) -> Any:
    """``json.loads`` with out-of-range integers kept as their digits (see ``_bounded_int``)."""
    return json.loads(text, parse_int=_bounded_int)


def parse_request(route: Route, raw: bytes) -> ParsedRequest:
    """Read a model request.

    Raises:
        ValueError: the body is not a JSON object (the message says why).
    """
    try:
        body = _loads(raw)
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


# --- replies ----------------------------------------------------------------------------------


@dataclass
class Reply:
    """What a model answered, read from the response bytes (streamed or not)."""

    text: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """``{"id", "name", "input"}`` for each tool call."""
    stop_reason: str | None = None
    model: str | None = None
    response_id: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    """The provider's usage object, as sent."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    error: str | None = None
    """The provider's error message (an error body or a stream's error event)."""

    @property
    def tokens_used(self) -> int | None:
        """Input plus output tokens (cache tokens stay in the usage metadata, as the
        transcript importer counts them)."""
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def output(self) -> dict[str, Any] | None:
        """The step's output: the reply's text, tool calls and stop reason."""
        out: dict[str, Any] = {}
        if self.text:
            out["text"] = self.text
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        if self.stop_reason:
            out["stop_reason"] = self.stop_reason
        return out or None


def read_reply(kind: ApiKind, status: int, body: bytes, stream: bool) -> Reply:
    """Read a reply from its bytes; never raises (what can't be read is left out)."""
    reply = Reply()
    text = body.decode("utf-8", "replace")
    if status >= 400 or not stream:
        try:
            data = _loads(text) if text.strip() else None
        except ValueError:
            data = None
        if status >= 400:
            reply.error = _error_message(data, text, status)
            return reply
        if kind == "generate" and isinstance(data, list):  # a streamGenerateContent array
            for item in data:
                _gemini_chunk(reply, item)
        elif isinstance(data, dict):
            _READERS[kind](reply, data)
        return reply
    if kind == "generate" and text.lstrip().startswith("["):
        try:
            items = _loads(text)
        except ValueError:
            items = []
        for item in items if isinstance(items, list) else []:
            _gemini_chunk(reply, item)
        return reply
    assembler = _ASSEMBLERS[kind]()
    for event, data in sse_events(text):
        assembler.feed(reply, event, data)
    assembler.finish(reply)
    return reply


def sse_events(text: str) -> Iterable[tuple[str | None, Any]]:
    """``(event name, decoded data)`` of each server-sent event (``[DONE]`` and undecodable
    data are skipped)."""
    for block in re.split(r"\r?\n\r?\n", text):
        event: str | None = None
        data_lines: list[str] = []
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data_lines.append(line[5:].lstrip(" "))
        if not data_lines:
            continue
        data = "\n".join(data_lines)
        if data.strip() == "[DONE]":
            continue
        try:
            yield event, _loads(data)
        except ValueError:
            continue


def _error_message(data: Any, text: str, status: int) -> str:
    message: Any = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("type") or error.get("status")
        elif isinstance(error, str):
            message = error
        message = message or data.get("message")
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return _error_message(data[0], text, status)
    if not isinstance(message, str) or not message:
        message = text.strip()[:500] or "no body"
    return f"HTTP {status}: {message}"


def _as_int(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _anthropic_usage(reply: Reply, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    reply.usage.update({k: v for k, v in usage.items() if v is not None})
    u = reply.usage
    reply.input_tokens = _as_int(u.get("input_tokens"))
    reply.output_tokens = _as_int(u.get("output_tokens"))
    reply.cache_read_tokens = _as_int(u.get("cache_read_input_tokens"))
    reply.cache_write_tokens = _as_int(u.get("cache_creation_input_tokens"))


def _anthropic_message(reply: Reply, msg: dict[str, Any]) -> None:
    reply.model = msg.get("model") if isinstance(msg.get("model"), str) else None
    reply.response_id = msg.get("id") if isinstance(msg.get("id"), str) else None
    reply.stop_reason = msg.get("stop_reason") or None
    texts = []
    for block in msg.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") in ("tool_use", "server_tool_use"):
            reply.tool_calls.append(
                {"id": block.get("id"), "name": block.get("name"), "input": block.get("input")}
            )
    reply.text = "".join(texts) or None
    _anthropic_usage(reply, msg.get("usage"))


def _chat_completion(reply: Reply, data: dict[str, Any]) -> None:
    reply.model = data.get("model") if isinstance(data.get("model"), str) else None
    reply.response_id = data.get("id") if isinstance(data.get("id"), str) else None
    choices = data.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    if isinstance(message.get("content"), str):
        reply.text = message["content"] or None
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        reply.tool_calls.append(
            {
                "id": call.get("id"),
                "name": function.get("name"),
                "input": _json_or_text(function.get("arguments")),
            }
        )
    reply.stop_reason = choice.get("finish_reason") or None
    _chat_usage(reply, data.get("usage"))


def _chat_usage(reply: Reply, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    reply.usage = dict(usage)
    reply.input_tokens = _as_int(usage.get("prompt_tokens"))
    reply.output_tokens = _as_int(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details") or {}
    reply.cache_read_tokens = (
        _as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
    )


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return _loads(value)
        except ValueError:
            return value
    return value


def _response_object(reply: Reply, data: dict[str, Any]) -> None:
    reply.model = data.get("model") if isinstance(data.get("model"), str) else None
    reply.response_id = data.get("id") if isinstance(data.get("id"), str) else None
    texts = []
    for item in data.get("output") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments") if kind == "function_call" else item.get("input")
            reply.tool_calls.append(
                {
                    "id": item.get("call_id"),
                    "name": item.get("name"),
                    "input": _json_or_text(arguments),
                }
            )
        elif isinstance(kind, str) and kind.endswith("_call"):
            reply.tool_calls.append(
                {
                    "id": item.get("call_id") or item.get("id"),
                    "name": kind,
                    "input": item.get("action"),
                }
            )
    reply.text = "".join(texts) or None
    status = data.get("status")
    reply.stop_reason = (
        status
        if isinstance(status, str) and status != "completed"
        else ("tool_calls" if reply.tool_calls else ("completed" if status else None))
    )
    error = data.get("error")
    if isinstance(error, dict) and error.get("message"):
        reply.error = str(error["message"])
    usage = data.get("usage")
    if isinstance(usage, dict):
        reply.usage = dict(usage)
        reply.input_tokens = _as_int(usage.get("input_tokens"))
        reply.output_tokens = _as_int(usage.get("output_tokens"))
        details = usage.get("input_tokens_details") or {}
        reply.cache_read_tokens = (
            _as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
        )


def _gemini_chunk(reply: Reply, data: Any) -> None:
    """Merge one ``GenerateContentResponse`` (a whole reply or a streamed piece)."""
    if not isinstance(data, dict):
        return
    if isinstance(data.get("error"), dict):
        reply.error = _error_message(data, "", int(data["error"].get("code") or 500))
        return
    if isinstance(data.get("modelVersion"), str):
        reply.model = data["modelVersion"]
    if isinstance(data.get("responseId"), str):
        reply.response_id = data["responseId"]
    candidates = data.get("candidates") or []
    candidate = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
    for part in (candidate.get("content") or {}).get("parts") or []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and not part.get("thought"):
            reply.text = (reply.text or "") + part["text"]
        call = part.get("functionCall")
        if isinstance(call, dict):
            reply.tool_calls.append(
                {"id": call.get("id"), "name": call.get("name"), "input": call.get("args")}
            )
    if candidate.get("finishReason"):
        reply.stop_reason = candidate["finishReason"]
    usage = data.get("usageMetadata")
    if isinstance(usage, dict):
        reply.usage = dict(usage)
        reply.input_tokens = _as_int(usage.get("promptTokenCount"))
        out = _as_int(usage.get("candidatesTokenCount"))
        thoughts = _as_int(usage.get("thoughtsTokenCount"))
        reply.output_tokens = (
            None if out is None and thoughts is None else (out or 0) + (thoughts or 0)
        )
        reply.cache_read_tokens = _as_int(usage.get("cachedContentTokenCount"))


def _nothing(reply: Reply, data: dict[str, Any]) -> None:
    """Replies of APIs the proxy doesn't read."""


_READERS: dict[ApiKind, Callable[[Reply, dict[str, Any]], None]] = {
    "messages": _anthropic_message,
    "chat": _chat_completion,
    "responses": _response_object,
    "generate": _gemini_chunk,
    "other": _nothing,
}


class _Assembler:
    """Builds a reply from a stream's events."""

    def feed(self, reply: Reply, event: str | None, data: Any) -> None:
        raise NotImplementedError

    def finish(self, reply: Reply) -> None:
        """Called after the last event."""


class _AnthropicStream(_Assembler):
    def __init__(self) -> None:
        self.message: dict[str, Any] = {"content": []}
        self.partial: dict[int, str] = {}

    def feed(self, reply: Reply, event: str | None, data: Any) -> None:
        if not isinstance(data, dict):
            return
        kind = data.get("type") or event
        blocks: list[Any] = self.message["content"]
        if kind == "message_start" and isinstance(data.get("message"), dict):
            self.message = {
                **data["message"],
                "content": list(data["message"].get("content") or []),
            }
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            index = data.get("index", len(blocks))
            while len(blocks) <= index:
                blocks.append({})
            blocks[index] = dict(data["content_block"])
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            index, delta = data.get("index", 0), data["delta"]
            if not (isinstance(index, int) and 0 <= index < len(blocks)):
                return
            block = blocks[index]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                self.partial[index] = self.partial.get(index, "") + str(
                    delta.get("partial_json", "")
                )
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.message["stop_reason"] = delta["stop_reason"]
            if isinstance(data.get("usage"), dict):
                self.message["usage"] = {**(self.message.get("usage") or {}), **data["usage"]}
        elif kind == "error":
            error = data.get("error") or {}
            reply.error = str(error.get("message") or error.get("type") or "stream error")

    def finish(self, reply: Reply) -> None:
        for index, text in self.partial.items():
            block = self.message["content"][index]
            block["input"] = _json_or_text(text) if text else {}
        error = reply.error
        _anthropic_message(reply, self.message)
        reply.error = error


class _ChatStream(_Assembler):
    def __init__(self) -> None:
        self.calls: dict[int, dict[str, Any]] = {}
        self.texts: list[str] = []

    def feed(self, reply: Reply, event: str | None, data: Any) -> None:
        if not isinstance(data, dict):
            return
        if isinstance(data.get("error"), dict):
            reply.error = str(data["error"].get("message") or "stream error")
            return
        reply.model = data.get("model") if isinstance(data.get("model"), str) else reply.model
        reply.response_id = data.get("id") if isinstance(data.get("id"), str) else reply.response_id
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.texts.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(
                    call.get("index", 0), {"id": None, "name": None, "arguments": ""}
                )
                function = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                slot["name"] = function.get("name") or slot["name"]
                slot["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                reply.stop_reason = choice["finish_reason"]
        if isinstance(data.get("usage"), dict):
            _chat_usage(reply, data["usage"])

    def finish(self, reply: Reply) -> None:
        reply.text = "".join(self.texts) or None
        for _, slot in sorted(self.calls.items()):
            reply.tool_calls.append(
                {"id": slot["id"], "name": slot["name"], "input": _json_or_text(slot["arguments"])}
            )


class _ResponsesStream(_Assembler):
    def __init__(self) -> None:
        self.final: dict[str, Any] | None = None
        self.items: list[dict[str, Any]] = []

    def feed(self, reply: Reply, event: str | None, data: Any) -> None:
        if not isinstance(data, dict):
            return
        kind = data.get("type") or event
        if kind in ("response.completed", "response.incomplete", "response.failed") and isinstance(
            data.get("response"), dict
        ):
            self.final = data["response"]
        elif kind == "response.output_item.done" and isinstance(data.get("item"), dict):
            self.items.append(data["item"])
        elif kind == "error":
            reply.error = str(data.get("message") or "stream error")

    def finish(self, reply: Reply) -> None:
        error = reply.error
        final = dict(self.final or {})
        if not final.get("output"):
            final["output"] = self.items
        _response_object(reply, final)
        reply.error = reply.error or error


class _GeminiStream(_Assembler):
    def feed(self, reply: Reply, event: str | None, data: Any) -> None:
        _gemini_chunk(reply, data)


_ASSEMBLERS: dict[ApiKind, type[_Assembler]] = {
    "messages": _AnthropicStream,
    "chat": _ChatStream,
    "responses": _ResponsesStream,
    "generate": _GeminiStream,
    "other": _GeminiStream,
}


# --- answers the proxy writes itself --------------------------------------------------------


def error_body(provider: Provider, status: int, kind: str, message: str) -> bytes:
    """An error body in the provider's own shape, so its SDK reports ``message``."""
    if provider == "anthropic":
        data: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    elif provider == "openai":
        data = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    else:
        data = {
            "error": {
                "code": status,
                "message": message,
                "status": "ABORTED" if status == 409 else "UNAVAILABLE",
            }
        }
    return json.dumps(data).encode("utf-8")


def override_chunks(route: Route, value: Any, stream: bool, model: str | None) -> list[bytes]:
    """The response bytes for ``--override``: ``value`` is the API's own (non-streamed)
    response object, or ``{"text": ..., "tool_calls": [{"name", "input", "id"?}]}``; a
    streamed request gets it as the API's event stream.

    Raises:
        ValueError: ``value`` is neither.
    """
    native = _native(route.kind, value, model)
    if not stream:
        return [json.dumps(native).encode("utf-8")]
    events = _STREAMERS[route.kind](native)
    return [e.encode("utf-8") for e in events]


def _native(kind: ApiKind, value: Any, model: str | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(
            'an override must be a JSON object (the API\'s response, or {"text": ...})'
        )
    marks = {
        "messages": "content",
        "chat": "choices",
        "responses": "output",
        "generate": "candidates",
    }
    if marks.get(kind) in value:
        return value
    if "text" not in value and "tool_calls" not in value:
        raise ValueError(
            f"an override for this API needs {marks.get(kind)!r} (its own response shape) or "
            '"text"/"tool_calls"'
        )
    text = value.get("text")
    calls = value.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) and c.get("name") for c in calls):
        raise ValueError('"tool_calls" must be a list of {"name": ..., "input": {...}}')
    model = model or "override"
    if kind == "messages":
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [
            {
                "type": "tool_use",
                "id": c.get("id") or f"toolu_override_{i}",
                "name": c["name"],
                "input": c.get("input") or {},
            }
            for i, c in enumerate(calls)
        ]
        return {
            "id": "msg_override",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
    if kind == "chat":
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.get("id") or f"call_override_{i}",
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c.get("input") or {})},
                }
                for i, c in enumerate(calls)
            ]
        return {
            "id": "chatcmpl-override",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
    if kind == "responses":
        output: list[dict[str, Any]] = []
        if text:
            output.append(
                {
                    "id": "msg_override",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        output += [
            {
                "id": f"fc_override_{i}",
                "type": "function_call",
                "status": "completed",
                "name": c["name"],
                "call_id": c.get("id") or f"call_override_{i}",
                "arguments": json.dumps(c.get("input") or {}),
            }
            for i, c in enumerate(calls)
        ]
        return {
            "id": "resp_override",
            "object": "response",
            "created_at": 0,
            "model": model,
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        }
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += [{"functionCall": {"name": c["name"], "args": c.get("input") or {}}} for c in calls]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "modelVersion": model,
        "usageMetadata": {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0},
    }


def _sse(name: str | None, data: Any) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def _anthropic_events(msg: dict[str, Any]) -> list[str]:
    start = {**msg, "content": [], "stop_reason": None}
    out = [_sse("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(msg.get("content") or []):
        if block.get("type") == "tool_use":
            head = {**block, "input": {}}
            delta = {
                "type": "input_json_delta",
                "partial_json": json.dumps(block.get("input") or {}),
            }
        else:
            head = {**block, "text": ""}
            delta = {"type": "text_delta", "text": block.get("text", "")}
        out.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": head},
            )
        )
        out.append(
            _sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
        )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": msg.get("stop_reason"), "stop_sequence": None},
                "usage": {"output_tokens": (msg.get("usage") or {}).get("output_tokens", 0)},
            },
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return out


def _chat_events(data: dict[str, Any]) -> list[str]:
    base = {k: data.get(k) for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = (data.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    out = [
        _sse(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
        _sse(
            None,
            {
                **base,
                "choices": [
                    {"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason")}
                ],
            },
        ),
    ]
    if data.get("usage"):
        out.append(_sse(None, {**base, "choices": [], "usage": data["usage"]}))
    out.append("data: [DONE]\n\n")
    return out


def _responses_events(data: dict[str, Any]) -> list[str]:
    seq = iter(range(1_000_000))
    started = {**data, "status": "in_progress", "output": []}
    out = [
        _sse(
            "response.created",
            {"type": "response.created", "sequence_number": next(seq), "response": started},
        ),
    ]
    for i, item in enumerate(data.get("output") or []):
        for name in ("response.output_item.added", "response.output_item.done"):
            out.append(
                _sse(
                    name,
                    {"type": name, "sequence_number": next(seq), "output_index": i, "item": item},
                )
            )
    out.append(
        _sse(
            "response.completed",
            {"type": "response.completed", "sequence_number": next(seq), "response": data},
        )
    )
    return out


def _gemini_events(data: dict[str, Any]) -> list[str]:
    return [f"data: {json.dumps(data)}\r\n\r\n"]


_STREAMERS = {
    "messages": _anthropic_events,
    "chat": _chat_events,
    "responses": _responses_events,
    "generate": _gemini_events,
    "other": _gemini_events,
}
