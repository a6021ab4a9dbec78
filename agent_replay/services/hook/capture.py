"""Harness hook payloads -> trace steps (Claude Code, Codex CLI, Gemini CLI).

Called by the drainer for each queued payload, in arrival order, inside a savepoint.
Stateless: a payload finds its trace by the harness's ``session_id`` (the most recent trace
with that session id and this dialect's ``source_format``, or the one ``agent-replay proxy``
opened for the same session, so hook and proxy make one trace), and a tool result finds its call
by the harness's call id (the open step started with it). Everything is written through
``TraceRecorder`` in lenient, redacting mode.

The dialect comes from ``options["dialect"]`` or is detected from the payload
(``detect_dialect``: ``harness.detect`` with this store's traces to ask); each dialect module
(``dialects.claude``, ``dialects.codex``, ``dialects.gemini``) maps its events onto the
``session.Hook`` helpers. Events a dialect does not know are skipped, never an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_replay.clock import Clock
from agent_replay.services.capture import transcript_follow
from agent_replay.services.hook.dialects import claude, codex, gemini
from agent_replay.services.hook.harness import DIALECTS, detect
from agent_replay.services.hook.session import Hook, event_time
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store
from agent_replay.store.models import TraceRow
from agent_replay.store.statements import Statement, arg

APPLY: dict[str, Callable[[Hook], None]] = {
    "claude": claude.apply,
    "codex": codex.apply,
    "gemini": gemini.apply,
}


def apply_hook_payload(
    store: Store, payload: dict[str, Any], options: dict[str, Any], clock: Clock
) -> None:
    """Record one hook payload.

    Args:
        store: the store (inside the drainer's transaction).
        payload: exactly what the harness wrote to the hook's stdin.
        options: ``dialect`` (auto|claude|codex|gemini), ``no_input``, ``redact``, and
            ``received_ms`` (when the hook queued the payload; the event's time for harnesses
            whose payloads carry none).
        clock: the time source for events without timestamps.

    Raises:
        ValueError: the payload is not a JSON object or has no ``session_id`` (the drainer
            logs it and moves on).
    """
    if not isinstance(payload, dict):
        raise ValueError(f"a hook payload must be a JSON object (got {type(payload).__name__})")
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("the hook payload has no session_id; nothing to correlate it with")
    key = detect_dialect(store, payload, str(options.get("dialect") or "auto"))
    hook = Hook(
        store=store,
        rec=TraceRecorder(
            store, lenient=True, redact=bool(options.get("redact", True)), clock=clock
        ),
        payload=payload,
        dialect=DIALECTS[key],
        session_id=session_id,
        event=str(payload.get("hook_event_name") or ""),
        at=event_time(payload, options, clock),
        no_input=bool(options.get("no_input")),
    )
    # The session file the payload names holds what the payloads lack (model, tokens, text):
    # read what it gained, before the event when the harness wrote it first.
    when = transcript_follow.phase(hook)
    if when == "before":
        transcript_follow.follow(hook)
    APPLY[key](hook)
    if when == "after":
        transcript_follow.follow(hook)


def detect_dialect(store: Store, payload: dict[str, Any], forced: str = "auto") -> str:
    """Which harness wrote this payload (``harness.detect``), asking the store for the
    dialect of a trace this session already has when the payload's own clues are weak."""
    return detect(payload, forced=forced, known=lambda: _known_dialect(store, payload))


_BY_FORMAT = {f: d.key for d in DIALECTS.values() for f in d.formats}
"""The dialect of each ``source_format`` a hook (or the proxy beside it) gives a trace."""
_KNOWN = Statement(
    lambda: (
        TraceRow.select(TraceRow.source_format)
        .where(
            TraceRow.session_id == arg(), TraceRow.source_format.in_([arg() for _ in _BY_FORMAT])
        )
        .order_by(TraceRow.started_at_ms.desc())
        .limit(arg())
    )
)
"""The newest hook (or proxy) trace's format of a session: (session_id, *formats, 1)."""


def _known_dialect(store: Store, payload: dict[str, Any]) -> str | None:
    """The dialect of a trace this session already has, if any."""
    session_id = payload.get("session_id")
    if not isinstance(session_id, str):
        return None
    row = _KNOWN.run(store, (session_id, *_BY_FORMAT, 1)).fetchone()
    return _BY_FORMAT[row[0]] if row else None
