"""The receiver's writer thread: staged items in, rebuilt traces out, in batched transactions.

Request handlers only enqueue (``submit``); this thread owns the store connection. Each batch
is one ``BEGIN IMMEDIATE`` transaction that:

1. stages the spans (``INSERT OR IGNORE`` keyed by OTel trace id + span id) and the log records
   (keyed by a digest of their content), so a redelivered batch changes nothing;
2. recomputes the group of every OTel trace that got a new span (an agent root arriving late
   can move spans out of a harness session, and the other way round), and moves the log
   records linked to it;
3. rebuilds each touched group once (``build.build_trace``), validates it leniently and
   replaces the stored trace: same id, evals and first-seen time kept, delete and insert in the
   same transaction, through the ingest service's row builder (``prepare``).

While one batch is written the next accumulates, so under load batches grow and commits stay
few (group commit). ``stop`` drains the queue before returning: every accepted item lands.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_replay.clock import Clock, SystemClock
from agent_replay.errors import AgentReplayError
from agent_replay.paths import make_private_dir
from agent_replay.services.ingest import prepare
from agent_replay.services.otel.build import Group, build_trace, otel_trace_group, trace_id_for
from agent_replay.store.db import DB_ERRORS, Store, open_store
from agent_replay.store.mapping import EVAL_COLUMNS, TRACE_COLUMNS, TraceRows
from agent_replay.store.writes import execute, insert_trace_rows
from agent_replay.trace.io import dumps, loads
from agent_replay.trace.validate import validate_trace

_CHUNK = 500  # ids per IN (...) list, well under SQLite's variable limit
_SPAN_COLUMNS = ("otel_trace_id", "span_id", "group_key", "received_ms", "data")
_LOG_COLUMNS = ("record_key", "otel_trace_id", "session_key", "group_key", "received_ms", "data")
_CREATED = TRACE_COLUMNS.index("created_at_ms")
_STARTED_MS = TRACE_COLUMNS.index("started_at_ms")
_STARTED = TRACE_COLUMNS.index("started_at")

Log = Callable[[str], None]


def _select_in(store: Store, sql: str, keys: list[str]) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (with one ``IN ({})``) for every key, chunk by chunk."""
    out: list[tuple[Any, ...]] = []
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        out.extend(tuple(row) for row in execute(store, sql.format(marks), chunk).fetchall())
    return out


def insert_many(
    store: Store, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]], *, verb: str
) -> None:
    """``executemany`` of rows into a staging table (``INSERT OR IGNORE``: keys decide)."""
    if rows:
        marks = ", ".join("?" * len(columns))
        store.db.cursor().executemany(
            f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows
        )


@dataclass
class WriterStats:
    """Counters, read by the server's summary (updated by the writer thread only)."""

    spans_staged: int = 0
    """Spans new to the store (a redelivered span is not counted again)."""
    logs_staged: int = 0
    batches: int = 0
    traces_rebuilt: int = 0
    trace_ids: set[str] = field(default_factory=set)
    build_errors: int = 0
    write_errors: int = 0
    warnings: int = 0


@dataclass
class _Batch:
    spans: list[dict[str, Any]]
    logs: list[dict[str, Any]]
    seq: int


