"""The hook's fast path: queue a harness payload and return, in a few milliseconds.

A harness (Claude Code, Codex CLI, Gemini CLI) runs ``agent-replay hook`` before and after
every tool call of the user's agent, so the hook must start and finish about as fast as the
interpreter itself. It therefore imports only the stdlib: it writes the raw payload into the
store's ``hook_inbox`` table with ``sqlite3`` (one small transaction; WAL lets parallel hooks
and readers proceed) and makes sure a drainer is running. The drainer (``drain``) turns
queued payloads into steps through ``TraceRecorder`` — the one write path — in arrival order.

One drainer serves a store for a whole session: started by the first hook, it waits on a
FIFO (``<dir>/hook-drain.wake``) for the next payloads and exits after ``IDLE_S`` without
any (sooner after a session ended). A hook that queued a payload writes a byte to that FIFO;
it starts a drainer only when nobody listens there. The drainer is detached (its own session,
the harness's descriptors closed, stdio on ``/dev/null``) and runs at low priority, so the
harness never waits on it, for its pipes or for the CPU.

Exactly one drainer runs per store: it holds an exclusive ``flock`` on ``<dir>/hook-drain.lock``.
The hook takes that lock itself (non-blocking) and, if it got it, hands the locked file to the
detached drainer (``pass_fds``), so two hooks can never start two drainers. A drainer opens
the FIFO before it first reads the inbox, and when it stops it closes the FIFO, releases the
lock and only then looks at the inbox once more; a hook that found neither a listener nor
the lock queued its payload before that last look, so no payload is ever stranded.

A new store costs the hook no migrations: the fast path creates the file and queues into
``schema.EARLY_INBOX``; the drainer's first open migrates the store, which moves those rows
into ``hook_inbox`` (migration 0013).

With a team store (``--db-url``/``AGENT_REPLAY_DB_URL``) nothing changes here: the payload is
spooled in the same local inbox, marked with its store, and the drainer delivers it. A server
that is down or slow never reaches the harness; the spool keeps the payloads until it is back.

Must import nothing beyond the stdlib: a test checks ``sys.modules`` after a real hook run.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from agent_replay.paths import DB_NAME, ENV_DB_URL, append_private, make_private_dir
from agent_replay.store.schema import EARLY_INBOX, EARLY_INBOX_DDL, SCHEMA_VERSION

LOCK_NAME = "hook-drain.lock"
WAKE_NAME = "hook-drain.wake"
"""The FIFO a running drainer listens on: a byte ``w`` means "payloads queued", ``q`` "stop"."""
BUSY_TIMEOUT_MS = 15000
ENV_NO_SPAWN = "AGENT_REPLAY_HOOK_NO_SPAWN"
"""Set to 1 to queue payloads without starting a drainer (tests drain synchronously)."""
ENV_IDLE = "AGENT_REPLAY_HOOK_IDLE_S"
"""How long a drainer waits for the next payload before it exits (seconds)."""
IDLE_S = 300.0
"""The default of ``ENV_IDLE``: longer than the pauses of a working session (a model turn,
a person reading), so one drainer serves a session; an idle one costs no CPU."""
NICE = 10
"""How much nicer the drainer runs than the hook that started it: on a busy machine the
harness (and its hooks) get the CPU first."""


def connect(db_file: Path) -> sqlite3.Connection:
    """A stdlib connection with the store's pragmas (WAL is persistent in the file)."""
    conn = sqlite3.connect(str(db_file), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


_LEFT_OPEN: list[sqlite3.Connection] = []


def queue(store_dir: Path, payload: str, options: dict[str, Any], *, close: bool = True) -> bool:
    """Queue one payload in the store at ``store_dir``, creating the store if need be.

    With ``close=False`` the connection is left open for a process about to ``os._exit``:
    the last connection to close checkpoints the WAL (fsyncs, ~10 ms and much more on a busy
    disk), which the hooks that run before the drainer has the store open would pay. The
    commit is durable either way, as after a SIGKILL; the drainer checkpoints.

    Returns ``False`` (nothing queued) when the store needs the full path first: a store of
    an older schema to migrate, an empty file, a missing one that the policies marker says
    had guardrails (``hook --enforce`` names what vanished), or a file that is something
    else. The schema check and the insert are one ``BEGIN IMMEDIATE`` transaction, so a
    drainer migrating the store at the same moment is either wholly before it (the payload
    goes to the early inbox, whose rows the migration then moves) or wholly after it (to
    ``hook_inbox``)."""
    db_file = store_dir / DB_NAME
    new = not db_file.exists()
    if new:
        from agent_replay.services.guard.marker import MarkerError, remembered  # new store only

        try:
            if remembered(store_dir):
                return False  # a store whose guardrails vanished: never silently replaced
        except MarkerError:
            return False
        make_private_dir(store_dir)
        os.close(os.open(db_file, os.O_CREAT | os.O_WRONLY, 0o600))
    elif db_file.stat().st_size == 0:
        return False  # emptied (the guard refuses calls on it), or a hook is creating it
    conn = connect(db_file)
    try:
        if new:  # as open_store makes a new store: auto_vacuum must precede WAL's header
            conn.execute("PRAGMA auto_vacuum = incremental")
            conn.execute("PRAGMA journal_mode = wal")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version == SCHEMA_VERSION:
                table = "hook_inbox"
            elif version == 0 and _fresh(conn):
                conn.execute(EARLY_INBOX_DDL)
                table = EARLY_INBOX
            else:
                conn.execute("ROLLBACK")
                conn.close()
                return False
            insert(conn, payload, options, table=table)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except BaseException:
        conn.close()
        raise
    if close:
        conn.close()
    else:
        _LEFT_OPEN.append(conn)
    return True


def _fresh(conn: sqlite3.Connection) -> bool:
    """Whether an unmigrated store holds nothing but the early inbox (a brand-new store, not
    one of the pre-migration era that the full path upgrades)."""
    row = conn.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND name != ?",
        [EARLY_INBOX],
    ).fetchone()
    return int(row[0]) == 0


