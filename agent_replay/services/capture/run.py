"""The process wrapper behind ``agent-replay run -- CMD...``: one trace per run, whatever the
child does.

Before starting the child it creates the trace (status ``running``, input the command line,
metadata ``argv`` and ``cwd``) and an events file in the store directory. The child gets
``AGENT_REPLAY_DIR``, ``AGENT_REPLAY_TRACE_ID`` (our id) and ``AGENT_REPLAY_EVENTS`` (that
file): an instrumented child appends native protocol v1 events to it, which a thread tails
live through the same ``EventEngine`` as ``record`` (events without a ``trace_id`` go to the
run's trace; the child's first ``trace_start`` claims it). The child's stdio is inherited
untouched. SIGTERM and SIGHUP sent to the wrapper are forwarded to the child, and so is SIGINT
unless the wrapper sits in the terminal's foreground process group, where Ctrl-C already reached
the child (forwarding it would deliver it twice). When the child exits the trace is finalized
from the exit: 0 -> ``completed`` (or what the child's own ``trace_end`` said), non-zero ->
``failed`` "exited with code N", killed -> ``failed`` "killed by signal SIGKILL"; metadata
gets ``exit_code``, ``signal`` and ``duration_ms``. The wrapper's exit status is the child's:
its code, or 128 + the signal number, as a shell reports it.

Never imports Textual, Rich or an AI SDK.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import AgentReplayError
from agent_replay.paths import ENV_DB_URL, ENV_DIR, db_path, make_private_dir
from agent_replay.services.capture.events import EventEngine
from agent_replay.services.capture.protocol import EventReport, Warn
from agent_replay.services.capture.pump import FdReader, NativeSink, finish, pump
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import DB_ERRORS, open_store

ENV_TRACE_ID = "AGENT_REPLAY_TRACE_ID"
ENV_EVENTS = "AGENT_REPLAY_EVENTS"
EVENTS_DIR = "events"
# Exit statuses a shell uses when a command can't be run.
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126

FORWARDED = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@dataclass
class RunOutcome:
    """How a wrapped run ended.

    Attributes:
        trace_id: the run's trace.
        exit_status: what ``run`` exits with (the child's code, 128 + signal, or 126/127).
        returncode: the child's return code as ``subprocess`` gives it (negative: a signal);
            ``None`` when it never started.
        error: why the trace failed, if it did.
        report: what the events the child wrote did (problems, warnings).
        events_file: the events file, when kept (it is removed when every line recorded).
    """

    trace_id: str
    exit_status: int
    returncode: int | None
    error: str | None
    report: EventReport = field(default_factory=EventReport)
    events_file: Path | None = None


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9 (or ``signal 99`` for an unknown number)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _terminal_reaches_child() -> bool:
    """Whether a terminal's Ctrl-C already reached the child: we (and so the child, which
    shares our process group) are the terminal's foreground process group."""
    getpgrp = getattr(os, "getpgrp", None)
    if getpgrp is None:
        return False
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return bool(os.tcgetpgrp(fd) == getpgrp())
        except OSError:
            continue
    return False


