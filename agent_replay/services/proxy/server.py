"""The proxy's HTTP side: an aiohttp server in front of an aiohttp client, on one event loop.

Why aiohttp: one well-kept asyncio library gives both ends — a server whose responses can be
written piece by piece (``StreamResponse.write``) and a client whose body can be read as it
arrives (``iter_any``) — with a C HTTP parser and TCP_NODELAY on both sides, so a streamed
chunk is passed on the moment it is read. The store is never touched here: finished exchanges
go to the writer thread (``recording.Writer``), so a slow disk never delays a byte.

Forwarding rules: the request goes upstream as received (method, path, query, body, headers
minus hop-by-hop ones and the proxy's own ``X-Agent-Replay-*``); the upstream's status,
headers and body come back as they are (errors included), decompressed when the upstream
compressed them. Only an allow-list of headers is recorded: API keys, ``Authorization``,
cookies and ``?key=`` never reach the store.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web
from multidict import CIMultiDict

from agent_replay.errors import UsageError
from agent_replay.services.proxy.answers import error_body
from agent_replay.services.proxy.apis import (
    DEFAULT_UPSTREAMS,
    ParsedRequest,
    Provider,
    Route,
    parse_request,
    route,
    upstream_url,
)
from agent_replay.services.proxy.recording import Exchange, SessionTraces, Writer
from agent_replay.services.proxy.replay import (
    Decision,
    ForkSink,
    Live,
    Refuse,
    Replayer,
    ReplayPlan,
    Serve,
    served_mark,
)
from agent_replay.services.proxy.session import (
    OWN_HEADERS,
    SESSION_HEADER,
    ClientProcess,
    Grouping,
    ProcessFinder,
    harness_session,
    session_key,
)
from agent_replay.store.db import Store

MAX_REQUEST = 64 * 1024 * 1024
"""The largest request body accepted (a long agent session with images reaches several MB)."""

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
_RECORDED_REQUEST_HEADERS = (
    "content-type",
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "x-app",
    "originator",
    "x-claude-code-session-id",
    "x-agent-replay-session",
    "x-agent-replay-agent",
)
_RECORDED_RESPONSE_HEADERS = ("content-type", "request-id", "x-request-id")


@dataclass
class ProxyStats:
    """Counts for the summary line."""

    requests: int = 0
    recorded: int = 0
    served: int = 0
    live: int = 0
    refused: int = 0
    passed: int = 0
    """Forwarded, not recorded (other endpoints: token counting, model lists)."""
    upstream_errors: int = 0


@dataclass
class ProxyConfig:
    """What ``agent-replay proxy`` was asked to do."""

    host: str = "127.0.0.1"
    port: int = 8787
    upstreams: dict[Provider, str] = field(default_factory=lambda: dict(DEFAULT_UPSTREAMS))
    grouping: Grouping = field(default_factory=lambda: Grouping("session"))
    redact: bool = True
    replay: ReplayPlan | None = None


class ProxyServer:
    """The proxy: ``start()``/``stop()`` on a running loop, or ``start_in_thread()`` /
    ``stop_thread()`` to run it on a loop of its own (tests, benchmarks, the CLI)."""

    def __init__(
        self,
        store: Store,
        config: ProxyConfig,
        *,
        log: Callable[[str], None] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.log = log or (lambda line: None)
        self.stats = ProxyStats()
        self.writer = Writer(store, on_error=on_error)
        self.traces = SessionTraces(store, redact=config.redact)
        self.replayer = Replayer(config.replay) if config.replay is not None else None
        self.fork: ForkSink | None = (
            ForkSink(store, config.replay, redact=config.redact)
            if config.replay is not None
            else None
        )
        self.url = ""
        self.ended: list[str] = []
        self.fork_id: str | None = None
        self._runner: web.AppRunner | None = None
        self._client: ClientSession | None = None
        self._procs: dict[tuple[int, int], asyncio.Future[ClientProcess | None]] = {}
        self._finder = ProcessFinder()
        self._lookups: dict[int, asyncio.Future[ClientProcess | None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle ---------------------------------------------------------------------------

    async def start(self) -> str:
        """Listen; returns the base URL (``http://HOST:PORT``)."""
        self._client = ClientSession(
            connector=TCPConnector(limit=0, ttl_dns_cache=300),
            timeout=ClientTimeout(total=None, connect=30, sock_read=900),
            auto_decompress=True,
            trust_env=False,
        )
        app = web.Application(client_max_size=MAX_REQUEST)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port, reuse_address=True)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        port = int(sockets[0].getsockname()[1]) if sockets else self.config.port
        self.config.port = port
        host = self.config.host if ":" not in self.config.host else f"[{self.config.host}]"
        self.url = f"http://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        """Stop listening, then write everything received and end the traces opened."""
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.close()
        done = threading.Event()

        def finish() -> None:
            try:
                self.ended = self.traces.finish()
                if self.fork is not None:
                    self.fork_id = self.fork.finish()
            finally:
                done.set()

        self.writer.submit(finish)
        self.writer.close()

    def start_in_thread(self) -> str:
        """Run on an event loop in a thread of its own; returns the base URL."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # noqa: BLE001 - reported to the caller
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="agent-replay-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self.url

    def stop_thread(self) -> None:
        """Stop a proxy started with ``start_in_thread`` (everything received is written)."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(120)

    # --- requests -----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.stats.requests += 1
        t0 = time.perf_counter()
        started = dt.datetime.now(dt.UTC)
        raw = await request.read()
        headers = request.headers
        where = route(request.method, request.path_qs, headers)
        if not where.recorded:
            self.stats.passed += 1
            return await self._forward(request, where, raw, None, t0)
        parsed: ParsedRequest | None = None
        problem: str | None = None
        try:
            parsed = parse_request(where, raw)
        except ValueError as exc:
            problem = str(exc)
        process = None
        if self.replayer is None:
            process = self._process_of(request, headers, parsed)
        ex = Exchange(
            route=where,
            session=session_key(
                self.config.grouping, headers, parsed.body if parsed else None, None
            ),
            raw_request=raw,
            request=parsed,
            parse_error=problem,
            request_headers={k: headers[k] for k in _RECORDED_REQUEST_HEADERS if k in headers},
            started_at=started,
        )
        if process is not None:
            self._lookups[id(ex)] = process
        departs, reason = True, None
        if self.replayer is not None and parsed is not None:
            try:
                decision: Decision = self.replayer.decide(where, parsed)
            except UsageError as exc:  # an --override that doesn't fit this API
                decision = Refuse(f"agent-replay proxy: {exc}")
            reason = self.replayer.ended
            if isinstance(decision, Serve):
                assert self.config.replay is not None
                ex.served = served_mark(self.config.replay, decision)
                departs = decision.override is not None
                self.stats.served += 1
                response = await self._serve(request, where, decision, ex, t0)
            elif isinstance(decision, Live):
                self.stats.live += 1
                response = await self._forward(request, where, raw, ex, t0)
            else:
                self.stats.refused += 1
                response = await self._refuse(request, where, decision.message, ex, t0)
        else:
            response = await self._forward(request, where, raw, ex, t0)
        if process is not None:
            self._lookups.pop(id(ex), None)
            found = await process  # done by now (awaited before the response started)
            ex.session = session_key(
                self.config.grouping, headers, parsed.body if parsed else None, found
            )
        self._record(ex, departs, reason)
        return response

    def _record(self, ex: Exchange, departs: bool, reason: str | None) -> None:
        self.stats.recorded += 1
        if self.fork is not None:
            fork = self.fork
            self.writer.submit(lambda: fork.record(ex, departs=departs, reason=reason))
        else:
            traces = self.traces

            def job() -> None:
                traces.record(ex)

            self.writer.submit(job)

    def _process_of(
        self, request: web.Request, headers: Mapping[str, str], parsed: ParsedRequest | None
    ) -> asyncio.Future[ClientProcess | None] | None:
        """Start looking up the client process when the trace depends on it (off the loop, in
        parallel with forwarding; cached per connection)."""
        grouping = self.config.grouping
        if grouping.mode == "fixed":
            return None
        if grouping.mode == "session" and (
            SESSION_HEADER in headers or harness_session(headers, parsed.body if parsed else None)
        ):
            return None
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        if not peer or peer[0] not in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
            return None
        key = (int(peer[1]), id(transport))
        future = self._procs.get(key)
        if future is None:
            if len(self._procs) > 1024:
                self._procs.clear()
            loop = asyncio.get_running_loop()
            future = self._procs[key] = loop.run_in_executor(
                None, self._finder.find, int(peer[1]), int(self.config.port)
            )
        return future

    async def _before_reply(self, ex: Exchange | None) -> None:
        """Wait for the client-process look-up of this exchange, if one runs: until the client
        has its reply it keeps the connection (and so the socket the look-up searches for)
        open. It ran in parallel with the upstream's work, so this rarely waits."""
        lookup = self._lookups.get(id(ex)) if ex is not None else None
        if lookup is not None:
            await asyncio.wait([lookup])

    async def _forward(
        self, request: web.Request, where: Route, raw: bytes, ex: Exchange | None, t0: float
    ) -> web.StreamResponse:
        assert self._client is not None
        url = upstream_url(self.config.upstreams[where.provider], where.path)
        out_headers = CIMultiDict(
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in _HOP_BY_HOP
            and k.lower() not in OWN_HEADERS
            and k.lower() != "accept-encoding"
        )
        skip = () if "user-agent" in out_headers else ("User-Agent",)
        response: web.StreamResponse | None = None
        try:
            async with self._client.request(
                request.method,
                url,
                data=raw or None,
                headers=out_headers,
                allow_redirects=False,
                skip_auto_headers=skip,
            ) as upstream:
                if ex is not None:
                    ex.first_byte_ms = (time.perf_counter() - t0) * 1000
                    ex.status = upstream.status
                    ex.response_headers = {
                        k: upstream.headers[k]
                        for k in _RECORDED_RESPONSE_HEADERS
                        if k in upstream.headers
                    }
                if upstream.status >= 400:
                    self.stats.upstream_errors += 1
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for k, v in upstream.headers.items():
                    if k.lower() not in _HOP_BY_HOP and k.lower() != "content-encoding":
                        response.headers.add(k, v)
                await self._before_reply(ex)
                length = upstream.headers.get("Content-Length")
                if length is not None and "Content-Encoding" not in upstream.headers:
                    response.content_length = int(length)
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    if ex is not None:
                        ex.chunks.append(chunk)
                    await response.write(chunk)
                await response.write_eof()
        except (TimeoutError, ClientError, OSError) as exc:
            message = (
                f"agent-replay proxy: the upstream {where.provider} API at "
                f"{url.split('?')[0]} failed: {exc or type(exc).__name__}"
            )
            if response is not None and response.prepared:
                # Mid-stream: the status is sent; end the stream so the client sees it cut.
                if ex is not None:
                    ex.error = message
                    ex.duration_ms = (time.perf_counter() - t0) * 1000
                return response
            if ex is not None:
                ex.error = message
            return await self._answer(request, where, 502, "upstream_unreachable", message, ex, t0)
        if ex is not None:
            ex.duration_ms = (time.perf_counter() - t0) * 1000
        return response

    async def _serve(
        self, request: web.Request, where: Route, decision: Serve, ex: Exchange, t0: float
    ) -> web.StreamResponse:
        recorded = decision.recorded
        ex.status = recorded.status
        ex.response_headers = dict(recorded.headers)
        ex.first_byte_ms = (time.perf_counter() - t0) * 1000
        response = web.StreamResponse(status=recorded.status)
        for k, v in recorded.headers.items():
            response.headers[k] = v
        if decision.override is not None and "content-type" not in {
            k.lower() for k in recorded.headers
        }:
            response.headers["Content-Type"] = "application/json"
        response.headers["X-Agent-Replay-Served"] = (
            f"{ex.served.trace_id if ex.served else ''} step {recorded.step_number}"
        )
        if not (ex.request and ex.request.stream):
            response.content_length = sum(len(c) for c in decision.chunks)
        await self._before_reply(ex)
        await response.prepare(request)
        for chunk in decision.chunks:
            ex.chunks.append(chunk)
            await response.write(chunk)
        await response.write_eof()
        ex.duration_ms = (time.perf_counter() - t0) * 1000
        return response

    async def _refuse(
        self, request: web.Request, where: Route, message: str, ex: Exchange, t0: float
    ) -> web.StreamResponse:
        ex.error = message
        return await self._answer(request, where, 409, "replay_mismatch", message, ex, t0)

    async def _answer(
        self,
        request: web.Request,
        where: Route,
        status: int,
        kind: str,
        message: str,
        ex: Exchange | None,
        t0: float,
    ) -> web.StreamResponse:
        body = error_body(where.provider, status, kind, message)
        response = web.Response(
            status=status,
            body=body,
            content_type="application/json",
            headers={"x-should-retry": "false"} if status == 409 else None,
        )
        await self._before_reply(ex)
        if ex is not None:
            ex.status = status
            ex.chunks = [body]
            ex.response_headers = {"content-type": "application/json"}
            ex.duration_ms = (time.perf_counter() - t0) * 1000
        return response


