"""``hook --enforce``: decide a harness's proposed tool call and answer in its own dialect.

On a pre-tool event (Claude Code and Codex CLI ``PreToolUse``, Gemini CLI ``BeforeTool``) the
proposed call is evaluated as a ``tool_call`` step (name: the tool, input: its arguments)
against the enabled policies (``decide``), and the harness is answered:

| decision | Claude Code | Codex CLI | Gemini CLI | ``--plain`` |
|---|---|---|---|---|
| deny | ``permissionDecision`` deny | ``permissionDecision`` deny | ``decision`` deny | exit 2 |
| require_review | ``permissionDecision`` ask | deny, "review required" | deny, idem | exit 2 |
| warn | ``systemMessage`` | ``systemMessage`` | ``systemMessage`` | stderr line |
| allow / none | nothing | nothing | nothing | nothing |

The JSON answers go to stdout with exit code 0; the reason names the deciding policy.
``require_review`` asks Claude Code for its own approval prompt; Codex CLI rejects ``ask``
from a PreToolUse hook and then runs the call (it "fails open"), and Gemini CLI hooks can only
allow or deny, so both get a deny whose reason says review is required. ``allow`` never
answers ``permissionDecision: allow``: agent-replay grants nothing, and the harness's own
permission rules and sandbox still apply. A decision no policy matched prints nothing.

Every payload is also captured exactly as plain ``hook`` does (queued for the drainer). A
decision that matched a policy rides along in the queued row's options (``guard``), and the
drainer records it as a ``guard_check`` step caused by the attempted tool call
(``record.record_guard_check``).

Failing closed: when the policies cannot be read (a corrupt store, an unreadable file) or
anything unexpected happens while deciding, the answer is a deny that says why; a broken
single policy is handled by ``decide`` (fails closed unless it was added ``--fail-open``).

Stdlib only, like the capture fast path it extends: the hook budget allows no click, peewee or
pydantic. ``re2`` is imported only when an enabled policy has a ``name_regex``. So its one
statement, the policy read (``ENABLED_POLICIES``), is SQL text rather than Peewee's query
builder, the fast path's exception to issue 19 (``guard.manage`` reads the same columns through
the query builder, and ``policy.policy_from_row`` turns either's rows into policies).
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import IO, Any, NamedTuple

from agent_replay.paths import DB_NAME, redaction_on, resolve_dir
from agent_replay.services.guard.decide import Evaluation, evaluate, failure, gone, undecidable
from agent_replay.services.guard.marker import MarkerError, remembered
from agent_replay.services.guard.match import StepText
from agent_replay.services.guard.policy import POLICY_COLUMNS, Policy, policy_from_row
from agent_replay.services.hook import inbox
from agent_replay.services.hook.harness import HARNESS_LABELS, HARNESSES, detect, norm_event
from agent_replay.store.schema import SCHEMA_VERSION

PRE_TOOL_EVENTS = frozenset({"PreToolUse", "BeforeTool"})
"""The events a tool call is decided on (Claude Code/Codex CLI, Gemini CLI)."""
BLOCK_EXIT = 2
"""The exit code of a block under ``--plain`` (every harness reads 2 as "block")."""


class Answer(NamedTuple):
    """What the hook prints and returns for one decision."""

    stdout: str
    stderr: str
    exit_code: int
    decision: str
    """What the harness was told: ``deny``, ``ask`` or ``allow``."""

    def emit(self, out: IO[str], err: IO[str]) -> int:
        """Write the answer and return the exit code."""
        if self.stdout:
            out.write(self.stdout)
            out.flush()
        if self.stderr:
            err.write(self.stderr)
            err.flush()
        return self.exit_code


# --- what is being decided ---------------------------------------------------------------

MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
"""A larger payload is not parsed: a pre-tool one is refused (closed) at once."""
SNIFF_BYTES = 64 * 1024
"""How much of a payload that cannot be parsed is scanned for its top-level fields (the
harnesses write the event name and transcript path before the tool input)."""
GUARD_BUSY_MS = 3000
"""How long deciding waits for a locked store before failing closed (well under every
harness's hook timeout; a WAL store never makes readers wait on writers)."""


_PRE_NORMS = frozenset({"pretooluse", "beforetool", "pretool", "beforetooluse"})
_RESULT_KEYS = ("tool_response", "tool_output", "tool_result", "tool_error", "error")


def is_pre_tool(payload: Any) -> bool:
    """Whether ``--enforce`` decides this payload: a pre-tool event (``PreToolUse``,
    ``BeforeTool``, however spelled), or any payload naming a tool call (``tool_name`` or
    ``tool_input``) whose event name is missing or unknown. A post-tool event (an event name
    starting with Post/After, or a payload carrying the call's result) is never decided:
    post-tool events never block."""
    if not isinstance(payload, dict):
        return False
    norm = norm_event(payload.get("hook_event_name"))
    if norm in _PRE_NORMS:
        return True
    if "tool_name" not in payload and "tool_input" not in payload:
        return False
    if norm.startswith(("post", "after")) or any(k in payload for k in _RESULT_KEYS):
        return False
    return norm not in _OTHER_NORMS


_OTHER_NORMS = frozenset(
    {
        "userpromptsubmit",
        "sessionstart",
        "sessionend",
        "stop",
        "subagentstart",
        "subagentstop",
        "notification",
        "precompact",
        "precompress",
        "beforeagent",
        "beforemodel",
        "beforetoolselection",
        "permissionrequest",
        "instructionsloaded",
        "messagedisplay",
    }
)
"""Events that carry tool fields but are not the call's attempt (never decided)."""


class Incoming(NamedTuple):
    """A payload as read under ``--enforce``: what it is and whether it can be decided."""

    text: str
    """The payload as text (undecodable bytes replaced), for the capture."""
    payload: dict[str, Any] | None
    """The parsed object; for a payload that cannot be parsed, its top-level string fields
    as far as they could be scanned."""
    problem: str | None
    """Why the payload cannot be decided (``None``: it parsed)."""
    guarded: bool
    """Enforcement decides it (a pre-tool event or an unnamed tool call)."""
    harness: str
    """Which harness's reply format answers it."""


def read_payload(raw: bytes | str, dialect: str = "auto") -> Incoming:
    """Read a payload for enforcement without ever raising: size, encoding, nesting depth and
    shape problems become ``problem`` (a guarded payload with a problem is refused, closed).

    A payload that cannot be parsed is classified by its top-level fields, scanned from its
    first ``SNIFF_BYTES`` without recursion; when even that leaves its kind unknown, it is
    guarded (fail closed).
    """
    problem: str | None = None
    if isinstance(raw, bytes):
        size = len(raw)
        if size > MAX_PAYLOAD_BYTES:
            problem = f"the payload is {size} bytes, over the {MAX_PAYLOAD_BYTES}-byte limit"
            text = raw[:SNIFF_BYTES].decode("utf-8", errors="replace")
        else:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                problem = f"the payload is not valid UTF-8 ({exc.reason} at byte {exc.start})"
                text = raw.decode("utf-8", errors="replace")
    else:
        text = raw
        if len(text) > MAX_PAYLOAD_BYTES:
            problem = f"the payload is {len(text)} characters, over the limit"
    payload: Any = None
    if problem is None:
        try:
            payload = json.loads(text)
        except RecursionError:
            problem = "the payload is nested too deeply to read"
        except ValueError as exc:
            problem = f"the payload is not valid JSON ({exc})"
        else:
            if not isinstance(payload, dict):
                problem = f"the payload is a JSON {type(payload).__name__}, not an object"
                payload = None
    if payload is None:
        payload = sniff(text[:SNIFF_BYTES])
        guarded = is_pre_tool(payload) or not (
            _known_other(payload) or any(k in payload for k in _RESULT_KEYS)
        )
    else:
        guarded = is_pre_tool(payload)
    try:
        harness = harness_of(payload, dialect)
    except Exception:  # noqa: BLE001 - an odd shape: the forced dialect or Claude's format
        harness = dialect if dialect in HARNESSES else "claude"
    return Incoming(text, payload if problem is None else None, problem, guarded, harness)


def _known_other(fields: dict[str, Any]) -> bool:
    """A scanned payload that names an event this hook never decides."""
    norm = norm_event(fields.get("hook_event_name"))
    return bool(norm) and (norm.startswith(("post", "after")) or norm in _OTHER_NORMS)


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]')


