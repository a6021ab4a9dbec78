"""Plain-terminal output shared by the headless commands: optional colour, aligned tables,
JSON on stdout, and the usage error for a step a trace lacks. Stdlib only (no click): the
read fast path (``fast_read``) prints with it too.
"""

from __future__ import annotations

import os
import re
import sys

from agent_replay.errors import UsageError

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any


def _echo(text: str) -> None:
    """One line on stdout (what ``click.echo`` does with text, without click)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def use_color(stream: IO[str] | None = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set."""
    stream = stream or sys.stdout
    return stream.isatty() and not os.environ.get("NO_COLOR")


_ANSI = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "dim": 2}


class Painter:
    """Wraps text in ANSI colours when enabled (our own labels only, never producer text)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, color: str | None) -> str:
        if not self.enabled or color is None:
            return text
        return f"\x1b[{_ANSI[color]}m{text}\x1b[0m"


STATUS_COLORS = {
    "completed": "green",
    "failed": "red",
    "timeout": "yellow",
    "running": "cyan",
    "forked": "magenta",
}


def print_table(
    headers: list[str], rows: list[list[str]], *, right: set[int] | None = None, out: Any = None
) -> None:
    """Print an aligned plain-text table (cells must already be escaped)."""
    out = out or _echo
    right = right or set()
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], _visible_len(cell))

    def line(cells: list[str]) -> str:
        parts = []
        for i, cell in enumerate(cells):
            pad = widths[i] - _visible_len(cell)
            parts.append(" " * pad + cell if i in right else cell + " " * pad)
        return "  ".join(parts).rstrip()

    out(line(headers))
    for row in rows:
        out(line(row))


_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def _visible_len(text: str) -> int:
    return len(_ANSI_RE.sub("", text))


def emit_json(value: Any) -> None:
    """Write a JSON value to stdout (indented, UTF-8)."""
    from agent_replay.trace.io import dumps_bytes

    stream = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    data = dumps_bytes(value, indent=True) + b"\n"
    if stream is not None:
        sys.stdout.flush()
        stream.write(data)
        stream.flush()
    else:  # a test runner's stream without a byte buffer
        sys.stdout.write(data.decode())


def step_out_of_range(
    option: str, number: int, trace_id: str, span: tuple[int, int] | None
) -> UsageError:
    """The one usage error for a step number a trace does not have (``show``, ``why``,
    ``fork``)."""
    has = f"has steps {span[0]}..{span[1]}" if span else "has no steps"
    return UsageError(f"{option} {number} is out of range: trace {trace_id} {has}")
