"""``codex exec --json`` (``codex-exec``) mapped onto native events (see ``streams`` for what
maps to what, ``stream_sink`` for the shared machinery).
"""

from __future__ import annotations

from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.capture.events import EventEngine
from agent_replay.services.capture.stream_sink import StreamSink, first_line, total_tokens


class CodexExecSink(StreamSink):
    """``codex exec --json``: thread/turn events and items (messages, reasoning, commands,
    file changes, MCP calls, web searches, to-do lists, warnings)."""

    FORMAT = "codex-exec"
    DEFAULT_AGENT = "codex"
    IGNORED = frozenset({"turn.started"})

    def __init__(self, engine: EventEngine, *, agent_name: str | None = None) -> None:
        super().__init__(engine, agent_name=agent_name)
        self.turns = 0
        self.turn_tokens: list[int] = []
        self.completed_turns = 0
        self.failure: str | None = None
        self.started_items: set[str] = set()
        self.last_message: str | None = None

    def on_thread_started(self, event: dict[str, Any]) -> None:
        thread = event.get("thread_id")
        self.ensure_trace(
            trace_id=thread,
            session_id=thread,
            metadata={"thread_id": thread} if thread else None,
        )

    def on_turn_completed(self, event: dict[str, Any]) -> None:
        self.turns += 1
        self.completed_turns += 1
        self.flush_text("output")
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        tokens = total_tokens(usage.get("input_tokens"), usage.get("output_tokens"))
        self.emit(
            "step",
            step_type="llm_call",
            name=f"turn {self.turns}",
            output={"usage": usage} if usage else None,
            tokens_used=tokens,
            metadata={"usage": usage} if usage else None,
        )
        if tokens is not None:
            self.turn_tokens.append(tokens)
        self.failure = None

    def on_turn_failed(self, event: dict[str, Any]) -> None:
        self.turns += 1
        self.flush_text("thought")
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        text = str(message or "turn failed")
        self.emit("step", step_type="error", name=f"turn {self.turns} failed", error=text)
        self.failure = text

    def on_error(self, event: dict[str, Any]) -> None:
        self.flush_text("thought")
        text = str(event.get("message") or "stream error")
        self.emit("step", step_type="error", name="stream error", error=text)
        self.failure = text

    def on_item_started(self, event: dict[str, Any]) -> None:
        item = event.get("item")
        if not isinstance(item, dict):
            self.engine.skip("codex-exec item that is not an object", self.where)
            return
        kind = item.get("type")
        call = self._tool_call(item)
        if call is None:
            return
        self.flush_text("thought")
        item_id = str(item.get("id"))
        self.started_items.add(item_id)
        self.emit(
            "step_start",
            step_type="tool_call",
            name=call.name,
            input=call.input,
            call_id=item_id,
            metadata={"item_type": kind, **call.metadata},
        )

    def on_item_updated(self, event: dict[str, Any]) -> None:
        """Progress of an item (to-do list ticks, streaming command output): the completed
        item carries the final state."""

    def on_item_completed(self, event: dict[str, Any]) -> None:
        item = event.get("item")
        if not isinstance(item, dict):
            self.engine.skip("codex-exec item that is not an object", self.where)
            return
        kind = item.get("type")
        if kind == "agent_message":
            self.flush_text("thought")
            text = item.get("text")
            if isinstance(text, str):
                self.hold_text(text)
                self.last_message = text
            return
        if kind == "reasoning":
            self.flush_text("thought")
            self.emit("step", step_type="thought", name="reasoning", output=item.get("text"))
            return
        if kind == "todo_list":
            self.flush_text("thought")
            self.emit("step", step_type="thought", name="to-do list", output=item.get("items"))
            return
        if kind == "error":
            # A warning (e.g. about hook trust): an error step, but the run goes on.
            self.flush_text("thought")
            self.emit(
                "step",
                step_type="error",
                name="warning",
                error=str(item.get("message") or "error"),
                metadata={"item_type": "error", "fatal": False},
            )
            return
        call = self._tool_call(item)
        if call is None:
            self.engine.skip(f"unknown codex-exec item type {kind!r}", self.where)
            return
        output, error, metadata = self._tool_result(item)
        item_id = str(item.get("id"))
        if item_id in self.started_items:
            self.started_items.discard(item_id)
            self.emit("step_end", call_id=item_id, output=output, error=error, metadata=metadata)
            return
        self.flush_text("thought")
        self.emit(
            "step",
            step_type="tool_call",
            name=call.name,
            input=call.input,
            output=output,
            error=error,
            metadata={"item_type": kind, **call.metadata, **metadata},
        )

    @staticmethod
    def _tool_call(item: dict[str, Any]) -> vocabulary.Tool | None:
        """The canonical call of an item that is a tool call, else ``None``."""
        kind = item.get("type")
        if kind == "command_execution":
            return vocabulary.canonical_tool(
                vocabulary.CODEX, "command_execution", {"command": item.get("command")}
            )
        if kind == "file_change":  # the stream carries the changed files, not the patch
            return vocabulary.Tool(vocabulary.PATCH_TOOL, {"changes": item.get("changes")})
        if kind == "mcp_tool_call":
            return vocabulary.Tool(
                vocabulary.mcp_name(item.get("server"), item.get("tool")), item.get("arguments")
            )
        if kind == "web_search":
            return vocabulary.Tool("web_search", {"query": item.get("query")})
        return None

    @staticmethod
    def _tool_result(item: dict[str, Any]) -> tuple[Any, str | None, dict[str, Any]]:
        """(output, error, metadata) of a completed tool item."""
        kind = item.get("type")
        status = item.get("status")
        metadata: dict[str, Any] = {"status": status} if status else {}
        error = None
        if kind == "command_execution":
            output = item.get("aggregated_output")
            code = item.get("exit_code")
            metadata["exit_code"] = code
            if status == "declined":
                error = "declined"
            elif (type(code) is int and code != 0) or status == "failed":
                error = f"exit code {code}" if type(code) is int else "command failed"
                if isinstance(output, str) and output.strip():
                    error += f": {first_line(output)}"
            return output, error, metadata
        if kind == "mcp_tool_call":
            failure = item.get("error")
            if isinstance(failure, dict):
                error = str(failure.get("message") or "tool call failed")
            elif status == "failed":
                error = "tool call failed"
            return item.get("result"), error, metadata
        if status == "failed":
            error = f"{kind} failed"
        output = {"status": status} if kind == "file_change" else item.get("results")
        return output, error, metadata

    def close(self) -> None:
        if self.completed_turns or self.failure:
            self.flush_text("output" if not self.failure else "thought")
            self.end_trace(
                status="failed" if self.failure else "completed",
                error=self.failure,
                output=self.last_output or self.last_message,
            )
        else:
            self.flush_text("thought")
