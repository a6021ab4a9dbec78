"""A local stand-in for the AI providers' HTTP APIs (imported as ``aifake``, like ``otelkit``).

``FakeAI`` is a real HTTP server on 127.0.0.1 that speaks the wire formats the official SDKs
use: Anthropic Messages (``POST /v1/messages``), Gemini ``generateContent``
(``POST /{version}/models/{model}:generateContent``) and OpenAI Chat Completions
(``POST /v1/chat/completions``). The SDKs reach it through their base-URL settings, so every
test exercises the real SDK, the real HTTP exchange, retries and error parsing; nothing of
agent-replay is mocked.

Replies are scripted with ``queue(Reply(...))`` (consumed in order, whatever the provider);
with the queue empty, the server answers each request validly for the task it recognizes in
the system prompt (an AI preset, the divergence explanation, the connectivity check, or a
plain chat turn). A request with the wrong key gets each provider's real auth error.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

KEY = "test-key-0123456789abcdef"
"""The key the fake accepts (long enough to be masked as ``test…cdef``)."""

ENV_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
)


def isolate_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove every provider key and endpoint the environment may carry: tests never reach a
    real provider, and never see the developer's own keys."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def point_sdks_at(monkeypatch: pytest.MonkeyPatch, fake: FakeAI, *providers: str) -> None:
    """Set the SDKs' own base-URL variables to the fake, and a valid key for ``providers``."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    names = {
        "anthropic": "ANTHROPIC_API_KEY",
        "google": "GOOGLE_API_KEY",
        "openai": "OPENAI_API_KEY",
    }
    for provider in providers:
        monkeypatch.setenv(names[provider], KEY)


@dataclass
class Reply:
    """One scripted answer."""

    status: int = 200
    text: str | None = None
    """The model's reply text (default: a valid reply for the recognized task)."""
    input_tokens: int = 1000
    output_tokens: int = 200
    stop: str | None = None
    """A stop reason other than the normal one (``max_tokens``, ``length``, ``MAX_TOKENS``)."""
    usage: bool = True
    """Whether the response reports token usage."""
    raw: bytes | None = None
    """Send this body as it is instead of a provider reply (a proxy's HTML page, say)."""
    content_type: str = "application/json"
    """The ``content-type`` of a ``raw`` body."""


@dataclass
class Request:
    """What the fake received."""

    provider: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def system(self) -> str:
        if self.provider == "anthropic":
            system = self.body.get("system") or ""
            if isinstance(system, list):
                return "".join(b.get("text", "") for b in system)
            return str(system)
        if self.provider == "openai":
            return "".join(
                str(m.get("content")) for m in self.body["messages"] if m["role"] == "system"
            )
        parts = (self.body.get("systemInstruction") or {}).get("parts") or []
        return "".join(p.get("text", "") for p in parts)

    @property
    def turns(self) -> list[tuple[str, str]]:
        """(role, text) of each conversation turn, system prompt excluded."""
        if self.provider == "google":
            return [
                (c.get("role", "user"), "".join(p.get("text", "") for p in c.get("parts", [])))
                for c in self.body.get("contents", [])
            ]
        return [
            (m["role"], m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]))
            for m in self.body["messages"]
            if m["role"] != "system"
        ]

    @property
    def task(self) -> str:
        system = self.system
        for name in CANNED:
            if f"Task: {name}." in system:
                return name
        if "Explain why they diverged" in system:
            return "divergence"
        if "connectivity check" in system:
            return "test-ai"
        return "chat"


ROOT_CAUSE = {
    "problem_found": True,
    "what_went_wrong": "The answer promised instant refunds.",
    "root_cause_step": 5,
    "root_cause": "compose_answer ignored the retrieved refund policy.",
    "contributing_factors": ["temperature 0.9"],
    "suggested_fix": "Lower the temperature and quote the policy.",
    "confidence": 0.8,
    "evidence": [{"step": 5, "quote": "instant refunds"}, {"step": 99, "quote": "made up"}],
}
QUALITY = {
    "relevance": 8,
    "completeness": 6,
    "coherence": 7,
    "accuracy": 3,
    "overall": 5,
    "summary": "On topic but wrong about the refund window.",
    "issues": [
        {"criterion": "accuracy", "step": 6, "quote": "within 1 hour", "problem": "contradicts"}
    ],
}
SECURITY = {
    "risk_level": "Low",
    "prompt_injection": {"detected": False, "explanation": "none seen"},
    "data_exfiltration": {"detected": False, "explanation": ""},
    "unauthorized_access": {"detected": False, "explanation": ""},
    "privilege_escalation": {"detected": False, "explanation": ""},
    "findings": [],
    "summary": "No security problem.",
}
OPTIMIZATION = {
    "efficiency_score": 7,
    "token_efficiency": 6,
    "redundant_steps": [2],
    "unnecessary_tool_calls": [],
    "wasted_context": [{"step": 5, "reason": "the whole policy is resent"}],
    "suggestions": ["Cache the rewrite."],
    "summary": "Mostly lean.",
}
DIVERGENCE = {
    "summary": "B skipped the date filter.",
    "divergence_step": {"a": 3, "b": 3},
    "cause": "the prompt asked for the simplest query",
    "effect": "all-time totals reported as last quarter's",
    "better_run": "a",
    "recommendation": "restore the date filter rule",
    "confidence": 0.9,
}
CANNED: dict[str, dict[str, Any]] = {
    "ai-root-cause": ROOT_CAUSE,
    "ai-quality-review": QUALITY,
    "ai-security-audit": SECURITY,
    "ai-optimization": OPTIMIZATION,
}