def sniff(text: str) -> dict[str, Any]:
    """The top-level fields of a JSON object's text, as far as they can be scanned: string
    values as strings, every other value as ``None``. Iterative (no recursion, any depth)."""
    fields: dict[str, Any] = {}
    depth = 0
    key: str | None = None
    expect_value = False
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "{[":
            if depth == 1 and expect_value and key is not None:
                fields[key] = None
            depth += 1
            expect_value = False
        elif token in "}]":
            depth -= 1
        elif token == ":":
            expect_value = depth == 1
        elif token == ",":
            key, expect_value = (None if depth == 1 else key), False
        elif depth == 1:
            try:
                value = json.loads(token)
            except ValueError:
                value = None
            if expect_value and key is not None:
                fields[key] = value
                expect_value = False
            elif key is None and isinstance(value, str):
                key = value
    return fields


def harness_of(payload: dict[str, Any], dialect: str = "auto") -> str:
    """Which harness to answer: ``--dialect`` when given, else detected from the payload
    (``harness.detect``, without the capture's store lookup: a pre-tool payload always
    carries enough)."""
    return detect(payload, forced=dialect)


def proposed_step(payload: dict[str, Any]) -> StepText:
    """The proposed call as a step: a ``tool_call`` named after the tool, with its input."""
    name = payload.get("tool_name")
    return StepText("tool_call", name if isinstance(name, str) else "", payload.get("tool_input"))


