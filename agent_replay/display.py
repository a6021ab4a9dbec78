"""Presentation helpers both front ends share (the CLI's plain text and the TUI's cells):
escaping producer text, previews, and human units. No Textual, no Rich."""

from __future__ import annotations

from agent_replay.trace.io import dumps

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STEP_EMOJI = {
    "thought": "💭",
    "tool_call": "🔧",
    "llm_call": "🤖",
    "retrieval": "📚",
    "output": "📤",
    "decision": "🔀",
    "error": "❌",
    "guard_check": "🛡",
}
"""The step types' icons in plain text and the HTML page (the TUI has its own glyphs)."""

# C0 and C1 control characters (and DEL) become visible escapes: producer text must never
# move the cursor, change colours or ring the bell in the user's terminal.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), *range(0x7F, 0xA0))}
_CONTROL_KEEP_LINES = {k: v for k, v in _CONTROL.items() if k not in (0x0A, 0x09)}


def safe(text: Any, *, multiline: bool = False) -> str:
    """Producer text made safe for a terminal: control characters shown as ``\\xNN``."""
    value = text if isinstance(text, str) else str(text)
    if value.isprintable():  # no control character (all are non-printable): nothing to do
        return value
    return value.translate(_CONTROL_KEEP_LINES if multiline else _CONTROL)


def truncate(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` characters with an ellipsis."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def preview(value: Any, width: int = 60) -> str:
    """A one-line, escaped preview of a JSON payload."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        text = dumps(value)
    return truncate(safe(text), width)


def fmt_ms(ms: float | None) -> str:
    """Human duration: 850ms, 12.3s, 4m05s, 2h03m."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms:.0f}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def fmt_int(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def fmt_cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def fmt_time(iso: str | None) -> str:
    """Canonical UTC timestamp shown as ``2026-06-01 12:00:00``."""
    if not iso:
        return "-"
    return iso[:19].replace("T", " ")
