"""The hook's fast path: queue a harness payload and return, in a few milliseconds.

A harness (Claude Code, Codex CLI, Gemini CLI) runs ``agent-replay hook`` before and after
every tool call of the user's agent, so the hook must start and finish about as fast as the
interpreter itself. It therefore imports only the stdlib: it writes the raw payload into the
store's ``hook_inbox`` table with ``sqlite3`` (one small transaction; WAL lets parallel hooks
and readers proceed) and makes sure a drainer is running. The drainer
(``hook_drain``) turns queued payloads into steps through ``TraceRecorder`` — the one write
path — in arrival order, then exits when the inbox is empty.

Exactly one drainer runs per store: it holds an exclusive ``flock`` on ``<dir>/hook-drain.lock``.
The hook takes that lock itself (non-blocking) and, if it got it, hands the locked file to a
detached drainer process (``pass_fds``), so two hooks can never start two drainers. A drainer
releases the lock only when the inbox is empty and re-checks after releasing, so a payload
queued at that moment is never stranded.

With a team store (``--db-url``/``AGENT_REPLAY_DB_URL``) nothing changes here: the payload is
spooled in the same local inbox, marked with its store, and the drainer delivers it. A server
that is down or slow never reaches the harness; the spool keeps the payloads until it is back.

Must import nothing beyond the stdlib: a test checks ``sys.modules`` after a real hook run.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agent_replay.paths import DB_NAME, ENV_DB_URL, append_private, redaction_on, resolve_dir
from agent_replay.store.schema import SCHEMA_VERSION

LOCK_NAME = "hook-drain.lock"
BUSY_TIMEOUT_MS = 15000
ENV_NO_SPAWN = "AGENT_REPLAY_HOOK_NO_SPAWN"
"""Set to 1 to queue payloads without starting a drainer (tests drain synchronously)."""


def connect(db_file: Path) -> sqlite3.Connection:
    """A stdlib connection with the store's pragmas (WAL is persistent in the file)."""
    conn = sqlite3.connect(str(db_file), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def store_is_current(db_file: Path) -> bool:
    """Whether the store exists and is migrated to this build's schema (else the slow path
    creates or migrates it once)."""
    if not db_file.exists():
        return False
    conn = connect(db_file)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION
    finally:
        conn.close()


def enqueue(db_file: Path, payload: str, options: dict[str, Any]) -> None:
    """Append one raw payload to the inbox (one autocommitted INSERT)."""
    conn = connect(db_file)
    try:
        insert(conn, payload, options)
    finally:
        conn.close()


def insert(conn: sqlite3.Connection, payload: str, options: dict[str, Any]) -> None:
    """The inbox INSERT on an open connection (autocommitted). Unless ``options["redact"]``
    is false, the payload is redacted first: a queued or spooled payload (one waiting for an
    unreachable team store too) never holds a secret on disk."""
    if len(payload) > 1 << 18:  # a huge payload: its values capped first (services/limits)
        from agent_replay.services.limits import cap_payload_text  # deferred: rarely needed

        payload = cap_payload_text(payload)
    if options.get("redact", True):
        from agent_replay.services.redact import redact_payload_text  # deferred: ~3 ms

        payload = redact_payload_text(payload)
    conn.execute(
        "INSERT INTO hook_inbox (received_ms, payload, options) VALUES (?, ?, ?)",
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


def ensure_drainer(store_dir: Path) -> None:
    """Start a detached drainer unless one is running (it inherits our lock)."""
    if os.environ.get(ENV_NO_SPAWN) == "1":
        return
    fd = try_lock(store_dir)
    if fd is None:
        return  # a drainer is running; it re-checks the inbox before it exits
    try:
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent_replay.services.capture.hook_drain",
                str(store_dir),
                "--lock-fd",
                str(fd),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(fd,),
            start_new_session=True,  # outlives the harness's process group and timeouts
            close_fds=True,
        )
    finally:
        os.close(fd)  # the child's copy keeps the lock


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


def parse_args(argv: list[str]) -> dict[str, Any] | None:
    """The hook's options, or ``None`` when the arguments need the full CLI (help, errors).

    ``--enforce`` (and ``--plain``) hand the invocation to ``services/guard/enforce``."""
    options: dict[str, Any] = {
        "dialect": "auto",
        "no_input": False,
        "redact": True,
        "dir": None,
        "sync": False,
        "enforce": False,
        "plain": False,
        "db_url": None,
    }
    args = iter(argv)
    for arg in args:
        if arg == "--no-input":
            options["no_input"] = True
        elif arg == "--no-redact":
            options["redact"] = False
        elif arg == "--sync":
            options["sync"] = True
        elif arg in ("--enforce", "--plain"):
            options[arg[2:]] = True
        elif arg in ("--dir", "--dialect", "--db-url"):
            value = next(args, None)
            if value is None:
                return None
            options[arg[2:].replace("-", "_")] = value
        elif arg.startswith(("--dir=", "--dialect=", "--db-url=")):
            key, _, value = arg[2:].partition("=")
            options[key.replace("-", "_")] = value
        else:
            return None  # --help or a typo
    if options["dialect"] not in ("auto", "claude", "codex", "gemini"):
        return None
    if options["plain"] and not options["enforce"]:
        return None  # --plain only means something with --enforce: the full CLI says so
    return options


def spool(options: dict[str, Any]) -> None:
    """With a database URL (``--db-url``, else ``AGENT_REPLAY_DB_URL``; an empty one means the
    local store), mark the payload for that store: the local inbox spools it and the drainer
    delivers it (``hook_drain``), so the harness never waits on, or fails with, the server.
    The random spool key lets the target store apply it once (``hook_receipts``)."""
    url = options.pop("db_url", None)
    if url is None:
        url = os.environ.get(ENV_DB_URL)
    if url and url.strip():
        options["db_url"] = url.strip()
        options["spool_key"] = f"{time.time_ns():x}-{os.urandom(8).hex()}"


def run(argv: list[str], stdin: Any = None) -> int | None:
    """Capture one hook invocation. Returns 0, or ``None`` to defer to the full CLI.

    Capture mode always exits 0 and prints nothing: a broken recorder must never break the
    user's agent. Failures go to the log under the store directory.
    """
    options = parse_args(argv)
    if options is None:
        return None
    spool(options)
    if options.pop("enforce"):
        # Deciding the call is the answer the harness waits for (services/guard/enforce).
        from agent_replay.services.guard.enforce import run_fast

        return run_fast(options, stdin)
    del options["plain"]
    try:
        store_dir = resolve_dir(options.pop("dir"))
    except OSError:  # e.g. the working directory was deleted under the harness
        return 0
    options["redact"] = redaction_on(store_dir, not options["redact"])
    stream = stdin if stdin is not None else sys.stdin.buffer
    try:
        raw = stream.read()
        payload = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if not payload.strip():
            log_error(store_dir, "empty payload on stdin; nothing recorded")
            return 0
        db_file = store_dir / DB_NAME
        if options["sync"] or not store_is_current(db_file):
            # First use of a store (create + migrate) or --sync: the full path, which reads
            # the payload we already took from stdin.
            sys.stdin = io.TextIOWrapper(io.BytesIO(payload.encode("utf-8")), encoding="utf-8")
            return None
        enqueue(db_file, payload, options)
        ensure_drainer(store_dir)
    except Exception as exc:  # noqa: BLE001 - capture must never fail the harness
        log_error(store_dir, f"{type(exc).__name__}: {exc}")
    return 0