# --- reading the policies ------------------------------------------------------------------


ENABLED_POLICIES = (
    f"SELECT {', '.join(POLICY_COLUMNS)} FROM policies WHERE enabled <> 0 "
    "ORDER BY priority DESC, name"
)
"""The enabled policies as ``policy_from_row`` reads them, in the order ``guard list`` shows
them (``manage.list_policies`` builds the same query with Peewee, which the hook can't import:
SQL text here is the fast path's exception to issue 19's query builder)."""


def load_policies(conn: sqlite3.Connection) -> list[Policy]:
    """The enabled policies, highest priority first (stdlib connection)."""
    rows = conn.execute(ENABLED_POLICIES).fetchall()
    return [policy_from_row(tuple(row)) for row in rows]


def decide_payload(
    conn: sqlite3.Connection, payload: dict[str, Any], store_dir: Path | None = None
) -> Evaluation:
    """Evaluate a pre-tool payload against the store's enabled policies; fails closed (also
    when ``store_dir``'s policies marker says enabled policies existed and none are left)."""
    try:
        policies = load_policies(conn)
    except sqlite3.Error as exc:
        return failure(f"{type(exc).__name__}: {exc}")
    return _checked(policies, proposed_step(payload), store_dir)


def _checked(policies: list[Policy], step: StepText, store_dir: Path | None) -> Evaluation:
    """``evaluate``, unless the policies vanished: none enabled, though the marker says the
    store had some."""
    if not policies and store_dir is not None:
        try:
            count = remembered(store_dir)
        except MarkerError as exc:
            return failure(str(exc))
        if count:
            return gone(count, "the store has no enabled policies now")
    return evaluate(policies, step)


# --- answering -----------------------------------------------------------------------------


