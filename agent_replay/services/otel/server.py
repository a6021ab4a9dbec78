"""The OTLP/HTTP receiver: a stdlib ``ThreadingHTTPServer`` in front of the writer process.

A request is read (``Content-Length`` or chunked, capped), decompressed (capped), decoded with
the official messages, normalized and redacted, queued for the writer, and answered once the
writer process has committed it to the store (``synchronous=FULL``: fsync'd), so a 2xx means
the data survives a kill of the server; the writer commits whatever has arrived in one
transaction (group commit), so concurrent exporters share each fsync. A request that can't be
made durable in ``ACK_TIMEOUT_S`` gets 503 with ``Retry-After``, which exporters retry.
Answers follow the OTLP/HTTP specification: 200 with an
``Export*ServiceResponse`` in the request's encoding (``partial_success`` when some items can't
be kept), 400 malformed, 404 unknown path, 405 other methods, 413 over a size cap, 415 other
content types or codings, 503 (retryable) when the queue is full or the server is stopping;
error bodies are ``google.rpc.Status`` messages.

``/v1/metrics`` is accepted and dropped (agent-replay records traces, not metrics), so a
harness exporting all three signals to one endpoint gets no errors.

The stdlib server is enough here: exporters hold a few keep-alive connections, and decoding
and normalizing are CPU-bound under the GIL whatever the server. Writing (building traces,
validating, SQL) is as much work again, so it runs in a process of its own (see ``writer``):
the two use two cores.
"""

from __future__ import annotations

import email.utils
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agent_replay.clock import Clock
from agent_replay.services import limits
from agent_replay.services.otel import normalize
from agent_replay.services.otel.protocol import (
    JSON,
    PROTOBUF,
    Outcome,
    ProtocolError,
    decompress,
    encode,
    error_body,
    export_response,
    media_type,
)
from agent_replay.services.otel.writer import Log, OtelWriter
from agent_replay.services.redact import identity, redact_value

if TYPE_CHECKING:
    from agent_replay.services.otel.grpc_server import GrpcServer

DEFAULT_PORT = 4318
MAX_BODY = 32 * 1024 * 1024
"""The largest request body accepted as sent (the OpenTelemetry Collector's default is 20 MiB;
Gemini CLI's log posts reach a few hundred KiB)."""
MAX_DECOMPRESSED = 64 * 1024 * 1024
"""The largest body accepted after decompression (a gzip bomb stops here). Decoding holds a
few copies of a body (its bytes, the parsed message, the items), so this bounds the
receiver's memory at a few hundred MB with ``MAX_INFLIGHT``."""
ACK_TIMEOUT_S = 10.0
"""How long a request waits for its items to be on disk; then 503 with ``Retry-After`` (the
items may still land: a retry is idempotent, spans are keyed by trace and span id)."""
MAX_INFLIGHT = 80 * 1024 * 1024
"""The most decompressed bytes decoded at once over all requests (see ``_Budget``): one
request at the decompression cap plus many ordinary ones."""
IDLE_TIMEOUT_S = 120.0
"""A keep-alive connection idle this long is closed (its thread ends)."""
LINGER_BYTES = 64 * 1024 * 1024
LINGER_S = 5.0
"""After an answer that closes the connection (413 over the cap, 415, 404, 405: the body
unread or half read), the receiver stops writing, then reads and drops what the client still
sends, up to these bounds, before it closes: a socket closed with unread input resets the
connection, and a client still sending sees a broken pipe or a reset instead of the answer
(what nginx calls a lingering close)."""

PATHS = {"/v1/traces": "traces", "/v1/logs": "logs", "/v1/metrics": "metrics"}

_SUCCESS: dict[tuple[str, str], bytes] = {}


def _success(signal: str, media: str) -> bytes:
    """The body of a full success (no ``partial_success``), encoded once per signal and
    encoding."""
    body = _SUCCESS.get((signal, media))
    if body is None:
        body = _SUCCESS[signal, media] = encode(export_response(signal, Outcome()), media)
    return body


