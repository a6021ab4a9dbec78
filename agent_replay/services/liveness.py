"""Finalizing orphans: a ``running`` trace whose registered writer (``record``, ``run``,
``import``) died on this host is ended as ``timeout``, with an error saying its recorder
exited without ending it, so it never shows ``running`` forever beside the live ones.

Readers call ``finalize_orphans`` before they read (``list``, ``show``, ``watch``); it costs one
small indexed query when nothing died. Traces without a registered writer (the hook's, whose
sessions end with SessionEnd; ``record --leave-open``) keep their own rules. Writers elsewhere
(another host sharing a team store) can't be checked from here and are left alone.
"""

from __future__ import annotations

from agent_replay.clock import Clock
from agent_replay.store import writers
from agent_replay.store.db import DB_ERRORS, Store
from agent_replay.store.models import TraceRow

# What ``metadata.writer_exited`` says (``import`` resumes a session whose import died).
EXITED_KEY = "writer_exited"


def orphan_error(kind: str, pid: int) -> str:
    """The error an orphaned trace is finalized with."""
    return f"the {kind} process (pid {pid}) exited without ending the trace"


def finalize_orphans(store: Store, clock: Clock | None = None) -> list[str]:
    """End every running trace whose writer died on this host; returns their ids.

    Never fails a reader: a store it can't write (read-only, locked past the busy timeout) is
    left as it is, to be finalized by the next reader.
    """
    if store.read_only:
        return []
    try:
        dead = writers.dead_writers(store)
    except DB_ERRORS:
        return []
    ended: list[str] = []
    if not dead:
        return ended
    from agent_replay.services.recorder import TraceRecorder  # pydantic: only when one died

    recorder = TraceRecorder(store, clock=clock, lenient=True, redact=False)
    for writer in dead:
        try:
            with store.write():
                current = writers.writer_of(store, writer.trace_id)
                status = (
                    TraceRow.select(TraceRow.status)
                    .where(TraceRow.id == writer.trace_id)
                    .scalar(store.db)
                )
                if current != writer or status != "running":
                    continue  # another reader got there first, or a new writer took it over
                recorder.end_trace(
                    writer.trace_id,
                    status="timeout",
                    error=orphan_error(writer.kind, writer.pid),
                    metadata={EXITED_KEY: {"kind": writer.kind, "pid": writer.pid}},
                )
            ended.append(writer.trace_id)
        except DB_ERRORS:
            break
    return ended
