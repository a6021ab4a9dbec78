"""Which harness a hook payload comes from, and how each harness's traces are named.

The one detection of a payload's harness (``detect``), used by the capture (which dialect
records it, ``hook.capture``), by ``hook --enforce`` (which reply format answers it,
``hook.enforce``) and by the drainer's guard step (``hook.guard_check``). They used to keep
two copies that drifted: enforce knew Codex's ``turn_id`` and spellings of the event names,
the capture the event names only one harness sends; both clue sets are here now.

A leaf: stdlib only and importing nothing of the package, because the hook's fast path
(``hook --enforce``) imports it within the hook's start-up budget. No ``dataclasses`` either
(~5 ms to import), nor ``typing.NamedTuple`` (building one costs the hook more than this
whole module): ``Dialect`` is a plain class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

HARNESSES = ("claude", "codex", "gemini")
"""The dialect keys (``--dialect``), also the harness names of the guard's answers."""
HARNESS_LABELS = {"claude": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}


class Dialect:
    """How one harness's traces are named and marked in the store."""

    __slots__ = ("key", "agent_name", "source_format", "proxy_format")

    def __init__(
        self, key: str, agent_name: str, source_format: str, proxy_format: str = ""
    ) -> None:
        self.key = key
        self.agent_name = agent_name
        self.source_format = source_format
        self.proxy_format = proxy_format
        """The ``source_format`` of a trace ``agent-replay proxy`` opened for this harness's
        session (the hook records into it too)."""

    def __repr__(self) -> str:
        return f"Dialect({self.key!r})"

    @property
    def formats(self) -> tuple[str, ...]:
        """The traces a session of this harness may already have."""
        return (
            (self.source_format, self.proxy_format) if self.proxy_format else (self.source_format,)
        )


DIALECTS: dict[str, Dialect] = {
    "claude": Dialect("claude", "claude-code", "claude-code-hook", "claude-code-proxy"),
    "codex": Dialect("codex", "codex", "codex-hook", "codex-proxy"),
    "gemini": Dialect("gemini", "gemini-cli", "gemini-cli-hook"),
}


def norm_event(event: Any) -> str:
    """An event name with case and separators dropped (``PreToolUse``, ``pre_tool_use`` and
    ``pre-tool-use`` are one event); ``""`` for anything but a string."""
    return "".join(c for c in event.lower() if c.isalpha()) if isinstance(event, str) else ""


# Event names only one harness sends (the others share Claude Code's names), normalised.
_GEMINI_EVENTS = frozenset(
    norm_event(name)
    for name in (
        "BeforeAgent",
        "AfterAgent",
        "BeforeModel",
        "AfterModel",
        "BeforeToolSelection",
        "BeforeTool",
        "AfterTool",
        "PreCompress",
    )
)
_CLAUDE_EVENTS = frozenset(
    norm_event(name)
    for name in (
        "PostToolUseFailure",
        "PostToolBatch",
        "StopFailure",
        "MessageDisplay",
        "InstructionsLoaded",
        "UserPromptExpansion",
        "PreModelSwitch",
        "PostModelSwitch",
        "PermissionDenied",
        "Setup",
        "TeammateIdle",
        "TaskCreated",
        "TaskCompleted",
        "Elicitation",
        "ElicitationResult",
        "ConfigChange",
        "CwdChanged",
        "FileChanged",
        "DirectoryAdded",
        "PreSkillShellCommand",
    )
)


def detect(
    payload: Mapping[str, Any],
    *,
    forced: str = "auto",
    known: Callable[[], str | None] | None = None,
) -> str:
    """Which harness wrote this payload: ``claude``, ``codex`` or ``gemini``.

    ``forced`` (``--dialect``) wins when it names one. Else, in order: an event name only one
    harness uses (however spelled); the transcript's location (each harness keeps it under
    its own home folder); ``known()``, the dialect of the trace this session already has
    (the capture looks it up in the store; enforce has none to ask, and a pre-tool payload
    always carries enough); the fields each harness adds (Gemini's ``timestamp``, Claude
    Code's ``prompt_id``, Codex's ``turn_id``, ``call_`` ids and ``model``). Claude Code
    when nothing tells.
    """
    if forced in HARNESSES:
        return forced
    event = norm_event(payload.get("hook_event_name"))
    if event in _GEMINI_EVENTS:
        return "gemini"
    if event in _CLAUDE_EVENTS:
        return "claude"
    path = payload.get("transcript_path")
    if isinstance(path, str):
        if "/.gemini/" in path:
            return "gemini"
        if "/.codex/" in path or path.rsplit("/", 1)[-1].startswith("rollout-"):
            return "codex"
        if "/.claude/" in path:
            return "claude"
    found = known() if known is not None else None
    if found is not None:
        return found
    if isinstance(payload.get("timestamp"), str):
        return "gemini"
    if "prompt_id" in payload or "agent_transcript_path" in payload:
        return "claude"
    call_id = payload.get("tool_use_id")
    if "turn_id" in payload or (isinstance(call_id, str) and call_id.startswith("call_")):
        return "codex"
    if "model" in payload:  # Codex adds the model to every payload but SessionEnd
        return "codex"
    return "claude"
