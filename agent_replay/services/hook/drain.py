"""The hook drainer: turns queued hook payloads into steps, through the recorder.

Started detached by the hook's fast path (``inbox.ensure_drainer``) holding the drainer
lock, or called in-process (``drain``) by the full ``hook`` path, by ``push`` and by tests. It
processes the inbox in arrival order, a batch per transaction with a savepoint per payload, so
one bad payload is logged and dropped without holding up the rest. When the inbox is empty it
releases the lock, looks once more, and exits.

A payload queued with a database URL (``--db-url``/``AGENT_REPLAY_DB_URL``: a team's
PostgreSQL store) is spooled: the local inbox holds it until the drainer has recorded it in
that store. Each carries a random spool key; the target store records the key in
``hook_receipts`` in the same transaction as the payload's steps, so a payload whose spool row
outlived its delivery (a drainer killed in between) is never applied twice. When the server
can't be reached the payloads stay spooled, in order, for the next hook invocation's drainer
or ``agent-replay push``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peewee import fn

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import AgentReplayError
from agent_replay.paths import DB_NAME, db_path
from agent_replay.services.hook.inbox import (
    ENV_IDLE,
    IDLE_S,
    LOCK_NAME,
    NICE,
    WAKE_NAME,
    ensure_drainer,
    log_error,
    signal_drainer,
    try_lock,
)
from agent_replay.store.db import DB_ERRORS, Store, mask_url, open_store
from agent_replay.store.models import HookInboxRow, HookReceiptRow
from agent_replay.store.statements import Statement, arg, insert_statement

BATCH = 25  # a hook arriving mid-batch waits for the write lock at most ~25 ms
CHUNK_S = 0.1
"""The longest one drain transaction holds the write lock before it commits (a payload that
takes longer alone is still recorded whole, in a transaction of its own)."""
BIG_PAYLOAD = 256 * 1024
"""A payload this large (as queued) is parsed before a transaction of its own begins."""
RECEIPT_DAYS = 30
"""How long a target store keeps a delivered payload's receipt (its spool row is deleted
right after delivery; the receipt only matters if that delete never happened)."""


# Run once or more per hook event (the drainer wakes per payload): built once, not per run.
_PENDING = Statement(lambda: HookInboxRow.select(fn.COUNT(HookInboxRow.id)))
_BATCH = Statement(
    lambda: (
        HookInboxRow.select(
            HookInboxRow.id, HookInboxRow.received_ms, HookInboxRow.payload, HookInboxRow.options
        )
        .where(HookInboxRow.id > arg())
        .order_by(HookInboxRow.id)
        .limit(arg())
    )
)
"""The next ``(id, received_ms, payload, options)`` rows after an id: (after, how many)."""
_DONE = Statement(lambda: HookInboxRow.delete().where(HookInboxRow.id == arg()))
"""A processed payload leaves the inbox: (id,)."""
_RECEIPT = insert_statement(HookReceiptRow, [HookReceiptRow.spool_key, HookReceiptRow.delivered_ms])
_EXPIRE = Statement(lambda: HookReceiptRow.delete().where(HookReceiptRow.delivered_ms < arg()))


def pending_count(store: Store) -> int:
    """How many payloads wait in the inbox."""
    return int(_PENDING.run(store).fetchone()[0])


@dataclass
class DrainReport:
    """What a drain did: payloads processed, and those left spooled for unreachable stores."""

    done: int = 0
    delivered: int = 0
    """Of ``done``, payloads recorded in a database-URL store."""
    stuck: int = 0
    """Payloads left in the inbox because their store could not be reached."""
    unreachable: dict[str, str] = field(default_factory=dict)
    """Masked URL -> the connection error, for each store that could not be reached."""
    ended: bool = False
    """The last payload processed ended a session (``SessionEnd``)."""


class _Targets:
    """The stores spooled payloads go to, opened once per drain (``None``: unreachable)."""

    def __init__(self, store_dir: Path | None) -> None:
        self.store_dir = store_dir
        self.stores: dict[str, Store | None] = {}
        self.errors: dict[str, str] = {}

    def get(self, url: str) -> Store | None:
        if url not in self.stores:
            try:
                self.stores[url] = open_store(url, create=True)
            except (AgentReplayError,) + DB_ERRORS as exc:
                message = getattr(exc, "message", None) or str(exc)
                self.stores[url] = None
                self.errors[mask_url(url)] = message
                if self.store_dir is not None:
                    log_error(self.store_dir, f"payloads stay spooled: {message}")
        return self.stores[url]

    def down(self, url: str, store: Store | None) -> None:
        """Give up on this store for the rest of the drain (its payloads stay spooled)."""
        if store is not None:
            store.close()
        self.stores[url] = None

    def close(self) -> None:
        for store in self.stores.values():
            if store is not None:
                store.close()


def drain(
    store: Store,
    *,
    clock: Clock | None = None,
    store_dir: Path | None = None,
    report: DrainReport | None = None,
    await_calls: bool = False,
) -> int:
    """Process every queued payload; returns how many were processed.

    Payloads with a database URL go to that store (see the module docstring); those whose
    store can't be reached stay in the inbox (counted in ``report.stuck``). The caller must
    hold the drainer lock (or know no drainer runs, as in tests). ``await_calls`` (the
    detached drainer, never a caller the harness waits for): a PreToolUse whose tool call
    the harness has not yet written to its session file waits for it, outside any
    transaction, up to ``transcript_follow.CALL_WAIT_S``, so the model call is recorded
    before the tool call it made.
    """
    clock = clock or SystemClock()
    report = report if report is not None else DrainReport()
    targets = _Targets(store_dir)
    try:
        # Passes over the inbox in id order, skipping (not re-reading) rows left for an
        # unreachable store, until all that is left is such rows. A new pass picks up rows
        # queued meanwhile under a reused id (the rowid restarts low once the inbox empties).
        while True:
            stuck = _drain_pass(store, targets, clock, store_dir, report, await_calls)
            if pending_count(store) <= stuck:
                report.stuck = stuck
                return report.done
    finally:
        report.unreachable.update(targets.errors)
        targets.close()


def _drain_pass(
    store: Store,
    targets: _Targets,
    clock: Clock,
    store_dir: Path | None,
    report: DrainReport,
    await_calls: bool = False,
) -> int:
    """One pass over the inbox; returns how many payloads it left for unreachable stores."""
    after = 0
    stuck = 0
    while True:
        rows = _BATCH.run(store, (after, BATCH)).fetchall()
        if not rows:
            return stuck
        after = int(rows[-1][0])
        local: list[Any] = []
        spooled: dict[str, list[Any]] = {}
        for row in rows:
            url = _options(row).get("db_url")
            if url:
                spooled.setdefault(str(url), []).append(row)
            else:
                local.append(row)
        if local:
            _apply_local(store, local, clock, store_dir, report, await_calls)
        for url, batch in spooled.items():
            target = targets.get(url)
            if target is None or not _deliver(store, target, batch, clock, store_dir, report):
                targets.down(url, target)
                stuck += len(batch)


def _options(row: Any) -> dict[str, Any]:
    try:
        value = json.loads(row[3])
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def _parse(row: Any) -> tuple[Any, dict[str, Any]]:
    """A queued payload's data and settings (parsed before the write lock is taken: a large
    payload's parse must not hold up the hooks waiting to queue theirs)."""
    _, received_ms, payload, options = row
    settings = {**json.loads(options), "received_ms": received_ms}
    settings.pop("db_url", None)
    settings.pop("spool_key", None)
    return json.loads(payload), settings


