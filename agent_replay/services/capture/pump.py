"""Reading a live stream and committing it in small transactions (group commit).

``FdReader`` reads complete lines from a file descriptor without buffering that hides data
from ``select``; ``pump`` feeds them to a ``LineSink`` (the native engine, or a stream
format's mapper in ``streams.py``) and commits each batch; ``finish`` ends the stream.

``pump`` opens one ``BEGIN IMMEDIATE`` transaction per batch and commits when no more input is
immediately available or ``WINDOW_S`` has passed since the batch began, so a recorder killed at
any moment loses at most the batch in flight (how the engine coalesces a batch's steps: see
``events``).
"""

from __future__ import annotations

import os
import select
import stat
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from agent_replay.services.capture.protocol import EventReport, rejection_reason

if TYPE_CHECKING:
    from agent_replay.services.capture.events import EventEngine

# The longest a batch stays uncommitted (seconds): the most a killed recorder can lose.
WINDOW_S = 0.1
READ_SIZE = 1 << 20
# What a pipe on stdin may hold (Linux: ``F_SETPIPE_SZ``, default 64 KiB; 1 MiB is what an
# unprivileged process may ask): the producer keeps writing while a batch is recorded, so the
# next batch takes everything that came meanwhile, in one read (group commit by itself).
PIPE_SIZE = 1 << 20


class Interrupted(Exception):
    """A signal arrived while the pump was waiting for input."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class FdReader:
    """Complete lines from a file descriptor, read with ``os.read`` (a buffered reader would
    hold data ``select`` can't see).

    Args:
        fd: a pipe, terminal or file.
        follow: tail a growing file instead of reading to EOF: called when no data is left,
            returns ``True`` once the writer is done (then the rest is read and the reader
            ends).
        poll_s: how long to sleep between reads when following.
    """

    def __init__(
        self,
        fd: int,
        *,
        follow: Callable[[], bool] | None = None,
        poll_s: float = 0.05,
    ) -> None:
        self.fd = fd
        self.follow = follow
        self.poll_s = poll_s
        # (line number, line, when it was read: ``time.time()``)
        self.lines: deque[tuple[int, bytes, float]] = deque()
        self.eof = False
        self.line_number = 0
        self.interrupted: int | None = None
        # True while blocked waiting for input: a signal handler may raise Interrupted then.
        self.waiting = False
        self._partial = b""
        _grow_pipe(fd)
        try:
            select.select([fd], [], [], 0)
            self._selectable = follow is None
        except (OSError, ValueError):  # e.g. Windows pipes: no select
            self._selectable = False

    def _take(self, chunk: bytes) -> None:
        # A line is stamped when it is read, not when the recorder gets to it (a busy batch
        # must not shift the times of events that leave them out).
        read_at = time.time()
        if not chunk:
            self.eof = True
            if self._partial:
                self.line_number += 1
                self.lines.append((self.line_number, self._partial, read_at))
                self._partial = b""
            return
        data = self._partial + chunk if self._partial else chunk
        parts = data.split(b"\n")
        self._partial = parts.pop()
        for part in parts:
            self.line_number += 1
            self.lines.append((self.line_number, part, read_at))

    def wait(self) -> bool:
        """Block until at least one more line (or the end) is there; ``False`` at the end."""
        while not self.lines:
            if self.eof or self.interrupted is not None:
                return bool(self.lines)
            if self.follow is not None:
                chunk = os.read(self.fd, READ_SIZE)
                if chunk:
                    self._take(chunk)
                    continue
                if self.follow():
                    self._take(os.read(self.fd, READ_SIZE))
                    if self.eof:
                        break
                    continue
                self.waiting = True
                try:
                    if self.interrupted is None:
                        time.sleep(self.poll_s)
                finally:
                    self.waiting = False
                continue
            # Only the wait itself may be cut short by a signal: data once read is kept.
            self.waiting = True
            try:
                if self.interrupted is not None:
                    continue
                if self._selectable:
                    select.select([self.fd], [], [])
                    self.waiting = False
                chunk = os.read(self.fd, READ_SIZE)
            finally:
                self.waiting = False
            self._take(chunk)
        return bool(self.lines)

    def poll(self) -> bool:
        """Read what is available right now without blocking; ``True`` if anything came."""
        if self.eof or self.interrupted is not None:
            return False
        if self.follow is not None:
            chunk = os.read(self.fd, READ_SIZE)
            if not chunk:
                return False  # a file at its current end is not EOF while following
        else:
            if not self._selectable:
                return False
            ready, _, _ = select.select([self.fd], [], [], 0)
            if not ready:
                return False
            chunk = os.read(self.fd, READ_SIZE)
        self._take(chunk)
        return True


def _grow_pipe(fd: int) -> None:
    """Ask for a bigger pipe buffer when ``fd`` is a pipe (best effort: Linux only, and the
    system's limit may refuse it)."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setsize is None:
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            fcntl.fcntl(fd, setsize, PIPE_SIZE)
    except OSError:
        pass  # a smaller pipe only means smaller batches


class LineSink:
    """What ``pump`` feeds: the native engine, or a stream format's mapper."""

    engine: EventEngine

    def feed_line(self, line: bytes, where: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def finish(self, *, leave_open: bool = False) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class NativeSink(LineSink):
    """Native protocol v1 lines straight into the engine."""

    def __init__(self, engine: EventEngine) -> None:
        self.engine = engine

    def feed_line(self, line: bytes, where: str) -> None:
        self.engine.feed_line(line, where)

    def finish(self, *, leave_open: bool = False) -> None:
        self.engine.finish(leave_open=leave_open)


def pump(reader: FdReader, sink: LineSink, *, window_s: float = WINDOW_S) -> None:
    """Record every line from ``reader`` with group commit.

    Each batch is one ``store.write()`` transaction: lines are recorded until no more input is
    immediately available, or ``window_s`` has passed since the batch began, then it commits.
    Returns at the end of input, or, once ``reader.interrupted`` is set (a signal handler sets
    it), after recording and committing every line already read.
    """
    engine = sink.engine
    store = engine.store
    monotonic = time.monotonic
    while reader.wait():
        with store.write():
            engine.begin_batch()
            deadline = monotonic() + window_s
            lines = reader.lines
            while True:
                while lines:
                    number, line, read_at = lines.popleft()
                    where = f"line {number}"
                    engine.arrived_at = read_at
                    try:
                        sink.feed_line(line, where)
                    except Exception as exc:  # noqa: BLE001 - a stream format's mapper too
                        engine.reject(where, "line", rejection_reason(exc))
                    if monotonic() >= deadline:
                        break
                if lines or monotonic() >= deadline or not reader.poll():
                    break
            engine.arrived_at = None
            engine.end_batch()


def finish(sink: LineSink, *, leave_open: bool = False) -> EventReport:
    """End a stream: write what is held and finalize the traces it left open."""
    with sink.engine.store.write():
        sink.finish(leave_open=leave_open)
    return sink.engine.report
