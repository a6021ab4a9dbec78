"""Harness hook payloads -> trace steps (Claude Code, Codex CLI, Gemini CLI).

Called by the drainer for each queued payload, in arrival order, inside a savepoint.
Stateless: a payload finds its trace by the harness's ``session_id``.
"""

from __future__ import annotations

from typing import Any

from agent_replay.clock import Clock
from agent_replay.store.db import Store


def apply_hook_payload(
    store: Store, payload: dict[str, Any], options: dict[str, Any], clock: Clock
) -> None:
    """Record one hook payload.

    Args:
        store: the store (inside the drainer's transaction).
        payload: exactly what the harness wrote to the hook's stdin.
        options: ``dialect`` (auto|claude|codex|gemini), ``no_input``, ``redact``.
        clock: the time source for events without timestamps.
    """
    raise NotImplementedError("hook dialects are not implemented yet")
