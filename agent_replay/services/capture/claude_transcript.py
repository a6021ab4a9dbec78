"""Claude Code transcripts (``~/.claude/projects/<project>/<session>.jsonl``): one trace per
session, streamed line by line.

What becomes what:

- the session: agent ``claude-code``, ``session_id``, input = the first user prompt, started and
  ended at the first and last timestamps, ``agent_version`` = Claude Code's version, cost from
  the ``cost-state`` line; ``cwd``/``git_branch`` in metadata.
- each user prompt of the session (not a subagent's task): a ``thought`` step
  ``user_prompt``, as the hook path records it (the hook's follower leaves it to the hook).
- an API reply: one ``llm_call`` step (named after the model) whose output is its text. Claude
  Code writes one line per content block, all sharing ``message.id``: they merge into one step
  and the usage they repeat is counted once. ``tokens_used`` = input + output tokens; the cache
  tokens (``cache_creation_input_tokens``, ``cache_read_input_tokens``) go in the step's
  metadata, not into ``tokens_used``. Its input is the prompt it answers, if any.
- ``thinking`` blocks: ``thought`` steps; ``tool_use`` + its ``tool_result`` (paired by the
  tool_use id): a ``tool_call`` step with input, output, duration, and ``error`` when the result
  says ``is_error`` (for a call a hook blocked, the hook's reason; ``vocabulary``). Thoughts
  and tool calls are ``caused_by`` the reply that made them.
- a reply without tool calls that ends a turn: an ``output`` step (``final_answer``); the last
  one is the trace's output.
- subagents (``<session>/subagents/agent-<id>.jsonl``): imported in place, when the Task/Agent
  call that spawned them returns, with ``parent_step`` = that call's step (nested subagents
  nest the same way). The call is found by the result's ``toolUseResult.agentId`` or by the
  ``agent-<id>.meta.json`` beside the file.

Status: ``failed`` when the session ends on an API error; ``timeout`` when it ends mid-turn (a
tool call without its result, a prompt or tool results never answered, an interrupted turn):
the session was killed, interrupted or is still running; ``completed`` otherwise. A failed
tool call does not fail the trace. Lines of other kinds (attachments, API request shapes, queue
operations, …) carry nothing for the trace and are ignored; kinds this importer does not know,
unreadable lines and results without their call are skipped and counted.

The state kept while streaming (the reply being merged, each conversation, the open calls) is
``claude_state``'s dataclasses, which the transcript follower saves between hook payloads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.capture.claude_state import _Call, _Context, _Message
from agent_replay.services.capture.session_writer import (
    CLAUDE_TRANSCRIPT,
    SessionWriter,
    as_int,
    head_records,
    latest,
    not_before,
    read_records,
    text_of,
    timestamp,
)
from agent_replay.trace.base import time_before
from agent_replay.trace.io import loads

FORMAT = CLAUDE_TRANSCRIPT
AGENT_NAME = "claude-code"

# Line kinds that carry nothing for the trace (known, so not counted as skipped).
_IGNORED = frozenset(
    {
        "attachment",
        "system",
        "summary",
        "queue-operation",
        "last-prompt",
        "file-history-snapshot",
        "custom-title",
        "atis-latch",
        "api-request-shape",
        "api-request-blob",
        "tools-used",
        "progress",
    }
)
_KNOWN = _IGNORED | {"user", "assistant", "api-request", "cost-state"}
_SUBAGENT_TOOLS = frozenset({"Task", "Agent"})
_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
_RECORD_ERRORS = (KeyError, TypeError, AttributeError, ValueError, IndexError)
_SESSION_NAME = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

NO_RESULT = "no result: the session ended before the tool returned"
MID_TURN = "the transcript ends mid-turn: the session was interrupted or is still running"


def sniff(record: dict[str, Any]) -> bool:
    """Whether a record looks like a Claude Code transcript line."""
    kind = record.get("type")
    if not isinstance(kind, str) or "payload" in record:
        return False
    if isinstance(record.get("sessionId"), str) and ("uuid" in record or kind in _KNOWN):
        return True
    return kind == "summary" and "leafUuid" in record


def peek_session_id(path: Path) -> str | None:
    """The session id: the file's name when it is one (Claude Code names a transcript after its
    session; a resumed session's file may begin with lines copied from the session it resumed),
    else the first ``sessionId`` in the file (a subagent's file carries its parent's), else the
    file name."""
    if _SESSION_NAME.fullmatch(path.stem):
        return path.stem
    for record in head_records(path):
        if isinstance(record.get("sessionId"), str):
            return str(record["sessionId"])
    return path.stem


def import_session(path: Path, writer: SessionWriter) -> None:
    """Stream one transcript (and its subagents' transcripts) into ``writer``."""
    _Session(path, writer).run()


class _Session:
    """The streaming state of one transcript: only open calls and the current reply.

    ``run`` imports a whole file. ``transcript_follow`` drives the same state incrementally
    (``feed`` the new lines, ``follow_agent`` a subagent's file, ``flush_reply`` at the end of
    a turn), saving it between hook payloads; it overrides ``lines`` (read from an offset) and
    ``agent_parent`` (nest under the hook's subagent step)."""

    def __init__(self, path: Path, writer: SessionWriter) -> None:
        self.path = path
        self.writer = writer
        self.main = _Context()
        self.sidechain: _Context | None = None
        self.calls: dict[str, _Call] = {}
        self.first_at: str | None = None
        self.last_at: str | None = None
        self.cost: float | None = None
        self.info: dict[str, Any] = {}
        self.subagents: dict[str, Path] = {}
        self.spawned_by: dict[str, str] = {}
        self.agent_info: dict[str, dict[str, Any]] = {}
        self.done_agents: set[str] = set()
        self.agent_contexts: dict[str, _Context] = {}
        self._index_subagents()

    # --- the file(s) ---------------------------------------------------------------------

    def _index_subagents(self) -> None:
        """Find ``<session>/subagents/agent-<id>.jsonl`` and which call spawned each."""
        folder = self.path.parent / self.path.stem / "subagents"
        if not folder.is_dir():
            return
        for file in sorted(folder.glob("agent-*.jsonl")):
            agent_id = file.stem.removeprefix("agent-")
            self.subagents[agent_id] = file
            info: dict[str, Any] = {"agent_id": agent_id}
            try:
                meta = loads(file.with_name(f"{file.stem}.meta.json").read_bytes())
            except (OSError, ValueError):
                meta = None
            if isinstance(meta, dict):
                if isinstance(meta.get("toolUseId"), str):
                    self.spawned_by[meta["toolUseId"]] = agent_id
                if isinstance(meta.get("agentType"), str):
                    info["agent_type"] = meta["agentType"]
            self.agent_info[agent_id] = info

    def run(self) -> None:
        self.feed(self.lines(self.path))
        self._end()

    def lines(self, path: Path) -> Iterable[dict[str, Any] | None]:
        """The records of a file to read (the whole file; ``None`` for an unreadable line)."""
        return (record for _, record in read_records(path))

    def feed(self, records: Iterable[dict[str, Any] | None]) -> None:
        """Read records of the main transcript."""
        for record in records:
            self._record(record, self.main)

    def agent_parent(self, agent_id: str, spawner: int | None) -> int | None:
        """The step a subagent's steps nest under: the call that spawned it."""
        return spawner

    def follow_agent(self, agent_id: str) -> None:
        """Read what a running subagent's file has gained (its spawning call has not returned
        yet, so ``_import_subagent`` will read the rest)."""
        if agent_id in self.done_agents:
            return
        if agent_id not in self.subagents or agent_id not in self.agent_info:
            self._index_subagents()  # its file (and meta.json) appeared since
        if agent_id not in self.subagents:
            return
        context = self.agent_contexts.get(agent_id)
        if context is None:
            tool_id = next((t for t, a in self.spawned_by.items() if a == agent_id), None)
            call = self.calls.get(tool_id) if tool_id is not None else None
            if self.agent_parent(agent_id, call.step if call else None) is None:
                return  # nothing to nest it under yet: read when its call returns
            context = self._agent_context(agent_id, call.step if call else None)
        for record in self.lines(self.subagents[agent_id]):
            self._record(record, context)

    def flush_reply(self, agent_id: str | None = None) -> None:
        """A turn (of the main agent, or of subagent ``agent_id``) ended: its last reply is
        complete."""
        context = self.agent_contexts.get(agent_id) if agent_id else self.main
        if context is not None:
            self._flush(context)

    def _record(self, record: dict[str, Any] | None, context: _Context) -> None:
        writer = self.writer
        if record is None:
            writer.skip("unreadable line")
            return
        kind = record.get("type")
        try:
            self._dispatch(record, kind, context)
        except _RECORD_ERRORS:
            writer.skip(f"malformed {kind} line")

    def _dispatch(self, record: dict[str, Any], kind: Any, context: _Context) -> None:
        writer = self.writer
        at = timestamp(record.get("timestamp"))
        if at is not None:
            self.first_at = self.first_at or at
            self.last_at = latest(self.last_at, at)
        if kind not in _KNOWN:
            writer.skip(str(kind) if kind is not None else "line without a type")
            return
        writer.known += 1
        if "cwd" in record and not self.info:
            self.info = {
                key: record[name]
                for key, name in (
                    ("version", "version"),
                    ("cwd", "cwd"),
                    ("git_branch", "gitBranch"),
                    ("entrypoint", "entrypoint"),
                )
                if isinstance(record.get(name), str)
            }
        if record.get("isSidechain") is True and context is self.main:
            context = self._sidechain_context()
        if kind == "user":
            self._user(record, context, at)
        elif kind == "assistant":
            self._assistant(record, context, at)
        elif kind == "api-request" and at is not None:
            context.request_at = at
        elif kind == "cost-state":
            cost = record.get("totalCostUSD")
            if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
                self.cost = float(cost)

    def _sidechain_context(self) -> _Context:
        """Older transcripts keep a Task's sidechain in the main file: nest it under the
        latest open Task/Agent call (or leave it in the main conversation when none is open,
        as in a subagent file imported on its own)."""
        spawner = next(
            (c for c in reversed(self.calls.values()) if c.name in _SUBAGENT_TOOLS), None
        )
        if spawner is None:
            return self.main
        if self.sidechain is None or self.sidechain.parent_step != spawner.step:
            if self.sidechain is not None:
                self._end_context(self.sidechain)
            self.sidechain = _Context(parent_step=spawner.step, meta={"sidechain": True})
        return self.sidechain

    def _start(self, prompt: str | None) -> None:
        self.writer.start(
            input=prompt,
            started_at=self.first_at,
            agent_version=self.info.get("version"),
            metadata=self._metadata(),
        )

    def _metadata(self) -> dict[str, Any]:
        return {k: v for k, v in self.info.items() if k != "version"}

    # --- user lines: prompts and tool results --------------------------------------------

    def _user(self, record: dict[str, Any], context: _Context, at: str | None) -> None:
        if record.get("isMeta") or record.get("isCompactSummary"):
            return  # harness-injected context, not something the user typed
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self._result(block, record, at)
            return
        text = text_of(content)
        if text is None:
            self.writer.skip("user line without content")
            return
        if text.startswith("[Request interrupted by user"):
            self._flush(context)
            context.answer = None
            context.interrupted = True
            context.awaiting_reply = False
            return
        self._end_turn(context)
        if context is self.main:
            if not self.writer.started:
                self._start(text)
            self.writer.add_step(
                "thought", vocabulary.PROMPT_STEP, input=text, started_at=at, ended_at=at
            )
        context.prompt = text
        context.request_at = at
        context.awaiting_reply = True
        context.interrupted = False

    def _result(self, block: dict[str, Any], record: dict[str, Any], at: str | None) -> None:
        tool_id = block.get("tool_use_id")
        call = self.calls.pop(tool_id, None) if isinstance(tool_id, str) else None
        if call is None:
            self.writer.skip("tool_result without its tool_use")
            return
        totals = self._maybe_subagent(str(tool_id), record.get("toolUseResult"), call)
        text = text_of(block.get("content"))
        failed = block.get("is_error") is True
        error, metadata = None, dict(totals)
        if failed:  # a hook's block carries the hook's reason (``vocabulary``)
            error, refused = vocabulary.tool_error(vocabulary.CLAUDE, text)
            error = error or "the tool reported an error"
            metadata.update(refused)
        self.writer.close_step(
            call.step,
            output=None if failed else text,
            error=error,
            ended_at=not_before(call.started_at, at),
            metadata=metadata or None,
        )
        context = call.context
        context.last_tool_step = call.step
        context.awaiting_reply = True
        context.request_at = at

    def _maybe_subagent(self, tool_id: str, result: Any, call: _Call) -> dict[str, Any]:
        """Import the subagent a returning Task/Agent call spawned; its totals."""
        agent_id = result.get("agentId") if isinstance(result, dict) else None
        if isinstance(agent_id, str) and agent_id not in self.subagents:
            self._index_subagents()  # followed live: the file may be newer than our index
        if agent_id not in self.subagents:
            agent_id = self.spawned_by.get(tool_id)
        if agent_id is not None and agent_id not in self.done_agents:
            return self._import_subagent(agent_id, call.step)
        return {}

    def _agent_context(self, agent_id: str, spawner: int | None) -> _Context:
        context = self.agent_contexts.get(agent_id)
        if context is None:
            context = _Context(
                parent_step=self.agent_parent(agent_id, spawner),
                meta=dict(self.agent_info.get(agent_id, {})),
            )
            self.agent_contexts[agent_id] = context
        return context

    def _import_subagent(self, agent_id: str, parent_step: int | None) -> dict[str, Any]:
        """Read (the rest of) a subagent's file, nested under ``parent_step``; returns its
        totals (``subagent_tokens``, ``subagent_cost_usd``) for the spawning call."""
        self.done_agents.add(agent_id)
        context = self._agent_context(agent_id, parent_step)
        for record in self.lines(self.subagents[agent_id]):
            self._record(record, context)
        self._end_context(context)
        self.agent_contexts.pop(agent_id, None)
        totals: dict[str, Any] = {"subagent_tokens": context.tokens}
        cost = self.writer.steps_cost(context.llm_steps)
        if cost is not None:
            totals["subagent_cost_usd"] = cost
        return totals

    # --- assistant lines: replies, thinking, tool calls ----------------------------------

    def _assistant(self, record: dict[str, Any], context: _Context, at: str | None) -> None:
        message = record.get("message")
        if not isinstance(message, dict):
            self.writer.skip("assistant line without a message")
            return
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            blocks = []
        if record.get("isApiErrorMessage"):
            self._api_error(text_of(blocks) or "API error", context, at)
            return
        message_id = message.get("id") or record.get("uuid") or f"line-{at}"
        current = context.message
        if current is not None and current.id != message_id:
            self._flush(context)
            current = None
        if current is None:
            current = self._open_reply(context, str(message_id), message, at)
        current.ended_at = latest(current.ended_at, at)
        if isinstance(message.get("model"), str):
            current.model = message["model"]
        if isinstance(message.get("stop_reason"), str):
            current.stop_reason = message["stop_reason"]
        if isinstance(record.get("requestId"), str):
            current.request_id = record["requestId"]
        usage = message.get("usage")
        if isinstance(usage, dict):
            # Every line of a reply repeats its usage (or an earlier, partial count): keep the
            # largest value of each field, so the reply counts once.
            for key in _USAGE_KEYS:
                value = as_int(usage.get(key))
                if value is not None:
                    current.usage[key] = max(value, current.usage.get(key, 0))
        for block in blocks:
            if isinstance(block, dict):
                self._block(block, context, current, at)

    def _open_reply(
        self, context: _Context, message_id: str, message: dict[str, Any], at: str | None
    ) -> _Message:
        if not self.writer.started:
            self._start(None)
        started_at = context.request_at or at
        if started_at is not None and at is not None and time_before(at, started_at):
            started_at = at
        model = message.get("model") if isinstance(message.get("model"), str) else None
        step = self.writer.open_step(
            "llm_call",
            model or "assistant",
            input=context.prompt,
            started_at=started_at,
            model=model,
            parent_step=context.parent_step,
            caused_by_step=context.last_tool_step,
            metadata={**context.meta, "message_id": message_id},
        )
        context.prompt = None
        context.request_at = None
        context.answer = None
        context.awaiting_reply = False
        context.fatal = None
        context.message = _Message(id=message_id, step=step, started_at=started_at, model=model)
        return context.message

    def _block(
        self, block: dict[str, Any], context: _Context, reply: _Message, at: str | None
    ) -> None:
        kind = block.get("type")
        writer = self.writer
        if kind == "text":
            if isinstance(block.get("text"), str):
                reply.texts.append(block["text"])
        elif kind in ("thinking", "redacted_thinking"):
            thinking = block.get("thinking")
            writer.add_step(
                "thought",
                "thinking",
                output=thinking if isinstance(thinking, str) and thinking else None,
                started_at=at,
                ended_at=at,
                model=reply.model,
                parent_step=context.parent_step,
                caused_by_step=reply.step,
                metadata={**context.meta, **({"redacted": True} if kind != "thinking" else {})},
            )
        elif kind == "tool_use":
            tool_id = block.get("id")
            if isinstance(tool_id, str) and tool_id in self.calls:
                writer.skip("repeated tool_use")
                return
            name = block.get("name") if isinstance(block.get("name"), str) else "tool"
            step = writer.open_step(
                "tool_call",
                name,
                input=block.get("input"),
                started_at=at,
                parent_step=context.parent_step,
                caused_by_step=reply.step,
                call_id=tool_id if isinstance(tool_id, str) else None,
                metadata={**context.meta, "tool_use_id": tool_id},
            )
            reply.tool_uses += 1
            if isinstance(tool_id, str):
                self.calls[tool_id] = _Call(step, str(name), at, context)
        else:
            writer.skip(f"assistant content block {kind}")

    def _api_error(self, text: str, context: _Context, at: str | None) -> None:
        """Claude Code writes a failed request (after its retries) as a synthetic reply."""
        self._flush(context)
        if not self.writer.started:
            self._start(None)
        self.writer.add_step(
            "error",
            "api_error",
            error=text,
            started_at=at,
            ended_at=at,
            parent_step=context.parent_step,
            caused_by_step=context.last_tool_step,
            metadata=context.meta or None,
        )
        context.fatal = text
        context.answer = None
        context.awaiting_reply = False

    def _flush(self, context: _Context) -> None:
        """Close the reply being merged: its text, model and usage (counted once)."""
        reply = context.message
        if reply is None:
            return
        context.message = None
        text = "\n\n".join(t for t in reply.texts if t) or None
        usage = reply.usage
        tokens = None
        if "input_tokens" in usage or "output_tokens" in usage:
            tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
            context.tokens += tokens
        context.llm_steps.append(reply.step)
        metadata: dict[str, Any] = {**usage}
        for key, value in (("stop_reason", reply.stop_reason), ("request_id", reply.request_id)):
            if value is not None:
                metadata[key] = value
        if reply.tool_uses:
            metadata["tool_calls"] = reply.tool_uses
        self.writer.close_step(
            reply.step,
            output=text,
            ended_at=not_before(reply.started_at, reply.ended_at),
            tokens_used=tokens,
            model=reply.model,
            metadata=metadata,
        )
        if text and not reply.tool_uses:
            context.answer = (text, reply.step, reply.ended_at)

    def _end_turn(self, context: _Context) -> None:
        """A turn is over: its last reply without tool calls is the turn's answer."""
        self._flush(context)
        if context.answer is None:
            return
        text, step, at = context.answer
        context.answer = None
        self.writer.add_step(
            "output",
            vocabulary.ANSWER_STEP,
            output=text,
            started_at=at,
            ended_at=at,
            parent_step=context.parent_step,
            caused_by_step=step,
            metadata=context.meta or None,
        )
        context.output = text

    def _end_context(self, context: _Context) -> bool:
        """Finish a conversation at the end of its file; whether it ended cleanly."""
        self._flush(context)
        open_calls = [(tid, c) for tid, c in self.calls.items() if c.context is context]
        for tool_id, call in open_calls:
            self._import_unmatched(tool_id, call)
            del self.calls[tool_id]
            self.writer.close_step(
                call.step,
                error=NO_RESULT,
                ended_at=not_before(call.started_at, self.last_at),
                metadata={"incomplete": True},
            )
        clean = not (open_calls or context.awaiting_reply or context.interrupted)
        if clean:
            self._end_turn(context)
        return clean

    def _import_unmatched(self, tool_id: str, call: _Call) -> None:
        """A subagent whose spawning call never returned still nests under that call."""
        agent_id = self.spawned_by.get(tool_id)
        if agent_id is not None and agent_id not in self.done_agents:
            self._import_subagent(agent_id, call.step)

    def _end(self) -> None:
        if self.sidechain is not None:
            self._end_context(self.sidechain)
        clean = self._end_context(self.main)
        for agent_id in self.subagents:
            if agent_id not in self.done_agents and self.writer.started:
                self._import_subagent(agent_id, None)  # its spawning call is not in the file
        main = self.main
        if main.fatal is not None:
            status, error = "failed", main.fatal
        elif clean:
            status, error = "completed", None
        else:
            status, error = "timeout", MID_TURN
        self.writer.finish(
            status=status,
            output=main.output,
            error=error,
            ended_at=self.last_at,
            total_cost_usd=self.cost,
            metadata=self._metadata(),
        )
