"""A real exporter drives the receiver: the OpenTelemetry Python SDK with its OTLP/HTTP
exporters (protobuf, gzip-compressed or not, and JSON) and its OTLP/gRPC exporters (gzip or
not), sending GenAI spans and log records the way an instrumented agent does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.json.http._log_exporter import OTLPLogExporter as JsonLogExporter
from opentelemetry.exporter.otlp.json.http.trace_exporter import (
    OTLPSpanExporter as JsonSpanExporter,
)
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from otelkit import receiving, shape, traces


def exporters(kind: str, url: str, grpc_port: int | None) -> tuple[Any, Any]:
    """(span exporter, log exporter) of one kind, pointed at the receiver."""
    if kind.startswith("grpc"):
        target = f"http://127.0.0.1:{grpc_port}"
        packing = grpc.Compression.Gzip if kind == "grpc-gzip" else grpc.Compression.NoCompression
        return (
            GrpcSpanExporter(endpoint=target, insecure=True, timeout=10, compression=packing),
            GrpcLogExporter(endpoint=target, insecure=True, timeout=10, compression=packing),
        )
    if kind == "json":
        return (
            JsonSpanExporter(endpoint=f"{url}/v1/traces", timeout=10),
            JsonLogExporter(endpoint=f"{url}/v1/logs", timeout=10),
        )
    compression = Compression.Gzip if kind == "protobuf-gzip" else Compression.NoCompression
    return (
        OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10, compression=compression),
        OTLPLogExporter(endpoint=f"{url}/v1/logs", timeout=10, compression=compression),
    )


def run_agent(tracer: trace_api.Tracer, logger: Any) -> str:
    """What an instrumented agent does: an invoke_agent span around a chat call (with its
    operation-details log record, carrying the same usage) and a tool call."""
    with tracer.start_as_current_span(
        "invoke_agent travel_agent",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel_agent",
            "gen_ai.conversation.id": "trip-42",
            "gen_ai.provider.name": "openai",
        },
    ) as root:
        with tracer.start_as_current_span(
            "chat gpt-4o",
            kind=trace_api.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.id": "chatcmpl-sdk-1",
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 30,
                "gen_ai.input.messages": '[{"role": "user", "parts": '
                '[{"type": "text", "content": "Book me a train to Lyon"}]}]',
            },
        ):
            logger.emit(
                event_name="gen_ai.client.inference.operation.details",
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.response.id": "chatcmpl-sdk-1",
                    "gen_ai.usage.input_tokens": 120,
                    "gen_ai.usage.output_tokens": 30,
                    "gen_ai.output.messages": '[{"role": "assistant", "parts": '
                    '[{"type": "text", "content": "Done: 9:04 to Lyon."}]}]',
                },
            )
        with tracer.start_as_current_span(
            "execute_tool book_train",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "book_train",
                "gen_ai.tool.call.arguments": '{"to": "Lyon"}',
            },
        ) as tool:
            tool.set_status(trace_api.Status(trace_api.StatusCode.ERROR, "no seats left"))
        return f"{root.get_span_context().trace_id:032x}"


@pytest.mark.parametrize("kind", ["protobuf", "protobuf-gzip", "json", "grpc", "grpc-gzip"])
def test_sdk_exporters_record_a_genai_agent(store_dir: Path, kind: str) -> None:
    """Spans and logs from the real SDK exporters become one trace: hierarchy, tokens counted
    once (span and log record of the same call), the log's output merged, the tool's error."""
    with receiving(store_dir, grpc_port=0) as (receiver, _client, store):
        resource = Resource.create({"service.name": "travel-service"})
        span_exporter, log_exporter = exporters(kind, receiver.url, receiver.grpc_port)
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
        try:
            otel_id = run_agent(
                tracer_provider.get_tracer("tests"), logger_provider.get_logger("tests")
            )
            assert tracer_provider.force_flush(10_000)
            assert logger_provider.force_flush(10_000)
        finally:
            tracer_provider.shutdown()
            logger_provider.shutdown()
        assert receiver.flush(timeout=30)
        assert receiver.stats.spans == 3 and receiver.stats.log_records == 1
        assert receiver.stats.refused == 0
        (trace,) = traces(store)
    assert trace["metadata"]["otel"]["trace_ids"] == [otel_id]
    assert trace["agent_name"] == "travel_agent"
    assert trace["session_id"] == "trip-42"
    assert shape(trace) == [("llm_call", "chat gpt-4o", None), ("tool_call", "book_train", None)]
    chat, tool = trace["steps"]
    assert chat["tokens_used"] == 150 and trace["total_tokens"] == 150
    assert chat["output"][0]["parts"][0]["content"] == "Done: 9:04 to Lyon."
    assert trace["input"] == "Book me a train to Lyon"
    assert tool["error"] == "no seats left"
    assert tool["input"] == {"to": "Lyon"}
    assert trace["status"] == "completed"
