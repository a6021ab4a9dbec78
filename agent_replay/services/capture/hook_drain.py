"""The hook drainer: turns queued hook payloads into steps, through the recorder.

Started detached by the hook's fast path (``hook_inbox.ensure_drainer``) holding the drainer
lock, or called in-process (``drain``) by the full ``hook`` path and by tests. It processes the
inbox in arrival order, a batch per transaction with a savepoint per payload, so one bad
payload is logged and dropped without holding up the rest. When the inbox is empty it releases
the lock, looks once more, and exits.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from agent_replay.clock import Clock, SystemClock
from agent_replay.services.capture.hook_inbox import log_error, try_lock
from agent_replay.store.db import Store
from agent_replay.store.writes import execute

BATCH = 25  # a hook arriving mid-batch waits for the write lock at most ~25 ms


def pending_count(store: Store) -> int:
    """How many payloads wait in the inbox."""
    return int(execute(store, "SELECT COUNT(*) FROM hook_inbox").fetchone()[0])


def drain(store: Store, *, clock: Clock | None = None, store_dir: Path | None = None) -> int:
    """Process every queued payload; returns how many were processed.

    The caller must hold the drainer lock (or know no drainer runs, as in tests).
    """
    from agent_replay.services.capture.hooks import apply_hook_payload

    clock = clock or SystemClock()
    done = 0
    while True:
        with store.write():
            rows = execute(
                store,
                "SELECT id, received_ms, payload, options FROM hook_inbox ORDER BY id LIMIT ?",
                [BATCH],
            ).fetchall()
            if not rows:
                return done
            for row_id, received_ms, payload, options in rows:
                try:
                    with store.db.atomic():  # a savepoint: a failure drops this payload only
                        settings = {**json.loads(options), "received_ms": received_ms}
                        apply_hook_payload(store, json.loads(payload), settings, clock)
                except Exception as exc:  # noqa: BLE001 - one bad payload never stops the queue
                    _report(store_dir, row_id, exc)
                execute(store, "DELETE FROM hook_inbox WHERE id = ?", [row_id])
                done += 1


def _report(store_dir: Path | None, row_id: int, exc: BaseException) -> None:
    if store_dir is not None:
        log_error(store_dir, f"payload {row_id} dropped: {type(exc).__name__}: {exc}")


def drain_with_lock(store_dir: Path, *, clock: Clock | None = None, wait: bool = True) -> int:
    """Take the drainer lock (waiting for a running drainer if ``wait``) and drain the inbox."""
    import fcntl

    from agent_replay.paths import db_path
    from agent_replay.store.db import open_store

    fd = os.open(store_dir / "hook-drain.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        with open_store(db_path(store_dir), create=True) as store:
            return drain(store, clock=clock, store_dir=store_dir)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    """The detached drainer process: drain, release, re-check, exit."""
    parser = argparse.ArgumentParser(prog="agent-replay-hook-drain")
    parser.add_argument("store_dir", type=Path)
    parser.add_argument("--lock-fd", type=int, required=True)
    args = parser.parse_args(argv)
    from agent_replay.paths import db_path
    from agent_replay.store.db import open_store

    fd: int | None = args.lock_fd
    try:
        with open_store(db_path(args.store_dir), create=True) as store:
            while fd is not None:
                drain(store, store_dir=args.store_dir)
                os.close(fd)  # release, then look again: a payload may have just arrived
                fd = None
                if pending_count(store):
                    fd = try_lock(args.store_dir)  # None: another drainer took over
    except Exception as exc:  # noqa: BLE001 - a detached process has nowhere else to report
        log_error(args.store_dir, f"drainer stopped: {type(exc).__name__}: {exc}")
        return 1
    finally:
        if fd is not None:
            os.close(fd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
