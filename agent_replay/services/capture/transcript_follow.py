"""The hook path follows the harness's own session file: hook traces as rich as imports.

Hook payloads say which tool ran and when, but not what the model did: no model, no tokens, no
cost, no assistant text, no thinking. Every Claude Code and Codex CLI payload names the session
file the harness is writing (``transcript_path``: the Claude Code transcript, the Codex
rollout), and that file has it all. So the drainer, recording a payload, first reads what the
file gained since the last payload of the session and feeds it to the importer of that format
(``claude_transcript``, ``codex_rollout``) — the same code ``agent-replay import`` runs, so a
session captured by hook and by import has the same ``llm_call`` steps (model, tokens, cache
tokens, cost, latency, text), ``thought`` steps and nested subagents.

How it stays incremental: per hook trace, one ``hook_follow`` row holds the byte offset reached
in each file (the transcript and Claude Code's ``<session>/subagents/agent-<id>.jsonl`` files)
and the importer's streaming state (the reply being merged, the open calls, ...) as JSON,
redacted like everything written. Each payload reads only the complete lines past the offset
(a line still being written waits for the next payload) and saves the state in the same
transaction as the steps, so a payload applied twice or a drainer killed half-way never
records a step twice. Records the importer does not know are skipped and counted, as on
import.

How it merges with the hook's own steps (``_FollowWriter``):

- a tool call the file shows is the hook's step with the same call id (whichever came first
  opens it; the other finds it). The hook's result wins: the file's result closes a call only
  while the hook has not (a call a permission check refused or a hook blocked never gets
  one), and the hook's PostToolUse overwrites it later;
- the turn's answer and the trace's start and end stay the hook's (``Stop``, ``SessionEnd``);
  Claude Code's API errors too (``StopFailure``);
- a subagent's steps nest under the hook's ``subagent:<type>`` step when ``SubagentStart``
  made one, else under the call that spawned it (as on import), and the spawning call gets
  the subagent's own totals (``metadata.subagent_tokens``, ``subagent_cost_usd``) instead of
  the harness's ``totalTokens`` (its last call only) in ``tokens_used``.

When it reads: at the events the hook mapping records, before the payload's own event is
recorded (the harness writes the file first: the reply naming a tool call is in the
transcript before its PreToolUse fires; when it is not there yet, the detached drainer waits
for it briefly: ``call_not_yet_written``), except ``UserPromptSubmit`` and ``SubagentStart``
(after: the prompt's and the subagent's steps come first); ``SessionStart`` and
notifications read nothing. ``Stop``, ``StopFailure`` and ``SessionEnd`` close the reply
being merged; ``SubagentStop`` closes the subagent's.

Gemini CLI is not followed: its hooks (``AfterModel``) already carry the model's replies,
tokens and text, and its hook trace equals the chat recording's import. Nor is a session
``agent-replay proxy`` records (it opened the trace or joined the hook's): it has the calls.
Without a readable file the hook trace is what the payloads alone give. A failure here is
logged in the row's ``error`` column and never costs the payload.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from peewee import SQL

from agent_replay.services.capture import claude_state, claude_transcript, codex_rollout, vocabulary
from agent_replay.services.capture.session_writer import (
    CLAUDE_TRANSCRIPT,
    CODEX_ROLLOUT,
    SessionWriter,
)
from agent_replay.services.hook.session import SUBAGENT_KEY, Hook, error_marker
from agent_replay.services.setup import CLAUDE_EVENTS
from agent_replay.store.models import HookFollowRow, StepRow, TraceRow
from agent_replay.store.statements import Statement, arg, insert_statement
from agent_replay.trace.io import dumps, loads

STATE_VERSION = 1
FLUSH_EVENTS = frozenset({"Stop", "StopFailure", "SessionEnd"})
"""Events after which the reply being merged is complete."""
AFTER_EVENTS = frozenset({"UserPromptSubmit", "SubagentStart"})
"""Events recorded before the file is read (the prompt's step comes before the reply's, the
subagent's step before the steps nested under it)."""
FOLLOW_EVENTS = frozenset(CLAUDE_EVENTS) - {"SessionStart"}
"""The events the hook mapping records (``hook.dialects.claude``); the others (notifications,
instructions loaded, ...) read nothing."""
_CLAUDE_FILE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl")

# The statements a followed payload runs (the drainer's per-payload path: built once).
_SAVED = Statement(
    lambda: HookFollowRow.select(HookFollowRow.path, HookFollowRow.state).where(
        HookFollowRow.trace_id == arg()
    )
)
_INSERT_SAVED = insert_statement(
    HookFollowRow,
    [HookFollowRow.trace_id, HookFollowRow.path, HookFollowRow.state, HookFollowRow.updated_ms],
)
# Peewee writes an UPDATE's SET list in the model's field order: path, state, updated_ms.
_UPDATE_SAVED = Statement(
    lambda: HookFollowRow.update(
        {
            HookFollowRow.path: arg(),
            HookFollowRow.state: arg(),
            HookFollowRow.updated_ms: arg(),
            HookFollowRow.error: SQL("NULL"),
        }
    ).where(HookFollowRow.trace_id == arg())
)
_NOTE_ERROR = Statement(
    lambda: HookFollowRow.update(error=arg()).where(HookFollowRow.trace_id == arg())
)
_SOURCE_FORMAT = Statement(
    lambda: TraceRow.select(TraceRow.source_format).where(TraceRow.id == arg())
)
_PROXY_STEP = Statement(  # ``**``: LIKE on SQLite, ILIKE on PostgreSQL (the same answer)
    lambda: (
        StepRow.select(StepRow.id)
        .where(
            (StepRow.trace_id == arg()) & (StepRow.step_type == arg()) & (StepRow.metadata ** arg())
        )
        .limit(arg())
    )
)
_CALL_STEP = Statement(
    lambda: (
        StepRow.select(StepRow.step_number)
        .where((StepRow.trace_id == arg()) & (StepRow.call_id == arg()))
        .order_by(StepRow.step_number.desc())
        .limit(arg())
    )
)
_STEP_STATE = Statement(
    lambda: StepRow.select(StepRow.is_open, StepRow.step_type, StepRow.ended_at).where(
        (StepRow.trace_id == arg()) & (StepRow.step_number == arg())
    )
)


def phase(hook: Hook) -> str | None:
    """When to read this payload's session file: ``before`` or ``after`` its event is
    recorded, or ``None`` (Gemini CLI, no file named, ``SessionStart``)."""
    if hook.dialect.key not in ("claude", "codex") or hook.event not in FOLLOW_EVENTS:
        return None
    if not hook.text("transcript_path"):
        return None
    if hook.event in AFTER_EVENTS or hook.find_trace() is None:
        return "after"
    return "before"


def follow(hook: Hook) -> None:
    """Record what the payload's session file gained since the last payload of its session.

    Runs in a savepoint of its own: whatever goes wrong (an unreadable file, a record of a
    shape nobody expected) is noted in ``hook_follow.error`` and the payload is recorded as
    if there were no file."""
    try:
        with hook.store.db.atomic():
            _follow(hook)
    except Exception as exc:  # noqa: BLE001 - following is extra: never lose the payload for it
        _note_error(hook, f"{type(exc).__name__}: {exc}")


def following(hook: Hook) -> bool:
    """Whether this session's trace is being followed from its session file."""
    found = hook.find_trace()
    if found is None:
        return False
    return _SAVED.run(hook.store, (found[0],)).fetchone() is not None


def _own_file(dialect: str, path: str) -> bool:
    """Only ever read the harness's own session files (a payload could name any path)."""
    name = path.rsplit("/", 1)[-1]
    if dialect == "claude":
        return _CLAUDE_FILE.fullmatch(name) is not None
    return name.startswith("rollout-") and name.endswith(".jsonl")


def _follow(hook: Hook) -> None:
    text = hook.text("transcript_path")
    found = hook.find_trace()
    if not text or found is None or not _own_file(hook.dialect.key, text):
        return
    trace_id, path = found[0], Path(text)
    if _proxied(hook, trace_id):
        return  # ``agent-replay proxy`` records this session's model calls already
    row = _SAVED.run(hook.store, (trace_id,)).fetchone()
    saved = loads(row[1]) if row is not None and row[0] == text else None
    if saved is None and not path.is_file():
        return
    spec = _CLAUDE if hook.dialect.key == "claude" else _CODEX
    writer = _FollowWriter(hook, trace_id, path, spec)
    offsets = _Offsets(dict(saved["offsets"]) if saved else {})
    if saved:
        session = spec.restore(saved["session"], path, writer)
        writer.skipped.update(saved.get("skipped") or {})
    else:
        session = spec.create(path, writer)
    session.follower = _Follower(hook, offsets)
    session.advance(hook)
    state = {
        "v": STATE_VERSION,
        "offsets": offsets.offsets,
        "session": _encode(_state_of(session), {}, _NO_INPUT if hook.no_input else {}),
        "skipped": dict(writer.skipped),
    }
    now_ms = int(time.time() * 1000)
    encoded = dumps(hook.rec.redact(state))
    if row is None:
        _INSERT_SAVED.run(hook.store, (trace_id, text, encoded, now_ms))
    else:
        _UPDATE_SAVED.run(hook.store, (text, encoded, now_ms, trace_id))


CALL_WAIT_S = 0.3
"""How long the detached drainer waits for a tool call's reply to reach the session file."""
_TAIL = 1 << 20
_FRESH_S = 10.0


def call_not_yet_written(data: Any) -> tuple[Path, str] | None:
    """For a PreToolUse payload whose tool call is not yet in the harness's session file: the
    file and the call id; else ``None``.

    The follower reads the file at PreToolUse, before the tool's step is recorded, so the
    reply that asked for the call comes first and causes it. The real Claude Code writes that
    reply's line asynchronously, and now and then after the hook fired (seen with 2.1.332:
    one tool call in three sessions recorded before its model call, with no cause). Only a
    file written to in the last seconds counts: a session file that stopped growing will not
    get the line."""
    if not isinstance(data, dict) or data.get("hook_event_name") != "PreToolUse":
        return None
    call_id, text = data.get("tool_use_id"), data.get("transcript_path")
    if not isinstance(call_id, str) or not call_id or not isinstance(text, str):
        return None
    if not (_own_file("claude", text) or _own_file("codex", text)):
        return None
    path = Path(text)
    if _has_call(path, call_id) is not False:
        return None
    return path, call_id


def wait_for_call(path: Path, call_id: str, timeout_s: float = CALL_WAIT_S) -> bool:
    """Wait (polling, off any transaction) until the call's id is in the file; ``False`` on
    timeout or when the file can't be read."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.01)
        found = _has_call(path, call_id)
        if found is None:
            return False
        if found:
            return True
    return False


def _has_call(path: Path, call_id: str) -> bool | None:
    """Whether the file's complete lines (its last MiB) name the call; ``None`` when the file
    is missing, unreadable, not a regular file (a FIFO a payload names must not block the
    drainer) or stale."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or time.time() - info.st_mtime > _FRESH_S:
            return None
        tail = os.pread(fd, _TAIL, max(0, info.st_size - _TAIL))
    except OSError:
        return None
    finally:
        os.close(fd)
    complete = tail[: tail.rfind(b"\n") + 1]
    return call_id.encode("utf-8", "replace") in complete


def _proxied(hook: Hook, trace_id: str) -> bool:
    """Whether ``agent-replay proxy`` records this trace's model calls: it opened the trace,
    or joined the one the hook opened (its steps carry ``metadata.proxy``)."""
    row = _SOURCE_FORMAT.run(hook.store, (trace_id,)).fetchone()
    if row[0] != hook.dialect.source_format:
        return True
    found = _PROXY_STEP.run(hook.store, (trace_id, "llm_call", '%"proxy":%', 1))
    return found.fetchone() is not None


def _note_error(hook: Hook, message: str) -> None:
    found = hook.find_trace()
    if found is None:
        return
    try:
        with hook.store.db.atomic():
            _NOTE_ERROR.run(hook.store, (message[:500], found[0]))
    except Exception:  # noqa: BLE001 - the note is best effort; the payload is what matters
        return


# --- reading from an offset ------------------------------------------------------------------


class _Offsets:
    """The byte offset reached in each file read (keyed by path)."""

    def __init__(self, offsets: dict[str, int]) -> None:
        self.offsets = offsets

    def records(self, path: Path) -> Iterator[dict[str, Any] | None]:
        """The complete lines past the offset, as records (``None``: not a JSON object); the
        offset moves past each line read. A last line without its newline is still being
        written: it is read next time. A file now shorter than the offset was replaced: it is
        read from its start."""
        key = str(path)
        start = self.offsets.get(key, 0)
        try:
            stream = path.open("rb")
        except OSError:
            return
        with stream:
            if os.fstat(stream.fileno()).st_size < start:
                start = 0
            stream.seek(start)
            position = start
            for raw in stream:
                if not raw.endswith(b"\n"):
                    break
                position += len(raw)
                self.offsets[key] = position
                if not raw.strip():
                    continue
                try:
                    value = loads(raw)
                except ValueError:
                    yield None
                    continue
                yield value if isinstance(value, dict) else None


@dataclasses.dataclass
class _Follower:
    """What a following session needs besides its own state (never saved)."""

    hook: Hook
    offsets: _Offsets


# --- the importers, driven incrementally -----------------------------------------------------


class _ClaudeFollow(claude_transcript._Session):
    """A Claude Code transcript, read payload by payload."""

    follower: _Follower

    def lines(self, path: Path) -> Iterator[dict[str, Any] | None]:
        return self.follower.offsets.records(path)

    def agent_parent(self, agent_id: str, spawner: int | None) -> int | None:
        """Under the hook's step of the subagent when ``SubagentStart`` made one."""
        found = self.follower.hook.latest_step(SUBAGENT_KEY + agent_id)
        return found[0] if found is not None else spawner

    def advance(self, hook: Hook) -> None:
        self.feed(self.lines(self.path))
        agent_id = hook.text("agent_id")
        if agent_id:
            self.follow_agent(agent_id)
            if hook.event == "SubagentStop":
                self.flush_reply(agent_id)
        if hook.event in FLUSH_EVENTS:
            self.flush_reply()


class _CodexFollow(codex_rollout._Rollout):
    """A Codex CLI rollout, read payload by payload."""

    follower: _Follower

    def advance(self, hook: Hook) -> None:
        self.feed(self.follower.offsets.records(self.path))
        if hook.event in FLUSH_EVENTS:
            self._close_reply()


_Session = _ClaudeFollow | _CodexFollow


@dataclasses.dataclass(frozen=True)
class _Spec:
    """One followed format: its session class, the dataclasses its state holds, and the
    steps the hook records itself."""

    format: str
    session: type[_ClaudeFollow] | type[_CodexFollow]
    types: tuple[type[Any], ...]
    hook_owns: frozenset[tuple[str, str | None]]
    """Steps the file's importer makes that the hook path records on its own: (step type,
    name), ``None`` for any name."""

    def create(self, path: Path, writer: SessionWriter) -> _Session:
        return self.session(path, writer)

    def restore(self, state: Any, path: Path, writer: SessionWriter) -> _Session:
        session = self.session.__new__(self.session)
        values = _decode(state, {t.__name__: t for t in self.types}, {})
        assert isinstance(values, dict)
        session.__dict__.update(values)
        session.path, session.writer = path, writer
        return session


_CLAUDE = _Spec(
    CLAUDE_TRANSCRIPT,
    _ClaudeFollow,
    (claude_state._Message, claude_state._Context, claude_state._Call),
    # UserPromptSubmit's prompt, Stop's answer, StopFailure's error
    frozenset({("thought", vocabulary.PROMPT_STEP), ("output", None), ("error", None)}),
)
_CODEX = _Spec(
    CODEX_ROLLOUT,
    _CodexFollow,
    (codex_rollout._Reply, codex_rollout._Call),
    # UserPromptSubmit's prompt, Stop's answer (Codex has no failure hook)
    frozenset({("thought", vocabulary.PROMPT_STEP), ("output", None)}),
)
_NOT_STATE = frozenset({"path", "writer", "follower"})


def _state_of(session: _Session) -> dict[str, Any]:
    return {k: v for k, v in vars(session).items() if k not in _NOT_STATE}


# --- the importer's state as JSON ------------------------------------------------------------
# Plain JSON for what JSON has; tagged objects for the rest. A dataclass met twice (an open
# call points at the conversation it belongs to) is written once and referenced after.


_NO_INPUT: dict[str, Any] = {"texts": [], "prompt": None, "answer": None, "output": None}
"""Under ``--no-input`` the saved state keeps no content: the fields holding a prompt or a
reply's text are saved empty (the steps they feed keep no content either)."""


def _encode(value: Any, seen: dict[int, int], blank: dict[str, Any]) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_encode(v, seen, blank) for v in value]
    if isinstance(value, tuple):
        return {"$t": [_encode(v, seen, blank) for v in value]}
    if isinstance(value, set | frozenset):
        return {"$s": sorted(_encode(v, seen, blank) for v in value)}
    if isinstance(value, Path):
        return {"$p": str(value)}
    if isinstance(value, dict):
        pairs = [(k, blank.get(k, v) if isinstance(k, str) else v) for k, v in value.items()]
        return {"$d": [[_encode(k, seen, blank), _encode(v, seen, blank)] for k, v in pairs]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if id(value) in seen:
            return {"$r": seen[id(value)]}
        seen[id(value)] = len(seen)
        fields = {
            f.name: _encode(blank.get(f.name, getattr(value, f.name)), seen, blank)
            for f in dataclasses.fields(value)
        }
        return {"$c": type(value).__name__, "$i": seen[id(value)], "f": fields}
    raise TypeError(f"cannot save a {type(value).__name__} in the follow state")


def _decode(value: Any, types: dict[str, type[Any]], made: dict[int, Any]) -> Any:
    if isinstance(value, list):
        return [_decode(v, types, made) for v in value]
    if not isinstance(value, dict):
        return value
    if "$t" in value:
        return tuple(_decode(v, types, made) for v in value["$t"])
    if "$s" in value:
        return {_decode(v, types, made) for v in value["$s"]}
    if "$p" in value:
        return Path(value["$p"])
    if "$d" in value:
        return {_decode(k, types, made): _decode(v, types, made) for k, v in value["$d"]}
    if "$r" in value:
        return made[value["$r"]]
    if "$c" in value:
        cls = types[value["$c"]]
        obj = object.__new__(cls)
        made[value["$i"]] = obj
        for name, item in value["f"].items():
            setattr(obj, name, _decode(item, types, made))
        return obj
    return {k: _decode(v, types, made) for k, v in value.items()}


# --- writing into the hook's trace -----------------------------------------------------------


class _FollowWriter(SessionWriter):
    """The importer's writer, aimed at the hook's trace (see the module docstring)."""

    def __init__(self, hook: Hook, trace_id: str, path: Path, spec: _Spec) -> None:
        super().__init__(
            hook.store,
            path=path,
            source_format=spec.format,
            agent_name=hook.dialect.agent_name,
            session_id=hook.session_id,
            tags=[],
            redact=True,
            clock=hook.rec.clock,
        )
        self.recorder = hook.rec  # the hook's: its redaction and leniency
        self.trace_id = trace_id
        self.hook = hook
        self.hook_owns = spec.hook_owns

    # The drainer's transaction holds every write: no batching of our own.
    def _tick(self) -> None:
        return

    def _commit(self) -> None:
        return

    def start(self, **_: Any) -> str:
        """The hook made the trace."""
        assert self.trace_id is not None
        return self.trace_id

    def finish(self, **_: Any) -> None:
        """The hook ends the trace."""

    def _content(self, fields: dict[str, Any]) -> dict[str, Any]:
        """``--no-input``: no prompts, texts or outputs, only error markers."""
        kept = {k: v for k, v in fields.items() if v is not None}
        if self.hook.no_input:
            kept.pop("input", None)
            kept.pop("output", None)
            if isinstance(kept.get("error"), str):
                kept["error"] = error_marker(kept["error"])
        return kept

    def _call_step(self, call_id: str) -> int | None:
        row = _CALL_STEP.run(self.store, (self.trace_id, call_id, 1)).fetchone()
        return int(row[0]) if row else None

    def open_step(self, step_type: str, name: str | None = None, **fields: Any) -> int:
        assert self.trace_id is not None
        call_id = fields.get("call_id")
        if step_type == "tool_call" and isinstance(call_id, str):
            found = self._call_step(call_id)
            if found is not None:
                return found  # the hook's PreToolUse came first
        number = self.recorder.start_step(self.trace_id, step_type, name, **self._content(fields))
        self.steps += 1
        return number

    def close_step(self, number: int, **fields: Any) -> None:
        assert self.trace_id is not None
        row = _STEP_STATE.run(self.store, (self.trace_id, number)).fetchone()
        if row is None:
            return
        if not row[0] and row[1] == "tool_call":
            # The hook recorded the call's result: keep it, add what only the file knows.
            if fields.get("metadata"):
                self.recorder.end_step(
                    self.trace_id, number, ended_at=row[2], metadata=fields["metadata"]
                )
            return
        self.recorder.end_step(self.trace_id, number, **self._content(fields))

    def add_step(self, step_type: str, name: str | None = None, **fields: Any) -> int:
        assert self.trace_id is not None
        if (step_type, None) in self.hook_owns or (step_type, name) in self.hook_owns:
            return 0
        data = {"step_type": step_type, "name": name, **self._content(fields)}
        number = self.recorder.step(self.trace_id, data)
        self.steps += 1
        return number