def message(evaluation: Evaluation, harness: str, *, plain: bool = False) -> str:
    """The text shown for a decision (to the model, the user, or on stderr)."""
    reason = evaluation.reason
    action = evaluation.action
    if action == "deny":
        return f"Blocked by agent-replay guard: {reason}"
    if action == "require_review":
        if harness == "claude" and not plain:
            return f"Review required by agent-replay guard: {reason}"
        who = "this hook" if plain else f"{HARNESS_LABELS[harness]} hooks"
        return (
            f"Review required by agent-replay guard, and {who} cannot ask for approval, "
            f"so the call is blocked: {reason}"
        )
    if action == "warn":
        return f"agent-replay guard warning: {reason}"
    return ""


def answer(evaluation: Evaluation, harness: str, *, plain: bool = False) -> Answer:
    """The hook's answer to a decision, in the harness's dialect (or ``plain``)."""
    action = evaluation.action if evaluation.matched else "allow"
    text = message(evaluation, harness, plain=plain)
    if action == "allow":
        return Answer("", "", 0, "allow")
    if action == "warn":
        if plain:
            return Answer("", text + "\n", 0, "allow")
        return Answer(_json({"systemMessage": text}), "", 0, "allow")
    # deny or require_review
    if plain:
        return Answer("", text + "\n", BLOCK_EXIT, "deny")
    if harness == "gemini":
        return Answer(_json({"decision": "deny", "reason": text}), "", 0, "deny")
    decision = "ask" if action == "require_review" and harness == "claude" else "deny"
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": text,
        }
    }
    return Answer(_json(output), "", 0, decision)


def guard_record(evaluation: Evaluation, reply: Answer, harness: str) -> dict[str, Any]:
    """What the queued row carries for the drainer to record as a guard_check step."""
    return {"evaluation": evaluation.to_json(), "decision": reply.decision, "harness": harness}


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value) + "\n"


# --- the hook's fast path ------------------------------------------------------------------


