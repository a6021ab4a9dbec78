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
pydantic. ``re2`` is imported only when an enabled policy has a ``name_regex``.
"""

from __future__ import annotations

import io
import json
import sqlite3
import sys
from pathlib import Path
from typing import IO, Any, NamedTuple

from agent_replay.services.guard.decide import Evaluation, evaluate, failure
from agent_replay.services.guard.match import StepText
from agent_replay.services.guard.policy import ORDER, POLICY_SELECT, Policy, policy_from_row

PRE_TOOL_EVENTS = frozenset({"PreToolUse", "BeforeTool"})
"""The events a tool call is decided on (Claude Code/Codex CLI, Gemini CLI)."""
HARNESSES = ("claude", "codex", "gemini")
HARNESS_LABELS = {"claude": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}
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


def is_pre_tool(payload: Any) -> bool:
    """Whether a payload is a harness's pre-tool event (the one enforcement decides)."""
    return isinstance(payload, dict) and payload.get("hook_event_name") in PRE_TOOL_EVENTS


def harness_of(payload: dict[str, Any], dialect: str = "auto") -> str:
    """Which harness to answer: ``--dialect`` when given, else detected from the payload.

    The same clues as the capture's ``hooks.detect_dialect``, without its store lookup (a
    pre-tool payload always carries enough): Gemini's event name, the transcript's location,
    then the fields only one harness adds.
    """
    if dialect in HARNESSES:
        return dialect
    if payload.get("hook_event_name") == "BeforeTool":
        return "gemini"
    path = payload.get("transcript_path")
    if isinstance(path, str):
        if "/.gemini/" in path:
            return "gemini"
        if "/.codex/" in path or path.rsplit("/", 1)[-1].startswith("rollout-"):
            return "codex"
        if "/.claude/" in path:
            return "claude"
    if isinstance(payload.get("timestamp"), str):
        return "gemini"
    if "prompt_id" in payload or "agent_transcript_path" in payload:
        return "claude"
    call_id = payload.get("tool_use_id")
    if "turn_id" in payload or (isinstance(call_id, str) and call_id.startswith("call_")):
        return "codex"
    if "model" in payload:
        return "codex"
    return "claude"


def proposed_step(payload: dict[str, Any]) -> StepText:
    """The proposed call as a step: a ``tool_call`` named after the tool, with its input."""
    name = payload.get("tool_name")
    return StepText("tool_call", name if isinstance(name, str) else "", payload.get("tool_input"))


# --- reading the policies ------------------------------------------------------------------


def load_policies(conn: sqlite3.Connection) -> list[Policy]:
    """The enabled policies, highest priority first (stdlib connection)."""
    rows = conn.execute(POLICY_SELECT + " WHERE enabled <> 0" + ORDER).fetchall()
    return [policy_from_row(tuple(row)) for row in rows]


def decide_payload(conn: sqlite3.Connection, payload: dict[str, Any]) -> Evaluation:
    """Evaluate a pre-tool payload against the store's enabled policies; fails closed."""
    try:
        policies = load_policies(conn)
    except sqlite3.Error as exc:
        return failure(f"{type(exc).__name__}: {exc}")
    return evaluate(policies, proposed_step(payload))


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
    build (the full path creates or migrates it, then evaluates the same way). Anything else
    is answered here: the payload queued (one connection for the version check, the
    policies and the insert), a drainer started, the answer printed.
    """
    from agent_replay.paths import DB_NAME, resolve_dir
    from agent_replay.services.capture import hook_inbox
    from agent_replay.store.schema import SCHEMA_VERSION

    out = out or sys.stdout
    err = err or sys.stderr
    options = dict(options)
    options.pop("enforce", None)
    plain = bool(options.pop("plain", False))
    stream = stdin if stdin is not None else sys.stdin.buffer
    raw = stream.read()
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    payload = _parse(text)
    guarded = is_pre_tool(payload)
    try:
        store_dir: Path | None = resolve_dir(options.pop("dir", None))
    except OSError as exc:  # the working directory was deleted under the harness
        if not guarded:
            return 0
        refusal = answer(failure(f"no store directory: {exc}"), harness_of(payload), plain=plain)
        return refusal.emit(out, err)
    assert store_dir is not None
    if not text.strip():
        hook_inbox.log_error(store_dir, "empty payload on stdin; nothing recorded")
        return 0
    db_file = store_dir / DB_NAME
    if options["sync"] or not db_file.exists():
        return _defer(text)
    conn: sqlite3.Connection | None = None
    evaluation: Evaluation | None = None
    try:
        conn = hook_inbox.connect(db_file)
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) != SCHEMA_VERSION:
            conn.close()
            return _defer(text)
        if guarded:
            evaluation = decide_payload(conn, payload)
    except Exception as exc:  # noqa: BLE001 - a store we cannot read fails closed
        log_traceback(store_dir)
        if guarded:
            evaluation = failure(f"{type(exc).__name__}: {exc}")
    harness = harness_of(payload, options["dialect"]) if guarded else ""
    reply = answer(evaluation, harness, plain=plain) if evaluation is not None else None
    queued = dict(options)
    if evaluation is not None and reply is not None and evaluation.matched:
        queued["guard"] = guard_record(evaluation, reply, harness)
    try:
        if conn is None:
            raise sqlite3.OperationalError("the store could not be opened")
        conn.execute(
            "INSERT INTO hook_inbox (received_ms, payload, options) VALUES (?, ?, ?)",
            (_now_ms(), text, json.dumps(queued)),
        )
        hook_inbox.ensure_drainer(store_dir)
    except Exception as exc:  # noqa: BLE001 - capture never changes the answer
        hook_inbox.log_error(store_dir, f"{type(exc).__name__}: {exc}")
    finally:
        if conn is not None:
            conn.close()
    if reply is None:
        return 0
    return reply.emit(out, err)


def evaluate_file(db_file: Path, step: StepText) -> Evaluation:
    """Decide a step against the enabled policies in ``db_file`` (the hook's full path and
    ``guard check``); a store that cannot be read fails closed, a missing one has none."""
    from agent_replay.services.capture.hook_inbox import connect

    if not db_file.exists():
        return evaluate([], step)
    try:
        conn = connect(db_file)
        try:
            policies = load_policies(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return failure(f"{type(exc).__name__}: {exc}")
    return evaluate(policies, step)


def log_traceback(store_dir: Path) -> None:
    """The current traceback into the store's log (a failure that made the hook fail
    closed must be diagnosable)."""
    import traceback

    from agent_replay.services.capture.hook_inbox import log_error

    log_error(store_dir, "guard failed:\n" + traceback.format_exc().rstrip())


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _defer(text: str) -> int | None:
    """Hand the payload we already read to the full CLI, which reads stdin again."""
    sys.stdin = io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8")
    return None


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