def _apply(
    target: Store, row: Any, clock: Clock, parsed: tuple[Any, dict[str, Any]] | None = None
) -> None:
    """Record one payload in ``target`` (inside the caller's transaction)."""
    # Deferred (~150 ms of the recorder, the dialects and the importers): the detached drainer
    # lowers its priority and closes what it inherited first (``main``), then ``_warm``s.
    from agent_replay.services.hook.capture import apply_hook_payload

    data, settings = parsed if parsed is not None else _parse(row)
    apply_hook_payload(target, data, settings, clock)
    if "guard" in settings:  # decided by `hook --enforce`
        from agent_replay.services.hook.guard_check import record_guard_check

        record_guard_check(target, data, settings, clock)


def _apply_local(
    store: Store,
    rows: list[Any],
    clock: Clock,
    store_dir: Path | None,
    report: DrainReport,
    await_calls: bool = False,
) -> None:
    """Payloads for the local store: each recorded and removed from the inbox in one
    transaction, several a transaction while they are quick, a new transaction once one has
    held the write lock ``CHUNK_S`` (a large payload never makes the hooks queueing theirs
    wait long); each payload is parsed before the lock is taken, and waits there for its
    tool call to reach the session file (``await_calls``, see ``drain``)."""
    index = 0
    while index < len(rows):
        parsed = _parse_or_none(rows[index])
        pending = _unwritten_call(parsed) if await_calls else None
        if pending is not None:
            from agent_replay.services.capture.transcript_follow import wait_for_call

            wait_for_call(*pending)
        with store.write():
            began = time.monotonic()
            while True:
                row = rows[index]
                index += 1
                try:
                    if isinstance(parsed, BaseException):
                        raise parsed
                    with store.db.atomic():  # a savepoint: a failure drops this payload only
                        _apply(store, row, clock, parsed)
                    data = parsed[0]
                    report.ended = isinstance(data, dict) and data.get("hook_event_name") in (
                        "SessionEnd",
                        "session_end",
                    )
                except Exception as exc:  # noqa: BLE001 - one bad payload never stops the queue
                    _report(store_dir, row[0], exc)
                _DONE.run(store, (row[0],))
                report.done += 1
                if index >= len(rows) or time.monotonic() - began >= CHUNK_S:
                    break
                if len(rows[index][2] or "") > BIG_PAYLOAD:
                    break  # parse it outside the lock, in the next transaction
                parsed = _parse_or_none(rows[index])
                if await_calls and _unwritten_call(parsed) is not None:
                    break  # wait for the session file outside the lock


