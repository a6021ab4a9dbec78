"""Importing harness session files into the store: format detection, folder walking, skipping
sessions already imported, and the parsers by format name.

A parser (``claude_transcript``, ``codex_rollout``, ``gemini_chat``) streams one file line by
line and drives a ``SessionWriter`` (``session_writer``, the leaf the parsers share), which owns
the ``TraceRecorder`` (lenient, redacting unless ``--no-redact``) and the transactions. Nothing
here holds a session in memory: the writer keeps counters, and the parsers keep only what
pairing needs (open tool calls, the message being merged).

A session is identified by ``source_format`` + ``session_id`` (both indexed columns): a file
whose session is already in the store is skipped, wherever it was imported from. The source
path is kept in ``metadata.source.path`` but is not part of the identity, so moving or copying
``~/.claude/projects`` and importing again adds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent_replay.clock import Clock
from agent_replay.errors import AgentReplayError, UsageError
from agent_replay.services.capture import claude_transcript, codex_rollout, gemini_chat
from agent_replay.services.capture.session_writer import (
    CLAUDE_TRANSCRIPT,
    CODEX_ROLLOUT,
    FORMATS,
    GEMINI_CHAT,
    Progress,
    SessionWriter,
    head_records,
)
from agent_replay.store.db import DB_ERRORS, Store
from agent_replay.store.models import TraceRow
from agent_replay.store.retention import delete_traces


class Parser(Protocol):
    """What a format module provides."""

    FORMAT: str
    AGENT_NAME: str

    def sniff(self, record: dict[str, Any]) -> bool: ...

    def peek_session_id(self, path: Path) -> str | None: ...

    def import_session(self, path: Path, writer: SessionWriter) -> None: ...


_PARSERS: dict[str, Parser] = {
    CLAUDE_TRANSCRIPT: claude_transcript,
    CODEX_ROLLOUT: codex_rollout,
    GEMINI_CHAT: gemini_chat,
}


def parser_for(fmt: str) -> Parser:
    """The parser module of a format name."""
    parser = _PARSERS.get(fmt)
    if parser is None:
        raise UsageError(f"unknown import format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return parser


def detect_format(path: Path) -> str | None:
    """The format of a session file, from its first records (``None``: none of them)."""
    parsers = [parser_for(fmt) for fmt in FORMATS]
    for record in head_records(path):
        for parser in parsers:
            if parser.sniff(record):
                return parser.FORMAT
    return None


def iter_session_files(root: Path) -> Iterator[Path]:
    """Every ``*.jsonl`` under ``root`` (recursively, in name order), except Claude Code's
    ``<session>/subagents/`` files: those are imported nested inside their parent session."""
    for path in sorted(root.rglob("*.jsonl")):
        if path.is_file() and "subagents" not in path.relative_to(root).parts[:-1]:
            yield path


def find_imported(store: Store, source_format: str, session_id: str) -> str | None:
    """The trace already holding this session, if any (by ``source_format`` + ``session_id``)."""
    found = (
        TraceRow.select(TraceRow.id)
        .where((TraceRow.session_id == session_id) & (TraceRow.source_format == source_format))
        .order_by(TraceRow.started_at_ms, TraceRow.id)
        .limit(1)
        .scalar(store.db)
    )
    return str(found) if found is not None else None


def _import_died(store: Store, trace_id: str) -> bool:
    """Whether the trace is what an import that died left: still ``running`` with its import
    process gone, or already finalized so by a reader (``services/liveness``)."""
    from agent_replay.services.liveness import EXITED_KEY, finalize_orphans
    from agent_replay.store.mapping import dec_meta

    finalize_orphans(store)
    row = (
        TraceRow.select(TraceRow.status, TraceRow.metadata)
        .where(TraceRow.id == trace_id)
        .tuples()
        .first(store.db)
    )
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
            delete_traces(store, [existing])
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
