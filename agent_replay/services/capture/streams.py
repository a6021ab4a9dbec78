"""Harness stream formats mapped onto native events: ``codex exec --json`` (``codex-exec``),
``gemini -p --output-format stream-json`` (``gemini-stream``) and
``claude -p --output-format stream-json --verbose`` (``claude-stream``).

Each mapper reads the harness's JSON lines and feeds native protocol v1 events to the same
``EventEngine`` that ``record`` uses, so redaction, group commit and the report work the same.
What they map to:

- assistant text -> ``thought`` steps, except the last text of the run -> ``output``; streamed
  chunks (Gemini ``delta`` messages, Claude's per-block lines of one reply) merge into one step;
- tool calls -> ``tool_call`` steps opened when the call starts and closed with its result,
  paired by the harness's call id, named and shaped as the harness's hooks show them
  (``vocabulary``: Codex's ``command_execution`` is ``Bash`` with the command line unwrapped
  from ``bash -lc``); a failed call gets ``error`` set (a blocked one, the hook's reason);
- model usage -> ``llm_call`` steps carrying the tokens (Claude: one per API reply, counted once
  per message id; Codex: one per turn; Gemini: one per model in the final stats);
- warnings and errors -> ``error`` steps (a Codex warning item doesn't fail the trace).

Event types a mapper knows but has no use for are ignored silently; unknown ones are skipped
with one warning per kind. Text still streaming in is held until its message is complete.
Never imports Textual, Rich or an AI SDK.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import orjson

from agent_replay.services.capture import vocabulary
from agent_replay.services.capture.events import EventEngine
from agent_replay.services.capture.pump import LineSink

# A failed shell command's text: "Exit code 1" / "Exit Code: 1" (Claude, Gemini's full format).
_EXIT_CODE = re.compile(r"(?im)^\s*exit code:?\s*(-?\d+)\s*$")
_SHELL_TOOLS = frozenset({"run_shell_command", "shell", "bash", "Bash", "exec_command"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
_ERROR_TEXT_LIMIT = 2000


def make_sink(fmt: str, engine: EventEngine, *, agent_name: str | None = None) -> LineSink:
    """The mapper for a ``record --format`` value."""
    mappers: dict[str, type[StreamSink]] = {
        "codex-exec": CodexExecSink,
        "gemini-stream": GeminiStreamSink,
        "claude-stream": ClaudeStreamSink,
    }
    return mappers[fmt](engine, agent_name=agent_name)


def _tokens(*values: Any) -> int | None:
    known = [v for v in values if type(v) is int and v >= 0]
    return sum(known) if known else None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:_ERROR_TEXT_LIMIT]
    return text.strip()[:_ERROR_TEXT_LIMIT]


def shell_failure(command: Any, output: Any) -> str | None:
    """The failure a shell tool's output shows although the harness reported success.

    Gemini CLI's ``run_shell_command`` reports ``status: "success"`` for a command that exits
    non-zero. The failure is read from the text: an ``Exit Code: N`` line with N != 0, or a
    first line that is the command's (or its shell's) own diagnostic, ``cat: x: No such file
    or directory``. ``None`` when nothing says it failed.
    """
    if not isinstance(output, str) or not output.strip():
        return None
    match = _EXIT_CODE.search(output)
    if match is not None:
        code = int(match.group(1))
        return f"exit code {code}" if code else None
    program = None
    if isinstance(command, str) and command.strip():
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        if words:
            program = words[0].rsplit("/", 1)[-1]
    first = _first_line(output)
    prefixes = [f"{shell}: " for shell in _SHELLS]
    if program:
        prefixes.append(f"{program}: ")
    if any(first.startswith(prefix) for prefix in prefixes):
        return first
    return None


class StreamSink(LineSink):
    """The shared machinery: one trace per stream, native events out, assistant text held until
    it is known to be a thought or the final output.

    Args:
        engine: where the native events go.
        agent_name: the traces' agent name (default: the harness's, ``DEFAULT_AGENT``).
    """

    FORMAT = ""
    DEFAULT_AGENT = ""
    # Event types known and deliberately not recorded (no warning).
    IGNORED: frozenset[str] = frozenset()

    def __init__(self, engine: EventEngine, *, agent_name: str | None = None) -> None:
        self.engine = engine
        self.agent_name = agent_name or self.DEFAULT_AGENT
        self.where = ""
        # The current line's own time, and the latest one seen (harnesses that stamp lines).
        self.timestamp: str | None = None
        self.last_timestamp: str | None = None
        self.trace_key: str | None = None
        self.trace_fields: dict[str, Any] = {}
        self.ended = False
        self.events = 0
        # Held assistant text: parts, first/last timestamps, model, link fields.
        self._text: list[str] = []
        self._text_started: str | None = None
        self._text_ended: str | None = None
        self._text_links: dict[str, Any] = {}
        self.last_output: str | None = None

    # --- lines ----------------------------------------------------------------------------

    def feed_line(self, line: bytes, where: str) -> None:
        if not line.strip():
            return
        engine = self.engine
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            engine.malformed(where, f"not valid JSON ({exc})")
            return
        if not isinstance(event, dict):
            engine.malformed(where, f"not a JSON object (got {type(event).__name__})")
            return
        kind = event.get("type")
        if not isinstance(kind, str) or not kind:
            engine.malformed(where, "no event type")
            return
        self.events += 1
        self.where = where
        stamp = event.get("timestamp")
        self.timestamp = stamp if isinstance(stamp, str) else None
        if self.timestamp is not None:
            self.last_timestamp = self.timestamp
        handler = getattr(self, "on_" + kind.replace(".", "_").replace("-", "_"), None)
        if handler is not None:
            try:
                handler(event)
            except Exception as exc:  # noqa: BLE001 - one odd event never costs the stream
                engine.reject(where, kind, f"could not be mapped ({type(exc).__name__}: {exc})")
        elif kind not in self.IGNORED:
            engine.skip(f"unknown {self.FORMAT} event type {kind!r}", where)

    def finish(self, *, leave_open: bool = False) -> None:
        self.close()
        self.engine.report.events = self.events
        self.engine.finish(leave_open=leave_open)

    def close(self) -> None:
        """The stream ended: write what is held (subclasses end the trace if they can)."""
        self.flush_text("thought")

    # --- native events --------------------------------------------------------------------

    def emit(self, kind: str, **fields: Any) -> Any:
        """Send one native event for this stream's trace; returns the engine's result."""
        self.ensure_trace()
        event = {"v": 1, "type": kind, "trace_id": self.trace_key}
        event.update({k: v for k, v in fields.items() if v is not None})
        return self.engine.handle(event, self.where)

    def ensure_trace(self, **fields: Any) -> None:
        """Start the stream's trace (once), with what is known about it so far."""
        if self.trace_key is not None:
            return
        self.trace_fields.update({k: v for k, v in fields.items() if v is not None})
        self.trace_fields.setdefault("started_at", self.timestamp)
        key = self.trace_fields.pop("trace_id", None) or f"{self.FORMAT}-stream"
        self.trace_key = str(key)
        event = {
            "v": 1,
            "type": "trace_start",
            "trace_id": self.trace_key,
            "agent_name": self.agent_name,
            **{k: v for k, v in self.trace_fields.items() if v is not None},
        }
        self.engine.handle(event, self.where)

    def end_trace(self, **fields: Any) -> None:
        """End the stream's trace (once)."""
        if self.ended:
            return
        self.emit("trace_end", **fields)
        self.ended = True

    # --- held assistant text --------------------------------------------------------------

    def hold_text(self, text: str, timestamp: str | None = None, **links: Any) -> None:
        """Add a chunk of assistant text to the message being held."""
        if not self._text:
            self._text_started = timestamp
            self._text_links = links
        self._text.append(text)
        self._text_ended = timestamp

    def flush_text(self, step_type: str) -> int | None:
        """Write the held text as one ``thought`` or ``output`` step; returns its number."""
        if not self._text:
            return None
        text = "".join(self._text)
        started, ended, links = self._text_started, self._text_ended, self._text_links
        self._text, self._text_started, self._text_ended, self._text_links = [], None, None, {}
        if not text.strip():
            return None
        if step_type == "output":
            self.last_output = text
        return self.emit(  # type: ignore[no-any-return]
            "step",
            step_type=step_type,
            name="final answer" if step_type == "output" else "message",
            output=text,
            started_at=started,
            ended_at=ended if ended != started else None,
            **links,
        )


# --- codex exec --json ------------------------------------------------------------------------


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
        tokens = _tokens(usage.get("input_tokens"), usage.get("output_tokens"))
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
                    error += f": {_first_line(output)}"
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


# --- gemini -p --output-format stream-json ----------------------------------------------------


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
                error = _first_line(output)
            error, refused = vocabulary.tool_error(vocabulary.GEMINI, error)
            metadata.update(refused)
            error = error or "tool failed"
        elif tool.get("name") in _SHELL_TOOLS:
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


# --- claude -p --output-format stream-json --verbose ------------------------------------------


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
        tokens = _tokens(
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
                error = (error or "").strip()[:_ERROR_TEXT_LIMIT] or "tool failed"
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
            total_tokens=_tokens(
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