def _unwritten_call(parsed: tuple[Any, dict[str, Any]] | Exception) -> tuple[Path, str] | None:
    """The session file and call id of a payload whose tool call is not yet in that file
    (see ``drain``), else ``None``."""
    from agent_replay.services.capture.transcript_follow import call_not_yet_written

    return None if isinstance(parsed, Exception) else call_not_yet_written(parsed[0])


def _parse_or_none(row: Any) -> tuple[Any, dict[str, Any]] | Exception:
    """``_parse``, or the error that says why the payload can't be read."""
    try:
        return _parse(row)
    except Exception as exc:  # noqa: BLE001 - reported (and the payload dropped) by the caller
        return exc


def _deliver(
    inbox: Store,
    target: Store,
    rows: list[Any],
    clock: Clock,
    store_dir: Path | None,
    report: DrainReport,
) -> bool:
    """Spooled payloads for a database-URL store: recorded there with their receipts in one
    transaction, then removed from the local inbox. A lost connection leaves them spooled
    (returns ``False``)."""
    now_ms = int(clock.now().timestamp() * 1000)
    try:
        with target.write():
            keys = [str(_options(r).get("spool_key") or f"row-{r[0]}-{r[1]}") for r in rows]
            seen = {
                key
                for (key,) in HookReceiptRow.select(HookReceiptRow.spool_key)
                .where(HookReceiptRow.spool_key.in_(keys))
                .tuples()
                .execute(target.db)
            }
            for row, key in zip(rows, keys, strict=True):
                if key in seen:
                    continue
                try:
                    with target.db.atomic():
                        _apply(target, row, clock)
                except DB_ERRORS as exc:
                    if _connection_lost(target):
                        raise
                    _report(store_dir, row[0], exc)
                except Exception as exc:  # noqa: BLE001 - one bad payload never stops the queue
                    _report(store_dir, row[0], exc)
                _RECEIPT.run(target, (key, now_ms))
            _EXPIRE.run(target, (now_ms - RECEIPT_DAYS * 86_400_000,))
    except DB_ERRORS as exc:
        report.unreachable[target.label] = str(exc).strip().splitlines()[0] if str(exc) else ""
        if store_dir is not None:
            log_error(store_dir, f"payloads stay spooled for {target.label}: {exc}")
        return False
    with inbox.write():
        _DONE.run_many(inbox, [(row[0],) for row in rows])
    report.done += len(rows)
    report.delivered += len(rows)
    return True