class _Forwarder:
    """Signal handlers that pass SIGINT/SIGTERM/SIGHUP on to the child (main thread only)."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.early: list[int] = []
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        for number in FORWARDED:
            self._previous[number] = signal.signal(number, self._handle)

    def restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    def started(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        for number in self.early:
            self._send(number)
        self.early.clear()

    def _handle(self, number: int, frame: Any) -> None:
        self.received.append(number)
        if self.process is None:
            self.early.append(number)
            return
        if number == signal.SIGINT and _terminal_reaches_child():
            return
        self._send(number)

    def _send(self, number: int) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            try:
                os.kill(process.pid, number)
            except ProcessLookupError:
                pass


class _Tail(threading.Thread):
    """Tails the events file into the engine until the child is done, then drains it."""

    def __init__(self, engine: EventEngine, path: Path, done: threading.Event) -> None:
        super().__init__(name="agent-replay-run-events", daemon=True)
        self.engine = engine
        self.path = path
        self.done = done
        self.failure: BaseException | None = None

    def run(self) -> None:
        store = self.engine.store
        store.db.connect(reuse_if_open=True)  # this thread's own connection
        fd = os.open(self.path, os.O_RDONLY)
        try:
            sink = NativeSink(self.engine)
            pump(FdReader(fd, follow=self.done.is_set), sink)
            finish(sink)
        except (AgentReplayError, OSError) + DB_ERRORS as exc:
            self.failure = exc
        finally:
            os.close(fd)
            store.close()


def run_traced(
    argv: Sequence[str],
    *,
    store_dir: Path,
    agent_name: str | None = None,
    tags: Sequence[str] = (),
    redact: bool = True,
    clock: Clock | None = None,
    warn: Warn | None = None,
    db_url: str | None = None,
) -> RunOutcome:
    """Run ``argv`` as a traced child process and wait for it (see the module docstring).

    Args:
        argv: the command and its arguments.
        store_dir: the store directory (created if needed); handed to the child.
        agent_name: the trace's agent name (default: the command's base name).
        tags: tags of the run's trace (and of traces the child starts).
        redact: redact secrets before writing (the command line and the child's events).
        clock: time source of the trace's timestamps.
        warn: receives warnings about the child's events as they occur.
        db_url: record into this team store (PostgreSQL) instead; the events file stays in
            ``store_dir``, and the child gets the URL too (``AGENT_REPLAY_DB_URL``).

    Raises:
        StoreError: the store can't be opened (the child is not started then).
    """
    command = list(argv)
    clock = clock or SystemClock()
    store_dir = store_dir.expanduser().resolve()
    store = open_store(db_url or db_path(store_dir), create=True)
    recorder = TraceRecorder(store, clock=clock, lenient=True, redact=redact)
    trace_id = recorder.start_trace(
        agent_name or os.path.basename(command[0]) or command[0],
        input=shlex.join(command),
        tags=list(tags),
        metadata={"argv": command, "cwd": os.getcwd()},
        source_format="run",
    )
    recorder.claim(trace_id, "run")
    events_dir = store_dir / EVENTS_DIR
    make_private_dir(events_dir)
    events_file = events_dir / f"{trace_id}.jsonl"
    os.close(os.open(events_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    env = {
        **os.environ,
        ENV_DIR: str(store_dir),
        ENV_TRACE_ID: trace_id,
        ENV_EVENTS: str(events_file),
    }
    if db_url:
        env[ENV_DB_URL] = db_url

    engine = EventEngine(
        store,
        clock=clock,
        redact=redact,
        tags=list(tags),
        default_trace=trace_id,
        warn=warn or (lambda message: None),
        writer="run",
    )
    forwarder = _Forwarder()
    forwarder.install()
    began = time.monotonic()
    error: str | None
    try:
        try:
            process = subprocess.Popen(command, env=env)
        except (FileNotFoundError, NotADirectoryError):
            error = f"command not found: {command[0]}"
            return _end(recorder, engine, trace_id, EXIT_NOT_FOUND, None, error, began, events_file)
        except PermissionError:
            error = f"permission denied: {command[0]}"
            return _end(
                recorder, engine, trace_id, EXIT_NOT_EXECUTABLE, None, error, began, events_file
            )
        except OSError as exc:
            error = f"cannot run {command[0]}: {exc.strerror or exc}"
            return _end(
                recorder, engine, trace_id, EXIT_NOT_EXECUTABLE, None, error, began, events_file
            )
        forwarder.started(process)
        done = threading.Event()
        tail = _Tail(engine, events_file, done)
        tail.start()
        try:
            returncode = process.wait()
        finally:
            done.set()
            tail.join()
        if tail.failure is not None and warn is not None:
            warn(f"recording the child's events failed: {tail.failure}")
        if returncode < 0:
            status, error = 128 - returncode, f"killed by signal {signal_name(-returncode)}"
        else:
            status = returncode
            error = f"exited with code {returncode}" if returncode else None
        return _end(recorder, engine, trace_id, status, returncode, error, began, events_file)
    finally:
        forwarder.restore()
        store.close()


def _end(
    recorder: TraceRecorder,
    engine: EventEngine,
    trace_id: str,
    exit_status: int,
    returncode: int | None,
    error: str | None,
    began: float,
    events_file: Path,
) -> RunOutcome:
    """Finalize the run's trace from the exit (and what the child's own trace_end said)."""
    state = engine.trace_state(trace_id)
    said: dict[str, Any] = dict(state.end_values or {}) if state is not None else {}
    metadata: dict[str, Any] = dict(state.pending_metadata) if state is not None else {}
    metadata["duration_ms"] = round((time.monotonic() - began) * 1000, 3)
    if returncode is not None and returncode < 0:
        metadata["signal"] = signal_name(-returncode)
    else:
        metadata["exit_code"] = returncode
    status = said.get("status") or "completed"
    if error is not None:
        child_error = said.get("error")
        status = "failed"
        if child_error and child_error != error:
            error = f"{error}: {child_error}"
    else:
        error = said.get("error")
    recorder.end_trace(
        trace_id,
        status=status,
        output=said.get("output"),
        error=error,
        total_tokens=said.get("total_tokens"),
        total_cost_usd=said.get("total_cost_usd"),
        metadata=metadata,
    )
    report = engine.report
    kept: Path | None = events_file
    if report.ok:
        events_file.unlink(missing_ok=True)
        kept = None
    return RunOutcome(trace_id, exit_status, returncode, error, report, kept)
