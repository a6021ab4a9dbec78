"""The receiver's writer: a process of its own that stages received items and rebuilds their
traces in batched transactions, off the request path.

Request handlers only enqueue (``submit``): the items, already decoded, normalized and
redacted, are serialized (compact JSON, as they are staged) and piped to the writer process
(``writer_process``), which owns the store connection and does everything else: staging,
regrouping, building, validating and replacing traces. Decoding and writing are both CPU-bound
Python; in separate processes they run on separate cores instead of taking turns at one GIL.

Each batch the process writes is one ``BEGIN IMMEDIATE`` transaction (see
``writer_process.BatchWriter``); while one batch is written the next accumulates, so under
load batches grow and commits stay few (group commit). The process acknowledges every
committed batch; until then this side keeps the batch, so:

- ``pending`` counts the items not yet acknowledged, and ``submit`` refuses more than
  ``max_pending`` (the server answers 503, retryable) instead of growing without bound;
- ``flush`` waits for the acknowledgements of everything submitted;
- ``stop`` drains: it closes the pipe after the last batch, and the process writes everything
  it was sent before it exits;
- a writer process that dies (killed, crashed) is restarted and sent every unacknowledged
  batch again (staging is idempotent, so a batch written twice changes nothing).

The process ignores SIGINT: a Ctrl-C in the terminal reaches the whole process group, and the
receiver, not the writer, decides when writing stops.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import orjson

from agent_replay.clock import Clock, SystemClock
from agent_replay.paths import append_private
from agent_replay.services.redact import redact_text

Log = Callable[[str], None]

FRAME_HEADER = struct.Struct(">IQQII")
"""A batch on the pipe: body length, sequence number, received time (Unix ms), spans, log
records; then the body: each span, then each log record, as compact JSON (which has no raw
newline) and a newline. The writer process stages each item's text as it came."""

_BOOT = (
    "import json, sys; config = json.loads(sys.argv[1]); sys.path[:] = config['sys_path']; "
    "from agent_replay.services.otel.writer_process import main; main(config)"
)
"""The writer process's command (``python -c``)."""

_MAX_RESTARTS = 3
"""Writer processes that may die in a row, acknowledging nothing, before the writer gives up."""


@dataclass
class WriterStats:
    """Counters, read by the server's summary (updated from the writer process's reports)."""

    spans_staged: int = 0
    """Spans new to the store (a redelivered span is not counted again)."""
    logs_staged: int = 0
    batches: int = 0
    traces_rebuilt: int = 0
    trace_ids: set[str] = field(default_factory=set)
    build_errors: int = 0
    write_errors: int = 0
    warnings: int = 0

    def add(self, counts: dict[str, int]) -> None:
        """Add a report's counters (everything but ``trace_ids``)."""
        for name, value in counts.items():
            setattr(self, name, getattr(self, name) + value)


COUNTERS = tuple(f.name for f in fields(WriterStats) if f.name != "trace_ids")


@dataclass
class _Frame:
    seq: int
    items: int
    data: bytes


