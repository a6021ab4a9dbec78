"""A scripted model upstream for the proxy tests (imported as ``proxykit``, like ``aifake``).

``ScriptedModel`` is a real HTTP server on 127.0.0.1 speaking the four APIs the proxy records,
streamed and not, with tool use: Anthropic Messages (``/v1/messages``), OpenAI Chat Completions
(``/v1/chat/completions``) and Responses (``/v1/responses``), Gemini ``generateContent`` and
``streamGenerateContent`` (``alt=sse`` or a JSON array). It plays an agent scenario: while the
conversation holds fewer tool results than ``TOOL_TURNS``, it asks for the weather tool; then it
answers. Every reply carries the server's running call number in its ids and text
(``call 7``), so a test can tell a reply served from a recording from a fresh one.

A user turn containing ``please fail`` gets the provider's own 400 error. Streams are written
in several flushed chunks; ``hold_streams`` makes each stream wait, after its first chunk, until
``release`` is set (to prove the proxy passes chunks on as they come).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOOL_TURNS = 2
"""Tool calls the scripted agent makes before its final answer."""

ANTHROPIC_MODEL = "claude-3-5-haiku-20241022"
OPENAI_MODEL = "gpt-4o-mini"
GEMINI_MODEL = "gemini-2.0-flash"


@dataclass
class Seen:
    """A request the upstream received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class ScriptedModel:
    """The upstream (a context manager; ``stop()`` closes it for good)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seen: list[Seen] = []
        self.hold_streams = False
        self.release = threading.Event()
        self.lock = threading.Lock()
        kit = self

        class Handler(_Handler):
            model = kit

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def next_call(self) -> int:
        with self.lock:
            self.calls += 1
            return self.calls

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _usage_numbers(n: int) -> tuple[int, int]:
    return 100 + 10 * n, 20 + n


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    model: ScriptedModel

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # --- plumbing -------------------------------------------------------------------------

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        self.model.seen.append(Seen("POST", self.path, dict(self.headers.items()), raw))
        parts = urlsplit(self.path)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._json(400, {"error": {"message": "upstream: body is not JSON"}})
        path = parts.path
        if path.endswith("/v1/messages"):
            return self._anthropic(body)
        if path.endswith("/chat/completions"):
            return self._chat(body)
        if path.endswith("/responses"):
            return self._responses(body)
        if ":generateContent" in path or ":streamGenerateContent" in path:
            sse = parse_qs(parts.query).get("alt") == ["sse"]
            return self._gemini(body, ":streamGenerateContent" in path, sse)
        return self._json(404, {"error": {"message": f"upstream: no route {path}"}})

    def do_GET(self) -> None:
        self.model.seen.append(Seen("GET", self.path, dict(self.headers.items()), b""))
        self._json(200, {"data": [{"id": "scripted"}], "object": "list"})

    def _json(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("request-id", "req_scripted")
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, pieces: list[str], content_type: str = "text/event-stream") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index, piece in enumerate(pieces):
            data = piece.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            if index == 0 and self.model.hold_streams:
                self.model.release.wait(10)
            else:
                time.sleep(0.001)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # --- the scenario ---------------------------------------------------------------------

    @staticmethod
    def _fails(texts: list[str]) -> bool:
        return any("please fail" in t for t in texts)

    def _anthropic(self, body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        texts = [json.dumps(m.get("content")) for m in messages if m.get("role") == "user"]
        if self._fails(texts):
            return self._json(
                400,
                {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "scripted failure"},
                },
            )
        done = sum(
            1
            for m in messages
            if m.get("role") == "user" and isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        )
        n = self.model.next_call()
        inp, out = _usage_numbers(n)
        if body.get("tools") and done < TOOL_TURNS:
            content: list[dict[str, Any]] = [
                {"type": "text", "text": f"Checking (call {n})."},
                {
                    "type": "tool_use",
                    "id": f"toolu_{n:04d}",
                    "name": "get_weather",
                    "input": {"city": f"City{done}"},
                },
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": f"It is sunny everywhere (call {n})."}]
            stop = "end_turn"
        msg = {
            "id": f"msg_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": inp, "output_tokens": out},
        }
        if not body.get("stream"):
            return self._json(200, msg)

        def ev(name: str, data: dict[str, Any]) -> str:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n"

        start = {
            **msg,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": inp, "output_tokens": 1},
        }
        pieces = [ev("message_start", {"type": "message_start", "message": start})]
        for i, block in enumerate(content):
            if block["type"] == "text":
                head = {"type": "text", "text": ""}
                text = block["text"]
                deltas = [
                    {"type": "text_delta", "text": text[j : j + 7]} for j in range(0, len(text), 7)
                ]
            else:
                head = {**block, "input": {}}
                js = json.dumps(block["input"])
                deltas = [
                    {"type": "input_json_delta", "partial_json": js[j : j + 5]}
                    for j in range(0, len(js), 5)
                ]
            pieces.append(
                ev(
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": head},
                )
            )
            for d in deltas:
                pieces.append(
                    ev(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": i, "delta": d},
                    )
                )
            pieces.append(ev("content_block_stop", {"type": "content_block_stop", "index": i}))
        pieces.append(
            ev(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": out},
                },
            )
        )
        pieces.append(ev("message_stop", {"type": "message_stop"}))
        self._stream(pieces)

    def _chat(self, body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        if self._fails([str(m.get("content")) for m in messages if m.get("role") == "user"]):
            return self._json(
                400,
                {
                    "error": {
                        "message": "scripted failure",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                },
            )
        done = sum(1 for m in messages if m.get("role") == "tool")
        n = self.model.next_call()
        inp, out = _usage_numbers(n)
        usage = {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}
        call = None
        if body.get("tools") and done < TOOL_TURNS:
            call = {
                "id": f"call_{n:04d}",
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "arguments": json.dumps({"city": f"City{done}"}),
                },
            }
            text = None
        else:
            text = f"It is sunny everywhere (call {n})."
        base = {
            "id": f"chatcmpl-{n:04d}",
            "created": 1700000000 + n,
            "model": body.get("model"),
            "system_fingerprint": "fp_scripted",
        }
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            if call:
                message["tool_calls"] = [call]
            return self._json(
                200,
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "logprobs": None,
                            "finish_reason": "tool_calls" if call else "stop",
                        }
                    ],
                    "usage": usage,
                },
            )

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            data = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            return f"data: {json.dumps(data)}\n\n"

        pieces = [chunk({"role": "assistant", "content": ""})]
        if call:
            args = call["function"]["arguments"]
            pieces.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": ""},
                            }
                        ]
                    }
                )
            )
            for j in range(0, len(args), 6):
                pieces.append(
                    chunk(
                        {"tool_calls": [{"index": 0, "function": {"arguments": args[j : j + 6]}}]}
                    )
                )
            pieces.append(chunk({}, "tool_calls"))
        else:
            assert text is not None
            for j in range(0, len(text), 8):
                pieces.append(chunk({"content": text[j : j + 8]}))
            pieces.append(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            last = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
            pieces.append(f"data: {json.dumps(last)}\n\n")
        pieces.append("data: [DONE]\n\n")
        self._stream(pieces)

    def _responses(self, body: dict[str, Any]) -> None:
        items = body.get("input")
        items = items if isinstance(items, list) else [{"role": "user", "content": items}]
        if self._fails([json.dumps(i.get("content")) for i in items if i.get("role") == "user"]):
            return self._json(
                400,
                {
                    "error": {
                        "message": "scripted failure",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                },
            )
        done = sum(1 for i in items if i.get("type") == "function_call_output")
        n = self.model.next_call()
        inp, out = _usage_numbers(n)
        output: list[dict[str, Any]] = []
        if body.get("tools") and done < TOOL_TURNS:
            output.append(
                {
                    "id": f"fc_{n:04d}",
                    "type": "function_call",
                    "status": "completed",
                    "name": "get_weather",
                    "call_id": f"call_{n:04d}",
                    "arguments": json.dumps({"city": f"City{done}"}),
                }
            )
        else:
            output.append(
                {
                    "id": f"msg_{n:04d}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "output_text",
                            "text": f"It is sunny everywhere (call {n}).",
                            "annotations": [],
                        }
                    ],
                }
            )
        response = {
            "id": f"resp_{n:04d}",
            "object": "response",
            "created_at": 1700000000 + n,
            "status": "completed",
            "model": body.get("model"),
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "usage": {
                "input_tokens": inp,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": inp + out,
            },
        }
        if not body.get("stream"):
            return self._json(200, response)
        seq = iter(range(1000))

        def ev(data: dict[str, Any]) -> str:
            data = {**data, "sequence_number": next(seq)}
            return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"

        started = {**response, "status": "in_progress", "output": [], "usage": None}
        pieces = [
            ev({"type": "response.created", "response": started}),
            ev({"type": "response.in_progress", "response": started}),
        ]
        item = output[0]
        if item["type"] == "function_call":
            pieces.append(
                ev(
                    {
                        "type": "response.output_item.added",
                        "output_index": 0,
                        "item": {**item, "status": "in_progress", "arguments": ""},
                    }
                )
            )
            pieces.append(
                ev(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "delta": item["arguments"],
                    }
                )
            )
            pieces.append(
                ev(
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item["id"],
                        "output_index": 0,
                        "arguments": item["arguments"],
                    }
                )
            )
        else:
            text = item["content"][0]["text"]
            pieces.append(
                ev(
                    {
                        "type": "response.output_item.added",
                        "output_index": 0,
                        "item": {**item, "status": "in_progress", "content": []},
                    }
                )
            )
            for j in range(0, len(text), 9):
                pieces.append(
                    ev(
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": 0,
                            "content_index": 0,
                            "delta": text[j : j + 9],
                        }
                    )
                )
        pieces.append(ev({"type": "response.output_item.done", "output_index": 0, "item": item}))
        pieces.append(ev({"type": "response.completed", "response": response}))
        self._stream(pieces)

    def _gemini(self, body: dict[str, Any], stream: bool, sse: bool) -> None:
        contents = body.get("contents") or []
        texts = [
            p.get("text", "")
            for c in contents
            if c.get("role", "user") == "user"
            for p in c.get("parts") or []
        ]
        if self._fails(texts):
            return self._json(
                400,
                {
                    "error": {
                        "code": 400,
                        "message": "scripted failure",
                        "status": "INVALID_ARGUMENT",
                    }
                },
            )
        done = sum(1 for c in contents for p in c.get("parts") or [] if "functionResponse" in p)
        n = self.model.next_call()
        inp, out = _usage_numbers(n)
        model = self.path.split("/models/")[1].split(":")[0]
        usage = {"promptTokenCount": inp, "candidatesTokenCount": out, "totalTokenCount": inp + out}
        if body.get("tools") and done < TOOL_TURNS:
            parts = [
                {"text": f"Checking (call {n})."},
                {"functionCall": {"name": "get_weather", "args": {"city": f"City{done}"}}},
            ]
        else:
            parts = [{"text": "It is sunny "}, {"text": f"everywhere (call {n})."}]

        def response(ps: list[dict[str, Any]], last: bool) -> dict[str, Any]:
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": ps}, "index": 0}
            data: dict[str, Any] = {
                "candidates": [candidate],
                "modelVersion": model,
                "responseId": f"resp{n:04d}",
            }
            if last:
                candidate["finishReason"] = "STOP"
                data["usageMetadata"] = usage
            return data

        if not stream:
            return self._json(200, response(parts, True))
        chunks = [response([p], i == len(parts) - 1) for i, p in enumerate(parts)]
        if sse:
            self._stream([f"data: {json.dumps(c)}\r\n\r\n" for c in chunks])
        else:
            pieces = (
                ["[" + json.dumps(chunks[0])] + ["," + json.dumps(c) for c in chunks[1:]] + ["]"]
            )
            self._stream(pieces, "application/json")
