"""``gemini -p --output-format stream-json`` (``gemini-stream``) mapped onto native events
(see ``streams`` for what maps to what, ``stream_sink`` for the shared machinery).
"""

from __future__ import annotations

from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.capture.events import EventEngine
from agent_replay.services.capture.stream_sink import (
    SHELL_TOOLS,
    StreamSink,
    first_line,
    shell_failure,
)


class GeminiStreamSink(StreamSink):
    """``gemini -p ... --output-format stream-json``: init, messages (assistant text streamed
    as ``delta`` chunks), tool_use / tool_result, error and the final result with stats."""

    FORMAT = "gemini-stream"
    DEFAULT_AGENT = "gemini-cli"

    def __init__(self, engine: EventEngine, *, agent_name: str | None = None) -> None:
        super().__init__(engine, agent_name=agent_name)
        self.tools: dict[str, dict[str, Any]] = {}
        self.model: str | None = None
        self.failure: str | None = None

    def on_init(self, event: dict[str, Any]) -> None:
        # The trace starts with the user's message (its input) if one follows.
        session = event.get("session_id")
        self.model = event.get("model") if isinstance(event.get("model"), str) else None
        self.trace_fields.update(
            trace_id=session,
            session_id=session,
            started_at=event.get("timestamp"),
            metadata={"model": self.model} if self.model else None,
        )

    def on_message(self, event: dict[str, Any]) -> None:
        role, content = event.get("role"), event.get("content")
        timestamp = event.get("timestamp")
        if role == "user":
            if self.trace_key is None:
                self.ensure_trace(input=content)
            else:
                self.flush_text("thought")
                self.emit(
                    "step", step_type="thought", name="user", input=content, started_at=timestamp
                )
            return
        if not isinstance(content, str):
            return
        if not event.get("delta"):
            self.flush_text("thought")  # a whole message: the previous one is complete
        self.hold_text(content, timestamp)

    def on_tool_use(self, event: dict[str, Any]) -> None:
        thought = self.flush_text("thought")
        tool_id = str(event.get("tool_id") or event.get("tool_name") or "tool")
        parameters = event.get("parameters")
        self.tools[tool_id] = {"name": event.get("tool_name"), "parameters": parameters}
        self.emit(
            "step_start",
            step_type="tool_call",
            name=event.get("tool_name"),
            input=parameters,
            call_id=tool_id,
            started_at=event.get("timestamp"),
            caused_by_step=thought,
        )

    def on_tool_result(self, event: dict[str, Any]) -> None:
        tool_id = str(event.get("tool_id") or "")
        tool = self.tools.pop(tool_id, {})
        status = event.get("status")
        output = event.get("output")
        error = None
        metadata: dict[str, Any] = {"status": status} if status else {}
        failure = event.get("error")
        if status == "error" or failure:
            if isinstance(failure, dict):
                error = str(failure.get("message") or failure.get("type") or "")
            elif failure:
                error = str(failure)
            elif isinstance(output, str):
                error = first_line(output)
            error, refused = vocabulary.tool_error(vocabulary.GEMINI, error)
            metadata.update(refused)
            error = error or "tool failed"
        elif tool.get("name") in SHELL_TOOLS:
            parameters = tool.get("parameters")
            command = parameters.get("command") if isinstance(parameters, dict) else None
            error = shell_failure(command, output)
            if error is not None:
                metadata["failure_inferred_from_output"] = True
        self.emit(
            "step_end",
            call_id=tool_id,
            output=output,
            error=error,
            ended_at=event.get("timestamp"),
            metadata=metadata or None,
        )

    def on_error(self, event: dict[str, Any]) -> None:
        self.flush_text("thought")
        severity = event.get("severity")
        message = str(event.get("message") or "error")
        self.emit(
            "step",
            step_type="error",
            name=str(severity or "error"),
            error=message,
            started_at=event.get("timestamp"),
            metadata={"severity": severity} if severity else None,
        )
        if severity not in ("warning", "info"):
            self.failure = message

    def on_result(self, event: dict[str, Any]) -> None:
        timestamp = event.get("timestamp")
        self.flush_text("output")
        stats = event.get("stats") if isinstance(event.get("stats"), dict) else {}
        assert isinstance(stats, dict)
        models = stats.get("models")
        if isinstance(models, dict) and models:
            for model, usage in models.items():
                if not isinstance(usage, dict):
                    continue
                self.emit(
                    "step",
                    step_type="llm_call",
                    name=model,
                    model=model,
                    output={"usage": usage},
                    tokens_used=usage.get("total_tokens"),
                    started_at=timestamp,
                    metadata={"usage": usage},
                )
        elif stats.get("total_tokens") is not None:
            self.emit(
                "step",
                step_type="llm_call",
                name=self.model or "model",
                model=self.model,
                tokens_used=stats.get("total_tokens"),
                started_at=timestamp,
            )
        failure = event.get("error")
        status = event.get("status")
        error = None
        if status not in (None, "success") or failure:
            error = (
                str(failure.get("message") or failure.get("type"))
                if isinstance(failure, dict)
                else str(failure or status)
            )
        self.end_trace(
            status="failed" if error else "completed",
            error=error,
            output=self.last_output,
            ended_at=timestamp,
            total_tokens=stats.get("total_tokens"),
            metadata={
                k: stats[k] for k in ("duration_ms", "tool_calls") if stats.get(k) is not None
            }
            or None,
        )

    def close(self) -> None:
        self.flush_text("thought")
