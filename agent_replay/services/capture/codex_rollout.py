"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``): one trace per session,
streamed line by line.

What becomes what:

- ``session_meta``: the trace's identity: ``session_id``, ``agent_version`` (the CLI version),
  and ``cwd``, ``model_provider``, ``originator`` and the ``git`` metadata in trace metadata.
  The input is the first user prompt (``user_message`` / ``UserMessage`` events: the rollout's
  ``role: user`` messages also carry injected context such as AGENTS.md).
- each user prompt: a ``thought`` step ``user_prompt``, as the hook path records it.
- one model response (its ``reasoning``, assistant ``message`` and tool calls, up to the next
  tool output or prompt): one ``llm_call`` step named after the model (``turn_context``),
  output = its text, tokens from the ``token_count`` event that follows it
  (``last_token_usage``). ``tokens_used`` = input − cached input + output tokens, as Codex
  itself totals them; the cached and reasoning counts go in the step's metadata.
- ``reasoning`` with a summary or text: a ``thought`` step. ``function_call``,
  ``custom_tool_call`` and ``local_shell_call`` + their outputs (paired by ``call_id``): a
  ``tool_call`` step, named and shaped as Codex's hooks show it (``vocabulary``): the shell
  tools (``exec_command``, ``shell``, ``local_shell``) are ``Bash`` with the command line as
  ``input.command``, ``apply_patch``'s input is ``{"command": "<patch>"}`` (the tool's own name
  stays in ``metadata.original_name``); a non-zero exit code (from the ``CommandExecution``
  item, ``exec_command_end``, or the output's header) or a failed patch sets ``error``, and a
  call a hook blocked has the hook's reason as its ``error``.
- ``task_complete``: the turn's answer (``last_agent_message``) as an ``output`` step
  (``final_answer``).

Status: ``failed`` when the session ends on an ``error`` event; ``timeout`` when it ends
mid-turn (a turn started and never completed or was aborted, a tool call without its output):
the session was killed, interrupted or is still running; ``completed`` otherwise. Rollouts
from versions that record no turn events are complete when the last response answered.
A failed tool call does not fail the trace. Record and event kinds this importer does not
know, unreadable lines and outputs without their call are skipped and counted (the kinds it
knows, and how a tool output is read: ``codex_records``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.capture.codex_records import (
    CALL_TYPES,
    ENVELOPES,
    IGNORED_EVENTS,
    ITEM_TYPES,
    OUTPUT_TYPES,
    exit_code_of,
    parse_output,
)
from agent_replay.services.capture.session_writer import (
    CODEX_ROLLOUT,
    SessionWriter,
    as_int,
    first_line,
    head_records,
    latest,
    not_before,
    read_records,
    text_of,
    timestamp,
)
from agent_replay.trace.base import time_before
from agent_replay.trace.io import loads

FORMAT = CODEX_ROLLOUT
AGENT_NAME = "codex"

_SESSION_IN_NAME = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")
_RECORD_ERRORS = (KeyError, TypeError, AttributeError, ValueError, IndexError)

NO_RESULT = "no result: the session ended before the tool returned"
MID_TURN = "the rollout ends mid-turn: the session was interrupted or is still running"


def sniff(record: dict[str, Any]) -> bool:
    """Whether a record looks like a Codex rollout line."""
    if "payload" in record and record.get("type") in ENVELOPES:
        return True
    if "type" not in record and isinstance(record.get("id"), str) and "instructions" in record:
        return True  # the header line of the oldest rollouts
    return record.get("record_type") == "state"


def peek_session_id(path: Path) -> str | None:
    """The session id (``session_meta``'s, else the UUID ending the file name)."""
    for record in head_records(path):
        meta = record.get("payload") if record.get("type") == "session_meta" else None
        if meta is None and "type" not in record and "instructions" in record:
            meta = record
        if isinstance(meta, dict):
            for key in ("id", "session_id"):
                if isinstance(meta.get(key), str) and meta[key]:
                    return str(meta[key])
    match = _SESSION_IN_NAME.search(path.stem)
    return match.group(1) if match else path.stem


def import_session(path: Path, writer: SessionWriter) -> None:
    """Stream one rollout into ``writer``."""
    _Rollout(path, writer).run()


@dataclass
class _Reply:
    """The model response being recorded."""

    step: int
    started_at: str | None
    ended_at: str | None
    texts: list[str] = field(default_factory=list)
    tool_calls: int = 0
    after_input: bool = False
    """A tool output or prompt arrived: the next output item belongs to a new response."""


@dataclass
class _Call:
    """A tool call waiting for its output."""

    step: int
    name: str
    started_at: str | None


class _Rollout:
    """The streaming state of one rollout: only open calls and the current response."""

    def __init__(self, path: Path, writer: SessionWriter) -> None:
        self.path = path
        self.writer = writer
        self.meta: dict[str, Any] = {}
        self.version: str | None = None
        self.started_at: str | None = None
        self.last_at: str | None = None
        self.model: str | None = None
        self.wrapped = False
        self.reply: _Reply | None = None
        self.calls: dict[str, _Call] = {}
        self.exec_info: dict[str, dict[str, Any]] = {}
        self.prompt: str | None = None
        self.request_at: str | None = None
        self.last_tool_step: int | None = None
        self.last_reply_step: int | None = None
        self.answer: tuple[str, int, str | None] | None = None
        self.output: str | None = None
        self.awaiting_reply = False
        self.saw_turns = False
        self.turn_open = False
        self.aborted = False
        self.fatal: str | None = None
        self.last_total: Any = None

    def run(self) -> None:
        self.feed(record for _, record in read_records(self.path))
        self._end()

    def feed(self, records: Iterable[dict[str, Any] | None]) -> None:
        """Read records (``None``: an unreadable line). ``transcript_follow`` feeds the lines
        a live rollout gained, with this state saved between hook payloads."""
        for record in records:
            if record is None:
                self.writer.skip("unreadable line")
                continue
            try:
                self._dispatch(record)
            except _RECORD_ERRORS:
                self.writer.skip(f"malformed {record.get('type')} line")

    def _dispatch(self, record: dict[str, Any]) -> None:
        writer = self.writer
        at = timestamp(record.get("timestamp"))
        if at is not None:
            self.started_at = self.started_at or at
            self.last_at = latest(self.last_at, at)
        kind = record.get("type")
        if "payload" in record:
            self.wrapped = True
            payload = record["payload"]
            if kind not in ENVELOPES or not isinstance(payload, dict):
                writer.skip(str(kind))
                return
            writer.known += 1
            if kind == "session_meta":
                self._session_meta(payload)
            elif kind == "response_item":
                self._item(payload, at)
            elif kind == "event_msg":
                self._event(payload, at)
            elif kind == "turn_context" and isinstance(payload.get("model"), str):
                self.model = payload["model"]
        elif kind in ITEM_TYPES:
            writer.known += 1
            self._item(record, at)
        elif kind is None and "instructions" in record and isinstance(record.get("id"), str):
            writer.known += 1
            self._session_meta(record)
        elif record.get("record_type") == "state":
            writer.known += 1
        else:
            writer.skip(str(kind) if kind is not None else "line without a type")

    def _session_meta(self, meta: dict[str, Any]) -> None:
        if self.meta:
            return  # a resumed session repeats its header
        fields = {
            "cwd": meta.get("cwd"),
            "cli_version": meta.get("cli_version"),
            "model_provider": meta.get("model_provider"),
            "originator": meta.get("originator"),
            "session_source": meta.get("source") if isinstance(meta.get("source"), str) else None,
            "git": meta.get("git") if isinstance(meta.get("git"), dict) else None,
        }
        self.meta = {k: v for k, v in fields.items() if v is not None} or {"session_meta": True}
        if isinstance(meta.get("cli_version"), str):
            self.version = meta["cli_version"]
        created = timestamp(meta.get("timestamp"))
        if created is not None and (
            self.started_at is None or time_before(created, self.started_at)
        ):
            self.started_at = created

    def _start(self, prompt: str | None) -> None:
        self.writer.start(
            input=prompt,
            started_at=self.started_at,
            agent_version=self.version,
            metadata={k: v for k, v in self.meta.items() if k != "session_meta"},
        )

    # --- response items --------------------------------------------------------------------

    def _item(self, item: dict[str, Any], at: str | None) -> None:
        kind = item.get("type")
        if kind == "message":
            role = item.get("role")
            if role == "assistant":
                reply = self._reply(at)
                text = text_of(item.get("content"))
                if text:
                    reply.texts.append(text)
            elif role == "user" and not self.wrapped:
                text = text_of(item.get("content"))
                if text and not text.lstrip().startswith(("<", "# AGENTS.md")):
                    self._prompt(text, at)
            # developer/system messages, and user messages the events already give: context
        elif kind == "reasoning":
            reply = self._reply(at)
            text = text_of(item.get("summary")) or text_of(item.get("content"))
            if text:
                self.writer.add_step(
                    "thought",
                    "reasoning",
                    output=text,
                    started_at=at,
                    ended_at=at,
                    model=self.model,
                    caused_by_step=reply.step,
                )
        elif kind in CALL_TYPES:
            self._call(item, self._reply(at), at)
        elif kind == "web_search_call":
            reply = self._reply(at)
            action = item.get("action")
            self.writer.add_step(
                "tool_call",
                "web_search",
                input=action if isinstance(action, dict) else None,
                started_at=at,
                ended_at=at,
                caused_by_step=reply.step,
                error="the search failed" if item.get("status") == "failed" else None,
            )
            reply.tool_calls += 1
        elif kind in OUTPUT_TYPES:
            self._output(item, at)
        else:
            self.writer.skip(f"response_item {kind}")

    def _reply(self, at: str | None) -> _Reply:
        """The response an output item belongs to (a new one after a tool output/prompt)."""
        reply = self.reply
        if reply is not None and not reply.after_input:
            reply.ended_at = latest(reply.ended_at, at)
            return reply
        self._close_reply()
        if not self.writer.started:
            self._start(None)
        started_at = self.request_at or at
        if started_at is not None and at is not None and time_before(at, started_at):
            started_at = at
        step = self.writer.open_step(
            "llm_call",
            self.model or "assistant",
            input=self.prompt,
            started_at=started_at,
            model=self.model,
            caused_by_step=self.last_tool_step,
        )
        self.prompt = None
        self.request_at = None
        self.answer = None
        self.awaiting_reply = False
        self.fatal = None
        self.reply = _Reply(step=step, started_at=started_at, ended_at=at)
        return self.reply

    def _close_reply(self, usage: dict[str, Any] | None = None) -> None:
        reply = self.reply
        if reply is None:
            return
        self.reply = None
        text = "\n\n".join(reply.texts) or None
        tokens = None
        metadata: dict[str, Any] = {}
        if usage:
            counts = {k: as_int(v) for k, v in usage.items()}
            metadata = {k: v for k, v in counts.items() if v is not None}
            if "input_tokens" in metadata or "output_tokens" in metadata:
                fresh = metadata.get("input_tokens", 0) - metadata.get("cached_input_tokens", 0)
                tokens = max(fresh, 0) + metadata.get("output_tokens", 0)
        if reply.tool_calls:
            metadata["tool_calls"] = reply.tool_calls
        self.writer.close_step(
            reply.step,
            output=text,
            ended_at=not_before(reply.started_at, reply.ended_at),
            tokens_used=tokens,
            model=self.model,
            metadata=metadata or None,
        )
        self.last_reply_step = reply.step
        if text and not reply.tool_calls:
            self.answer = (text, reply.step, reply.ended_at)

    def _call(self, item: dict[str, Any], reply: _Reply, at: str | None) -> None:
        kind = item.get("type")
        call_id = item.get("call_id") or item.get("id")
        name = item.get("name") if isinstance(item.get("name"), str) else str(kind)
        if kind == "function_call":
            arguments: Any = item.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = loads(arguments)
                except ValueError:
                    pass  # not JSON: keep the text the model wrote
        elif kind == "custom_tool_call":
            arguments = item.get("input")
        else:  # local_shell_call
            name = "local_shell"
            action = item.get("action")
            arguments = (
                {k: v for k, v in action.items() if k != "type"} if isinstance(action, dict) else {}
            )
        tool = vocabulary.canonical_tool(vocabulary.CODEX, name, arguments)
        metadata: dict[str, Any] = {"call_id": call_id, **tool.metadata}
        display, arguments = tool.name, tool.input
        step = self.writer.open_step(
            "tool_call",
            display,
            input=arguments,
            started_at=at,
            caused_by_step=reply.step,
            call_id=call_id if isinstance(call_id, str) else None,
            metadata=metadata,
        )
        reply.tool_calls += 1
        if isinstance(call_id, str):
            self.calls[call_id] = _Call(step, str(display or ""), at)

    def _output(self, item: dict[str, Any], at: str | None) -> None:
        call_id = item.get("call_id")
        call = self.calls.pop(call_id, None) if isinstance(call_id, str) else None
        if call is None:
            self.writer.skip("tool output without its call")
            return
        output, exit_code, success = parse_output(item.get("output"))
        info = self.exec_info.pop(str(call_id), {})
        if info.get("exit_code") is not None:
            exit_code = info["exit_code"]
        failed = (
            (exit_code is not None and exit_code != 0)
            or info.get("status") in ("failed", "declined")
            or success is False
        )
        error = None
        metadata: dict[str, Any] = {"exit_code": exit_code} if exit_code is not None else {}
        blocked = vocabulary.refusal(vocabulary.CODEX, output if isinstance(output, str) else None)
        if blocked is not None:  # a hook refused the call: it never ran
            error, refused = blocked
            metadata.update(refused)
            output = None
        elif failed:
            error = f"exit code {exit_code}" if exit_code is not None else "the tool failed"
            detail = first_line(output if isinstance(output, str) else None)
            if detail:
                error = f"{error}: {detail}"
        self.writer.close_step(
            call.step,
            output=output,
            error=error,
            ended_at=not_before(call.started_at, at),
            metadata=metadata or None,
        )
        self.last_tool_step = call.step
        self.awaiting_reply = True
        self.request_at = at
        if self.reply is not None:
            self.reply.after_input = True

    # --- events ----------------------------------------------------------------------------

    def _event(self, event: dict[str, Any], at: str | None) -> None:
        kind = event.get("type")
        if kind == "user_message":
            if event.get("kind") in (None, "plain") and isinstance(event.get("message"), str):
                self._prompt(event["message"], at)
        elif kind == "item_completed":
            self._item_completed(event.get("item"), at)
        elif kind == "exec_command_end":
            self._exec_info(event.get("call_id"), exit_code=exit_code_of(event.get("exit_code")))
        elif kind == "patch_apply_end":
            status = "completed" if event.get("success") is not False else "failed"
            self._exec_info(event.get("call_id"), status=status)
        elif kind == "token_count":
            self._tokens(event)
        elif kind in ("task_started", "turn_started"):
            self.saw_turns = True
            self.turn_open = True
        elif kind in ("task_complete", "turn_complete"):
            self._turn_complete(event, at)
        elif kind == "turn_aborted":
            self._close_reply()
            self.answer = None
            self.aborted = True
            self.turn_open = False
            self.awaiting_reply = False
        elif kind == "error":
            message = event.get("message")
            self._error(message if isinstance(message, str) else "error", at)
        elif kind not in IGNORED_EVENTS:
            self.writer.skip(f"event_msg {kind}")

    def _item_completed(self, item: Any, at: str | None) -> None:
        if not isinstance(item, dict):
            return
        kind = item.get("type")
        if kind == "UserMessage":
            text = text_of(item.get("content"))
            if text:
                self._prompt(text, at)
        elif kind == "CommandExecution":
            self._exec_info(
                item.get("id"),
                exit_code=exit_code_of(item.get("exit_code")),
                status=item.get("status"),
            )
        elif isinstance(item.get("status"), str):
            self._exec_info(item.get("id"), status=item["status"])

    def _exec_info(self, call_id: Any, **info: Any) -> None:
        """What the harness saw of a call's execution, kept until its output arrives."""
        if isinstance(call_id, str) and call_id in self.calls:
            known = self.exec_info.setdefault(call_id, {})
            known.update({k: v for k, v in info.items() if v is not None})

    def _tokens(self, event: dict[str, Any]) -> None:
        info = event.get("info")
        if isinstance(info, dict):
            total, usage = info.get("total_token_usage"), info.get("last_token_usage")
        elif "input_tokens" in event:  # older rollouts: the counts at the top level
            total, usage = None, {k: v for k, v in event.items() if k != "type"}
        else:
            return
        if total is not None and total == self.last_total:
            return  # the same totals again (rate-limit updates repeat them)
        self.last_total = total
        if self.reply is not None and isinstance(usage, dict):
            self._close_reply(usage)

    def _prompt(self, text: str, at: str | None) -> None:
        if self.awaiting_reply and self.prompt == text:
            return  # the same prompt from a second event kind
        self._close_reply()
        if not self.saw_turns:
            self._emit_answer(None)
        if not self.writer.started:
            self._start(text)
        self.writer.add_step(
            "thought", vocabulary.PROMPT_STEP, input=text, started_at=at, ended_at=at
        )
        self.prompt = text
        self.request_at = at
        self.awaiting_reply = True
        self.aborted = False

    def _turn_complete(self, event: dict[str, Any], at: str | None) -> None:
        self._close_reply()
        message = event.get("last_agent_message")
        self._emit_answer(message if isinstance(message, str) and message else None, at)
        self.turn_open = False
        self.aborted = False
        self.awaiting_reply = False

    def _emit_answer(self, text: str | None, at: str | None = None) -> None:
        """Record the turn's answer (``text``, else the last response without tool calls)."""
        answer, self.answer = self.answer, None
        if text is None and answer is not None:
            text = answer[0]
        if not text:
            return
        cause = answer[1] if answer is not None else self.last_reply_step
        when = answer[2] if answer is not None else at
        self.writer.add_step(
            "output",
            vocabulary.ANSWER_STEP,
            output=text,
            started_at=when,
            ended_at=not_before(when, at) if at else when,
            caused_by_step=cause,
        )
        self.output = text

    def _error(self, message: str, at: str | None) -> None:
        self._close_reply()
        if not self.writer.started:
            self._start(None)
        self.writer.add_step(
            "error",
            "error",
            error=message,
            started_at=at,
            ended_at=at,
            caused_by_step=self.last_reply_step,
        )
        self.fatal = message
        self.answer = None
        self.awaiting_reply = False

    def _end(self) -> None:
        self._close_reply()
        open_calls = list(self.calls.values())
        self.calls.clear()
        for call in open_calls:
            self.writer.close_step(
                call.step,
                error=NO_RESULT,
                ended_at=not_before(call.started_at, self.last_at),
                metadata={"incomplete": True},
            )
        if self.saw_turns:
            clean = not (self.turn_open or open_calls or self.aborted)
        else:
            clean = not (open_calls or self.awaiting_reply or self.aborted)
            if clean and self.writer.started:
                self._emit_answer(None)
        if self.fatal is not None:
            status, error = "failed", self.fatal
        elif clean:
            status, error = "completed", None
        else:
            status, error = "timeout", MID_TURN
        self.writer.finish(
            status=status,
            output=self.output,
            error=error,
            ended_at=self.last_at,
            metadata={k: v for k, v in self.meta.items() if k != "session_meta"},
        )


def tool_outcome(
    raw: Any, *, success: bool | None = None, exit_code: int | None = None
) -> tuple[Any, str | None, dict[str, Any]]:
    """A Codex tool output as ``(output, error, metadata)``, failed as the rollout import fails
    it: a non-zero exit code (given, or in the output's header), ``success`` false, or a hook's
    block (its reason is the error; the call never ran, so there is no output). Shared with the
    OTLP mapping of Codex's ``codex.tool_result`` events."""
    output, found, ok = parse_output(raw)
    exit_code = exit_code if exit_code is not None else found
    if ok is None:
        ok = success
    metadata: dict[str, Any] = {"exit_code": exit_code} if exit_code is not None else {}
    blocked = vocabulary.refusal(vocabulary.CODEX, output if isinstance(output, str) else None)
    if blocked is not None:
        error, refused = blocked
        metadata.update(refused)
        return None, error, metadata
    if (exit_code is not None and exit_code != 0) or ok is False:
        error = f"exit code {exit_code}" if exit_code is not None else "the tool failed"
        detail = first_line(output if isinstance(output, str) else None)
        return output, f"{error}: {detail}" if detail else error, metadata
    return output, None, metadata