def warm_up() -> None:
    """Import what the first recorded exchange needs (the price table, ~0.5 s), so it doesn't
    land on the writer thread while requests flow."""
    import genai_prices  # noqa: F401


def parse_upstreams(values: list[str] | tuple[str, ...]) -> dict[Provider, str]:
    """``--upstream NAME=URL`` values on top of the defaults.

    Raises:
        ValueError: an unknown NAME or a URL that is not http(s).
    """
    upstreams: dict[Provider, str] = dict(DEFAULT_UPSTREAMS)
    names: dict[str, Provider] = {
        "anthropic": "anthropic",
        "openai": "openai",
        "gemini": "gemini",
        "google": "gemini",
    }
    for value in values:
        name, sep, url = value.partition("=")
        provider = names.get(name.strip().lower())
        if not sep or provider is None:
            raise ValueError(
                f"--upstream {value!r}: expected anthropic=URL, openai=URL or gemini=URL"
            )
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--upstream {value!r}: the URL must start with http:// or https://")
        upstreams[provider] = url.rstrip("/")
    return upstreams


def describe(config: ProxyConfig) -> dict[str, Any]:
    """What the proxy serves, for the start-up lines and ``--json``."""
    return {
        "url": None,
        "upstreams": dict(config.upstreams),
        "trace_per": config.grouping.mode
        + (f":{config.grouping.fixed_trace}" if config.grouping.fixed_trace else ""),
        "replay": config.replay.trace_id if config.replay else None,
    }
