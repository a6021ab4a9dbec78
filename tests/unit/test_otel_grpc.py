"""``otel serve`` speaks OTLP/gRPC: the official services, the statuses the OTLP specification
gives for refusals, and a server that keeps serving after them. (The SDK's gRPC exporters
recording a whole agent are in ``test_otel_sdk``.)"""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from otelkit import count, otlp_payload, receiving

TRACES = trace_service_pb2_grpc.TraceServiceStub
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def request() -> trace_service_pb2.ExportTraceServiceRequest:
    """A real capture's spans (the manual instrumentation's protobuf request)."""
    message = trace_service_pb2.ExportTraceServiceRequest()
    message.ParseFromString(otlp_payload("0001").body)
    return message


def test_a_valid_export_lands_after_refusals_and_the_server_keeps_serving(store_dir: Path) -> None:
    """Garbage bytes get INVALID_ARGUMENT; spans without ids are reported in partial_success;
    a real request then lands: refusals cost nothing but the call."""
    with receiving(store_dir, grpc_port=0) as (receiver, _client, store):
        with grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel:
            raw = channel.unary_unary(EXPORT)  # bytes in, bytes out
            with pytest.raises(grpc.RpcError) as refused:
                raw(b"\xff\xff\xff\xff not a protobuf message", timeout=10)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT

            broken = request()
            broken.resource_spans[0].scope_spans[0].spans[0].trace_id = b"short"
            reply = TRACES(channel).Export(broken, timeout=10)
            assert reply.partial_success.rejected_spans == 1
            assert "without a valid trace id" in reply.partial_success.error_message

            reply = TRACES(channel).Export(request(), timeout=10, compression=grpc.Compression.Gzip)
            assert not reply.HasField("partial_success")
            logs = logs_service_pb2_grpc.LogsServiceStub(channel)
            empty = logs.Export(logs_service_pb2.ExportLogsServiceRequest(), timeout=10)
            assert not empty.HasField("partial_success")
        assert receiver.flush(timeout=30)
        assert receiver.stats.refused == 1
        assert count(store, "traces") >= 1
        spans = sum(len(s.spans) for r in request().resource_spans for s in r.scope_spans)
        assert receiver.stats.spans == 2 * spans - 1


def test_over_the_size_cap_is_resource_exhausted_even_gzipped(store_dir: Path) -> None:
    """A message past the decompressed-size cap gets RESOURCE_EXHAUSTED, sent plain or as a
    small gzip (a bomb is stopped at the cap, not inflated)."""
    with receiving(store_dir, grpc_port=0, max_decompressed=64 * 1024) as (receiver, _c, store):
        big = request()
        big.resource_spans[0].scope_spans[0].spans[0].name = "x" * (1024 * 1024)
        assert len(gzip.compress(big.SerializeToString())) < 64 * 1024
        with grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel:
            for packing in (grpc.Compression.NoCompression, grpc.Compression.Gzip):
                with pytest.raises(grpc.RpcError) as refused:
                    TRACES(channel).Export(big, timeout=10, compression=packing)
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            TRACES(channel).Export(request(), timeout=10)  # still serving
        assert receiver.flush(timeout=30)
        assert count(store, "traces") >= 1


def test_a_full_queue_is_unavailable_which_exporters_retry(store_dir: Path) -> None:
    """While another writer holds the store nothing can be made durable: an export waits,
    then gets UNAVAILABLE (the retryable status), and once the queue is full the next is
    refused at once; what was queued still lands when the store is free."""
    options = {"grpc_port": 0, "max_pending": 8, "ack_timeout_s": 0.3}
    with receiving(store_dir, **options) as (receiver, _client, store):
        locker = sqlite3.connect(store.path, timeout=5)
        locker.execute("BEGIN IMMEDIATE")
        try:
            with grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel:
                with pytest.raises(grpc.RpcError) as waited:
                    TRACES(channel).Export(request(), timeout=10)
                assert waited.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "not yet written" in (waited.value.details() or "")
                with pytest.raises(grpc.RpcError) as refused:
                    TRACES(channel).Export(request(), timeout=10)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "queue is full" in (refused.value.details() or "")
        finally:
            locker.rollback()
            locker.close()
        assert receiver.flush(timeout=30)
        assert count(store, "traces") >= 1
