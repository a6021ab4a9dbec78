"""What every headless command shares: the ``--dir`` and ``--json`` options, opening the store,
plain-terminal output (escaping producer text, optional colour), and time parsing.

Never imports Textual or Rich: these paths must start fast and stay importable without them.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

import click

from agent_replay.display import (  # noqa: F401  (re-exported for the commands)
    fmt_cost,
    fmt_int,
    fmt_ms,
    fmt_time,
    preview,
    safe,
    truncate,
)
from agent_replay.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])

# --- options -------------------------------------------------------------------------------


def dir_option(function: F) -> F:
    """``--dir``: the store directory (else AGENT_REPLAY_DIR, else the nearest .agent-replay)."""
    return click.option(
        "--dir",
        "store_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Store directory (default: $AGENT_REPLAY_DIR, else the nearest .agent-replay/).",
    )(function)


def json_option(function: F) -> F:
    """``--json``: machine output on stdout in the trace format's field names."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(
        function
    )


def resolve_store_dir(store_dir: Path | None) -> Path:
    """The store directory for this invocation (``--dir`` on the command or the root)."""
    from agent_replay.paths import resolve_dir

    if store_dir is None:
        ctx = click.get_current_context(silent=True)
        root = ctx.find_root() if ctx else None
        if root is not None and root.obj and root.obj.get("store_dir"):
            store_dir = root.obj["store_dir"]
    return resolve_dir(store_dir)


def open_existing(store_dir: Path | None) -> Any:
    """Open the store for reading commands; a missing store is an error with a hint."""
    from agent_replay.paths import db_path
    from agent_replay.store.db import open_store

    folder = resolve_store_dir(store_dir)
    return open_store(db_path(folder), create=False)


def open_or_create(store_dir: Path | None) -> Any:
    """Open the store, creating it (and its directory) when missing."""
    from agent_replay.paths import db_path
    from agent_replay.store.db import open_store

    return open_store(db_path(resolve_store_dir(store_dir)), create=True)


# --- output --------------------------------------------------------------------------------


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
    out = out or click.echo
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
    else:  # click's test runner without a byte buffer
        click.echo(data.decode(), nl=False)


# --- time ----------------------------------------------------------------------------------


def parse_since(value: str | None, now: dt.datetime) -> int | None:
    """``--since``: ``7d``/``12h``/``30m``/``2w``, a date (``2026-01-01``) or an ISO time -> ms."""
    if value is None:
        return None
    from agent_replay.services.query import since_ms

    try:
        return since_ms(value, now)
    except UsageError as exc:
        raise UsageError(f"--{exc.message}") from None


def split_tags(value: str | None) -> list[str]:
    """``--tags a,b`` -> ``["a", "b"]`` (blank entries dropped)."""
    if not value:
        return []
    return [t.strip() for t in value.split(",") if t.strip()]
