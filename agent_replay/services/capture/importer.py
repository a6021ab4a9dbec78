"""Importing harness session files into the store: format detection, folder walking, skipping
sessions already imported, and the plumbing every format parser writes through.

A parser (``claude_transcript``, ``codex_rollout``, ``gemini_chat``) streams one file line by
line and drives a ``SessionWriter``, which owns the ``TraceRecorder`` (lenient, redacting unless
``--no-redact``) and the transactions. Nothing here holds a session in memory: the writer keeps
counters, and the parsers keep only what pairing needs (open tool calls, the message being
merged).

Transactions: the writer groups recorder calls into one transaction committed every
``COMMIT_EVERY_S`` seconds, so a 200 MB import neither pays a commit per step nor holds the
write lock for long (hooks recording a live session into the same store wait at most that
long). If a file fails half-way, the partial trace is deleted, so a later import retries it
instead of skipping a session it holds only in part.

A session is identified by ``source_format`` + ``session_id`` (both indexed columns): a file
whose session is already in the store is skipped, wherever it was imported from. The source
path is kept in ``metadata.source.path`` but is not part of the identity, so moving or copying
``~/.claude/projects`` and importing again adds nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

from agent_replay.clock import Clock
from agent_replay.errors import AgentReplayError, NotFoundError, TraceFormatError, UsageError
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import DB_ERRORS, Store
from agent_replay.store.writes import execute
from agent_replay.trace.base import normalize_time, time_before
from agent_replay.trace.io import loads

CLAUDE_TRANSCRIPT = "claude-transcript"
CODEX_ROLLOUT = "codex-rollout"
GEMINI_CHAT = "gemini-chat"
FORMATS = (CLAUDE_TRANSCRIPT, CODEX_ROLLOUT, GEMINI_CHAT)

COMMIT_EVERY_S = 0.25
COMMIT_EVERY_WRITES = 500  # also bounds what one transaction holds in memory on a slow machine
SNIFF_RECORDS = 50
"""How many records detection and the session-id peek read at most."""

Progress = Callable[[int], None]


class _Rollback(Exception):
    """Thrown into the open transaction to roll it back."""


class RecordRejected(ValueError):
    """A record the recorder refused (a value it can't keep): the parsers count it as a
    malformed record and go on with the next one (a ``ValueError``, as their other
    per-record problems), instead of failing the whole import."""


@contextmanager
def _one_record() -> Iterator[None]:
    """The recorder's refusal of one record's data, as ``RecordRejected``."""
    try:
        yield
    except (TraceFormatError, NotFoundError, UsageError) as exc:
        raise RecordRejected(exc.message) from None


def read_records(path: Path) -> Generator[tuple[int, dict[str, Any] | None]]:
    """Stream ``(line_number, record)`` for each non-blank line; ``None`` for a line that is not
    a JSON object (a truncated last line of a live session, a stray non-JSON line)."""
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            try:
                value = loads(raw)
            except ValueError:
                yield number, None
                continue
            yield number, value if isinstance(value, dict) else None


class SessionWriter:
    """One session's trace, written through the recorder as the parser streams.

    The parser calls ``start`` once it knows the trace's input (the first prompt), then
    ``open_step``/``close_step``/``add_step``, then ``finish``. ``skip(kind)`` counts a
    record it could not use; the counts are the import's "unknown records skipped".
    """

    def __init__(
        self,
        store: Store,
        *,
        path: Path,
        source_format: str,
        agent_name: str,
        session_id: str | None,
        tags: list[str],
        redact: bool,
        clock: Clock | None,
        progress: Progress | None = None,
    ) -> None:
        self.store = store
        self.path = path
        self.source_format = source_format
        self.agent_name = agent_name
        self.session_id = session_id
        self.tags = tags
        self.recorder = TraceRecorder(store, clock=clock, lenient=True, redact=redact)
        self.progress = progress
        self.trace_id: str | None = None
        self.version: str | None = None
        self.steps = 0
        self.known = 0
        """Records the parser recognised (used or deliberately ignored)."""
        self.skipped: Counter[str] = Counter()
        self.status: str | None = None
        self._txn: Any = None
        self._txn_started = 0.0
        self._txn_writes = 0

    # --- bookkeeping -----------------------------------------------------------------------

    def skip(self, kind: str) -> None:
        """Count a record the parser could not use (reported, never fatal)."""
        self.skipped[kind] += 1

    @property
    def started(self) -> bool:
        """Whether the trace has been created."""
        return self.trace_id is not None

    def source(self) -> dict[str, Any]:
        """``metadata.source``: where the trace came from."""
        data: dict[str, Any] = {
            "format": self.source_format,
            "version": self.version,
            "path": str(self.path),
        }
        skipped = sum(self.skipped.values())
        if skipped:
            data["skipped_records"] = skipped
            data["skipped_kinds"] = dict(self.skipped.most_common(20))
        return data

    # --- transactions ----------------------------------------------------------------------

    def _tick(self) -> None:
        """Keep a transaction open; commit it when it has been open long enough."""
        now = time.monotonic()
        self._txn_writes += 1
        if self._txn is not None and (
            now - self._txn_started >= COMMIT_EVERY_S or self._txn_writes >= COMMIT_EVERY_WRITES
        ):
            self._commit()
            if self.progress is not None:
                self.progress(self.steps)
        if self._txn is None:
            self._txn = self.store.write()
            self._txn.__enter__()
            self._txn_started = now
            self._txn_writes = 0

    def _commit(self) -> None:
        if self._txn is not None:
            txn, self._txn = self._txn, None
            txn.__exit__(None, None, None)

    def _rollback(self) -> None:
        if self._txn is not None:
            txn, self._txn = self._txn, None
            try:
                txn.__exit__(_Rollback, _Rollback(), None)
            except _Rollback:
                pass  # the transaction re-raises what was thrown into it: rolled back

    # --- writing ---------------------------------------------------------------------------

    def start(
        self,
        *,
        input: Any = None,
        started_at: str | None = None,
        agent_version: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Create the trace (once; later calls return its id)."""
        if self.trace_id is not None:
            return self.trace_id
        self.version = agent_version
        self._tick()
        self.trace_id = self.recorder.start_trace(
            self.agent_name,
            input=input,
            tags=self.tags,
            session_id=self.session_id,
            started_at=started_at,
            agent_version=agent_version,
            metadata={**(metadata or {}), "source": self.source()},
            source_format=self.source_format,
        )
        self.recorder.claim(self.trace_id, "import")
        return self.trace_id

    def _trace(self) -> str:
        return self.trace_id if self.trace_id is not None else self.start()

    def open_step(self, step_type: str, name: str | None = None, **fields: Any) -> int:
        """Start a step whose result comes later (``close_step``); returns its number."""
        trace_id = self._trace()
        self._tick()
        with _one_record():
            number = self.recorder.start_step(
                trace_id, step_type, name, **{k: v for k, v in fields.items() if v is not None}
            )
        self.steps += 1
        return number

    def close_step(self, number: int, **fields: Any) -> None:
        """Finish a step opened with ``open_step``."""
        self._tick()
        with _one_record():
            self.recorder.end_step(
                self._trace(), number, **{k: v for k, v in fields.items() if v is not None}
            )

    def add_step(self, step_type: str, name: str | None = None, **fields: Any) -> int:
        """Record a complete step; returns its number."""
        trace_id = self._trace()
        self._tick()
        data = {"step_type": step_type, "name": name, **fields}
        with _one_record():
            number = self.recorder.step(trace_id, {k: v for k, v in data.items() if v is not None})
        self.steps += 1
        return number

    def finish(
        self,
        *,
        status: str,
        output: Any = None,
        error: str | None = None,
        ended_at: str | None = None,
        total_cost_usd: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Close the trace (when one was started) and commit."""
        if self.trace_id is not None:
            self._tick()
            self.recorder.end_trace(
                self.trace_id,
                status=status,
                output=output,
                error=error,
                ended_at=ended_at,
                total_cost_usd=total_cost_usd,
                metadata={**(metadata or {}), "source": self.source()},
            )
            self.status = status
        self._commit()

    def abort(self) -> None:
        """Undo a failed import: roll back the open batch and delete the partial trace."""
        self._rollback()
        if self.trace_id is not None:
            # The recorder has no delete; this removes only the rows this import wrote (the
            # steps, tags, decisions and snapshots go with the trace: ON DELETE CASCADE).
            with self.store.write():
                execute(self.store, "DELETE FROM traces WHERE id = ?", [self.trace_id])
            self.trace_id = None


class Parser(Protocol):
    """What a format module provides."""

    FORMAT: str
    AGENT_NAME: str

    def sniff(self, record: dict[str, Any]) -> bool: ...

    def peek_session_id(self, path: Path) -> str | None: ...

    def import_session(self, path: Path, writer: SessionWriter) -> None: ...


def parser_for(fmt: str) -> Parser:
    """The parser module of a format name."""
    if fmt == CLAUDE_TRANSCRIPT:
        from agent_replay.services.capture import claude_transcript as module
    elif fmt == CODEX_ROLLOUT:
        from agent_replay.services.capture import codex_rollout as module  # type: ignore[no-redef]
    elif fmt == GEMINI_CHAT:
        from agent_replay.services.capture import gemini_chat as module  # type: ignore[no-redef]
    else:
        raise UsageError(f"unknown import format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return module


def detect_format(path: Path) -> str | None:
    """The format of a session file, from its first records (``None``: none of them)."""
    parsers = [parser_for(fmt) for fmt in FORMATS]
    for record in head_records(path):
        for parser in parsers:
            if parser.sniff(record):
                return parser.FORMAT
    return None


def head_records(path: Path) -> list[dict[str, Any]]:
    """The file's first ``SNIFF_RECORDS`` JSON-object records (the file is closed after)."""
    with closing(read_records(path)) as records:
        return [r for _, r in islice(records, SNIFF_RECORDS) if r is not None]


def iter_session_files(root: Path) -> Iterator[Path]:
    """Every ``*.jsonl`` under ``root`` (recursively, in name order), except Claude Code's
    ``<session>/subagents/`` files: those are imported nested inside their parent session."""
    for path in sorted(root.rglob("*.jsonl")):
        if path.is_file() and "subagents" not in path.relative_to(root).parts[:-1]:
            yield path


def find_imported(store: Store, source_format: str, session_id: str) -> str | None:
    """The trace already holding this session, if any (by ``source_format`` + ``session_id``)."""
    row = execute(
        store,
        "SELECT id FROM traces WHERE session_id = ? AND source_format = ? "
        "ORDER BY started_at_ms, id LIMIT 1",
        [session_id, source_format],
    ).fetchone()
    return str(row[0]) if row else None


def _import_died(store: Store, trace_id: str) -> bool:
    """Whether the trace is what an import that died left: still ``running`` with its import
    process gone, or already finalized so by a reader (``services/liveness``)."""
    from agent_replay.services.liveness import EXITED_KEY, finalize_orphans
    from agent_replay.store.mapping import dec_meta

    finalize_orphans(store)
    row = execute(store, "SELECT status, metadata FROM traces WHERE id = ?", [trace_id]).fetchone()
    if row is None or row[0] != "timeout":
        return False
    exited = dec_meta(row[1]).get(EXITED_KEY)
    return isinstance(exited, dict) and exited.get("kind") == "import"


# --- reports ---------------------------------------------------------------------------------


@dataclass
class FileResult:
    """What happened to one file: ``imported``, ``present`` (skipped: already in the store),
    ``empty`` (no conversation in it), ``ignored`` (found in a folder, but not a session file)
    or ``failed``."""

    path: Path
    status: str
    format: str | None = None
    session_id: str | None = None
    trace_id: str | None = None
    trace_status: str | None = None
    steps: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    @property
    def unknown_records(self) -> int:
        """Records skipped in this file (unknown kinds, unreadable lines, orphan results)."""
        return sum(self.skipped.values())

    def to_json(self) -> dict[str, Any]:
        """The file's entry in ``import --json``."""
        return {
            "path": str(self.path),
            "status": self.status,
            "format": self.format,
            "session_id": self.session_id,
            "trace_id": self.trace_id,
            "trace_status": self.trace_status,
            "steps": self.steps,
            "unknown_records": self.unknown_records,
            "unknown_kinds": dict(self.skipped),
            "error": self.error,
        }


@dataclass
class ImportReport:
    """The outcome of one ``import``: a result per file, and the totals."""

    files: list[FileResult] = field(default_factory=list)

    def _count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def sessions(self) -> int:
        """Sessions imported by this run."""
        return self._count("imported")

    @property
    def steps(self) -> int:
        """Steps written by this run."""
        return sum(f.steps for f in self.files if f.status == "imported")

    @property
    def present(self) -> int:
        """Files skipped because their session is already in the store."""
        return self._count("present")

    @property
    def empty(self) -> int:
        """Files with no conversation to import."""
        return self._count("empty")

    @property
    def ignored(self) -> int:
        """Files found in a folder that are not session files."""
        return self._count("ignored")

    @property
    def failed(self) -> list[FileResult]:
        """Files that could not be imported at all."""
        return [f for f in self.files if f.status == "failed"]

    @property
    def unknown_records(self) -> int:
        """Records skipped across every file read."""
        return sum(f.unknown_records for f in self.files)

    def to_json(self) -> dict[str, Any]:
        """``import --json`` (with the ``error`` and ``hints`` of every failure output when a
        file could not be imported)."""
        failure: dict[str, Any] = {}
        if self.failed:
            failure = {
                "error": f"{len(self.failed)} file(s) could not be imported",
                "hints": ["each failed file's reason is in files[].error"],
            }
        return {
            "ok": not self.failed,
            **failure,
            "sessions": self.sessions,
            "steps": self.steps,
            "already_present": self.present,
            "empty": self.empty,
            "ignored": self.ignored,
            "failed": len(self.failed),
            "unknown_records": self.unknown_records,
            "files": [f.to_json() for f in self.files],
        }


# --- the service -----------------------------------------------------------------------------


def import_file(
    store: Store,
    path: Path,
    *,
    fmt: str | None = None,
    tags: list[str] | None = None,
    redact: bool = True,
    clock: Clock | None = None,
    progress: Progress | None = None,
    in_folder: bool = False,
) -> FileResult:
    """Import one session file (skipped when its session is already in the store).

    A file of neither format fails, unless it was found walking a folder (``in_folder``):
    then it is ``ignored`` (``~/.codex`` also holds ``history.jsonl``, for one).
    """
    try:
        if path.stat().st_size == 0:
            return FileResult(path, "empty", format=fmt)
        chosen = fmt or detect_format(path)
        if chosen is None:
            return FileResult(
                path,
                "ignored" if in_folder else "failed",
                error=(
                    "not a Claude Code transcript, Codex rollout or Gemini CLI chat recording "
                    "(use --format to force one)"
                ),
            )
        parser = parser_for(chosen)
        session_id = parser.peek_session_id(path)
    except OSError as exc:
        return FileResult(path, "failed", format=fmt, error=f"cannot read: {exc.strerror or exc}")
    if session_id is not None:
        existing = find_imported(store, chosen, session_id)
        if existing is not None and _import_died(store, existing):
            # An earlier import of this session was killed half-way: start it over.
            with store.write():
                execute(store, "DELETE FROM traces WHERE id = ?", [existing])
            existing = None
        if existing is not None:
            return FileResult(
                path, "present", format=chosen, session_id=session_id, trace_id=existing
            )
    writer = SessionWriter(
        store,
        path=path.resolve(),
        source_format=chosen,
        agent_name=parser.AGENT_NAME,
        session_id=session_id,
        tags=list(tags or []),
        redact=redact,
        clock=clock,
        progress=progress,
    )
    result = FileResult(path, "imported", format=chosen, session_id=session_id)
    try:
        parser.import_session(path, writer)
    except OSError as exc:
        writer.abort()
        result.status, result.error = "failed", f"cannot read: {exc.strerror or exc}"
    except (AgentReplayError,) + DB_ERRORS:
        writer.abort()  # the store itself failed: every other file would too
        raise
    except Exception as exc:  # a shape no parser rule expected: fail this file, not the run
        writer.abort()
        result.status, result.error = "failed", f"could not import: {type(exc).__name__}: {exc}"
    except BaseException:
        writer.abort()  # Ctrl-C: leave nothing half-imported, then stop
        raise
    result.skipped = dict(writer.skipped)
    if result.status == "failed":
        return result
    if writer.trace_id is None:
        if writer.known == 0:
            result.status = "ignored" if in_folder else "failed"
            result.error = f"no {chosen} records in this file"
        else:
            result.status = "empty"
        return result
    result.trace_id, result.steps, result.trace_status = (
        writer.trace_id,
        writer.steps,
        writer.status,
    )
    return result


def import_path(
    store: Store,
    path: Path,
    *,
    fmt: str | None = None,
    tags: list[str] | None = None,
    redact: bool = True,
    clock: Clock | None = None,
    on_file: Callable[[int, int, Path], None] | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import a session file, or every session file under a folder (recursively).

    Args:
        store: the store to write into.
        path: a ``.jsonl`` session file, or a folder such as ``~/.claude/projects``,
            ``~/.codex/sessions`` or ``~/.gemini/tmp``.
        fmt: ``claude-transcript``, ``codex-rollout`` or ``gemini-chat``; detected per file
            when ``None``.
        tags: tags added to every imported trace.
        redact: replace secrets before writing (``--no-redact`` turns it off).
        clock: the time source for values a file leaves out.
        on_file: called with ``(index, total, path)`` before each file.
        progress: called with the steps written so far in the current file, now and then.

    Raises:
        UsageError: the path does not exist, or ``fmt`` is not a known format.
    """
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown import format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if path.is_dir():
        files = list(iter_session_files(path))
    elif path.exists():
        files = [path]
    else:
        raise UsageError(f"no such file or folder: {path}")
    report = ImportReport()
    for index, file in enumerate(files, start=1):
        if on_file is not None:
            on_file(index, len(files), file)
        report.files.append(
            import_file(
                store,
                file,
                fmt=fmt,
                tags=tags,
                redact=redact,
                clock=clock,
                progress=progress,
                in_folder=path.is_dir(),
            )
        )
    return report


# --- helpers the parsers share ---------------------------------------------------------------


def text_of(content: Any) -> str | None:
    """The text of a message or tool result: a string, or the text parts of a content list
    (images and other parts become a short placeholder)."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif isinstance(block.get("type"), str):
                parts.append(f"[{block['type']}]")
    return "\n".join(parts)


def as_int(value: Any) -> int | None:
    """A token count, or ``None`` when the value is not a non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 0 else None


def first_line(text: str | None, limit: int = 200) -> str:
    """The first non-blank line of a text, shortened (for error summaries)."""
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def timestamp(value: Any) -> str | None:
    """A record's timestamp in canonical UTC, or ``None`` when it is missing or not a time."""
    if not isinstance(value, str):
        return None
    try:
        return normalize_time(value)
    except ValueError:
        return None


def latest(a: str | None, b: str | None) -> str | None:
    """The later of two canonical timestamps (either may be ``None``)."""
    if a is None or b is None:
        return a or b
    return b if time_before(a, b) else a


def not_before(start: str | None, end: str | None) -> str | None:
    """``end``, moved up to ``start`` if a producer's clock put it earlier (durations stay
    non-negative)."""
    if start is not None and end is not None and time_before(end, start):
        return start
    return end
