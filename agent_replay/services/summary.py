"""One line saying what a step did: the command it ran, the file it touched, the query it sent,
the first words of the model's answer.

Step names alone don't tell steps apart: every shell call of a Claude Code session is ``Bash``
and every llm_call is named after its model, so ``ls -la`` and a failing ``cat`` look alike.
The timeline and the diff show this summary beside the name. Pure (no store, no I/O), and the
text is raw producer text: front ends escape it (``display.safe``). Must not import Textual or
Rich.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SUMMARY_CHARS = 160
"""A summary is cut to this many characters (a row shows fewer)."""

# Input keys that say what a call is about, most telling first (the harnesses' own names:
# Claude Code's Bash/Read/Edit/Grep/WebFetch, Codex's shell, Gemini's tools, MCP, SQL agents).
_INPUT_KEYS: tuple[str, ...] = (
    "command",
    "cmd",
    "sql",
    "query",
    "q",
    "file_path",
    "path",
    "absolute_path",
    "filename",
    "file",
    "pattern",
    "url",
    "prompt",
    "description",
    "question",
    "task",
    "text",
    "message",
    "content",
    "goal",
)
_OUTPUT_KEYS: tuple[str, ...] = (
    "text",
    "content",
    "answer",
    "message",
    "result",
    "summary",
    "output",
    "stdout",
    "sql",
)


def one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    """Whitespace (newlines included) collapsed to single spaces, cut to ``limit``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)] + "…"


def _scalar(value: Any) -> str | None:
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return " ".join(value)  # argv
        return None
    return None


def _from_keys(value: Any, keys: tuple[str, ...]) -> str | None:
    if not isinstance(value, Mapping):
        return _scalar(value)
    for key in keys:
        found = _scalar(value.get(key))
        if found is not None:
            return found
    return None


def _message_text(value: Any) -> str | None:
    """The text of a chat reply in the usual shapes: a string, ``{content: ...}``, a list of
    content blocks, OpenAI ``choices``."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list):
        for block in value:
            text = _message_text(block.get("text") if isinstance(block, Mapping) else block)
            if text:
                return text
        return None
    if not isinstance(value, Mapping):
        return None
    calls = value.get("tool_calls")
    if isinstance(calls, list) and calls:
        names = [str(c.get("name")) for c in calls if isinstance(c, Mapping) and c.get("name")]
        if names:
            return "calls " + ", ".join(names)
    choices = value.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        return _message_text(choices[0].get("message") or choices[0].get("text"))
    for key in _OUTPUT_KEYS:
        if key in value:
            text = _message_text(value[key])
            if text:
                return text
    return None


def _compact(value: Any) -> str | None:
    """``key=value`` pairs of an object's scalar members: ``origin=SFO nonstop=true``."""
    if not isinstance(value, Mapping):
        return None
    pairs = []
    for key, item in value.items():
        if isinstance(item, bool):
            pairs.append(f"{key}={'true' if item else 'false'}")
        elif isinstance(item, str | int | float):
            pairs.append(f"{key}={item}")
        elif isinstance(item, list) and item and all(isinstance(v, str) for v in item):
            pairs.append(f"{key}={','.join(item)}")
    return " ".join(pairs) or None


def step_summary(step: Mapping[str, Any]) -> str:
    """What the step did, in one line (``""`` when nothing tells more than its name)."""
    step_type = step.get("step_type")
    step_input, output = step.get("input"), step.get("output")
    text: str | None = None
    if step_type == "decision":
        decision = step.get("decision")
        if isinstance(decision, Mapping) and decision.get("chosen") is not None:
            text = f"chose {_scalar(decision['chosen']) or decision['chosen']}"
    elif step_type in ("llm_call", "output", "thought"):
        text = _message_text(output) or _from_keys(step_input, _INPUT_KEYS)
    elif step_type == "error":
        text = step.get("error") or _message_text(output)
    elif step_type == "guard_check" and isinstance(output, Mapping) and output.get("verdict"):
        target = step_input.get("tool") if isinstance(step_input, Mapping) else None
        text = f"{output['verdict']}" + (f" {target}" if isinstance(target, str) else "")
    else:  # tool_call, retrieval, guard_check, and any type to come
        text = (
            _from_keys(step_input, _INPUT_KEYS)
            or _compact(step_input)
            or _message_text(output)
            or _compact(output)
        )
    if not text:
        return ""
    text = one_line(str(text))
    return "" if text == (step.get("name") or "") else text
