"""One vocabulary: the step names and the canonical tool calls of a harness's session, the
same whichever capture path saw it (hook, stream, import, OTLP).

Steps every path names alike: a user's prompt is a ``thought`` step ``user_prompt``
(``PROMPT_STEP``; the first is the trace's input), a model call an ``llm_call`` named after its
model (``llm_call`` when no model is known), a turn's final answer an ``output`` step
``final_answer`` (``ANSWER_STEP``; the last is the trace's output).

Tool calls: the canonical name, input and refusal error of each.

The canonical form is what the harness shows its own hooks, because that is what
``hook --enforce`` decides on: a guard policy that matches a call at enforcement time then
matches the same call in every stored trace, and ``check --golden`` and ``diff`` compare like
with like. The harness's own name for the tool stays in the step's ``metadata.original_name``
when it differs.

Codex CLI is the harness whose paths disagree:

- shell: the hook says ``Bash`` ``{"command": ...}``; the rollout says ``exec_command``
  ``{"cmd": ..., "workdir": ...}`` (older ones ``shell`` with an argv list); ``codex exec
  --json`` says ``command_execution`` ``/bin/bash -lc '...'``. Canonical: ``Bash``
  ``{"command": "<command line>"}``.
- patches: the hook says ``apply_patch`` ``{"command": "<patch>"}``; the rollout gives the
  patch as a bare string; ``codex exec --json`` a ``file_change``. Canonical: ``apply_patch``
  ``{"command": "<patch>"}``.
- MCP tools: ``mcp__<server>__<tool>`` (``codex exec --json`` says ``<server>.<tool>``).

Claude Code (``Bash``, ``Read``, ``Write``, ``Agent``, ...) and Gemini CLI
(``run_shell_command``, ``read_file``, ...) use one name and input on every path: unchanged.

Shell calls carry only the command line as input (``bash -lc`` unwrapped, argv lists joined);
the other arguments the model gave (``workdir``, ``timeout_ms``, ...) go to
``metadata.tool_options``. ``codex exec --json`` does not carry the patch text: its
``apply_patch`` input is the list of changed files (``{"changes": [...]}``).

Refusals: a call a hook blocked or a permission check refused carries, as its ``error``, the
reason the hook gave, on every path; the harness's wrapper around it ("PreToolUse:Write hook
error: ...", "Command blocked by PreToolUse hook: ... Command: ...", "Tool execution blocked:
...") is kept in ``metadata.harness_error``.

Stdlib only, no I/O: every capture path imports it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

PROMPT_STEP = "user_prompt"
"""A user's prompt: a ``thought`` step of this name, on every path."""
ANSWER_STEP = "final_answer"
"""A turn's final answer: an ``output`` step of this name, on every path."""
MODEL_STEP = "llm_call"
"""A model call's name when its model is unknown (a known one is the call's name)."""


RENAMED = {
    ("output", "assistant_message"): ANSWER_STEP,
    ("output", "final answer"): ANSWER_STEP,
}
"""Earlier names of a step, by (step type, name): the hook path called a turn's answer
``assistant_message`` and the harnesses' streams ``final answer``. A golden file recorded
then reads them as today's name, so ``check`` does not report the rename as a regression."""


def model_step_name(model: Any) -> str:
    """What every path names a model call: its model, else ``MODEL_STEP``."""
    return str(model) if model else MODEL_STEP


CLAUDE = "claude"
CODEX = "codex"
GEMINI = "gemini"

CODEX_SHELL = "Bash"
"""Codex CLI's shell tool, as its hooks name it (Claude Code's name for its own)."""
CODEX_SHELL_TOOLS = frozenset(
    {
        "exec_command",
        "shell",
        "shell_command",
        "local_shell",
        "local_shell_call",
        "container.exec",
        "command_execution",
        "unified_exec",
        CODEX_SHELL,
    }
)
"""Every name Codex CLI's shell tool goes by (model tools, rollout items, stream items)."""
PATCH_TOOL = "apply_patch"
SHELL_PROGRAMS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish", "pwsh", "powershell"})

_CLAUDE_HOOK_ERROR = re.compile(
    r"^[A-Za-z]+:[^\s:]+ hook (?:blocking )?error(?: from command: \"[^\"]*\")?: (?P<reason>.+)$",
    re.DOTALL,
)
_CODEX_BLOCKED = re.compile(r"^Command blocked by [A-Za-z]+ hook: (?P<reason>.+)$", re.DOTALL)
_CODEX_COMMAND = ". Command: "
_GEMINI_BLOCKED = re.compile(r"^Tool execution (?:blocked|denied): (?P<reason>.+)$", re.DOTALL)


