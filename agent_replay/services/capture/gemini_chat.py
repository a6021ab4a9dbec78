"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/session-*.jsonl``): one trace per
session, streamed line by line, to the same trace the Gemini CLI hook path records.

The file is an append-only log of updates, as Gemini CLI's ``chatRecordingService`` writes it:

- a header line: ``sessionId``, ``projectHash``, ``startTime``, ``lastUpdated``, ``kind``
  (``main``, or ``subagent`` for the files under ``chats/<parent session>/``);
- message records (``id``, ``timestamp``, ``type``: ``user``, ``gemini``, ``info``,
  ``warning``, ``error``). Gemini rewrites the message it is building (adding its tokens,
  then its tool calls and their results) by appending it again under the same ``id``: the
  last copy wins. Only the latest message is ever rewritten, so each one is written out when
  the next message begins;
- ``{"$set": {...}}`` patches of the header (``lastUpdated``, ``summary``, ``directories``;
  ``messages`` replaces the whole list, where only messages not seen before are new) and
  ``{"$rewindTo": id}`` (the user rewound the chat: the messages stay in the trace, as the
  hook path recorded them when they happened; the rewind is counted in metadata).

What becomes what (the Gemini hook path's names, ``hook.dialects.gemini``):

- a user prompt: a ``thought`` step ``user_prompt`` (the first one is the trace's input);
  Gemini's injected context (``<session_context>``, ``<hook_context>``), slash commands and
  the tool results it sends back as user messages are not prompts;
- a ``gemini`` message: an ``llm_call`` step named after the model, output = its text,
  ``tokens_used`` = ``tokens.total``, and ``input_tokens``/``output_tokens`` (plus
  ``cached_input_tokens``, ``thoughts_tokens``, ``tool_tokens`` when not zero) in metadata;
  its ``thoughts`` are ``thought`` steps; each of its ``toolCalls`` is a ``tool_call`` step
  with ``args`` as input and ``{"llmContent", "returnDisplay"}`` as output, failed as the hook
  path fails it (an ``error``, a shell ``Exit Code`` other than 0; a call a hook blocked
  carries the hook's reason);
- the turn's last model text: an ``output`` step ``assistant_message`` (the last one is the
  trace's output);
- an ``error`` message: an ``error`` step; ``info`` and ``warning`` messages are UI notices.

Status: ``failed`` when the session ends on an error message, ``timeout`` when it ends
mid-turn (a prompt or tool results never answered, a tool call without its result),
``completed`` otherwise. Record kinds this importer does not know and unreadable lines are
skipped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.capture.session_writer import (
    GEMINI_CHAT,
    SessionWriter,
    as_int,
    head_records,
    latest,
    not_before,
    read_records,
    timestamp,
)
from agent_replay.services.hook.dialects.gemini import tool_error
from agent_replay.trace.base import time_before

FORMAT = GEMINI_CHAT
AGENT_NAME = "gemini-cli"

_MESSAGE_TYPES = frozenset({"user", "gemini", "info", "warning", "error"})
_IGNORED_PROMPTS = ("/", "?", "<session_context>", "<hook_context>")
_RECORD_ERRORS = (KeyError, TypeError, AttributeError, ValueError, IndexError)
_TOKEN_KEYS = (
    ("input_tokens", "input"),
    ("output_tokens", "output"),
    ("cached_input_tokens", "cached"),
    ("thoughts_tokens", "thoughts"),
    ("tool_tokens", "tool"),
)
_DONE = frozenset({"success", "error", "cancelled"})

NO_RESULT = "no result: the session ended before the tool returned"
MID_TURN = "the chat recording ends mid-turn: the session was interrupted or is still running"


def sniff(record: dict[str, Any]) -> bool:
    """Whether a record looks like a Gemini CLI chat recording line."""
    if isinstance(record.get("sessionId"), str) and isinstance(record.get("projectHash"), str):
        return "type" not in record  # the header (a Claude transcript line has a type)
    if isinstance(record.get("$set"), dict) or isinstance(record.get("$rewindTo"), str):
        return True
    return (
        isinstance(record.get("id"), str)
        and record.get("type") in _MESSAGE_TYPES
        and "sessionId" not in record
        and "uuid" not in record
        and "content" in record
    )


def peek_session_id(path: Path) -> str | None:
    """The session id: the header's ``sessionId``, else the file name."""
    for record in head_records(path):
        if isinstance(record.get("sessionId"), str) and record["sessionId"]:
            return str(record["sessionId"])
    return path.stem


def import_session(path: Path, writer: SessionWriter) -> None:
    """Stream one chat recording into ``writer``."""
    _Chat(path, writer).run()


def text_of(content: Any) -> str | None:
    """The text of a message's content: a string, or its ``text`` parts (Gemini CLI's
    ``partListUnionToString`` for text); ``None`` when it has none (tool results)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return None
    texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    texts += [p for p in content if isinstance(p, str)]
    return "".join(texts) if texts else None


@dataclass
class _State:
    """What the turn being read needs: the pending prompt, the last reply, open calls."""

    prompt_at: str | None = None
    """When the next model call was asked for (a prompt or tool results)."""
    awaiting_reply: bool = False
    answer: tuple[str, int, str | None] | None = None
    """The turn's latest model text without tool calls: (text, its step, when)."""
    output: str | None = None
    tool_step: int | None = None
    """The newest tool call of the turn's last reply: the next reply answers it."""
    fatal: str | None = None
    open_calls: list[tuple[int, str | None]] = field(default_factory=list)


class _Chat:
    """The streaming state of one chat recording: the header and the message being built."""

    def __init__(self, path: Path, writer: SessionWriter) -> None:
        self.path = path
        self.writer = writer
        self.header: dict[str, Any] = {}
        self.pending: dict[str, Any] | None = None
        self.seen: set[str] = set()
        self.state = _State()
        self.first_at: str | None = None
        self.last_at: str | None = None
        self.model: str | None = None
        self.rewinds = 0

    def run(self) -> None:
        for _, record in read_records(self.path):
            if record is None:
                self.writer.skip("unreadable line")
                continue
            try:
                self._dispatch(record)
            except _RECORD_ERRORS:
                self.writer.skip("malformed line")
        self._flush()
        self._end()

    # --- the log -------------------------------------------------------------------------

    def _dispatch(self, record: dict[str, Any]) -> None:
        writer = self.writer
        if isinstance(record.get("$set"), dict):
            writer.known += 1
            patch = record["$set"]
            messages = patch.get("messages")
            self.header.update({k: v for k, v in patch.items() if k != "messages"})
            if isinstance(messages, list):
                for message in messages:
                    if isinstance(message, dict) and message.get("id") not in self.seen:
                        self._message(message)
            return
        if isinstance(record.get("$rewindTo"), str):
            writer.known += 1
            self.rewinds += 1
            return
        if isinstance(record.get("sessionId"), str) and "type" not in record:
            writer.known += 1
            if not self.header:
                self.header = dict(record)
                self.first_at = timestamp(record.get("startTime"))
            return
        if isinstance(record.get("id"), str) and record.get("type") in _MESSAGE_TYPES:
            writer.known += 1
            self._message(record)
            return
        kind = record.get("type")
        writer.skip(str(kind) if isinstance(kind, str) else "line without a type")

    def _message(self, message: dict[str, Any]) -> None:
        """A message record: the latest copy of its id wins, so it is written when the next
        message begins."""
        if self.pending is not None and self.pending.get("id") != message.get("id"):
            self._flush()
        self.pending = message

    def _flush(self) -> None:
        message, self.pending = self.pending, None
        if message is None:
            return
        self.seen.add(str(message.get("id")))
        at = timestamp(message.get("timestamp"))
        if at is not None:
            self.first_at = self.first_at or at
            self.last_at = latest(self.last_at, at)
        kind = message.get("type")
        try:
            if kind == "user":
                self._user(message, at)
            elif kind == "gemini":
                self._gemini(message, at)
            elif kind == "error":
                self._error(message, at)
        except _RECORD_ERRORS:
            self.writer.skip(f"malformed {kind} message")

    # --- messages ------------------------------------------------------------------------

    def _header_metadata(self) -> dict[str, Any]:
        return {
            k: self.header[k]
            for k in ("projectHash", "kind", "directories", "summary")
            if self.header.get(k) is not None
        }

    def _start(self, prompt: str | None) -> None:
        if self.writer.started:
            return
        self.writer.start(input=prompt, started_at=self.first_at, metadata=self._header_metadata())

    def _user(self, message: dict[str, Any], at: str | None) -> None:
        text = text_of(message.get("content"))
        if text is None:
            # Tool results sent back to the model: the next reply answers them.
            if self.state.open_calls:
                self._close_calls(None)
            self.state.prompt_at = at
            self.state.awaiting_reply = True
            return
        if not text.strip() or text.strip().startswith(_IGNORED_PROMPTS):
            return  # injected context or a slash command, not a prompt
        self._end_turn()
        self._start(text)
        self.state.tool_step = None
        self.writer.add_step(
            "thought", vocabulary.PROMPT_STEP, input=text, started_at=at, ended_at=at
        )
        self.state.prompt_at = at
        self.state.awaiting_reply = True

    def _gemini(self, message: dict[str, Any], at: str | None) -> None:
        self._start(None)
        state = self.state
        model = message.get("model") if isinstance(message.get("model"), str) else None
        self.model = model or self.model
        tokens = message.get("tokens") if isinstance(message.get("tokens"), dict) else {}
        assert isinstance(tokens, dict)
        meta: dict[str, Any] = {"message_id": message.get("id")}
        for ours, theirs in _TOKEN_KEYS:
            value = as_int(tokens.get(theirs))
            if value is not None and (value or ours in ("input_tokens", "output_tokens")):
                meta[ours] = value
        text = text_of(message.get("content"))
        calls = message.get("toolCalls") if isinstance(message.get("toolCalls"), list) else []
        assert isinstance(calls, list)
        started = state.prompt_at or at
        if started is not None and at is not None and time_before(at, started):
            started = at
        step = self.writer.add_step(
            "llm_call",
            vocabulary.model_step_name(model),
            output=text or None,
            started_at=started,
            ended_at=at,
            tokens_used=as_int(tokens.get("total")),
            model=model,
            caused_by_step=state.tool_step,
            metadata=meta,
        )
        state.tool_step = None
        state.awaiting_reply = bool(calls)  # the model answers the tool results next
        state.prompt_at = None
        state.fatal = None
        for thought in message.get("thoughts") or []:
            self._thought(thought, step, model, at)
        for call in calls:
            if isinstance(call, dict):
                state.tool_step = self._tool(call, step, at)
        if calls:
            state.answer = None
        elif text and text.strip():
            state.answer = (text.strip(), step, at)

    def _thought(self, thought: Any, step: int, model: str | None, at: str | None) -> None:
        if not isinstance(thought, dict):
            return
        parts = [thought.get("subject"), thought.get("description")]
        text = ": ".join(p for p in parts if isinstance(p, str) and p)
        if text:
            when = timestamp(thought.get("timestamp")) or at
            self.writer.add_step(
                "thought",
                "thinking",
                output=text,
                started_at=when,
                ended_at=when,
                model=model,
                caused_by_step=step,
            )

    def _tool(self, call: dict[str, Any], step: int, at: str | None) -> int:
        """A tool call the reply ``step`` asked for; returns its step."""
        name = call.get("name") if isinstance(call.get("name"), str) else "tool"
        tool = vocabulary.canonical_tool(vocabulary.GEMINI, name, call.get("args"))
        status = call.get("status")
        ended = timestamp(call.get("timestamp"))
        metadata: dict[str, Any] = {"call_id": call.get("id"), **tool.metadata}
        if isinstance(status, str):
            metadata["status"] = status
        if status not in _DONE:
            number = self.writer.open_step(
                "tool_call",
                tool.name,
                input=tool.input,
                started_at=at,
                caused_by_step=step,
                metadata=metadata,
            )
            self.state.open_calls.append((number, at))
            return number
        response: dict[str, Any] | None = _response(call)
        error = tool_error(response)
        if error is None and status != "success":
            error = "the tool call was cancelled" if status == "cancelled" else "the tool failed"
        if error is not None:
            refused = vocabulary.refusal(vocabulary.GEMINI, _raw_error(call))
            if refused is not None:  # a hook blocked it: it never ran
                metadata.update(refused[1])
                response = None
        return self.writer.add_step(
            "tool_call",
            tool.name,
            input=tool.input,
            output=response,
            error=error,
            started_at=at,
            ended_at=not_before(at, ended) or at,
            caused_by_step=step,
            metadata=metadata,
        )

    def _close_calls(self, error: str | None) -> None:
        for number, started in self.state.open_calls:
            self.writer.close_step(
                number,
                error=error or NO_RESULT,
                ended_at=not_before(started, self.last_at),
                metadata={"incomplete": True},
            )
        self.state.open_calls.clear()

    def _error(self, message: dict[str, Any], at: str | None) -> None:
        self._start(None)
        text = text_of(message.get("content")) or "error"
        self.writer.add_step("error", "error", error=text, started_at=at, ended_at=at)
        self.state.fatal = text
        self.state.answer = None
        self.state.awaiting_reply = False

    # --- turns and the end ---------------------------------------------------------------

    def _end_turn(self) -> None:
        """A turn is over: its last model text without tool calls is its answer."""
        state = self.state
        if state.answer is None:
            return
        text, step, at = state.answer
        state.answer = None
        self.writer.add_step(
            "output",
            vocabulary.ANSWER_STEP,
            output=text,
            started_at=at,
            ended_at=at,
            caused_by_step=step,
        )
        state.output = text

    def _end(self) -> None:
        if not self.writer.started:
            if self.writer.known:
                self.writer.finish(status="completed")
            return
        state = self.state
        open_calls = bool(state.open_calls)
        self._close_calls(None)
        clean = not (open_calls or state.awaiting_reply)
        if clean:
            self._end_turn()
        if state.fatal is not None:
            status, error = "failed", state.fatal
        elif clean:
            status, error = "completed", None
        else:
            status, error = "timeout", MID_TURN
        meta = self._header_metadata()  # patched since the trace began (summary, ...)
        if self.model:
            meta["model"] = self.model
        if self.rewinds:
            meta["rewinds"] = self.rewinds
        ended = latest(self.last_at, timestamp(self.header.get("lastUpdated")))
        self.writer.finish(
            status=status, output=state.output, error=error, ended_at=ended, metadata=meta
        )


def _response(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call's result as the hook's ``AfterTool`` gives it: ``{"llmContent": ...,
    "returnDisplay": ...}`` (plus ``error`` when the call failed)."""
    shown: dict[str, Any] = {}
    found = None
    for part in call.get("result") or []:
        function = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(function, dict) and isinstance(function.get("response"), dict):
            found = function["response"]
            break
    if found is not None:
        if "output" in found:
            shown["llmContent"] = found["output"]
        elif "content" in found:
            shown["llmContent"] = found["content"]
        if found.get("error") is not None:
            shown["error"] = found["error"]
    if "resultDisplay" in call:
        shown["returnDisplay"] = call["resultDisplay"]
    return shown


def _raw_error(call: dict[str, Any]) -> str | None:
    error = _response(call).get("error")
    if isinstance(error, dict):
        error = error.get("message")
    return error if isinstance(error, str) else None
