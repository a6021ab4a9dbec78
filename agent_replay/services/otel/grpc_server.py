"""OTLP/gRPC: the official ``TraceService`` and ``LogsService`` on ``grpcio``.

Most OpenTelemetry exporters default to gRPC on port 4317. This server takes their ``Export``
calls to the same receiver as OTLP/HTTP (``OtelReceiver.accept``): the same mapping, redaction,
caps and writer queue. Messages arrive as bytes (no deserializer: the receiver decodes them
with the official messages, as it does for OTLP/HTTP's protobuf bodies); gzip is grpcio's
message compression, undone before the handler runs and bounded by the receive limit.

Refusals use the statuses the OTLP specification gives for gRPC: ``INVALID_ARGUMENT`` for a
malformed message, ``RESOURCE_EXHAUSTED`` over a size cap, ``UNAVAILABLE`` (retryable) when
the writer's queue is full or the server is stopping. ``MetricsService`` is accepted and
dropped, as ``/v1/metrics`` is.

Imported only when ``otel serve`` listens for gRPC (grpcio takes ~0.1 s to import).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent import futures
from typing import TYPE_CHECKING

# gRPC's C core logs bind failures and the like to stderr itself; the receiver reports them
# in its own words. (Set before the import, which reads it; the user's setting wins.)
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

import grpc  # noqa: E402 - after the verbosity setting

from agent_replay.services.otel.protocol import PROTOBUF, ProtocolError, export_response
from agent_replay.services.otel.server import GrpcBindError

if TYPE_CHECKING:
    from agent_replay.services.otel.server import OtelReceiver

DEFAULT_GRPC_PORT = 4317

SERVICES = {
    "traces": "opentelemetry.proto.collector.trace.v1.TraceService",
    "logs": "opentelemetry.proto.collector.logs.v1.LogsService",
    "metrics": "opentelemetry.proto.collector.metrics.v1.MetricsService",
}

STATUS = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    503: grpc.StatusCode.UNAVAILABLE,
}
"""The gRPC status for each HTTP status ``accept`` refuses with."""


class GrpcServer:
    """The OTLP/gRPC front of an ``OtelReceiver``.

    Args:
        receiver: the receiver whose ``accept`` takes each request.
        host: the address to listen on.
        port: the TCP port (0 picks a free one; ``start`` returns the bound port).
        workers: threads answering calls (decoding holds the GIL: a few are enough).

    Example:
        >>> server = GrpcServer(receiver, "127.0.0.1", 4317)
        >>> port = server.start()
        >>> ...  # exporters call TraceService/Export at 127.0.0.1:4317
        >>> server.stop()
    """

    def __init__(self, receiver: OtelReceiver, host: str, port: int, *, workers: int = 8) -> None:
        self.receiver = receiver
        self.host = host.strip("[]")
        self.port = port
        limit = receiver.max_decompressed
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otel-grpc"),
            handlers=[
                grpc.method_handlers_generic_handler(
                    service, {"Export": grpc.unary_unary_rpc_method_handler(self._export(signal))}
                )
                for signal, service in SERVICES.items()
            ],
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", 1024 * 1024),
                ("grpc.so_reuseport", 0),  # a port in use is an error, not a shared listener
            ],
        )

    def start(self) -> int:
        """Bind and serve; returns the bound port.

        Raises:
            GrpcBindError: the address can't be bound (in use, not local).
        """
        address = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        try:
            bound = int(self._server.add_insecure_port(address))
        except RuntimeError:  # grpcio raises this when the port can't be bound
            bound = 0
        if not bound:
            raise GrpcBindError(f"cannot bind {address} for OTLP/gRPC")
        self.port = bound
        self._server.start()
        return bound

    def stop(self, grace: float = 5.0) -> None:
        """Stop taking calls; those in progress get ``grace`` seconds to finish."""
        self._server.stop(grace).wait(grace + 1.0)

    def _export(self, signal: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        receiver = self.receiver

        def export(request: bytes, context: grpc.ServicerContext) -> bytes:
            try:
                outcome = receiver.accept(signal, PROTOBUF, request, None)
            except ProtocolError as exc:
                receiver.count_refused()
                context.abort(STATUS.get(exc.status, grpc.StatusCode.INTERNAL), exc.message)
            except Exception as exc:  # a bug must not kill the server: report, answer INTERNAL
                receiver.writer.report(
                    f"unexpected {type(exc).__name__} handling gRPC {signal} export: {exc}"
                )
                receiver.count_refused()
                context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}")
            return bytes(export_response(signal, outcome).SerializeToString())

        return export