def canned_text(task: str) -> str:
    if task in CANNED:
        return json.dumps(CANNED[task])
    if task == "divergence":
        return json.dumps(DIVERGENCE)
    if task == "test-ai":
        return '{"ok": true}'
    return "A rerun answer: refunds take 5-7 business days."


@dataclass
class FakeAI:
    """The fake provider server (see the module doc). Use as a context manager."""

    key: str = KEY
    requests: list[Request] = field(default_factory=list)
    _script: deque[Reply] = field(default_factory=deque)
    _server: ThreadingHTTPServer | None = None

    def __enter__(self) -> FakeAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                status, body, headers = fake._answer(self.path, dict(self.headers), raw)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", headers.pop("content-type", "application/json"))
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with these, in order."""
        self._script.extend(replies)

    def tasks(self) -> list[str]:
        return [r.task for r in self.requests]

    # --- the three wire formats ----------------------------------------------------------

    def _answer(
        self, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any] | bytes, dict[str, str]]:
        lowered = {k.lower(): v for k, v in headers.items()}
        body = json.loads(raw or b"{}")
        if path.endswith("/v1/messages"):
            provider = "anthropic"
            key = lowered.get("x-api-key") or lowered.get("authorization", "").removeprefix(
                "Bearer "
            )
        elif path.endswith("/chat/completions"):
            provider = "openai"
            key = lowered.get("authorization", "").removeprefix("Bearer ")
        elif ":generateContent" in path:
            provider = "google"
            key = lowered.get("x-goog-api-key", "")
        else:
            return 404, {"error": {"message": f"no route {path}"}}, {}
        request = Request(provider, path, lowered, body)
        self.requests.append(request)
        if key != self.key:
            return _auth_error(provider)
        reply = self._script.popleft() if self._script else Reply()
        if reply.raw is not None:
            return reply.status, reply.raw, {"content-type": reply.content_type}
        if reply.status != 200:
            return _http_error(provider, reply.status)
        text = reply.text if reply.text is not None else canned_text(request.task)
        model = _model(provider, path, body)
        return 200, _success(provider, model, text, reply), {}


def _model(provider: str, path: str, body: dict[str, Any]) -> str:
    if provider == "google":
        return path.rsplit("/", 1)[1].split(":")[0]
    return str(body.get("model"))


def _success(provider: str, model: str, text: str, reply: Reply) -> dict[str, Any]:
    tokens_in, tokens_out = reply.input_tokens, reply.output_tokens
    if provider == "anthropic":
        out: dict[str, Any] = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": reply.stop or "end_turn",
            "stop_sequence": None,
        }
        if reply.usage:
            out["usage"] = {"input_tokens": tokens_in, "output_tokens": tokens_out}
        return out
    if provider == "openai":
        out = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1780000000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": reply.stop or "stop",
                }
            ],
        }
        if reply.usage:
            out["usage"] = {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            }
        return out
    out = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": reply.stop or "STOP",
                "index": 0,
            }
        ],
        "modelVersion": model,
    }
    if reply.usage:
        out["usageMetadata"] = {
            "promptTokenCount": tokens_in,
            "candidatesTokenCount": tokens_out,
            "totalTokenCount": tokens_in + tokens_out,
        }
    return out


_RETRY_FAST = {"retry-after-ms": "5", "retry-after": "0"}


def _http_error(provider: str, status: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    if provider == "anthropic":
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": kind, "message": f"fake {status}"},
        }
    elif provider == "openai":
        body = {"error": {"message": f"fake {status}", "type": "server_error", "code": None}}
    else:
        names = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
        body = {
            "error": {
                "code": status,
                "message": f"fake {status}",
                "status": names.get(status, "UNKNOWN"),
            }
        }
    return status, body, dict(_RETRY_FAST)


def _auth_error(provider: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    if provider == "anthropic":
        return (
            401,
            {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            },
            {},
        )
    if provider == "openai":
        return (
            401,
            {
                "error": {
                    "message": "Incorrect API key provided.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
            {},
        )
    # Gemini answers a bad key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
    return (
        400,
        {
            "error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                    }
                ],
            }
        },
        {},
    )