_DATE: list[Any] = [None, ""]


def _http_date() -> str:
    """The ``Date`` header's value, as ``BaseHTTPRequestHandler.date_time_string`` renders it
    (formatted once a second)."""
    now = int(time.time())
    if _DATE[0] != now:
        _DATE[:] = [now, email.utils.formatdate(now, usegmt=True)]
    return str(_DATE[1])


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only loopback addresses (``127.0.0.1``, ``::1``, ``localhost``)."""
    text = host.strip().strip("[]")
    if not text:
        return False
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(text, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


class GrpcBindError(OSError):
    """The gRPC port can't be bound (in use, or not an address of this machine)."""


@dataclass
class ReceiverStats:
    """What the receiver accepted and refused (for the closing summary)."""

    requests: int = 0
    spans: int = 0
    log_records: int = 0
    log_records_ignored: int = 0
    rejected: int = 0
    refused: int = 0
    """Requests answered with an error status."""


class _Budget:
    """Bytes of request bodies being decompressed and decoded at once, over all requests:
    four concurrent decompression bombs take their turns instead of four times the memory."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self._cond = threading.Condition()

    def acquire(self, size: int, timeout: float) -> bool:
        """Take ``size`` bytes (a request larger than the whole budget waits to be alone);
        ``False`` when there was no room within ``timeout`` seconds."""
        size = min(size, self.total)
        with self._cond:
            return self._cond.wait_for(lambda: self.used + size <= self.total, timeout) and (
                self._take(size)
            )

    def _take(self, size: int) -> bool:
        self.used += size
        return True

    def release(self, size: int) -> None:
        with self._cond:
            self.used -= min(size, self.total)
            self._cond.notify_all()


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # idle keep-alive connections must not hold up shutdown
    request_queue_size = 128
    receiver: OtelReceiver


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse their connection
    server_version = "agent-replay-otlp"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's
    # delayed ACK (~40 ms a request on Linux).
    disable_nagle_algorithm = True
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's naming
        receiver = self.server.receiver
        try:
            receiver.handle(self)
        except Exception as exc:  # a bug must not kill the connection silently: 500, logged
            receiver.internal_error(self, exc)

    def _not_allowed(self) -> None:
        self.server.receiver.refuse_method(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _not_allowed  # noqa: N815

    linger = False
    """Set when the answer closes the connection, maybe with the body unread (``LINGER_S``)."""

    def finish(self) -> None:
        super().finish()
        if self.linger:
            _drain(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet: an exporter posting every second would flood the terminal."""


def _drain(connection: socket.socket) -> None:
    """Half-close ``connection`` and drop what the peer still sends, within the linger bounds."""
    try:
        connection.shutdown(socket.SHUT_WR)  # the answer is out: the client sees its end
        deadline = time.monotonic() + LINGER_S
        left = LINGER_BYTES
        while left > 0:
            wait = deadline - time.monotonic()
            if wait <= 0:
                return
            connection.settimeout(wait)
            data = connection.recv(min(left, 1 << 16))
            if not data:
                return  # the client finished sending and closed its end
            left -= len(data)
    except OSError:  # reset, timeout or already closed: nothing more to wait for
        return


