"""The writer process of ``otel serve``: batches of staged items in, rebuilt traces out.

Started by ``writer.OtelWriter`` (``python -c``, see ``writer._BOOT``), which pipes it batches
of received items (``writer.FRAME_HEADER`` + JSON) on stdin and reads one JSON report per
line on stdout: the last batch written, counters, rebuilt trace ids, log lines. It owns the
store connection. Each batch is one ``BEGIN IMMEDIATE`` transaction that:

1. stages the spans (``INSERT OR IGNORE`` keyed by OTel trace id + span id) and the log records
   (keyed by a digest of their content), so a redelivered batch changes nothing;
2. recomputes the group of every OTel trace that got a new span (an agent root arriving late
   can move spans out of a harness session, and the other way round), and moves the log
   records linked to it;
3. rebuilds each touched group once (``build.build_trace``), validates it leniently, makes its
   rows through the ingest service's row builder (``prepare``) and stores them, writing only
   what changed since the stored build (``replace``: same id, first-seen time kept).

Between transactions the process takes everything that arrived on the pipe meanwhile, so under
load the next transaction writes many requests' items at once (group commit). At end of input
(the receiver stopping, or gone) everything received is written, then the process exits.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
from peewee import fn

from agent_replay.errors import AgentReplayError
from agent_replay.services.ingest import prepare
from agent_replay.services.otel.build import Group, build_trace, otel_trace_group, trace_id_for
from agent_replay.services.otel.replace import replace_traces
from agent_replay.services.otel.responses import count_once
from agent_replay.services.otel.runner import InList, run
from agent_replay.services.otel.writer import (
    COUNTERS,
    FRAME_HEADER,
    Log,
    WriterStats,
    write_error_log,
)
from agent_replay.store.db import DB_ERRORS, Store, open_store
from agent_replay.store.mapping import TraceRows
from agent_replay.store.models import OtelLogRow, OtelSpanRow
from agent_replay.store.statements import Statement, arg, insert_statement
from agent_replay.trace.io import dumps, loads
from agent_replay.trace.validate import validate_trace

_BUILD_ERRORS = (AgentReplayError, ValueError, TypeError, KeyError, OverflowError)
"""What a producer's data can make the builder raise (anything else is a bug)."""

# The statements of a batch, built once (see ``runner``).
_Span, _Log = OtelSpanRow, OtelLogRow
_INSERT_SPANS = insert_statement(
    _Span,
    [_Span.otel_trace_id, _Span.span_id, _Span.group_key, _Span.received_ms, _Span.data],
    ignore=True,
)
_INSERT_LOGS = insert_statement(
    _Log,
    [
        _Log.record_key,
        _Log.otel_trace_id,
        _Log.session_key,
        _Log.group_key,
        _Log.received_ms,
        _Log.data,
    ],
    ignore=True,
)
_SPANS_OF_TRACES = InList(
    lambda keys: _Span.select(
        _Span.otel_trace_id, _Span.span_id, _Span.group_key, _Span.data
    ).where(_Span.otel_trace_id.in_(keys))
)
_SPAN_GROUP_OF_TRACES = InList(
    lambda keys: (
        _Span.select(_Span.otel_trace_id, fn.MIN(_Span.group_key))
        .where(_Span.otel_trace_id.in_(keys))
        .group_by(_Span.otel_trace_id)
    )
)
_SPANS_OF_GROUPS = InList(
    lambda keys: _Span.select(_Span.group_key, _Span.data).where(_Span.group_key.in_(keys))
)
_MOVE_SPANS = Statement(lambda: _Span.update(group_key=arg()).where(_Span.otel_trace_id == arg()))
_LOG_GROUPS_OF_TRACES = InList(
    lambda keys: (
        _Log.select(_Log.otel_trace_id, _Log.group_key)
        .distinct()
        .where(_Log.otel_trace_id.in_(keys))
    )
)
_LOGS_PRESENT = InList(lambda keys: _Log.select(_Log.record_key).where(_Log.record_key.in_(keys)))
_LOGS_OF_GROUPS = InList(
    lambda keys: _Log.select(_Log.group_key, _Log.data).where(_Log.group_key.in_(keys))
)
_MOVE_LOGS = Statement(lambda: _Log.update(group_key=arg()).where(_Log.otel_trace_id == arg()))