@dataclass
class Tool:
    """A tool call in the canonical vocabulary."""

    name: str
    input: Any
    metadata: dict[str, Any] = field(default_factory=dict)
    """``original_name`` (when renamed) and ``tool_options`` (shell arguments besides the
    command line), for the step's metadata."""


def canonical_tool(harness: str, name: str | None, arguments: Any) -> Tool:
    """The canonical form of one tool call.

    Args:
        harness: ``claude``, ``codex`` or ``gemini`` (anything else is left as it is).
        name: the tool's name as this capture path saw it.
        arguments: its input as this capture path saw it.
    """
    tool_name = name or "tool"
    if harness != CODEX:
        return Tool(tool_name, arguments)
    meta: dict[str, Any] = {}
    if tool_name in CODEX_SHELL_TOOLS:
        command, options = shell_input(arguments)
        if options:
            meta["tool_options"] = options
        if tool_name != CODEX_SHELL:
            meta["original_name"] = tool_name
        return Tool(CODEX_SHELL, {"command": command}, meta)
    if tool_name == PATCH_TOOL:
        return Tool(PATCH_TOOL, patch_input(arguments))
    return Tool(tool_name, arguments)


def mcp_name(server: Any, tool: Any) -> str:
    """An MCP tool's name as the harnesses' hooks give it: ``mcp__<server>__<tool>``."""
    if not server:
        return str(tool or "tool")
    return f"mcp__{server}__{tool}"


def shell_input(arguments: Any) -> tuple[Any, dict[str, Any]]:
    """``(command line, other arguments)`` of a shell call, from the forms Codex writes: a
    string, an argv list (``["bash", "-lc", "ls"]``), or an object with ``cmd``/``command``."""
    if isinstance(arguments, str):
        return command_line(arguments), {}
    if isinstance(arguments, list):
        return command_line(arguments), {}
    if not isinstance(arguments, dict):
        return arguments, {}
    rest = {k: v for k, v in arguments.items() if k not in ("cmd", "command")}
    return command_line(arguments.get("cmd", arguments.get("command"))), rest


def command_line(command: Any) -> Any:
    """The command a shell runs: ``["bash", "-lc", "ls -la"]`` and ``/bin/bash -lc 'ls -la'``
    -> ``ls -la``; other argv lists are shell-quoted; other strings are kept as they are."""
    if isinstance(command, str):
        if " -lc " not in command and " -c " not in command:
            return command
        try:
            words = shlex.split(command)
        except ValueError:
            return command
        unwrapped = _unwrap(words)
        return unwrapped if unwrapped is not None else command
    if isinstance(command, list) and all(isinstance(part, str) for part in command):
        unwrapped = _unwrap(command)
        return unwrapped if unwrapped is not None else shlex.join(command)
    return command


def _unwrap(argv: list[str]) -> str | None:
    if len(argv) == 3 and argv[1] in ("-lc", "-c") and PurePath(argv[0]).name in SHELL_PROGRAMS:
        return argv[2]
    return None


def patch_input(arguments: Any) -> Any:
    """``apply_patch``'s input as its hook gives it: ``{"command": "<patch>"}``."""
    if isinstance(arguments, str):
        return {"command": arguments}
    if isinstance(arguments, dict):
        for key in ("command", "input", "patch"):
            if isinstance(arguments.get(key), str):
                return {"command": arguments[key]}
    return arguments


def refusal(harness: str, text: str | None) -> tuple[str, dict[str, Any]] | None:
    """``(reason, metadata)`` when a tool error is the harness's report of a hook block:
    the reason the hook gave, and ``harness_error`` (the harness's whole text) for metadata.
    ``None`` for any other error."""
    if not text:
        return None
    stripped = text.strip()
    reason: str | None = None
    if harness == CLAUDE:
        match = _CLAUDE_HOOK_ERROR.match(stripped)
        reason = match.group("reason") if match else None
    elif harness == CODEX:
        match = _CODEX_BLOCKED.match(stripped)
        if match:
            reason = match.group("reason").split(_CODEX_COMMAND, 1)[0]
    elif harness == GEMINI:
        match = _GEMINI_BLOCKED.match(stripped)
        reason = match.group("reason") if match else None
    if not reason or not reason.strip():
        return None
    return reason.strip(), {"harness_error": text, "blocked_by_hook": True}


def tool_error(harness: str, text: str | None) -> tuple[str | None, dict[str, Any]]:
    """A failed call's ``(error, metadata)``: the hook's reason for a blocked call, else the
    text as it is."""
    found = refusal(harness, text)
    if found is not None:
        return found
    return text, {}
