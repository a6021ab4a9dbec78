"""The answers the proxy writes itself, in each provider's own shape: error bodies its SDK
reports, and ``--override`` responses (the API's response object, or text and tool calls made
into one), streamed as the API's event stream when the request streams. Routing and requests
are ``apis``; reading real replies is ``replies``. Pure functions over JSON; stdlib only.
"""

from __future__ import annotations

import json
from typing import Any

from agent_replay.services.proxy.apis import ApiKind, Provider, Route


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