def _connection_lost(store: Store) -> bool:
    """Whether the server connection broke (as opposed to one payload's statement failing)."""
    try:
        return bool(store.db.is_closed() or not store.db.is_connection_usable())
    except Exception:  # noqa: BLE001 - any doubt about the connection counts as lost
        return True


def _report(store_dir: Path | None, row_id: int, exc: BaseException) -> None:
    if store_dir is not None:
        log_error(store_dir, f"payload {row_id} dropped: {type(exc).__name__}: {exc}")


def drain_with_lock(
    store_dir: Path,
    *,
    clock: Clock | None = None,
    wait: bool = True,
    report: DrainReport | None = None,
) -> int:
    """Take the drainer lock and drain the inbox; returns how many payloads were processed.

    A running drainer is asked to stop (it would otherwise hold the lock until it idles out)
    and waited for, unless not ``wait`` (then ``BlockingIOError``). Payloads queued while we
    held the lock, by hooks that found it taken, get a drainer when we release it."""
    import fcntl

    report = report if report is not None else DrainReport()
    fd = os.open(store_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    held = True
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait:
                    raise
                signal_drainer(store_dir, b"q")  # not yet listening: starting, or stopping
                time.sleep(0.005)
        with open_store(db_path(store_dir), create=True) as store:
            done = drain(store, clock=clock, store_dir=store_dir, report=report)
            os.close(fd)
            held = False
            if pending_count(store) > report.stuck:
                ensure_drainer(store_dir)
            return done
    finally:
        if held:
            os.close(fd)


class _Wake:
    """The drainer's end of the wake FIFO: a reader, plus a writer of its own so the reader
    never sees end-of-file between hooks. ``None`` from ``open`` where FIFOs can't be made
    (then the drainer stops once the inbox is empty, and the next hook starts another)."""

    def __init__(self, path: Path, reader: int, writer: int) -> None:
        self.path, self.reader, self.writer = path, reader, writer

    @classmethod
    def open(cls, store_dir: Path) -> _Wake | None:
        import stat

        path = store_dir / WAKE_NAME
        try:
            try:
                if not stat.S_ISFIFO(os.lstat(path).st_mode):
                    path.unlink()  # not a FIFO: hooks would write to it and start no drainer
            except FileNotFoundError:
                pass
            try:
                os.mkfifo(path, 0o600)
            except FileExistsError:
                pass
            reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            os.close(reader)
            return None
        return cls(path, reader, writer)

    def wait(self, timeout: float) -> bytes:
        """The bytes hooks wrote, after at most ``timeout`` seconds (empty: none came)."""
        import select

        ready, _, _ = select.select([self.reader], [], [], max(timeout, 0.0))
        if not ready:
            return b""
        try:
            return os.read(self.reader, 4096)
        except BlockingIOError:
            return b""

    def close(self) -> None:
        os.close(self.reader)
        os.close(self.writer)


CHECK_S = 10.0
"""How often an idle drainer checks that its store is still there (a deleted or replaced
store directory must not keep a drainer alive)."""
LINGER_S = 5.0
"""How long a drainer waits after a payload that ended a session (``SessionEnd``) before it
stops: other sessions on the store keep it busy, and a harness run in a script is done."""


def _idle_s() -> float:
    try:
        return max(float(os.environ.get(ENV_IDLE, "")), 0.0)
    except ValueError:
        return IDLE_S


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file ``fd`` has open (the store was not removed)."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def serve(store: Store, store_dir: Path, fd: int) -> None:
    """Drain, then wait for wake-ups until idle, asked to stop, or the store is gone.

    Going idle: close the FIFO (hooks now find no listener and try the lock), release the
    lock, and read the inbox once more: a payload that arrived meanwhile is taken over (the
    lock retaken) unless another drainer took it first. Asked to stop (``drain_with_lock``
    waits for the lock, then drains itself) or with the store gone, it just exits. With its
    database file replaced (restored from a backup, say), it hands over to a new drainer,
    which opens the file the hooks now write to."""
    lock: int | None = fd
    idle = _idle_s()
    db_file = store_dir / DB_NAME
    opened = _file_id(db_file)
    while lock is not None:
        _claim(lock)
        wake = _Wake.open(store_dir)
        report = DrainReport()
        why = "idle"
        try:
            while True:
                report = DrainReport()
                drain(store, store_dir=store_dir, report=report, await_calls=True)
                if wake is None:
                    break
                why = _wait(wake, lock, store_dir, LINGER_S if report.ended else idle)
                if why == "wake" and _file_id(db_file) != opened:
                    why = "replaced"
                if why != "wake":
                    break
        finally:
            if wake is not None:
                wake.close()
        os.close(lock)
        lock = None
        if why == "replaced":
            ensure_drainer(store_dir)
            return
        # Payloads spooled for an unreachable store stay: only newer ones count.
        if why == "idle" and pending_count(store) > report.stuck:
            lock = try_lock(store_dir)  # None: another drainer (or drain_with_lock) took over


def _claim(lock: int) -> None:
    """Write our pid into the lock file (for ``doctor``, benchmarks and tests; the lock
    itself, not the pid, is what keeps a second drainer out)."""
    try:
        os.ftruncate(lock, 0)
        os.pwrite(lock, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass


def _wait(wake: _Wake, lock: int, store_dir: Path, quiet: float) -> str:
    """Wait for the next wake-up: ``wake``, ``stop`` (asked to, or the store is gone), or
    ``idle`` after ``quiet`` seconds without one."""
    began = time.monotonic()
    while True:
        left = quiet - (time.monotonic() - began)
        got = wake.wait(min(left, CHECK_S))
        if b"q" in got or not _same_file(lock, store_dir / LOCK_NAME):
            return "stop"
        if got:
            return "wake"
        if left <= CHECK_S:
            return "idle"


def detach(keep: int) -> None:
    """Low priority, and no descriptor but stdio and ``keep`` (the hook that started us
    closed the rest already where it could list them)."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) < NICE:
            os.setpriority(os.PRIO_PROCESS, 0, NICE)
    except OSError:
        pass
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)


def _warm() -> None:
    """Import what recording payloads needs before the first transaction: imported inside
    it, the write lock would be held for the imports (~150 ms, longer at low priority) while
    the hooks queueing payloads wait for it."""
    # capture imports the dialects and the session-file follower; guard_check the recorder.
    from agent_replay.services.hook import capture, guard_check  # noqa: F401 - side effect


def main(argv: list[str] | None = None) -> int:
    """The detached drainer process: serve the store's inbox for a session, then exit."""
    parser = argparse.ArgumentParser(prog="agent-replay-hook-drain")
    parser.add_argument("store_dir", type=Path)
    parser.add_argument("--lock-fd", type=int, required=True)
    args = parser.parse_args(argv)
    detach(args.lock_fd)
    _warm()
    fd: int | None = args.lock_fd
    try:
        with open_store(db_path(args.store_dir), create=True) as store:
            assert fd is not None
            serve(store, args.store_dir, fd)
            fd = None  # serve closed it
    except Exception as exc:  # noqa: BLE001 - a detached process has nowhere else to report
        log_error(args.store_dir, f"drainer stopped: {type(exc).__name__}: {exc}")
        return 1
    finally:
        if fd is not None:
            os.close(fd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
