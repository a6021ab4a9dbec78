"""``claude -p --output-format stream-json --verbose`` (``claude-stream``) mapped onto native
events (see ``streams`` for what maps to what, ``stream_sink`` for the shared machinery).
"""

from __future__ import annotations

from typing import Any

import orjson

from agent_replay.services.capture import vocabulary
from agent_replay.services.capture.events import EventEngine
from agent_replay.services.capture.stream_sink import ERROR_TEXT_LIMIT, StreamSink, total_tokens


class ClaudeStreamSink(StreamSink):
    """``claude -p ... --output-format stream-json --verbose``: the init system event,
    assistant messages (one API reply can span several lines sharing a ``message.id``: text,
    thinking and tool_use blocks), user messages carrying tool results, and the final result.
    Subagent lines (``parent_tool_use_id``) nest under the Agent/Task tool call's step."""

    FORMAT = "claude-stream"
    DEFAULT_AGENT = "claude-code"
    IGNORED = frozenset({"stream_event", "rate_limit_event"})

    def __init__(self, engine: EventEngine, *, agent_name: str | None = None) -> None:
        super().__init__(engine, agent_name=agent_name)
        self.reply_id: str | None = None
        self.reply_step: int | None = None
        self.reply_usage: dict[str, Any] = {}
        self.reply_tools: list[str] = []
        self.reply_text: list[str] = []
        self.reply_stop: str | None = None
        self.reply_ended: str | None = None
        self.tool_steps: dict[str, int] = {}
        self.last_result_step: int | None = None

    def on_system(self, event: dict[str, Any]) -> None:
        if event.get("subtype") != "init":
            return  # hooks, tasks, status: progress the steps already show
        session = event.get("session_id")
        metadata = {
            k: event.get(k)
            for k in ("model", "cwd", "claude_code_version", "permissionMode")
            if event.get(k) is not None
        }
        # The trace starts with the first step, at its time (this line carries none).
        self.trace_fields.update(
            trace_id=session,
            session_id=session,
            agent_version=event.get("claude_code_version"),
            metadata=metadata or None,
        )

    def _parent(self, event: dict[str, Any]) -> int | None:
        parent = event.get("parent_tool_use_id")
        return self.tool_steps.get(parent) if isinstance(parent, str) else None

    def on_assistant(self, event: dict[str, Any]) -> None:
        message = event.get("message")
        if not isinstance(message, dict):
            self.engine.skip("claude-stream assistant line without a message", self.where)
            return
        timestamp = event.get("timestamp")
        parent = self._parent(event)
        message_id = message.get("id")
        if message_id is None or message_id != self.reply_id:
            self.close_reply()
            self.flush_text("thought")
            self.reply_id = message_id if isinstance(message_id, str) else None
            model = message.get("model")
            self.reply_step = self.emit(
                "step_start",
                step_type="llm_call",
                name=model if isinstance(model, str) else "model",
                model=model,
                call_id=self.reply_id,
                started_at=timestamp,
                parent_step=parent,
                caused_by_step=self.last_result_step,
            )
        self.reply_ended = timestamp or self.reply_ended
        usage = message.get("usage")
        if isinstance(usage, dict):
            self.reply_usage = usage  # the latest line of a reply has its final usage
        if isinstance(message.get("stop_reason"), str):
            self.reply_stop = message["stop_reason"]
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                self.reply_text.append(block["text"])
                self.hold_text(
                    block["text"], timestamp, caused_by_step=self.reply_step, parent_step=parent
                )
            elif kind in ("thinking", "redacted_thinking"):
                self.flush_text("thought")
                self.emit(
                    "step",
                    step_type="thought",
                    name="thinking",
                    output=block.get("thinking"),
                    started_at=timestamp,
                    caused_by_step=self.reply_step,
                    parent_step=parent,
                )
            elif kind in ("tool_use", "server_tool_use"):
                self.flush_text("thought")
                tool_id = str(block.get("id") or "")
                name = block.get("name")
                self.reply_tools.append(str(name))
                number = self.emit(
                    "step_start",
                    step_type="tool_call",
                    name=name,
                    input=block.get("input"),
                    call_id=tool_id or None,
                    started_at=timestamp,
                    caused_by_step=self.reply_step,
                    parent_step=parent,
                )
                if tool_id and number is not None:
                    self.tool_steps[tool_id] = number
            elif kind is not None:
                self.engine.skip(f"claude-stream content block {kind!r}", self.where)

    def close_reply(self) -> None:
        """Close the current API reply's llm_call step with its usage (counted once)."""
        if self.reply_step is None:
            return
        usage = self.reply_usage
        tokens = total_tokens(
            usage.get("input_tokens"),
            usage.get("output_tokens"),
            usage.get("cache_creation_input_tokens"),
            usage.get("cache_read_input_tokens"),
        )
        summary = {
            k: v
            for k, v in (("stop_reason", self.reply_stop), ("tool_calls", self.reply_tools))
            if v
        }
        self.emit(
            "step_end",
            step_number=self.reply_step,
            # The reply's text is in the thought/output steps it caused.
            output=summary or None,
            ended_at=self.reply_ended,
            tokens_used=tokens,
            metadata={
                k: v
                for k, v in (
                    ("message_id", self.reply_id),
                    ("usage", usage or None),
                    ("stop_reason", self.reply_stop),
                )
                if v is not None
            }
            or None,
        )
        self.reply_id, self.reply_step, self.reply_usage = None, None, {}
        self.reply_tools, self.reply_text, self.reply_stop = [], [], None
        self.reply_ended = None

    def on_user(self, event: dict[str, Any]) -> None:
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return  # a plain prompt: the trace's input isn't in the stream
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if not results:
            return  # e.g. the prompt a subagent was given
        self.close_reply()
        self.flush_text("thought")
        for block in results:
            tool_id = str(block.get("tool_use_id") or "")
            output = block.get("content")
            if isinstance(output, list):
                texts: list[str] = [
                    part["text"]
                    for part in output
                    if isinstance(part, dict) and isinstance(part.get("text"), str)
                ]
                output = "\n".join(texts) if len(texts) == len(output) else output
            error: str | None = None
            refused: dict[str, Any] = {}
            if block.get("is_error"):
                text = output if isinstance(output, str) else orjson.dumps(output).decode()
                error, refused = vocabulary.tool_error(vocabulary.CLAUDE, text)
                error = (error or "").strip()[:ERROR_TEXT_LIMIT] or "tool failed"
            number = self.emit(
                "step_end",
                call_id=tool_id or None,
                output=output,
                error=error,
                ended_at=event.get("timestamp"),
                metadata=refused or None,
            )
            if number is not None:
                self.last_result_step = number

    def on_result(self, event: dict[str, Any]) -> None:
        self.close_reply()
        result = event.get("result")
        if self._text:
            self.flush_text("output")
        elif isinstance(result, str) and result.strip():
            self.hold_text(result)
            self.flush_text("output")
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        failed = bool(event.get("is_error")) or event.get("subtype") not in (None, "success")
        metadata = {
            k: event.get(k)
            for k in (
                "num_turns",
                "duration_ms",
                "duration_api_ms",
                "stop_reason",
                "terminal_reason",
                "subtype",
            )
            if event.get(k) is not None
        }
        self.end_trace(
            status="failed" if failed else "completed",
            error=(str(result or event.get("subtype") or "failed") if failed else None),
            output=result if isinstance(result, str) else self.last_output,
            ended_at=self.last_timestamp,
            total_cost_usd=event.get("total_cost_usd"),
            total_tokens=total_tokens(
                usage.get("input_tokens"),
                usage.get("output_tokens"),
                usage.get("cache_creation_input_tokens"),
                usage.get("cache_read_input_tokens"),
            ),
            metadata=metadata or None,
        )

    def close(self) -> None:
        self.close_reply()
        self.flush_text("thought")