def enqueue(db_file: Path, payload: str, options: dict[str, Any]) -> None:
    """Append one raw payload to the inbox of a migrated store (one autocommitted INSERT)."""
    conn = connect(db_file)
    try:
        insert(conn, payload, options)
    finally:
        conn.close()


def insert(
    conn: sqlite3.Connection, payload: str, options: dict[str, Any], table: str = "hook_inbox"
) -> None:
    """The inbox INSERT on an open connection (autocommitted unless a transaction is open).
    Unless ``options["redact"]`` is false, the payload is redacted first: a queued or spooled
    payload (one waiting for an unreachable team store too) never holds a secret on disk."""
    if len(payload) > 1 << 18:  # a huge payload: its values capped first (services/limits)
        from agent_replay.services.limits import cap_payload_text  # deferred: rarely needed

        payload = cap_payload_text(payload)
    if options.get("redact", True):
        from agent_replay.services.redact import redact_payload_text  # deferred: ~3 ms

        payload = redact_payload_text(payload)
    conn.execute(
        f"INSERT INTO {table} (received_ms, payload, options) VALUES (?, ?, ?)",
        (int(time.time() * 1000), payload, json.dumps(options)),
    )


def try_lock(store_dir: Path) -> int | None:
    """An fd holding the drainer lock, or ``None`` when a drainer already holds it."""
    import fcntl

    fd = os.open(store_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def signal_drainer(store_dir: Path, byte: bytes = b"w") -> bool:
    """Write ``byte`` to the running drainer's FIFO; ``False`` when no drainer listens.

    A full FIFO is fine (the drainer has wake-ups pending); a FIFO whose reader closed just
    now counts as no listener (that drainer looks at the inbox once more as it stops)."""
    import stat

    try:
        fd = os.open(store_dir / WAKE_NAME, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENOENT):
            return False
        raise
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False  # not ours: a drainer makes the FIFO afresh
        os.write(fd, byte)
    except BlockingIOError:
        pass
    except BrokenPipeError:
        return False
    finally:
        os.close(fd)
    return True


def ensure_drainer(store_dir: Path) -> None:
    """Wake the store's drainer, or start one when none runs (it inherits our lock)."""
    if os.environ.get(ENV_NO_SPAWN) == "1":
        return
    if signal_drainer(store_dir):
        return
    fd = try_lock(store_dir)
    if fd is None:
        return  # a drainer is starting or stopping: it reads the inbox after our commit
    try:
        spawn_drainer(store_dir, fd)
    finally:
        os.close(fd)  # the child's copy keeps the lock


def spawn_drainer(store_dir: Path, fd: int) -> None:
    """Start the detached drainer holding the locked ``fd``: its own session, stdio on
    ``/dev/null``, no other descriptor of ours or the harness's (a harness waits for its
    pipes to close), and low priority from its first instruction."""
    folder = os.path.abspath(store_dir)
    argv = [sys.executable, "-m", "agent_replay.services.hook.drain", folder]
    argv += ["--lock-fd", str(fd)]
    null = os.open(os.devnull, os.O_RDWR)
    try:
        os.set_inheritable(fd, True)
        actions: list[tuple[int, ...]] = [(os.POSIX_SPAWN_DUP2, null, n) for n in (0, 1, 2)]
        actions += [(os.POSIX_SPAWN_CLOSE, n) for n in _inherited_fds() if n not in (fd, null)]
        try:
            # posix_spawn (vfork): a few ms cheaper than subprocess, and nothing to import
            pid = os.posix_spawn(
                sys.executable, argv, os.environ, file_actions=actions, setsid=True
            )
        except (NotImplementedError, AttributeError):  # a platform without setsid support
            import subprocess

            pid = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(fd,),
                close_fds=True,
                start_new_session=True,
            ).pid
        try:  # below our own priority, whatever it is
            os.setpriority(os.PRIO_PROCESS, pid, min(os.getpriority(os.PRIO_PROCESS, 0) + NICE, 19))
        except OSError:
            pass
    finally:
        os.close(null)


def _inherited_fds() -> list[int]:
    """Our open descriptors above stdio that an exec would pass on (the harness's, say)."""
    for where in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(where)
        except OSError:
            continue
        found = []
        for name in names:
            n = int(name)
            try:
                if n > 2 and os.get_inheritable(n):
                    found.append(n)
            except OSError:  # the listing's own descriptor, closed by now
                pass
        return found
    return []


def log_error(store_dir: Path, message: str) -> None:
    """Append a line to ``<dir>/logs/agent-replay.log`` (hooks never print on failure paths
    the harness would show as output)."""
    from agent_replay.services.redact import redact_text  # deferred: failure paths only

    try:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{stamp} hook: {redact_text(message)}\n"
        append_private(store_dir / "logs" / "agent-replay.log", line)
    except OSError:
        pass


def spool(options: dict[str, Any]) -> None:
    """With a database URL (``--db-url``, else ``AGENT_REPLAY_DB_URL``; an empty one means the
    local store), mark the payload for that store: the local inbox spools it and the drainer
    delivers it (``drain``), so the harness never waits on, or fails with, the server.
    The random spool key lets the target store apply it once (``hook_receipts``)."""
    url = options.pop("db_url", None)
    if url is None:
        url = os.environ.get(ENV_DB_URL)
    if url and url.strip():
        options["db_url"] = url.strip()
        options["spool_key"] = f"{time.time_ns():x}-{os.urandom(8).hex()}"