def run_fast(
    options: dict[str, Any],
    stdin: Any = None,
    *,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int | None:
    """One ``hook --enforce`` invocation; ``None`` defers to the full CLI.

    Deferred, like capture: ``--sync``, and a store that is missing or not migrated to this
    build (the full path creates or migrates it, then evaluates the same way) unless the
    policies marker says it had policies. Anything else is answered here: the payload queued
    (one connection for the version check, the policies and the insert), a drainer started,
    the answer printed. Nothing raised here escapes: a guarded payload is then refused, closed.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    options = dict(options)
    options.pop("enforce", None)
    plain = bool(options.pop("plain", False))
    dialect = str(options.get("dialect") or "auto")
    incoming: Incoming | None = None
    try:
        stream = stdin if stdin is not None else sys.stdin.buffer
        incoming = read_payload(stream.read(), dialect)
        return _run_fast(incoming, options, plain=plain, out=out, err=err)
    except Exception as exc:  # noqa: BLE001 - whatever failed, a tool call is refused, closed
        if incoming is not None and not incoming.guarded:
            return 0
        harness = incoming.harness if incoming else (dialect if dialect in HARNESSES else "claude")
        reason = undecidable(f"{type(exc).__name__}: {exc}")
        return answer(reason, harness, plain=plain).emit(out, err)


def _run_fast(
    incoming: Incoming, options: dict[str, Any], *, plain: bool, out: IO[str], err: IO[str]
) -> int | None:
    text, guarded, harness = incoming.text, incoming.guarded, incoming.harness
    try:
        store_dir: Path | None = resolve_dir(options.pop("dir", None))
    except OSError as exc:  # the working directory was deleted under the harness
        if not guarded:
            return 0
        return answer(failure(f"no store directory: {exc}"), harness, plain=plain).emit(out, err)
    assert store_dir is not None
    options["redact"] = redaction_on(store_dir, not options.get("redact", True))
    if not text.strip():
        inbox.log_error(store_dir, "empty payload on stdin; nothing recorded")
        return 0
    if guarded and incoming.problem is not None:
        inbox.log_error(store_dir, f"guard refused a payload: {incoming.problem}")
        return answer(undecidable(incoming.problem), harness, plain=plain).emit(out, err)
    if not guarded and incoming.problem is not None:
        return 0  # not a tool call, and nothing to record from it (capture logs the same)
    db_file = store_dir / DB_NAME
    if guarded:
        vanished = vanished_policies(store_dir, db_file)
        if vanished is not None:
            inbox.log_error(store_dir, f"guard refused a call: {vanished.reason}")
            return answer(vanished, harness, plain=plain).emit(out, err)
    if options["sync"] or not db_file.exists():
        return _defer(text)
    conn: sqlite3.Connection | None = None
    evaluation: Evaluation | None = None
    readable = False
    try:
        conn = connect_for_guard(db_file)
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) != SCHEMA_VERSION:
            conn.close()
            return _defer(text)
        readable = True
        if guarded:
            assert incoming.payload is not None
            evaluation = decide_payload(conn, incoming.payload, store_dir)
            readable = not evaluation.failed
    except Exception as exc:  # noqa: BLE001 - a store we cannot read fails closed
        log_traceback(store_dir)
        if guarded:
            evaluation = failure(f"{type(exc).__name__}: {exc}")
    reply = answer(evaluation, harness, plain=plain) if evaluation is not None else None
    queued = dict(options)
    if evaluation is not None and reply is not None and evaluation.matched:
        queued["guard"] = guard_record(evaluation, reply, harness)
    try:
        if conn is None or not readable:  # never wait on a store that could not be read
            raise sqlite3.OperationalError("the store could not be read; payload not queued")
        conn.execute(f"PRAGMA busy_timeout = {inbox.BUSY_TIMEOUT_MS}")
        inbox.insert(conn, text, queued)
        inbox.ensure_drainer(store_dir)
    except Exception as exc:  # noqa: BLE001 - capture never changes the answer
        inbox.log_error(store_dir, f"{type(exc).__name__}: {exc}")
    finally:
        if conn is not None:
            conn.close()
    if reply is None:
        return 0
    return reply.emit(out, err)


def connect_for_guard(db_file: Path) -> sqlite3.Connection:
    """A stdlib connection that waits at most ``GUARD_BUSY_MS`` for a locked store."""
    conn = sqlite3.connect(str(db_file), timeout=GUARD_BUSY_MS / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {GUARD_BUSY_MS}")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def vanished_policies(store_dir: Path, db_file: Path) -> Evaluation | None:
    """The refusal when the policies marker says the store had enabled policies and its
    database file is now missing or empty (``None``: nothing vanished, as far as the file
    shows; an unreadable marker refuses too)."""
    try:
        count = remembered(store_dir)
    except MarkerError as exc:
        return failure(str(exc))
    if not count:
        return None
    try:
        size = db_file.stat().st_size
    except FileNotFoundError:
        return gone(count, f"{db_file.name} is missing")
    except OSError as exc:
        return failure(f"cannot read {db_file.name}: {exc}")
    if size == 0:
        return gone(count, f"{db_file.name} is empty (0 bytes)")
    return None


def evaluate_file(db_file: Path, step: StepText) -> Evaluation:
    """Decide a step against the enabled policies in ``db_file`` (the hook's full path and
    ``guard check``); a store that cannot be read fails closed, a missing one has none
    unless the policies marker says it had some."""
    vanished = vanished_policies(db_file.parent, db_file)
    if vanished is not None:
        return vanished
    if not db_file.exists():
        return evaluate([], step)
    try:
        conn = connect_for_guard(db_file)
        try:
            policies = load_policies(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return failure(f"{type(exc).__name__}: {exc}")
    return _checked(policies, step, db_file.parent)


def log_traceback(store_dir: Path) -> None:
    """The current traceback into the store's log (a failure that made the hook fail
    closed must be diagnosable)."""
    import traceback  # deferred: failure paths only

    inbox.log_error(store_dir, "guard failed:\n" + traceback.format_exc().rstrip())


def _defer(text: str) -> int | None:
    """Hand the payload we already read to the full CLI, which reads stdin again."""
    sys.stdin = io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8")
    return None