class _Child:
    """One writer process and the thread reading its reports."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.dead = False
        self.acked = 0
        self.reader: threading.Thread | None = None


class OtelWriter:
    """Stage received spans and log records and keep their traces built, in a writer process.

    Args:
        db_file: the store's database file (the writer process opens its own connection).
        clock: stamps received and first-seen times (when an item is accepted).
        max_pending: the most items (spans + log records) not yet written; ``submit`` refuses
            more, and the server answers 503 (retryable) instead of growing without bound.
        batch_items: the most items written in one transaction.
        log: where problems are reported (one line each).
        error_log: where tracebacks of unexpected build failures go.
    """

    def __init__(
        self,
        db_file: Path,
        *,
        clock: Clock | None = None,
        max_pending: int = 500_000,
        batch_items: int = 20_000,
        log: Log | None = None,
        error_log: Path | None = None,
    ) -> None:
        self.db_file = db_file
        self.clock = clock or SystemClock()
        self.max_pending = max_pending
        self.batch_items = batch_items
        self.log: Log = log or (lambda _line: None)
        self.error_log = error_log
        self.stats = WriterStats()
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        """Guards the state below; wakes ``flush`` and ``stop`` waiters."""
        self._work = threading.Condition(lock)
        """Wakes the feeding thread: request threads only wake it when it waits for work, not
        once per request."""
        self._feeder_waiting = False
        self._sending = False
        """A thread is writing batches to the writer process."""
        self._outbox: deque[_Frame] = deque()
        """Batches not yet sent to the current writer process."""
        self._unacked: deque[_Frame] = deque()
        """Batches sent and not yet acknowledged (sent again to a restarted process)."""
        self._pending = 0
        self._submitted = 0
        self._written = 0
        self._stopping = False
        self._failed = False
        """The writer process can't be run (it kept dying): nothing more is accepted."""
        self._lost = False
        """Some accepted items were not written (``stop`` reports it)."""
        self._lost_seqs: set[int] = set()
        """Batches the writer process reported it could not write (their requests get 503)."""
        self._child: _Child | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # --- the request side -------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer process (and the thread that feeds it)."""
        self._thread = threading.Thread(target=self._supervise, name="otel-writer", daemon=True)
        self._thread.start()

    def submit(self, spans: list[dict[str, Any]], logs: list[dict[str, Any]]) -> int | None:
        """Queue items for writing; returns the batch's sequence number (``wait_written``
        tells when it is on disk), ``None`` (nothing queued) when the queue is full."""
        size = len(spans) + len(logs)
        if not self._has_room(size):  # refused before paying for the encoding
            return None
        received_ms = int(self.clock.now().timestamp() * 1000)
        dumps = orjson.dumps
        body = b"".join([dumps(item) + b"\n" for item in spans] + [dumps(r) + b"\n" for r in logs])
        with self._cond:
            if not self._has_room(size):
                return None
            self._submitted += 1
            seq = self._submitted
            header = FRAME_HEADER.pack(len(body), seq, received_ms, len(spans), len(logs))
            self._outbox.append(_Frame(seq, size, header + body))
            self._pending += size
            child = self._child
            if self._sending or child is None or child.dead:
                # Another thread is sending (it takes this batch too), or there is no process
                # to send to yet: the feeding thread will.
                if self._feeder_waiting and not self._sending:
                    self._work.notify()
                return seq
            self._sending = True
        # Send it from this thread: waking the feeding thread for every request costs more
        # than the write (the process reads its input promptly, whatever the disk does).
        self._send(child)
        return seq

    def wait_written(self, seq: int, timeout: float | None = None) -> bool:
        """Wait until batch ``seq`` is committed to the store (the writer process commits
        batches as they come, several requests' at once, with ``synchronous=FULL``);
        ``False`` on timeout, or when the batch could not be written."""
        with self._cond:
            done = self._cond.wait_for(
                lambda: self._written >= seq or self._failed, timeout=timeout
            )
            return done and self._written >= seq and seq not in self._lost_seqs

    def _has_room(self, size: int) -> bool:
        if self._stopping or self._failed:
            return False
        return not (self._pending and self._pending + size > self.max_pending)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the writer process has opened the store (items submitted before are
        queued, not lost); ``False`` on timeout."""
        return self._ready.wait(timeout)

    @property
    def pending(self) -> int:
        """Items queued and not yet written."""
        with self._cond:
            return self._pending

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is written; ``False`` on timeout."""
        with self._cond:
            target = self._submitted
            return self._cond.wait_for(
                lambda: self._written >= target or self._failed, timeout=timeout
            ) and (self._written >= target)

    def stop(self, timeout: float | None = None) -> bool:
        """Write everything queued, then end the writer process; ``True`` when nothing
        accepted was left unwritten."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            self._work.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._cond:
            return (
                not self._outbox
                and not self._unacked
                and self._written >= self._submitted
                and not self._lost
            )

    def report(self, line: str) -> None:
        """Report a problem: one line to the log, the current traceback to the error log."""
        self.log(line)
        write_error_log(self.error_log, line, traceback.format_exc())

    # --- feeding the writer process -----------------------------------------------------------

    def _supervise(self) -> None:
        """Run a writer process and feed it; when it dies with batches unwritten (killed,
        crashed), start another and send it those batches again."""
        deaths = 0
        while True:
            child = self._spawn()
            code = None
            if child is not None:
                self._feed(child)
                if child.reader is not None:
                    child.reader.join()
                code = child.process.wait()
            with self._cond:
                self._child = None
                if not self._unacked and not self._outbox and self._stopping:
                    return  # drained, and it exited at the end of its input
                self._outbox.extendleft(reversed(self._unacked))
                self._unacked.clear()
                deaths = 0 if child is not None and child.acked else deaths + 1
                giving_up = deaths >= _MAX_RESTARTS
                if giving_up:
                    self._failed = self._lost = True
                    self._cond.notify_all()
                pending = self._pending
            if giving_up:
                self.log(
                    f"the writer process keeps exiting (code {code}); "
                    f"{pending} item(s) can't be written"
                )
                return
            self.log(f"the writer process exited (code {code}); restarting it")
            time.sleep(0.1 * deaths)

    def _spawn(self) -> _Child | None:
        config = {
            "db_file": str(self.db_file),
            "batch_items": self.batch_items,
            "error_log": str(self.error_log) if self.error_log else None,
        }
        # This process's import path, as multiprocessing's spawn passes it: the writer runs
        # the same package, wherever it was imported from (a checkout, a wheel).
        config["sys_path"] = list(sys.path)
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, orjson.dumps(config).decode()],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
        except OSError as exc:
            self.log(f"cannot start the writer process: {exc}")
            return None
        child = _Child(process)
        child.reader = threading.Thread(
            target=self._read_reports, args=(child,), name="otel-writer-reports", daemon=True
        )
        child.reader.start()
        with self._cond:
            self._child = child
        return child

    def _feed(self, child: _Child) -> None:
        """Send what request threads couldn't (before the process started, while another
        thread was sending); at stop, send the rest and close the process's input (it drains
        and exits). Returns when stopped or when the process dies."""
        while True:
            with self._cond:
                self._feeder_waiting = True
                self._work.wait_for(
                    lambda: child.dead or not self._sending and (self._outbox or self._stopping)
                )
                self._feeder_waiting = False
                if child.dead or not self._outbox:  # dead, or stopping with everything sent
                    break
                self._sending = True
            if not self._send(child):
                break
        try:
            assert child.process.stdin is not None
            child.process.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def _send(self, child: _Child) -> bool:
        """Write the outbox to the writer process, until it is empty; the caller has claimed
        ``_sending`` (one writer at a time keeps the batches in order). ``False`` when the
        process is gone (the supervisor sends its batches to the next one)."""
        stdin = child.process.stdin
        assert stdin is not None
        while True:
            with self._cond:
                if not self._outbox or child.dead:
                    self._sending = False
                    # The feeding thread may wait for this to end: to drain at stop, or to
                    # send batches queued again for a new process.
                    if self._feeder_waiting and (self._outbox or self._stopping):
                        self._work.notify()
                    return not child.dead
                frames = list(self._outbox)
                self._outbox.clear()
                self._unacked.extend(frames)
            try:
                for frame in frames:
                    stdin.write(frame.data)
                stdin.flush()
            except (OSError, ValueError):  # a broken pipe: it died
                with self._cond:
                    child.dead = True
                    self._sending = False
                    self._work.notify_all()
                return False

    def _read_reports(self, child: _Child) -> None:
        """Apply the writer process's reports: written batches, counters, log lines."""
        stdout = child.process.stdout
        assert stdout is not None
        try:
            for line in iter(stdout.readline, b""):
                try:
                    report = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                self._apply(child, report)
        finally:
            with self._cond:
                child.dead = True
                self._cond.notify_all()
                self._work.notify_all()

    def _apply(self, child: _Child, report: dict[str, Any]) -> None:
        seq = report.get("seq")
        with self._cond:
            self.stats.add(report.get("counts") or {})
            self.stats.trace_ids.update(report.get("trace_ids") or ())
            if report.get("lost"):
                self._lost = True
            if report.get("ready"):
                self._ready.set()
            if seq is not None:
                while self._unacked and self._unacked[0].seq <= seq:
                    frame = self._unacked.popleft()
                    self._pending -= frame.items
                    if report.get("lost"):
                        self._lost_seqs.add(frame.seq)
                self._written = max(self._written, seq)
                child.acked += 1
            self._cond.notify_all()
        for text in report.get("log") or ():
            self.log(text)


def write_error_log(error_log: Path | None, line: str, details: str) -> None:
    """Append a problem and its traceback to the error log (best effort)."""
    if error_log is None:
        return
    try:
        append_private(error_log, redact_text(f"--- otel serve\n{line}\n{details}\n"))
    except OSError:
        pass  # the one-line report already went out
