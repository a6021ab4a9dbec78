"""What every format parser writes through: the ``SessionWriter`` (the recorder and the
transactions), streaming a session file's records, the field helpers the parsers share, and the
format names.

A leaf of the importer: ``claude_transcript``, ``codex_rollout`` and ``gemini_chat`` import it,
and ``importer`` (detection, folder walking, skipping) imports them, so nothing imports back.

Transactions: the writer groups recorder calls into one transaction committed every
``COMMIT_EVERY_S`` seconds, so a 200 MB import neither pays a commit per step nor holds the
write lock for long (hooks recording a live session into the same store wait at most that
long). If a file fails half-way, the partial trace is deleted, so a later import retries it
instead of skipping a session it holds only in part.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

from peewee import fn

from agent_replay.clock import Clock
from agent_replay.errors import NotFoundError, TraceFormatError, UsageError
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store
from agent_replay.store.models import StepRow
from agent_replay.store.retention import delete_traces
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

    def steps_cost(self, steps: list[int]) -> float | None:
        """The summed cost of some of the trace's steps (``None`` when none has one): a
        subagent's cost is its ``llm_call`` steps' (``claude_transcript``)."""
        if self.trace_id is None or not steps:
            return None
        total = (
            StepRow.select(fn.SUM(StepRow.cost_usd))
            .where((StepRow.trace_id == self.trace_id) & StepRow.step_number.in_(steps))
            .scalar(self.store.db)
        )
        return round(float(total), 10) if total is not None else None

    def abort(self) -> None:
        """Undo a failed import: roll back the open batch and delete the partial trace."""
        self._rollback()
        if self.trace_id is not None:
            # The recorder has no delete; this removes only the rows this import wrote (the
            # steps, tags, decisions and snapshots go with the trace: ON DELETE CASCADE).
            delete_traces(self.store, [self.trace_id])
            self.trace_id = None


def head_records(path: Path) -> list[dict[str, Any]]:
    """The file's first ``SNIFF_RECORDS`` JSON-object records (the file is closed after)."""
    with closing(read_records(path)) as records:
        return [r for _, r in islice(records, SNIFF_RECORDS) if r is not None]


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
