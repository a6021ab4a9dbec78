"""The read fast path: ``list`` and ``show`` on a local store without click, peewee,
psycopg2 or pydantic.

Their start-up was most of their time (about 170 modules; peewee imports psycopg2 and ssl
even for a SQLite file), so ``entry.main`` hands these two commands here first. A plain
invocation (the options below, each once or repeated, ``--opt value`` or ``--opt=value``) on a
local store whose schema is current, with no dead writer to finalize, is answered with the
stdlib ``sqlite3`` module through the same queries and printers as the click commands
(``list_text``, ``show_text``). Anything else returns ``None`` and the full CLI runs
instead: ``--help``, an unknown or malformed option, a value the CLI would reject, a
PostgreSQL store, a store to create or migrate, an orphaned trace to finalize, any error
before the first byte is written (the CLI says it with its hints and exit code).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_MAX_NUMBER = 2**53 - 1  # _common.MAX_NUMBER (the count options' bound)
_STATUSES = ("running", "completed", "failed", "timeout", "forked")
_SORTS = ("time", "tokens", "duration", "cost")

_LIST_VALUES = (
    *("--status", "--agent", "--tag", "--since", "--session", "--label"),
    *("--sort", "--limit", "--dir"),
)
_LIST_FLAGS = ("--json",)
_SHOW_VALUES = ("--from-step", "--to-step", "--dir")
_SHOW_FLAGS = ("--steps-only", "--evals", "--snapshots", "--tree", "--json")


def run(args: Sequence[str]) -> int | None:
    """Answer ``list``/``show`` here, or return ``None`` for the full CLI to run."""
    if not args or args[0] not in ("list", "show"):
        return None
    if (os.environ.get("AGENT_REPLAY_DB_URL") or "").strip():
        return None  # a server store (or a URL the CLI rejects)
    if args[0] == "list":
        parsed = _parse(args[1:], _LIST_VALUES, _LIST_FLAGS)
        if parsed is None or parsed[1]:
            return None
        return _list(parsed[0])
    parsed = _parse(args[1:], _SHOW_VALUES, _SHOW_FLAGS)
    if parsed is None or len(parsed[1]) != 1:
        return None
    return _show(parsed[0], parsed[1][0])


def _parse(
    args: Sequence[str], values: tuple[str, ...], flags: tuple[str, ...]
) -> tuple[dict[str, Any], list[str]] | None:
    """Options (the last of a repeated one wins, as in click) and positionals; ``None`` for
    anything this parser does not know."""
    options: dict[str, Any] = {}
    positional: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("-"):
            positional.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name in flags and not eq:
            options[name] = True
        elif name in values:
            if not eq:
                if index >= len(args):
                    return None
                value = args[index]
                index += 1
            if value.startswith("-"):
                return None
            options[name] = value
        else:
            return None  # --help, --, short options, anything unknown
    return options, positional


def _number(value: str | None) -> int | None:
    """A positive count as the CLI takes it, else ``ValueError``."""
    if value is None:
        return None
    if not value.isdigit() or not 1 <= int(value) <= _MAX_NUMBER:
        raise ValueError(value)
    return int(value)


def _open(store_dir: str | None) -> Any:
    """A read-only ``Store`` on the local file over ``sqlite3``, or ``None`` (the CLI opens
    it: missing, an older schema to migrate, or a running trace whose writer died here)."""
    from agent_replay.paths import db_path, resolve_dir
    from agent_replay.store.core import SqliteReader, Store
    from agent_replay.store.pragmas import BUSY_TIMEOUT_S
    from agent_replay.store.schema import SCHEMA_VERSION
    from agent_replay.store.writers import dead_writers

    file = db_path(resolve_dir(store_dir))
    if not file.is_file() or file.stat().st_size == 0:
        return None
    reader = SqliteReader(file, busy_timeout_s=BUSY_TIMEOUT_S)
    store = Store(reader, Path(file), read_only=True)
    try:
        version = reader.execute_sql("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION or dead_writers(store):
            store.close()
            return None
    except BaseException:
        store.close()
        raise
    return store


def _list(options: dict[str, Any]) -> int | None:
    try:
        from agent_replay.store.queries import TraceFilter, list_traces

        status, sort = options.get("--status"), options.get("--sort", "time")
        if (status is not None and status not in _STATUSES) or sort not in _SORTS:
            return None
        limit = _number(options.get("--limit", "50"))
        since = options.get("--since")
        since_ms = None
        if since is not None:
            from agent_replay.clock import SystemClock
            from agent_replay.services.filter_language import since_ms as parse_since

            since_ms = parse_since(since, SystemClock().now())
        label = (options.get("--label") or "").strip() or None
        filters = TraceFilter(
            status=status,
            agent=options.get("--agent"),
            tag=options.get("--tag"),
            session=options.get("--session"),
            since_ms=since_ms,
            label=label,
        )
        store = _open(options.get("--dir"))
        if store is None:
            return None
        with store:
            page = list_traces(store, filters, sort=sort, limit=limit or 50)
    except Exception:
        return None  # the CLI runs and says what went wrong, with its hints and exit code
    from agent_replay.commands.list_text import write_list

    return _printing(lambda: write_list(page, bool(options.get("--json"))))


def _show(options: dict[str, Any], trace_id: str) -> int | None:
    from agent_replay.commands.show_text import ShowOptions, prepare_show, write_show

    try:
        show = ShowOptions(
            steps_only=bool(options.get("--steps-only")),
            evals=bool(options.get("--evals")),
            snapshots=bool(options.get("--snapshots")),
            tree=bool(options.get("--tree")),
            from_step=_number(options.get("--from-step")),
            to_step=_number(options.get("--to-step")),
            as_json=bool(options.get("--json")),
        )
        store = _open(options.get("--dir"))
    except Exception:
        return None
    if store is None:
        return None
    try:
        plan = prepare_show(store, trace_id, show)
    except Exception:
        store.close()
        return None
    with store:
        return _printing(lambda: write_show(store, plan))


def _printing(write: Any) -> int:
    """Run ``write`` with the CLI's exit codes for what can go wrong once output began."""
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        # `agent-replay list | head`: the reader left (as cli.main handles it).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except Exception as exc:
        sys.stderr.write(f"error: unexpected {type(exc).__name__}: {exc}\n")
        return 1
    return 0
