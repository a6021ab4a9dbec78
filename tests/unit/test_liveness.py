"""``finalize_orphans``: a running trace whose registered writer died on this host ends as
``timeout``, once; a live writer's trace and an ended trace are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from agent_replay.clock import FixedClock
from agent_replay.services.ingest import ingest_trace
from agent_replay.services.liveness import EXITED_KEY, finalize_orphans
from agent_replay.store import writers
from agent_replay.store.db import Store
from agent_replay.store.models import WriterRow
from agent_replay.store.trace_detail import trace_json


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _register(store: Store, trace_id: str, pid: int) -> None:
    with store.write():
        WriterRow.insert(
            trace_id=trace_id,
            kind="record",
            host=writers.host(),
            pid=pid,
            token="",
            registered_ms=0,
        ).execute(store.db)


def test_a_dead_writers_running_trace_ends_as_timeout_once(
    store: Store, clock: FixedClock, make_trace: Callable[..., dict[str, Any]]
) -> None:
    ingest_trace(store, make_trace(2, id="trc_orphan", status="running"))
    ingest_trace(store, make_trace(2, id="trc_ended", status="completed"))
    pid = _dead_pid()
    _register(store, "trc_orphan", pid)
    _register(store, "trc_ended", pid)
    assert finalize_orphans(store, clock) == ["trc_orphan"]
    trace = trace_json(store, "trc_orphan")
    assert trace["status"] == "timeout"
    assert trace["error"] == f"the record process (pid {pid}) exited without ending the trace"
    assert trace["metadata"][EXITED_KEY] == {"kind": "record", "pid": pid}
    assert trace_json(store, "trc_ended")["status"] == "completed"
    assert finalize_orphans(store, clock) == []


def test_a_live_writers_trace_keeps_running(
    store: Store, clock: FixedClock, make_trace: Callable[..., dict[str, Any]]
) -> None:
    ingest_trace(store, make_trace(1, id="trc_live", status="running"))
    with store.write():
        writers.register(store, "trc_live", "record", now_ms=0)
    writer = writers.writer_of(store, "trc_live")
    assert writer is not None and writer.pid == os.getpid()
    assert finalize_orphans(store, clock) == []
    assert trace_json(store, "trc_live")["status"] == "running"
