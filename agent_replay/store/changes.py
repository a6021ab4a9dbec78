"""``ChangeSignal``: has another connection committed to the store since the last ask? Asked
once a second by the app (``AgentReplayApp.check_store``) so every screen refreshes on its own,
and cheap when nothing happened, on both backends.

No Textual, no Rich: the app calls it from a thread worker.
"""

from __future__ import annotations

from agent_replay.store.db import Store, shared_connection
from agent_replay.store.live import data_version
from agent_replay.store.writes import execute

# Everything a screen shows moves one of these when a writer commits: new traces, steps,
# decisions, snapshots, evals or annotations (arrival sequences and counts, each an index seek
# or an index-only count), a step closed (the partial index of open steps), a trace finished
# (the status index). On PostgreSQL only; SQLite has ``data_version``.
_PG_FINGERPRINT = (
    "SELECT (SELECT count(*) FROM traces), "
    "(SELECT count(*) FROM traces WHERE status = 'running'), "
    "(SELECT max(seq) FROM steps), (SELECT count(*) FROM steps WHERE is_open = 1), "
    "(SELECT max(seq) FROM decisions), (SELECT max(seq) FROM snapshots), "
    "(SELECT max(seq) FROM evals), (SELECT count(*) FROM evals), "
    "(SELECT max(seq) FROM annotations), (SELECT count(*) FROM annotations)"
)
# The cluster's WAL position: unchanged means nothing was committed anywhere, so an idle poll
# is this one call (a standby reports what it replayed).
_PG_WAL = (
    "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
    "ELSE pg_current_wal_lsn() END::text"
)


class ChangeSignal:
    """Whether another connection committed to the store since the last ask, cheaply, on a
    connection of its own (any thread, one at a time).

    SQLite: ``PRAGMA data_version``. PostgreSQL has no such counter: the WAL position says
    whether anything at all was committed on the server (one function call when idle), and
    only then a fingerprint of this store's tables (``_PG_FINGERPRINT``) says whether it was
    this store (other schemas and databases share the WAL).
    """

    def __init__(self, store: Store) -> None:
        self._store = shared_connection(store)
        self._wal: str | None = None
        self._token: object = None

    def changed(self) -> bool:
        """True when the store changed since the last call (the first call takes the
        baseline and says False)."""
        store = self._store
        if store.is_sqlite:
            token: object = data_version(store)
        else:
            wal = str(execute(store, _PG_WAL).fetchone()[0])
            if wal == self._wal:
                return False
            self._wal = wal
            token = tuple(execute(store, _PG_FINGERPRINT).fetchone())
        last, self._token = self._token, token
        return last is not None and token != last

    def close(self) -> None:
        """Close the signal's connection."""
        self._store.close()
