"""The OpenTelemetry receiver (``agent-replay otel serve``): OTLP/HTTP traces and logs in,
agent-replay traces out.

- ``protocol``: the wire format (bodies, compression, the official messages, responses);
- ``normalize``: decoded messages -> plain span and log-record dicts, redacted;
- ``semconv``: the attribute dialects (GenAI conventions, OpenInference, OpenLLMetry, the
  Claude Code and Gemini CLI events);
- ``nodes``, ``spans``, ``logs``, ``build``: one group's spans and records -> one trace;
- ``writer``: the request side of the writer (a queue piped to the writer process, with
  backpressure, flushing and draining);
- ``writer_process``: the writer process (staging, regrouping, rebuilding, in batched
  transactions);
- ``server``: the HTTP server and ``OtelReceiver``, the entry point.

Headless: imports the store, the trace format and protobuf; never Textual, Rich or an AI SDK.
Importing this package imports nothing else; import the submodules you need.
"""
