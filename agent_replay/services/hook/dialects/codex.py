"""Codex CLI hook events -> steps.

Codex sends Claude Code's event names with the same fields (``session_id``, ``tool_use_id``,
``tool_input``, ``tool_response``, ``last_assistant_message``, plus ``model`` and
``turn_id``), so ``claude`` records them. The difference is failure: Codex has no
failure event, and its PostToolUse for a command that exited non-zero carries only the
command's output. A tool step gets an error when the exit code can be found:

1. in the response itself (``Exit code: N`` / ``Process exited with code N`` text, or an
   ``exit_code`` field), else
2. in the session's rollout file (the payload's ``transcript_path``), which Codex writes
   before it runs the hook: the ``CommandExecution`` item with this call id has the
   ``exit_code``. Only the file's tail is read.

When neither is available (the rollout is not readable by the drainer) the step is recorded
without an error.

A call a hook blocked never gets a PostToolUse: at Stop it is closed with the reason its
rollout output gives ("Command blocked by PreToolUse hook: <reason>. Command: ..." ->
``<reason>``, as ``codex_rollout`` records it), else ``NO_RESULT``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.hook.dialects import claude
from agent_replay.services.hook.session import Hook

ROLLOUT_TAIL_BYTES = 4 * 1024 * 1024
_EXIT_TEXT = re.compile(
    r"^(?:exit code:\s*|process exited with code\s+)(-?\d+)\s*$", re.IGNORECASE | re.MULTILINE
)


def apply(hook: Hook) -> None:
    """Record one Codex CLI hook payload."""
    claude.apply(hook, tool_failure=tool_failure, refused=rollout_refusal)


def rollout_refusal(hook: Hook, call_id: str) -> tuple[str, dict[str, Any]] | None:
    """A blocked call's reason, from the output its rollout records (read from the tail)."""
    path = hook.text("transcript_path")
    name = (path or "").rsplit("/", 1)[-1]
    if not path or not (name.startswith("rollout-") and name.endswith(".jsonl")):
        return None  # only ever read Codex's own session files
    for record in claude.tail_records(path, call_id):
        item = record.get("payload")
        if (
            isinstance(item, dict)
            and item.get("call_id") == call_id
            and item.get("type") in ("function_call_output", "custom_tool_call_output")
        ):
            output = item.get("output")
            text = output if isinstance(output, str) else None
            return vocabulary.refusal(vocabulary.CODEX, text)
    return None


def tool_failure(hook: Hook) -> str | None:
    """The error of a PostToolUse whose command exited non-zero, else ``None``."""
    response = hook.payload.get("tool_response")
    code = exit_code_in(response)
    if code is None:
        code = rollout_exit_code(hook.text("transcript_path"), hook.text("tool_use_id"))
    if not code:
        return None
    text = _response_text(response).strip()
    return f"Exit code {code}" + (f"\n{text}" if text else "")


def exit_code_in(response: Any, depth: int = 0) -> int | None:
    """An exit code the tool response states, if any."""
    if depth > 3:
        return None
    if isinstance(response, dict):
        for key in ("exit_code", "exitCode"):
            value = response.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        for key in ("metadata", "output", "result"):
            if key in response:
                found = exit_code_in(response[key], depth + 1)
                if found is not None:
                    return found
        return None
    if isinstance(response, str):
        text = response.lstrip()
        if text.startswith("{"):
            try:
                return exit_code_in(json.loads(text), depth + 1)
            except ValueError:
                pass
        head = "\n".join(response[:2000].splitlines()[:5])  # a header, not the output
        match = _EXIT_TEXT.search(head)
        return int(match.group(1)) if match else None
    return None


def _response_text(response: Any) -> str:
    if isinstance(response, str):
        return response
    if isinstance(response, dict):
        for key in ("output", "stderr", "stdout", "aggregated_output"):
            if isinstance(response.get(key), str):
                return str(response[key])
    return ""


def rollout_exit_code(path: str | None, call_id: str | None) -> int | None:
    """The exit code the Codex rollout file records for ``call_id`` (read from its tail)."""
    if not path or not call_id:
        return None
    name = path.rsplit("/", 1)[-1]
    if not (name.startswith("rollout-") and name.endswith(".jsonl")):
        return None  # only ever read Codex's own session files
    try:
        with open(path, "rb") as stream:
            stream.seek(0, 2)
            size = stream.tell()
            stream.seek(max(0, size - ROLLOUT_TAIL_BYTES))
            data = stream.read()
    except OSError:
        return None
    needle = call_id.encode("utf-8")
    for line in reversed(data.splitlines()):
        if needle not in line or b"exit_code" not in line:
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        code = _find_exit_code(item, call_id, 0)
        if code is not None:
            return code
    return None


def _find_exit_code(value: Any, call_id: str, depth: int) -> int | None:
    if depth > 6:
        return None
    if isinstance(value, dict):
        code = value.get("exit_code")
        if (
            (value.get("id") == call_id or value.get("call_id") == call_id)
            and isinstance(code, int)
            and not isinstance(code, bool)
        ):
            return code
        children: Any = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return None
    for child in children:
        found = _find_exit_code(child, call_id, depth + 1)
        if found is not None:
            return found
    return None
