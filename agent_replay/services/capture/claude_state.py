"""The state a Claude Code transcript import keeps while it streams a file: the API reply being
merged (``_Message``), each conversation, main or subagent (``_Context``), and the tool calls
waiting for their results (``_Call``). ``claude_transcript._Session`` holds them;
``transcript_follow`` saves them between hook payloads under their class names, so renaming
one strands every session being followed at the upgrade.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Message:
    """The API reply being merged (its lines share ``message.id``)."""

    id: str
    step: int
    started_at: str | None
    model: str | None = None
    texts: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    tool_uses: int = 0
    stop_reason: str | None = None
    request_id: str | None = None
    ended_at: str | None = None


@dataclass
class _Context:
    """One conversation: the main session, or a subagent nested under the step that spawned
    it."""

    parent_step: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    message: _Message | None = None
    prompt: str | None = None
    """The prompt the next reply answers (its ``llm_call`` input)."""
    request_at: str | None = None
    """When the next request was sent (the prompt, the tool results, or ``api-request``)."""
    last_tool_step: int | None = None
    answer: tuple[str, int, str | None] | None = None
    """The latest reply without tool calls: (text, its step, when) — the turn's answer."""
    output: str | None = None
    awaiting_reply: bool = False
    interrupted: bool = False
    fatal: str | None = None
    tokens: int = 0
    """The tokens of this conversation's replies (a subagent's own total)."""
    llm_steps: list[int] = field(default_factory=list)
    """This conversation's ``llm_call`` steps (a subagent's cost is theirs summed)."""


@dataclass
class _Call:
    """A tool call waiting for its result."""

    step: int
    name: str
    started_at: str | None
    context: _Context
