"""Writer liveness: which process is recording a running trace, so a trace whose writer died
is recognised instead of showing ``running`` forever.

A long-lived writer (``record``, ``run``, ``import``) registers each trace it records into:
host, pid and the process's start token (Linux: the boot id and the process's start time, so
a reused pid is not taken for the writer). Ending a trace removes its row; so does a stream
that leaves its traces open on purpose (``record --leave-open``). A reader that finds a
``running`` trace whose writer was on this host and is gone finalizes it (``services/liveness``).
Hook traces have no long-lived writer and no row: they keep their own rules.

Registering, forgetting and looking up a writer go through the query builder (peewee, the
models and ``store/writes`` imported when they run). ``dead_writers`` keeps its one statement
as SQL text: ``list`` and ``show``'s fast path (issue 17, ``commands/fast_read``) runs it on a
stdlib ``sqlite3`` connection before deciding to answer without the CLI, and must not import
peewee (~100 ms of its budget). At import the module needs only the stdlib and ``store.core``.
"""

from __future__ import annotations

import os
from functools import cache

from agent_replay.store.core import Store, execute

TYPE_CHECKING = False  # typing itself stays off list's fast path (issue 17)
if TYPE_CHECKING:
    from agent_replay.store.models import WriterRow


class Writer:
    """A registered writer of a running trace. Immutable and compared by value, written out
    rather than a frozen dataclass: ``list``'s fast path imports this module (``dead_writers``)
    and ``dataclasses`` costs its start-up a few ms (issue 17)."""

    __slots__ = ("trace_id", "kind", "host", "pid", "token")
    trace_id: str
    kind: str
    host: str
    pid: int
    token: str

    def __init__(self, trace_id: str, kind: str, host: str, pid: int, token: str) -> None:
        for name, value in zip(self.__slots__, (trace_id, kind, host, pid, token), strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Writer is immutable: cannot set {name!r}")

    def _key(self) -> tuple[str, str, str, int, str]:
        return (self.trace_id, self.kind, self.host, self.pid, self.token)

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, Writer) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "Writer({})".format(
            ", ".join(f"{n}={v!r}" for n, v in zip(self.__slots__, self._key(), strict=True))
        )


@cache
def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def host() -> str:
    """This machine's name, as writers record it: ``socket.gethostname()``'s answer, read
    without importing ``socket`` (2.7 ms of every ``list``'s start-up)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket  # Windows

    return socket.gethostname()


def start_token(pid: int) -> str | None:
    """What identifies process ``pid`` for as long as it lives (``""`` where the system does not
    say; ``None``: no such process, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses: fields resume after the last ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    return f"{_boot_id()}:{fields[19].decode()}" if len(fields) > 19 else ""


def _alive(pid: int, token: str) -> bool:
    """Whether the process that registered as ``pid`` with ``token`` still runs."""
    if os.path.isdir("/proc/self"):
        current = start_token(pid)
        if current is None:
            return False
        return not token or not current or current == token
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, not ours to signal
    return True


def _model() -> type[WriterRow]:
    # deferred: list's fast path imports this module for dead_writers, without peewee
    from agent_replay.store.models import WriterRow

    return WriterRow


def register(store: Store, trace_id: str, kind: str, *, now_ms: int) -> None:
    """Record this process as the writer of ``trace_id`` (replacing an earlier writer)."""
    from agent_replay.store.models import WRITER_FIELDS  # deferred: see _model
    from agent_replay.store.writes import replace_rows

    pid = os.getpid()
    row = (trace_id, kind, host(), pid, start_token(pid) or "", now_ms)
    replace_rows(store, _model(), WRITER_FIELDS, [row])


def unregister(store: Store, trace_id: str) -> None:
    """Forget the writer of ``trace_id`` (the trace ended, or is left open on purpose)."""
    model = _model()
    model.delete().where(model.trace_id == trace_id).execute(store.db)


def writer_of(store: Store, trace_id: str) -> Writer | None:
    """The registered writer of a trace, if any."""
    model = _model()
    query = model.select(model.trace_id, model.kind, model.host, model.pid, model.token)
    for row in query.where(model.trace_id == trace_id).tuples().execute(store.db):
        return Writer(str(row[0]), str(row[1]), str(row[2]), int(row[3]), str(row[4]))
    return None


def is_dead(writer: Writer) -> bool:
    """Whether the writer is known to be gone (only a writer on this host can be checked)."""
    return writer.host == host() and not _alive(writer.pid, writer.token)


def dead_writers(store: Store) -> list[Writer]:
    """Writers on this host of traces still ``running`` whose process is gone."""
    rows = execute(  # SQL text, not the query builder: see the module docstring
        store,
        "SELECT w.trace_id, w.kind, w.host, w.pid, w.token FROM writers w "
        "JOIN traces t ON t.id = w.trace_id WHERE t.status = 'running' AND w.host = ?",
        [host()],
    ).fetchall()
    writers = [Writer(str(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4])) for r in rows]
    return [w for w in writers if is_dead(w)]
