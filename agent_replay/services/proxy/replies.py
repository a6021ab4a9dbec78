"""Reading what a model answered: a provider's reply bytes (one JSON body, or the API's event
stream) into a ``Reply`` (text, tool calls, stop reason, usage, error).

One reader per API for whole bodies, one assembler per API for streams (Anthropic and OpenAI
SSE events, Gemini's SSE or piecewise JSON array); ``read_reply`` never raises. Routing and
the request side are ``apis``; the answers the proxy writes itself are ``answers``. Pure
functions over bytes and JSON; stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_replay.services.proxy.apis import ApiKind, loads_json


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
            data = loads_json(text) if text.strip() else None
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
            items = loads_json(text)
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
            yield event, loads_json(data)
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
            return loads_json(value)
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