class OtelReceiver:
    """Receive OTLP/HTTP traces and logs into a store.

    Args:
        db_file: the store's database file (created and migrated by the caller).
        host: the address to listen on (loopback by default).
        port: the TCP port (0 picks a free one; see ``address`` after ``start``).
        grpc_port: also serve OTLP/gRPC on this port (0 picks a free one; see ``grpc_port``
            after ``start``); ``None`` serves HTTP only.
        redact: redact secrets before anything is queued (``--no-redact`` turns it off).
        clock: stamps first-seen times.
        max_body: the largest body accepted as sent, in bytes.
        max_decompressed: the largest body accepted after decompression, in bytes.
        max_pending: the most items queued for the writer before answering 503.
        log: where problems are reported, one line each.
        error_log: where tracebacks of unexpected failures go.
        ack_timeout_s: how long a request waits for its items to be committed before it is
            answered 503 (retryable) instead of 2xx.
        max_inflight: the most decompressed bytes being decoded at once, over all requests
            (a request waits for room, up to ``ack_timeout_s``, then gets 503).

    Example:
        >>> receiver = OtelReceiver(Path(".agent-replay/traces.db"), port=0)
        >>> host, port = receiver.start()
        >>> ...  # exporters post to http://host:port/v1/traces
        >>> receiver.stop()  # drains: everything accepted is written
    """

    def __init__(
        self,
        db_file: Path,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        grpc_port: int | None = None,
        redact: bool = True,
        clock: Clock | None = None,
        max_body: int = MAX_BODY,
        max_decompressed: int = MAX_DECOMPRESSED,
        max_pending: int = 500_000,
        log: Log | None = None,
        error_log: Path | None = None,
        ack_timeout_s: float = ACK_TIMEOUT_S,
        max_inflight: int = MAX_INFLIGHT,
    ) -> None:
        self.host = host
        self.ack_timeout_s = ack_timeout_s
        self.port = port
        # Every value capped (services/limits) before it is redacted: one giant attribute
        # costs its first MiB, not its size, in every step after decompression.
        self.redact = limits.capped(redact_value if redact else identity, limits.max_value_bytes())
        self.budget = _Budget(max_inflight)
        self.max_body = max_body
        self.max_decompressed = max_decompressed
        self.stats = ReceiverStats()
        self.writer = OtelWriter(
            db_file, clock=clock, max_pending=max_pending, log=log, error_log=error_log
        )
        self._lock = threading.Condition()
        self._inflight = 0
        self._closing = False
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._grpc: GrpcServer | None = None
        self.grpc_port = grpc_port

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> tuple[str, int]:
        """Bind, start serving and writing; returns the bound (host, port).

        Raises:
            OSError: the address can't be bound (in use, not local).
        """
        host = self.host.strip("[]")
        server_cls: type[_Server] = _Server
        if ":" in host:
            server_cls = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
        self._server = server_cls((host, self.port), _Handler)
        self._server.receiver = self
        if self.grpc_port is not None:
            from agent_replay.services.otel.grpc_server import GrpcServer

            self._grpc = GrpcServer(self, self.host, self.grpc_port)
            try:
                self.grpc_port = self._grpc.start()
            except OSError:
                self._server.server_close()
                raise
        self.writer.start()
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="otel-http"
        )
        self._thread.daemon = True
        self._thread.start()
        return self.address

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) the server is bound to."""
        assert self._server is not None, "start() first"
        bound = self._server.server_address
        return str(bound[0]), int(bound[1])

    @property
    def url(self) -> str:
        """The base URL exporters point at (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything accepted so far is in the store."""
        return self.writer.flush(timeout)

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop gracefully: refuse new requests (503), let those in progress finish, write
        everything queued. ``True`` when nothing accepted was left unwritten."""
        with self._lock:
            self._closing = True
            self._lock.wait_for(lambda: self._inflight == 0, timeout=timeout)
        if self._grpc is not None:
            self._grpc.stop(grace=1.0)
        if self._server is not None:
            self._server.shutdown()
        done = self.writer.stop(timeout)
        if self._server is not None:
            self._server.server_close()
        return done

    # --- requests -----------------------------------------------------------------------------

    def handle(self, request: _Handler) -> None:
        """Answer one POST."""
        signal = PATHS.get(urlsplit(request.path).path.rstrip("/"))
        media = media_type(request.headers.get("Content-Type"))
        if signal is None:
            self._fail(request, 404, f"no OTLP endpoint at {request.path}", media, close=True)
            return
        try:
            if media not in (JSON, PROTOBUF):
                raise ProtocolError(
                    415, f"unsupported Content-Type {media or '(none)'!r}: use {PROTOBUF} or {JSON}"
                )
            body = self._read_body(request)
        except ProtocolError as exc:  # the body is unread or half read: drop the connection
            self._fail(request, exc.status, exc.message, media, close=True)
            return
        try:
            outcome = self.accept(signal, media, body, request.headers.get("Content-Encoding"))
        except ProtocolError as exc:
            retry = exc.status == 503
            self._fail(request, exc.status, exc.message, media, retry=retry, close=self._closing)
            return
        if outcome.rejected:
            reply = encode(export_response(signal, outcome), media)
        else:
            reply = _success(signal, media)
        self._send(request, 200, reply, media)

    def accept(self, signal: str, media: str, body: bytes, encoding: str | None) -> Outcome:
        """Decode one export request and queue its items for the writer: the half of a request
        that OTLP/HTTP and OTLP/gRPC share (same mapping, same caps, same queue).

        Args:
            signal: ``traces``, ``logs`` or ``metrics``.
            media: the encoding, ``PROTOBUF`` or ``JSON``.
            body: the request's bytes as received.
            encoding: the body's ``Content-Encoding`` (gRPC hands over decompressed messages).

        Returns:
            What could not be kept (``partial_success``); empty when everything was queued.

        Raises:
            ProtocolError: the request is refused with that HTTP status: 400 malformed, 413 over
                a cap, 415 an unknown coding, 503 (retry later) queue full or shutting down.
        """
        cost = self._cost(body, encoding)
        if not self.budget.acquire(cost, self.ack_timeout_s):
            raise ProtocolError(503, "too many large requests being decoded; retry later")
        try:
            raw = decompress(
                body, encoding, cost if cost < self.max_decompressed else self.max_decompressed
            )
            del body
            decoded = normalize.decode(signal, media, raw, self.redact)
            del raw
        finally:
            self.budget.release(cost)
        with self._lock:
            if self._closing:
                raise ProtocolError(503, "the receiver is shutting down")
            self._inflight += 1
        try:
            if decoded.spans or decoded.logs:
                seq = self.writer.submit(decoded.spans, decoded.logs)
                if seq is None:
                    raise ProtocolError(503, "the write queue is full; retry later")
                # Acknowledged only once it is on disk: an exporter never retries a 2xx.
                if not self.writer.wait_written(seq, self.ack_timeout_s):
                    raise ProtocolError(503, "not yet written to the store; retry later")
            with self._lock:  # counted before the answer: a client may read them right after
                self.stats.requests += 1
                self.stats.spans += len(decoded.spans)
                self.stats.log_records += len(decoded.logs)
                self.stats.log_records_ignored += decoded.ignored
                self.stats.rejected += decoded.rejected
        finally:
            with self._lock:
                self._inflight -= 1
                if self._closing:  # ``stop`` waits for the requests in progress
                    self._lock.notify_all()
        if decoded.rejected:
            return Outcome(
                decoded.rejected,
                f"{decoded.rejected} span(s) without a valid trace id or span id were dropped",
            )
        return Outcome()

    def _cost(self, body: bytes, encoding: str | None) -> int:
        """What decoding ``body`` may take of the budget: its size, or for gzip the size its
        trailer announces (a bomb says it is big; a stream that lies is cut at that size with
        413), else the decompression cap."""
        coding = (encoding or "identity").strip().lower()
        if coding in ("", "identity"):
            return len(body)
        if coding in ("gzip", "x-gzip") and len(body) >= 18 and body[:2] == b"\x1f\x8b":
            announced = int.from_bytes(body[-4:], "little") + 64 * 1024  # (mod 2^32: a hint)
            return min(self.max_decompressed, max(announced, len(body)))
        return self.max_decompressed

    def count_refused(self) -> None:
        """Count a request refused by a transport (the gRPC server)."""
        with self._lock:
            self.stats.refused += 1

    def internal_error(self, request: _Handler, exc: Exception) -> None:
        """Answer 500 for an unexpected failure and record its traceback."""
        self.writer.report(f"unexpected {type(exc).__name__} handling {request.path}: {exc}")
        media = media_type(request.headers.get("Content-Type"))
        self._fail(request, 500, f"internal error: {type(exc).__name__}", media, close=True)

    def refuse_method(self, request: _Handler) -> None:
        """405 for a method other than POST on an OTLP path (404 elsewhere)."""
        media = media_type(request.headers.get("Content-Type"))
        if PATHS.get(urlsplit(request.path).path.rstrip("/")) is None:
            self._fail(request, 404, f"no OTLP endpoint at {request.path}", media, close=True)
            return
        self._fail(
            request,
            405,
            f"{request.command} is not allowed: OTLP/HTTP takes POST",
            media,
            close=True,
            headers={"Allow": "POST"},
        )

    def _read_body(self, request: _Handler) -> bytes:
        transfer = request.headers.get("Transfer-Encoding", "").lower()
        if "chunked" in transfer:
            return self._read_chunked(request)
        length_text = request.headers.get("Content-Length")
        if length_text is None:
            return b""
        try:
            length = int(length_text)
        except ValueError:
            raise ProtocolError(400, f"bad Content-Length {length_text!r}") from None
        if length < 0:
            raise ProtocolError(400, f"bad Content-Length {length_text!r}")
        if length > self.max_body:
            raise ProtocolError(413, f"body of {length} bytes is over the {self.max_body}-byte cap")
        body = request.rfile.read(length)
        if len(body) < length:
            raise ProtocolError(400, "the body ended before Content-Length bytes")
        return body

    def _read_chunked(self, request: _Handler) -> bytes:
        """A ``Transfer-Encoding: chunked`` body, refused as soon as it passes the cap."""
        out = bytearray()
        stream = request.rfile
        while True:
            line = stream.readline(1026)
            if not line.endswith(b"\n"):
                raise ProtocolError(400, "malformed or truncated chunked body")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(400, "malformed chunk size") from None
            if size < 0:
                raise ProtocolError(400, "malformed chunk size")
            if size == 0:
                while True:  # trailer fields, up to the blank line
                    trailer = stream.readline(8194)
                    if trailer in (b"\r\n", b"\n", b""):
                        return bytes(out)
            if len(out) + size > self.max_body:
                raise ProtocolError(413, f"chunked body over the {self.max_body}-byte cap")
            chunk = stream.read(size)
            if len(chunk) < size or stream.readline(3).strip():
                raise ProtocolError(400, "malformed or truncated chunked body")
            out += chunk

    # --- responses ------------------------------------------------------------------------------

    def _fail(
        self,
        request: _Handler,
        status: int,
        message: str,
        media: str,
        *,
        close: bool = False,
        retry: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        with self._lock:
            self.stats.refused += 1
        body, kind = error_body(status, message, media)
        extra = dict(headers or {})
        if retry:
            extra["Retry-After"] = "1"
        self._send(request, status, body, kind, close=close, headers=extra)

    @staticmethod
    def _send(
        request: _Handler,
        status: int,
        body: bytes,
        content_type: str,
        *,
        close: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        # What ``send_response`` and ``send_header`` write, in one write (two cost a second
        # system call, and the body would wait for the client's delayed ACK without NODELAY).
        lines = [
            f"{request.protocol_version} {status} {request.responses[status][0]}\r\n"
            f"Server: {request.version_string()}\r\n"
            f"Date: {_http_date()}\r\n"
            f"Content-Type: {content_type or JSON}\r\n"
            f"Content-Length: {len(body)}\r\n"
        ]
        for name, value in (headers or {}).items():
            lines.append(f"{name}: {value}\r\n")
        if close:
            lines.append("Connection: close\r\n")
            request.close_connection = True
            request.linger = True  # what the client still sends is read and dropped first
        lines.append("\r\n")
        head = "".join(lines).encode("latin-1", "strict")
        try:
            request.wfile.write(head + body if request.command != "HEAD" else head)
        except OSError:
            request.close_connection = True  # the client left; its items are already queued
