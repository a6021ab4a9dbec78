"""``ChangeSignal``: has another connection committed to the store since the last ask? Asked
once a second by the app (``AgentReplayApp.check_store``) so every screen refreshes on its own,
and cheap when nothing happened, on both backends.

No Textual, no Rich: the app calls it from a thread worker.
"""

from __future__ import annotations

import threading

from peewee import SQL, Case, Select, fn

from agent_replay.store.db import Store, data_version, shared_connection

# Imports nothing beyond the store handle at load: the app takes its baseline in the worker
# about to read the first screen's rows, ahead of that read (issue 17: the trace list's first
# paint). The models are imported by the PostgreSQL fingerprint, when a team store needs it.


def _pg_fingerprint() -> Select:
    """Everything a screen shows moves one of these when a writer commits: new traces, steps,
    decisions, snapshots, evals or annotations (arrival sequences and counts, each an index
    seek or an index-only count), a step closed (the partial index of open steps), a trace
    finished (the status index), a guard policy added, changed or removed (a hash of each of its
    few rows, summed: order does not matter). PostgreSQL only (``seq``: migration 0007)."""
    from agent_replay.store.models import (
        AnnotationRow,
        DecisionRow,
        EvalRow,
        PolicyRow,
        SnapshotRow,
        StepRow,
        TraceRow,
    )

    seq = SQL("seq")
    rows = fn.COUNT(SQL("*"))
    policy = PolicyRow._meta.sorted_fields  # every column: any change moves the hash
    return Select(
        columns=[
            TraceRow.select(rows),
            TraceRow.select(rows).where(TraceRow.status == "running"),
            StepRow.select(fn.MAX(seq)),
            StepRow.select(rows).where(StepRow.is_open == 1),
            DecisionRow.select(fn.MAX(seq)),
            SnapshotRow.select(fn.MAX(seq)),
            EvalRow.select(fn.MAX(seq)),
            EvalRow.select(rows),
            AnnotationRow.select(fn.MAX(seq)),
            AnnotationRow.select(rows),
            PolicyRow.select(fn.SUM(fn.hashtext(fn.concat_ws("|", *policy)))),
        ]
    )


def _pg_wal() -> Select:
    """The cluster's WAL position: unchanged means nothing was committed anywhere, so an idle
    poll is this one call (a standby reports what it replayed)."""
    position = Case(
        None, [(fn.pg_is_in_recovery(), fn.pg_last_wal_replay_lsn())], fn.pg_current_wal_lsn()
    )
    return Select(columns=[position.cast("text")])


class ChangeSignal:
    """Whether another connection committed to the store since the last ask, cheaply, on a
    connection of its own (any thread, one at a time).

    SQLite: ``PRAGMA data_version``. PostgreSQL has no such counter: the WAL position says
    whether anything at all was committed on the server (one function call when idle), and
    only then a fingerprint of this store's tables (``_pg_fingerprint``) says whether it was
    this store (other schemas and databases share the WAL).
    """

    def __init__(self, store: Store) -> None:
        self._store = shared_connection(store)
        self._wal: str | None = None
        self._token: object = None
        self._lock = threading.Lock()
        self._closed = False

    def changed(self) -> bool:
        """True when the store changed since the last call (the first call takes the
        baseline and says False; after ``close``, always False)."""
        with self._lock:
            return False if self._closed else self._changed()

    def _changed(self) -> bool:
        store = self._store
        if store.is_sqlite:
            token: object = data_version(store)
        else:
            wal = str(store.db.execute(_pg_wal()).fetchone()[0])
            if wal == self._wal:
                return False
            self._wal = wal
            token = tuple(store.db.execute(_pg_fingerprint()).fetchone())
        last, self._token = self._token, token
        return last is not None and token != last

    def close(self) -> None:
        """Close the signal's connection, once a poll in flight on another thread has
        finished: closing a SQLite connection under a running statement crashes the process
        (seen as a segfault when the app quit during a poll)."""
        with self._lock:
            self._closed = True
            self._store.close()
