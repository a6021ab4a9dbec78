"""A scripted Anthropic Messages API for driving the real Claude Code offline (loopback only).

Extracted from the project's realcli kit (its ``mock_llm_server.py``), keeping only what Claude
Code needs for that kit's "basic" scenario; the kit's OpenAI Responses/Chat Completions and
Gemini protocols and its subagent scenario are left out. Stdlib only, so that
``bench/hook_claude.py`` needs nothing outside the repository.

Endpoints (``?beta=true`` accepted):

* ``POST /v1/messages``: a message, as SSE when the request has ``"stream": true``.
* ``POST /v1/messages/count_tokens``: a fixed count.

The agent side is a fixed scenario (``SCENARIO``). For a request from the main agent loop (one
that offers the ``Bash`` tool), the step to play is the number of ``tool_use`` blocks the
assistant already sent in the conversation the request carries: ``ls -la``, read ``notes.txt``,
write ``summary.txt``, a failing ``cat does_not_exist.txt``, then a final text answer.
Requests that offer no ``Bash`` tool (title generation, classifiers, ...) get a short text, or
a title as JSON when the system prompt asks for one.

With ``--log``, every request and the exact response are appended to that file (JSONL).

Usage: ``python bench/claude_model.py --port 8765 --workdir ABS_AGENT_CWD [--log wire.jsonl]``
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import threading
import time
import traceback
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

NOTES = "notes.txt"
SUMMARY = "summary.txt"
SUMMARY_TEXT = "Summary written by the mock model.\nnotes.txt lists three TODO items.\n"
MISSING = "does_not_exist.txt"
FINAL_TEXT = (
    "Done. I listed the directory, read notes.txt, wrote summary.txt, "
    "and confirmed that does_not_exist.txt is missing."
)

# The abstract steps: a kind and its argument.
SCENARIO = [
    ("shell", "ls -la"),
    ("read", NOTES),
    ("write", SUMMARY),
    ("shell", f"cat {MISSING}"),
]

Plan = tuple[Any, ...]


class Wire:
    """Where the requests and responses are logged (nowhere without ``--log``)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.seq = 0

    def write(self, record: dict[str, Any]) -> None:
        if not self.path:
            return
        with self.lock:
            self.seq += 1
            record["seq"] = self.seq
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def rid(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def count_calls(body: dict[str, Any]) -> int:
    """The ``tool_use`` blocks the assistant already sent in the request's conversation."""
    n = 0
    for message in body.get("messages") or []:
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            n += sum(
                1 for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"
            )
    return n


def side_text(body: dict[str, Any]) -> str:
    """A title or topic generator's answer: a short string, or JSON when it asks for it."""
    system = json.dumps(body.get("system", "")).lower()
    if "title" in system and "json" in system:
        return json.dumps({"isNewTopic": True, "title": "Mock session"})
    return "Mock session"


def plan_for(body: dict[str, Any], workdir: str) -> tuple[Plan, int | None]:
    """What to answer: ``("text", str)`` or ``("tool", name, input)``, and the step played."""
    tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    if "Bash" not in tools:
        return ("text", side_text(body)), None
    n = count_calls(body)
    if n >= len(SCENARIO):
        return ("text", FINAL_TEXT), None
    kind, arg = SCENARIO[n]
    path = workdir.rstrip("/") + "/" + arg
    if kind == "shell":
        return ("tool", "Bash", {"command": arg, "description": f"Run {arg}"}), n
    if kind == "read":
        return ("tool", "Read", {"file_path": path}), n
    if kind == "write":
        return ("tool", "Write", {"file_path": path, "content": SUMMARY_TEXT}), n
    raise AssertionError(kind)


def message(body: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """The whole (non-streamed) Messages API response for ``plan``."""
    content: list[dict[str, Any]] = []
    if plan[0] == "text":
        content.append({"type": "text", "text": plan[1]})
        stop = "end_turn"
    else:
        content.append({"type": "text", "text": "Let me do that."})
        content.append(
            {"type": "tool_use", "id": rid("toolu_mock"), "name": plan[1], "input": plan[2]}
        )
        stop = "tool_use"
    usage = {
        "input_tokens": 1200 + 100 * len(body.get("messages") or []),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 40 + 10 * len(content),
    }
    return {
        "id": rid("msg_mock"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-mock"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def sse_events(msg: dict[str, Any]) -> list[str]:
    """``msg`` as the Messages API's stream: start, blocks with their deltas, delta, stop."""

    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n"

    start = dict(msg, content=[], stop_reason=None, usage=dict(msg["usage"], output_tokens=1))
    out = [event("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(msg["content"]):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            text, size, key, kind = block["text"], 24, "text", "text_delta"
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            text, size, key = json.dumps(block["input"]), 40, "partial_json"
            kind = "input_json_delta"
        out.append(
            event(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": opening},
            )
        )
        for j in range(0, len(text), size):
            delta = {"type": kind, key: text[j : j + size]}
            out.append(
                event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                )
            )
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": msg["usage"]["output_tokens"]},
            },
        )
    )
    out.append(event("message_stop", {"type": "message_stop"}))
    return out


def make_handler(workdir: str, wire: Wire) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass

        def read_body(self) -> tuple[bytes, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = b""
            if length:
                raw = self.rfile.read(length)
            elif (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
                while size := int(self.rfile.readline().strip().split(b";")[0], 16):
                    raw += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            try:
                if raw and encoding == "gzip":
                    raw = gzip.decompress(raw)
                elif raw and encoding == "deflate":
                    raw = zlib.decompress(raw)
            except (OSError, zlib.error) as e:  # keep the raw bytes
                print("could not decode body:", encoding, e, flush=True)
            try:
                return raw, json.loads(raw.decode("utf-8")) if raw else None
            except ValueError:
                return raw, None

        def record(
            self, raw: bytes, body: Any, status: int, headers: dict[str, str], out: Any, note: Any
        ) -> None:
            wire.write(
                {
                    "time": now(),
                    "method": self.command,
                    "path": self.path,
                    "request_headers": dict(self.headers.items()),
                    "request_body": body if body else raw.decode("utf-8", "replace"),
                    "response_status": status,
                    "response_headers": headers,
                    "response_body": out,
                    "note": note,
                }
            )

        def send_json(
            self, status: int, obj: Any, raw: bytes, body: Any, note: str | None = None
        ) -> None:
            data = json.dumps(obj).encode()
            headers = {
                "Content-Type": "application/json",
                "Content-Length": str(len(data)),
                "request-id": rid("req_mock"),
                "x-request-id": rid("req_mock"),
            }
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.record(raw, body, status, headers, obj, note)

        def send_sse(self, events: list[str], raw: bytes, body: Any, note: str) -> None:
            headers = {
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "Transfer-Encoding": "chunked",
                "request-id": rid("req_mock"),
                "x-request-id": rid("req_mock"),
            }
            self.send_response(200)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            for text in events:
                data = text.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                time.sleep(0.005)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            self.record(raw, body, 200, headers, events, note)

        def not_found(self, raw: bytes, body: Any) -> None:
            error = {"type": "not_found", "message": "mock: no such endpoint"}
            self.send_json(404, {"error": error}, raw, body, f"unhandled {self.command}")

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.not_found(b"", None)

        def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            raw, body = self.read_body()
            body = body if isinstance(body, dict) else {}
            path = urlparse(self.path).path
            try:
                if path.endswith("/v1/messages/count_tokens"):
                    return self.send_json(200, {"input_tokens": 1234}, raw, body)
                if path.endswith("/v1/messages"):
                    plan, step = plan_for(body, workdir)
                    msg = message(body, plan)
                    note = f"anthropic step={step} plan={plan[0]}"
                    if body.get("stream"):
                        return self.send_sse(sse_events(msg), raw, body, note)
                    return self.send_json(200, msg, raw, body, note)
            except Exception as e:  # surface bugs in the model itself
                traceback.print_exc()
                error = {"message": f"mock error: {e}"}
                return self.send_json(500, {"error": error}, raw, body, "mock exception")
            return self.not_found(raw, body)

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1")
    parser.add_argument(
        "--workdir", required=True, help="the agent's absolute cwd (for absolute file paths)"
    )
    parser.add_argument("--log", help="append every request and response here (JSONL)")
    args = parser.parse_args()
    handler = make_handler(args.workdir, Wire(args.log))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    print(f"scripted Anthropic model on 127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
