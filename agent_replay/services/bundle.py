"""Bundles: a few traces handed to a teammate as one file.

A bundle is an agent-replay store in a single SQLite file (journal mode ``DELETE``, so no
``-wal``/``-shm`` beside it; mode 0600) holding just the traces given, with their steps,
decisions, snapshots, evaluations and annotations, and nothing else (no policies, no spooled
payloads). It is written through the one write path: each trace is read as the format's object,
redacted (``services/redact``) and ingested (strict validation, the same ids), so a bundle never
holds what a store would refuse, nor a secret; and it is written atomically (complete or not at
all). Its search index is caught up before it is closed, so it can be read as it is.

``open_bundle`` opens one read-only (``agent-replay open``); ``merge_bundle`` ingests it into a
store (``agent-replay ingest FILE``), skipping traces already there, so merging twice adds
nothing.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_replay.clock import Clock
from agent_replay.errors import StoreError, UsageError
from agent_replay.services.ingest import IngestReport, Rejection, ingest_many
from agent_replay.services.redact import Redactor, identity, redact_value
from agent_replay.store.db import Store, open_read_only, open_store
from agent_replay.store.models import TraceRow
from agent_replay.store.trace_detail import trace_json
from agent_replay.store.writes import existing_trace_ids

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file: how ``ingest`` tells a bundle apart."""


def is_bundle(path: Path) -> bool:
    """Whether ``path`` is a SQLite file (a bundle, or any store's ``traces.db``)."""
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


@dataclass
class BundleReport:
    """What writing a bundle did."""

    path: Path
    traces: list[str] = field(default_factory=list)
    steps: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "traces": self.traces,
            "steps": self.steps,
            "bytes": self.bytes,
        }


def export_bundle(
    store: Store,
    trace_ids: Sequence[str],
    output: Path,
    *,
    clock: Clock | None = None,
    redact: bool = True,
) -> BundleReport:
    """Write the traces (full ids) into a new bundle file at ``output`` (replacing it).

    Raises:
        UsageError: no traces, or the output's folder does not exist.
        StoreError: a trace could not be written (the file is left untouched).
    """
    if not trace_ids:
        raise UsageError("a bundle needs at least one trace id")
    folder = output.resolve().parent
    if not folder.is_dir():
        raise UsageError(f"--output {output}: directory {output.parent} does not exist")
    redactor: Redactor = redact_value if redact else identity
    tmp = folder / f".{output.name}.{os.getpid()}.tmp"
    for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
        leftover.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    report = BundleReport(output)
    try:
        bundle = open_store(tmp, create=True)
        try:
            items = ((trace_id, redactor(trace_json(store, trace_id))) for trace_id in trace_ids)
            ingested = ingest_many(bundle, items, clock=clock)
            if ingested.rejected:
                first = ingested.rejected[0]
                raise StoreError(f"cannot bundle trace {first.where}: {first.reason}")
            from agent_replay.store.search import catch_up

            catch_up(bundle)
            # One self-contained file: leave WAL mode, which needs -wal and -shm beside it.
            bundle.db.pragma("journal_mode", "delete")
        finally:
            bundle.close()
        os.chmod(tmp, 0o600)
        os.replace(tmp, output)
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)
    report.traces = list(ingested.ingested)
    report.steps = ingested.steps
    report.bytes = output.stat().st_size
    return report


_COPIES: list[Path] = []


def _remove_copies() -> None:
    for folder in _COPIES:
        shutil.rmtree(folder, ignore_errors=True)


def open_bundle(path: Path) -> Store:
    """Open a bundle (or any store file) read-only.

    A bundle written by an older agent-replay is migrated in a private copy first (the file
    itself is never written), removed when the process ends.

    Raises:
        StoreError: not a SQLite file, not an agent-replay store, or newer than this build.
    """
    if not is_bundle(path):
        raise StoreError(
            f"{path} is not an agent-replay bundle (not a SQLite file)",
            hints=["bundles are written by `agent-replay export ID --format bundle --output F`"],
        )
    store = open_read_only(path)
    from agent_replay.store.migrations import pending

    try:
        if not store.db.table_exists("_migrations"):
            raise StoreError(f"{path} is a SQLite file but not an agent-replay store")
        missing = pending(store.db)
    except BaseException:
        store.close()
        raise
    if not missing:
        return store
    store.close()
    folder = Path(tempfile.mkdtemp(prefix="agent-replay-bundle-"))
    if not _COPIES:
        atexit.register(_remove_copies)
    _COPIES.append(folder)
    copy = folder / "bundle.db"
    shutil.copyfile(path, copy)
    os.chmod(copy, 0o600)
    open_store(copy, create=False).close()  # migrate the copy
    return open_read_only(copy)


@dataclass
class MergeReport:
    """What merging a bundle into a store did."""

    ingested: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    """Traces the store already held (left as they are)."""
    rejected: list[Rejection] = field(default_factory=list)
    steps: int = 0


def bundle_trace_ids(bundle: Store) -> list[str]:
    """The bundle's trace ids, oldest first (parents before their forks)."""
    query = TraceRow.select(TraceRow.id).order_by(TraceRow.started_at_ms, TraceRow.id)
    return [str(trace_id) for (trace_id,) in query.tuples().execute(bundle.db)]


def merge_bundle(
    store: Store | None,
    path: Path,
    *,
    clock: Clock | None = None,
    redact: bool = True,
    dry_run: bool = False,
    known_ids: Callable[[list[str]], set[str]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> MergeReport:
    """Ingest the bundle's traces that ``store`` does not hold yet (through ingest, redacted).

    Args:
        store: where to write (``None`` only with ``dry_run``).
        known_ids: in a dry run, tells which ids the store already holds.

    Raises:
        StoreError: the file is not a bundle.
    """
    redactor: Redactor = redact_value if redact else identity
    bundle = open_bundle(path)
    try:
        ids = bundle_trace_ids(bundle)
        if store is not None:
            present = existing_trace_ids(store, ids)
        else:
            present = known_ids(ids) if known_ids is not None else set()
        fresh = [i for i in ids if i not in present]

        def items() -> Iterator[tuple[str, Any]]:
            for trace_id in fresh:
                yield f"trace {trace_id}", redactor(trace_json(bundle, trace_id))

        result: IngestReport = ingest_many(
            None if dry_run else store, items(), dry_run=dry_run, clock=clock, progress=progress
        )
    finally:
        bundle.close()
    return MergeReport(
        ingested=result.ingested,
        present=[i for i in ids if i in present],
        rejected=result.rejected,
        steps=result.steps,
    )
