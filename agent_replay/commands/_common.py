"""What every headless command shares: the ``--dir``, ``--db-url`` and ``--json`` options,
opening the store (a local directory or a PostgreSQL URL),
plain-terminal output (escaping producer text, optional colour), and time parsing.

Never imports Textual or Rich: these paths must start fast and stay importable without them.
The output helpers live in ``_output`` (no click), for the read fast path (``fast_read``).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from agent_replay.commands._output import STATUS_COLORS as STATUS_COLORS  # re-exported
from agent_replay.commands._output import Painter as Painter
from agent_replay.commands._output import emit_json as emit_json
from agent_replay.commands._output import print_table as print_table
from agent_replay.commands._output import step_out_of_range as step_out_of_range
from agent_replay.commands._output import use_color as use_color
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

# Every count and step number option is bounded (a value past what the store holds is a usage
# error naming the option, never an overflow deep in a query): 2^53 - 1, the format's largest.
MAX_NUMBER = 2**53 - 1
POSITIVE = click.IntRange(min=1, max=MAX_NUMBER)
NATURAL = click.IntRange(min=0, max=MAX_NUMBER)


DB_URL_HELP = (
    "Use the PostgreSQL store at URL (postgresql://USER@HOST:PORT/DB[?schema=NAME]) instead "
    "of the local one (default: $AGENT_REPLAY_DB_URL; '' forces the local store)."
)
_DB_URL_KEY = "agent_replay.db_url"  # in click's ctx.meta, shared by the root and subcommands


def remember_db_url(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """Callback of every ``--db-url``: the innermost one given wins (see ``resolve_db_url``)."""
    if value is not None:
        ctx.meta[_DB_URL_KEY] = value


def db_url_option(function: F) -> F:
    """``--db-url``: a PostgreSQL store for this command (read by ``resolve_db_url``, so the
    command's own parameters don't change)."""
    return click.option(
        "--db-url",
        metavar="URL",
        default=None,
        expose_value=False,
        callback=remember_db_url,
        help=DB_URL_HELP,
    )(function)


def dir_option(function: F) -> F:
    """``--dir``: the store directory (else AGENT_REPLAY_DIR, else the nearest .agent-replay),
    and ``--db-url``: a PostgreSQL store instead (else AGENT_REPLAY_DB_URL)."""
    function = db_url_option(function)
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


def redaction(no_redact: bool, store_dir: Path | None) -> bool:
    """Whether this command redacts secrets: on unless ``--no-redact`` or the config setting
    ``redact`` is false (``paths.redaction_on``)."""
    from agent_replay.paths import redaction_on

    return redaction_on(resolve_store_dir(store_dir), no_redact)


def resolve_db_url() -> str | None:
    """The database URL for this invocation: the command's ``--db-url``, else the root's,
    else ``AGENT_REPLAY_DB_URL``; ``None`` for the local store (an empty value forces it)."""
    from agent_replay.paths import ENV_DB_URL

    ctx = click.get_current_context(silent=True)
    if ctx is not None and _DB_URL_KEY in ctx.meta:
        value, source = ctx.meta[_DB_URL_KEY], "--db-url"
    else:
        value, source = os.environ.get(ENV_DB_URL), ENV_DB_URL
    value = (value or "").strip()
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*)://", value)
    if scheme and scheme.group(1).lower() not in ("postgresql", "postgres"):
        from agent_replay.store.db import mask_url

        raise UsageError(
            f"{source} {mask_url(value)}: unsupported database {scheme.group(1)!r}",
            hints=[
                "a team store is PostgreSQL: postgresql://USER@HOST:PORT/DB",
                "the local store is SQLite: leave --db-url out (or use --dir)",
            ],
        )
    return value or None


def store_target(store_dir: Path | None) -> Any:
    """What ``open_store`` opens for this invocation: the database URL, else the local file."""
    from agent_replay.paths import db_path

    return resolve_db_url() or db_path(resolve_store_dir(store_dir))


def store_label(store_dir: Path | None) -> str:
    """The store for people: the URL (password masked), else the store directory."""
    from agent_replay.store.db import mask_url

    url = resolve_db_url()
    return mask_url(url) if url else str(resolve_store_dir(store_dir))


def open_existing(store_dir: Path | None) -> Any:
    """Open the store for reading commands; a missing store is an error with a hint."""
    from agent_replay.store.db import open_store

    return open_store(store_target(store_dir), create=False)


def open_current(store_dir: Path | None) -> Any:
    """``open_existing`` for commands that show trace statuses (``list``, ``show``,
    ``export``): a running trace whose recorder died on this host is finalized first
    (``services/liveness``), so it never shows ``running`` beside the live ones."""
    from agent_replay.services.liveness import finalize_orphans

    store = open_existing(store_dir)
    finalize_orphans(store)
    return store


def open_or_create(store_dir: Path | None) -> Any:
    """Open the store, creating it (its directory, or its server schema) when missing."""
    from agent_replay.store.db import open_store

    return open_store(store_target(store_dir), create=True)


# --- output --------------------------------------------------------------------------------


# --- time ----------------------------------------------------------------------------------


def parse_since(value: str | None, now: dt.datetime, option: str = "--since") -> int | None:
    """``--since`` (or ``option``, e.g. ``--older-than``): ``7d``/``12h``/``30m``/``2w``, a date
    (``2026-01-01``) or an ISO time -> ms.

    Raises:
        UsageError: naming the option, for text that is no time or one out of range.
    """
    if value is None:
        return None
    from agent_replay.services.filter_language import since_ms

    try:
        return since_ms(value, now)
    except UsageError:
        raise UsageError(
            f"{option} {value!r}: expected a duration like 7d, 12h, 30m, 2w or a date like "
            "2026-01-01"
        ) from None
    except (OverflowError, ValueError):
        raise UsageError(f"{option} {value!r}: out of range (before year 1)") from None


def split_tags(value: str | None) -> list[str]:
    """``--tags a,b`` -> ``["a", "b"]`` (blank entries dropped)."""
    if not value:
        return []
    return [t.strip() for t in value.split(",") if t.strip()]