class OtelWriter:
    """Stage received spans and log records and keep their traces built, off the request path.

    Args:
        db_file: the store's database file (the thread opens its own connection).
        clock: stamps first-seen times.
        max_pending: the most items (spans + log records) queued at once; ``submit`` refuses
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
        self._cond = threading.Condition()
        self._queue: deque[_Batch] = deque()
        self._pending = 0
        self._submitted = 0
        self._written = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._store: Store | None = None

    # --- the request side -------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer thread."""
        self._thread = threading.Thread(target=self._run, name="otel-writer", daemon=True)
        self._thread.start()

    def submit(self, spans: list[dict[str, Any]], logs: list[dict[str, Any]]) -> bool:
        """Queue items for writing; ``False`` (nothing queued) when the queue is full."""
        size = len(spans) + len(logs)
        with self._cond:
            if self._stopping:
                return False
            if self._pending and self._pending + size > self.max_pending:
                return False
            self._submitted += 1
            self._queue.append(_Batch(spans, logs, self._submitted))
            self._pending += size
            self._cond.notify_all()
        return True

    @property
    def pending(self) -> int:
        """Items queued and not yet written."""
        with self._cond:
            return self._pending

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is written; ``False`` on timeout."""
        with self._cond:
            target = self._submitted
            return self._cond.wait_for(lambda: self._written >= target, timeout=timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Write everything queued, then end the thread; ``True`` when nothing is left."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._cond:
            return not self._queue and self._written >= self._submitted

    # --- the writer thread --------------------------------------------------------------------

    def _take(self) -> tuple[list[_Batch], bool]:
        with self._cond:
            self._cond.wait_for(lambda: self._queue or self._stopping)
            taken: list[_Batch] = []
            size = 0
            while self._queue and (not taken or size < self.batch_items):
                batch = self._queue.popleft()
                taken.append(batch)
                size += len(batch.spans) + len(batch.logs)
            return taken, self._stopping and not self._queue and not taken

    def _run(self) -> None:
        store = self._open()
        if store is None:
            return
        try:
            while True:
                taken, done = self._take()
                if done:
                    return
                spans = [s for b in taken for s in b.spans]
                logs = [r for b in taken for r in b.logs]
                self._write_with_retry(store, spans, logs)
                with self._cond:
                    self._pending -= len(spans) + len(logs)
                    self._written = taken[-1].seq
                    self._cond.notify_all()
        finally:
            store.close()

    def _open(self) -> Store | None:
        delay = 0.1
        while True:
            try:
                return open_store(self.db_file)
            except AgentReplayError as exc:
                self.stats.write_errors += 1
                self.log(f"cannot open the store: {exc.message}; retrying")
                with self._cond:
                    if self._stopping:
                        return None
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _write_with_retry(
        self, store: Store, spans: list[dict[str, Any]], logs: list[dict[str, Any]]
    ) -> None:
        """Write a batch; a database error (a lock held past the busy timeout, a full disk)
        is retried with backoff, since the items were already acknowledged to the exporter."""
        delay = 0.1
        attempts = 0
        while True:
            try:
                self.write_batch(store, spans, logs)
                return
            except DB_ERRORS as exc:
                attempts += 1
                self.stats.write_errors += 1
                self.log(f"store write failed ({exc}); retrying {len(spans) + len(logs)} items")
                with self._cond:
                    stopping = self._stopping
                if stopping and attempts >= 5:
                    self.log(f"gave up on {len(spans)} spans and {len(logs)} log records")
                    return
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    # --- one batch ------------------------------------------------------------------------------

    def write_batch(
        self, store: Store, spans: list[dict[str, Any]], logs: list[dict[str, Any]]
    ) -> None:
        """Stage a batch and rebuild the traces it touches, in one transaction."""
        now_ms = int(self.clock.now().timestamp() * 1000)
        with store.write():
            groups: dict[str, None] = {}
            known: dict[str, list[dict[str, Any]]] = {}
            span_groups = self._stage_spans(store, spans, now_ms, groups, known)
            self._stage_logs(store, logs, now_ms, groups, span_groups)
            self._rebuild(store, list(groups), known, now_ms)
        self.stats.batches += 1

    def _stage_spans(
        self,
        store: Store,
        spans: list[dict[str, Any]],
        now_ms: int,
        groups: dict[str, None],
        known: dict[str, list[dict[str, Any]]],
    ) -> dict[str, str]:
        """Insert the new spans, regroup their OTel traces, move linked log records; returns
        the group of each OTel trace seen (for the log records of this batch)."""
        incoming: dict[str, dict[str, dict[str, Any]]] = {}
        for span in spans:  # a span twice in one batch (a retry that caught up) counts once
            incoming.setdefault(span["trace_id"], {}).setdefault(span["span_id"], span)
        if not incoming:
            return {}
        stored: dict[str, list[tuple[str, str, str]]] = {}
        for row in _select_in(
            store,
            "SELECT otel_trace_id, span_id, group_key, data FROM otel_spans "
            "WHERE otel_trace_id IN ({})",
            list(incoming),
        ):
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
            rows.extend((trace_id, item["span_id"], group, now_ms, dumps(item)) for item in fresh)
            groups.update(dict.fromkeys(sorted(old)))
            groups[group] = None
            if old - {group}:
                moves.append((group, trace_id))
            if group == f"t:{trace_id}":
                known[group] = everything  # the whole group: no need to read it again
        insert_many(store, "otel_spans", _SPAN_COLUMNS, rows, verb="INSERT OR IGNORE")
        self.stats.spans_staged += len(rows)
        for group, trace_id in moves:
            execute(
                store,
                "UPDATE otel_spans SET group_key = ? WHERE otel_trace_id = ?",
                [group, trace_id],
            )
        # Log records that arrived before their spans (or were linked to another group).
        touched = [trace_id for trace_id, _, _, _, _ in rows]
        for trace_id, group in _select_in(
            store,
            "SELECT DISTINCT otel_trace_id, group_key FROM otel_logs WHERE otel_trace_id IN ({})",
            list(dict.fromkeys(touched)),
        ):
            if group != span_groups[trace_id]:
                if group:
                    groups[group] = None
                groups[span_groups[trace_id]] = None
                execute(
                    store,
                    "UPDATE otel_logs SET group_key = ? WHERE otel_trace_id = ?",
                    [span_groups[trace_id], trace_id],
                )
        return span_groups

    def _stage_logs(
        self,
        store: Store,
        logs: list[dict[str, Any]],
        now_ms: int,
        groups: dict[str, None],
        span_groups: dict[str, str],
    ) -> None:
        """Insert the new log records into their groups: their span's group when that span's
        OTel trace is known, else their session's, else their OTel trace's (where the spans
        will land when they come)."""
        if not logs:
            return
        linked = {r["trace_id"] for r in logs if r.get("trace_id")} - set(span_groups)
        span_groups = dict(span_groups)
        for trace_id, group in _select_in(
            store,
            "SELECT otel_trace_id, MIN(group_key) FROM otel_spans WHERE otel_trace_id IN ({}) "
            "GROUP BY otel_trace_id",
            list(linked),
        ):
            span_groups[trace_id] = group
        present = {
            row[0]
            for row in _select_in(
                store,
                "SELECT record_key FROM otel_logs WHERE record_key IN ({})",
                list({r["key"] for r in logs}),
            )
        }
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
                (record["key"], trace_id, record.get("session_key"), group, now_ms, dumps(record))
            )
            groups[group] = None
        insert_many(store, "otel_logs", _LOG_COLUMNS, rows, verb="INSERT OR IGNORE")
        self.stats.logs_staged += len(rows)

    def _rebuild(
        self,
        store: Store,
        groups: list[str],
        known: dict[str, list[dict[str, Any]]],
        now_ms: int,
    ) -> None:
        """Rebuild each group's trace and replace the stored versions."""
        spans: dict[str, list[dict[str, Any]]] = {k: list(v) for k, v in known.items()}
        for key, data in _select_in(
            store,
            "SELECT group_key, data FROM otel_spans WHERE group_key IN ({})",
            [g for g in groups if g not in known],
        ):
            spans.setdefault(key, []).append(loads(data))
        logs: dict[str, list[dict[str, Any]]] = {}
        for key, data in _select_in(
            store, "SELECT group_key, data FROM otel_logs WHERE group_key IN ({})", groups
        ):
            logs.setdefault(key, []).append(loads(data))
        built: list[TraceRows] = []
        gone: list[str] = []
        for key in groups:
            trace_id = trace_id_for(key)
            try:
                data = build_trace(Group(key, spans.get(key, []), logs.get(key, [])))
                if data is None:
                    gone.append(trace_id)
                    continue
                validated = validate_trace(data, lenient=True)
                self.stats.warnings += len(validated.warnings)
                rows = prepare(
                    validated.trace,
                    created_ms=now_ms,
                    source_format="otlp",
                    otel_trace_id=key[2:] if key.startswith("t:") else None,
                )
            except (AgentReplayError, ValueError, TypeError, KeyError, OverflowError) as exc:
                # A producer's data the builder can't handle: keep it staged (a later item
                # may complete it), record the problem, build the other groups.
                self.stats.build_errors += 1
                self.report(f"cannot build the trace of {key}: {type(exc).__name__}: {exc}")
                continue
            built.append(rows)
        self._replace(store, built, gone)
        self.stats.traces_rebuilt += len(built)
        self.stats.trace_ids.update(rows.trace[0] for rows in built)

    def _replace(self, store: Store, built: list[TraceRows], gone: list[str]) -> None:
        """Delete the previous versions and insert the new ones, keeping each stored trace's
        first-seen time and its evals (they belong to the trace, not to one build of it)."""
        ids = [rows.trace[0] for rows in built]
        previous = {
            row[0]: int(row[1])
            for row in _select_in(
                store, "SELECT id, created_at_ms FROM traces WHERE id IN ({})", ids
            )
        }
        evals: dict[str, list[tuple[Any, ...]]] = {}
        if previous:
            names = ", ".join(EVAL_COLUMNS)
            for row in _select_in(
                store, f"SELECT {names} FROM evals WHERE trace_id IN ({{}})", list(previous)
            ):
                evals.setdefault(row[1], []).append(tuple(row))
        stale = [*previous, *gone]
        for start in range(0, len(stale), _CHUNK):
            chunk = stale[start : start + _CHUNK]
            execute(store, f"DELETE FROM traces WHERE id IN ({', '.join('?' * len(chunk))})", chunk)
        for rows in built:
            created = previous.get(rows.trace[0])
            if created is not None:
                row = list(rows.trace)
                row[_CREATED] = created
                if row[_STARTED] is None:
                    row[_STARTED_MS] = created
                rows.trace = tuple(row)
                rows.evals = evals.get(rows.trace[0], [])
        insert_trace_rows(store, built)

    def report(self, line: str) -> None:
        """Report a problem: one line to the log, the current traceback to the error log."""
        self.log(line)
        if self.error_log is None:
            return
        try:
            make_private_dir(self.error_log.parent)
            with self.error_log.open("a", encoding="utf-8") as out:
                out.write(f"--- otel serve\n{line}\n{traceback.format_exc()}\n")
        except OSError:
            pass  # the one-line report above already went out