class BatchWriter:
    """Stage items and keep their traces built, one batch (one transaction) at a time.

    Args:
        db_file: the store's database file.
        log: where problems are reported (one line each).
        error_log: where tracebacks of unexpected build failures go.
    """

    def __init__(self, db_file: Path, *, log: Log, error_log: Path | None = None) -> None:
        self.db_file = db_file
        self.log = log
        self.error_log = error_log
        self.stats = WriterStats()
        self.trace_ids: list[str] = []
        """Ids of the traces rebuilt since the last report."""

    def open(self, stopping: Callable[[], bool]) -> Store | None:
        """The store, opened (retried with backoff until ``stopping``: then ``None``)."""
        delay = 0.1
        while True:
            try:
                store = open_store(self.db_file)
                # Statement journals (an insert into a table with foreign keys keeps one, a
                # page image per page it touches) and temporary b-trees stay in memory: on
                # disk they were most of this process's system calls.
                if store.is_sqlite:  # (a PostgreSQL team store has no such pragma)
                    store.db.pragma("temp_store", "MEMORY")
                    # Each commit is fsync'd: the receiver acknowledges a request only once
                    # its batch is committed, and a 2xx must survive the machine, not only the
                    # process (one fsync per batch of however many requests arrived meanwhile).
                    store.db.pragma("synchronous", "FULL")
                return store
            except AgentReplayError as exc:
                self.stats.write_errors += 1
                self.log(f"cannot open the store: {exc.message}; retrying")
                if stopping():
                    return None
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def write_with_retry(
        self,
        store: Store,
        spans: list[dict[str, Any]],
        logs: list[dict[str, Any]],
        now_ms: int,
        stopping: Callable[[], bool],
        texts: dict[int, str] | None = None,
    ) -> None:
        """Write a batch; a database error (a lock held past the busy timeout, a full disk)
        is retried with backoff: the exporters' requests wait for these items (and are answered
        503, to retry, if that takes too long)."""
        delay = 0.1
        attempts = 0
        while True:
            try:
                self.write_batch(store, spans, logs, now_ms, texts)
                return
            except DB_ERRORS as exc:
                attempts += 1
                self.stats.write_errors += 1
                self.log(f"store write failed ({exc}); retrying {len(spans) + len(logs)} items")
                if stopping() and attempts >= 5:
                    self.log(f"gave up on {len(spans)} spans and {len(logs)} log records")
                    return
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    # --- one batch ------------------------------------------------------------------------------

    def write_batch(
        self,
        store: Store,
        spans: list[dict[str, Any]],
        logs: list[dict[str, Any]],
        now_ms: int,
        texts: dict[int, str] | None = None,
    ) -> None:
        """Stage a batch and rebuild the traces it touches, in one transaction; ``now_ms``
        stamps staged items and new traces. ``texts`` (by ``id`` of the item) holds the items'
        JSON as received, staged as it is instead of encoding each item again."""
        texts = texts or {}
        with store.write():
            groups: dict[str, None] = {}
            known: dict[str, list[dict[str, Any]]] = {}
            span_groups = self._stage_spans(store, spans, now_ms, groups, known, texts)
            self._stage_logs(store, logs, now_ms, groups, span_groups, texts)
            self._rebuild(store, list(groups), known, now_ms)
        self.stats.batches += 1

    def _stage_spans(
        self,
        store: Store,
        spans: list[dict[str, Any]],
        now_ms: int,
        groups: dict[str, None],
        known: dict[str, list[dict[str, Any]]],
        texts: dict[int, str],
    ) -> dict[str, str]:
        """Insert the new spans, regroup their OTel traces, move linked log records; returns
        the group of each OTel trace seen (for the log records of this batch)."""
        incoming: dict[str, dict[str, dict[str, Any]]] = {}
        for span in spans:  # a span twice in one batch (a retry that caught up) counts once
            incoming.setdefault(span["trace_id"], {}).setdefault(span["span_id"], span)
        if not incoming:
            return {}
        stored: dict[str, list[tuple[str, str, str]]] = {}
        for row in _SPANS_OF_TRACES.rows(store, list(incoming)):
            stored.setdefault(row[0], []).append((row[1], row[2], row[3]))
        rows: list[tuple[Any, ...]] = []
        span_groups: dict[str, str] = {}
        moves: list[tuple[str, str]] = []
        for trace_id, items in incoming.items():
            present = stored.get(trace_id, [])
            seen = {span_id for span_id, _, _ in present}
            fresh = [item for span_id, item in items.items() if span_id not in seen]
            old = {group for _, group, _ in present}
            if not fresh:
                span_groups[trace_id] = next(iter(old))
                continue
            everything = [loads(data) for _, _, data in present] + fresh
            group = otel_trace_group(trace_id, everything)
            span_groups[trace_id] = group
            rows.extend(
                (trace_id, item["span_id"], group, now_ms, texts.get(id(item)) or dumps(item))
                for item in fresh
            )
            groups.update(dict.fromkeys(sorted(old)))
            groups[group] = None
            if old - {group}:
                moves.append((group, trace_id))
            if group == f"t:{trace_id}":
                known[group] = everything  # the whole group: no need to read it again
        if rows:
            _INSERT_SPANS.run_many(store, rows)
        self.stats.spans_staged += len(rows)
        for group, trace_id in moves:
            run(store, _MOVE_SPANS, (group, trace_id))
        # Log records that arrived before their spans (or were linked to another group).
        touched = [trace_id for trace_id, _, _, _, _ in rows]
        for trace_id, group in _LOG_GROUPS_OF_TRACES.rows(store, list(dict.fromkeys(touched))):
            if group != span_groups[trace_id]:
                if group:
                    groups[group] = None
                groups[span_groups[trace_id]] = None
                run(store, _MOVE_LOGS, (span_groups[trace_id], trace_id))
        return span_groups

    def _stage_logs(
        self,
        store: Store,
        logs: list[dict[str, Any]],
        now_ms: int,
        groups: dict[str, None],
        span_groups: dict[str, str],
        texts: dict[int, str],
    ) -> None:
        """Insert the new log records into their groups: their span's group when that span's
        OTel trace is known, else their session's, else their OTel trace's (where the spans
        will land when they come)."""
        if not logs:
            return
        linked = {r["trace_id"] for r in logs if r.get("trace_id")} - set(span_groups)
        span_groups = dict(span_groups)
        for trace_id, group in _SPAN_GROUP_OF_TRACES.rows(store, list(linked)):
            span_groups[trace_id] = group
        present = {row[0] for row in _LOGS_PRESENT.rows(store, list({r["key"] for r in logs}))}
        rows: list[tuple[Any, ...]] = []
        for record in logs:
            if record["key"] in present:
                continue
            present.add(record["key"])
            trace_id = record.get("trace_id")
            group = (
                span_groups.get(trace_id or "")
                or record.get("session_key")
                or (f"t:{trace_id}" if trace_id else None)
            )
            if group is None:
                continue  # nothing to attach it to
            rows.append(
                (
                    record["key"],
                    trace_id,
                    record.get("session_key"),
                    group,
                    now_ms,
                    texts.get(id(record)) or dumps(record),
                )
            )
            groups[group] = None
        if rows:
            _INSERT_LOGS.run_many(store, rows)
        self.stats.logs_staged += len(rows)

    def _rebuild(
        self,
        store: Store,
        groups: list[str],
        known: dict[str, list[dict[str, Any]]],
        now_ms: int,
    ) -> None:
        """Rebuild each group's trace and replace the stored versions."""
        # The groups read below are the others: the lists of ``known`` are never added to.
        spans: dict[str, list[dict[str, Any]]] = dict(known)
        for key, data in _SPANS_OF_GROUPS.rows(store, [g for g in groups if g not in known]):
            spans.setdefault(key, []).append(loads(data))
        logs: dict[str, list[dict[str, Any]]] = {}
        for key, data in _LOGS_OF_GROUPS.rows(store, groups):
            logs.setdefault(key, []).append(loads(data))
        gone: list[str] = []
        made: list[tuple[str, dict[str, Any]]] = []
        for key in groups:
            try:
                data = build_trace(Group(key, spans.get(key, []), logs.get(key, [])))
            except _BUILD_ERRORS as exc:
                self._build_failed(key, exc)
                continue
            if data is None:
                gone.append(trace_id_for(key))
            else:
                made.append((key, data))
        # A response's tokens once in the store (one lookup for the batch).
        count_once(store, [data for _, data in made], {trace_id_for(key) for key in groups})
        built: list[TraceRows] = []
        for key, data in made:
            try:
                validated = validate_trace(data, lenient=True)
                self.stats.warnings += len(validated.warnings)
                rows = prepare(
                    validated.trace,
                    created_ms=now_ms,
                    source_format="otlp",
                    otel_trace_id=key[2:] if key.startswith("t:") else None,
                )
            except _BUILD_ERRORS as exc:
                self._build_failed(key, exc)
                continue
            built.append(rows)
        replace_traces(store, built, gone)
        self.stats.traces_rebuilt += len(built)
        self.trace_ids.extend(rows.trace[0] for rows in built)

    def _build_failed(self, key: str, exc: Exception) -> None:
        """A producer's data the builder can't handle: it stays staged (a later item may
        complete it), the problem is recorded, the other groups are built."""
        self.stats.build_errors += 1
        self.report(f"cannot build the trace of {key}: {type(exc).__name__}: {exc}")

    def report(self, line: str) -> None:
        """Report a problem: one line to the log, the current traceback to the error log."""
        self.log(line)
        write_error_log(self.error_log, line, traceback.format_exc())


# --- the process --------------------------------------------------------------------------------


@dataclass
class _Frame:
    seq: int
    received_ms: int
    spans: int
    logs: int
    body: bytes


class _Inbox:
    """Batches read off the pipe by the writing thread itself, between transactions.

    No reader thread: when nothing is waiting, ``take`` blocks on the pipe; after a
    transaction it takes, without waiting, everything that arrived meanwhile (group commit
    without a timer or a hand-over between threads: under load a thread hop per batch was
    a scheduler wake-up on the acknowledgement's path). The pipe is enlarged (1 MiB where
    Linux allows it) so that senders rarely wait while a transaction runs.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self.fd = stream.fileno()
        self.frames: deque[_Frame] = deque()
        self.buffer = bytearray()
        self.closed = False
        try:
            import fcntl

            fcntl.fcntl(self.fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
        except (ImportError, OSError):
            pass  # not Linux, or over the system's limit: the default size works too
        os.set_blocking(self.fd, False)

    def _fill(self, wait: bool) -> None:
        """Read what the pipe holds (up to 1 MiB a call) and cut it into batches; ``wait``:
        until at least one batch is complete or the input ends."""
        size = FRAME_HEADER.size
        while not self.closed:
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                if not wait or self.frames:
                    return
                select.select([self.fd], [], [])
                continue
            except (OSError, ValueError):
                chunk = b""
            if not chunk:  # end of input: a batch cut short is one its sender never finished
                self.closed = True
                return
            buffer = self.buffer
            buffer += chunk
            start = 0
            while len(buffer) - start >= size:
                length, seq, received_ms, spans, logs = FRAME_HEADER.unpack_from(buffer, start)
                end = start + size + length
                if len(buffer) < end:
                    break
                body = bytes(buffer[start + size : end])
                self.frames.append(_Frame(seq, received_ms, spans, logs, body))
                start = end
            del buffer[:start]

    def is_closed(self) -> bool:
        """Whether the input ended (what arrived until then is kept for ``take``)."""
        self._fill(wait=False)
        return self.closed

    def take(self, limit: int) -> list[_Frame]:
        """The batches waiting (at least one, up to ``limit`` items); none at end of input."""
        self._fill(wait=True)
        taken: list[_Frame] = []
        size = 0
        while self.frames and (not taken or size < limit):
            frame = self.frames.popleft()
            taken.append(frame)
            size += frame.spans + frame.logs
        return taken


class _Reports:
    """One JSON line per report on the private copy of stdout."""

    def __init__(self, out: IO[bytes], writer: BatchWriter, lines: list[str]) -> None:
        self.out = out
        self.writer = writer
        self.lines = lines
        self.sent = {name: 0 for name in COUNTERS}

    def send(self, seq: int | None, *, lost: bool = False, ready: bool = False) -> None:
        stats = self.writer.stats
        counts = {}
        for name in COUNTERS:
            value = getattr(stats, name)
            if value != self.sent[name]:
                counts[name] = value - self.sent[name]
                self.sent[name] = value
        report: dict[str, Any] = {"seq": seq, "counts": counts}
        if self.writer.trace_ids:
            report["trace_ids"] = self.writer.trace_ids
        if self.lines:
            report["log"] = list(self.lines)
        if lost:
            report["lost"] = True
        if ready:
            report["ready"] = True
        self.out.write(orjson.dumps(report) + b"\n")
        self.out.flush()
        self.writer.trace_ids = []
        self.lines.clear()


def _warm_up() -> None:
    """Load the price table before the receiver says it is ready: the first priced model call
    would otherwise pay for it (~0.5 s, the table and its snapshot), on the acknowledgement's
    path of the requests waiting for that batch."""
    from agent_replay.services.costs import lookup

    lookup("gpt-4o-mini", {"input_tokens": 1, "output_tokens": 1}, None)


def main(config: dict[str, Any]) -> None:
    """Write what arrives on stdin until it ends (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the receiver decides when writing stops
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not corrupt the reports
    # Many short-lived acyclic dicts (spans, steps): collect less often, as `otel serve` does.
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    lines: list[str] = []
    error_log = config.get("error_log")
    from agent_replay.store.db import is_db_url

    target = config["db_file"]  # a file, or a team store's URL (which Path would mangle)
    writer = BatchWriter(
        target if is_db_url(target) else Path(target),
        log=lines.append,
        error_log=Path(error_log) if error_log else None,
    )
    reports = _Reports(out, writer, lines)
    inbox = _Inbox(sys.stdin.buffer)

    def note_failures() -> bool:
        if lines:
            reports.send(None)
        return inbox.is_closed()

    store = writer.open(note_failures)
    if store is None:
        reports.send(None)
        return
    _warm_up()
    reports.send(None, ready=True)
    batch_items = int(config.get("batch_items") or 20_000)
    try:
        while True:
            frames = inbox.take(batch_items)
            if not frames:
                return
            spans: list[dict[str, Any]] = []
            logs: list[dict[str, Any]] = []
            texts: dict[int, str] = {}
            loads = orjson.loads
            for frame in frames:
                records = frame.body.split(b"\n")
                for index, record in enumerate(records[: frame.spans + frame.logs]):
                    item = loads(record)
                    texts[id(item)] = record.decode()
                    (spans if index < frame.spans else logs).append(item)
            now_ms = max(frame.received_ms for frame in frames)
            lost = False
            try:
                writer.write_with_retry(store, spans, logs, now_ms, inbox.is_closed, texts)
            except Exception as exc:  # a bug: report it, keep writing the next batches
                writer.stats.write_errors += 1
                writer.report(
                    f"cannot write {len(spans)} span(s) and {len(logs)} log record(s): "
                    f"{type(exc).__name__}: {exc}"
                )
                lost = True
            reports.send(frames[-1].seq, lost=lost)
    finally:
        store.close()
