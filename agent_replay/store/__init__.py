"""The store: peewee models, connection and pragmas, migrations, and queries returning the
trace format's objects. Depends on ``agent_replay.trace`` only; never on services, the CLI or
Textual.

Which module answers which question:

- **Opening a store**: ``db`` (``ensure_database``, ``open_store``: a SQLite file or a
  PostgreSQL schema, migrated), over ``core`` (the ``Store`` handle, ``SqliteReader``, the
  write lock ``Store.write``); ``handles`` wraps a connection the caller already holds;
  ``pragmas`` holds the connection settings; ``ids`` makes ``trc_…``/``stp_…`` ids.
- **Tables**: ``models`` (one peewee ``Model`` a table, not bound to a database: every query
  is run on a store's ``db`` explicitly). Their history is ``migrations`` (the runner:
  ordered, recorded), ``migration_ddl`` and ``search_index`` (the shipped migrations' frozen
  DDL) and ``schema`` (the version this build writes, stdlib only).
- **Reads go to** ``queries`` (the trace list: ``list_traces``, keyset pages of
  ``TraceSummary``, counts) and ``trace_detail`` (one trace: ``resolve_trace_id``,
  ``trace_json``, ``iter_step_dicts``, its evals and annotations). They return the typed
  shapes of ``shapes`` (``TraceJSON``, ``StepJSON``, ...: ``TypedDict``s, plain dicts at run
  time), built from rows by ``mapping``; ``get_trace`` validates one into a pydantic
  ``Trace``. Both keep SQL text because ``list``/``show``'s fast path runs them without
  peewee (their docstrings say why).
- **Writes go through** the services (``services/recorder``, ``services/ingest``, the
  capture paths), always inside ``Store.write()``: ``writes`` inserts whole traces' rows
  (``mapping`` turns models into rows), ``statements`` builds the per-row statements of the
  hot paths once; ``writers`` records which process writes a running trace.
- **Search**: ``search`` (the full-text index: FTS5 on SQLite, ``tsvector`` on PostgreSQL, and
  the free-text filter of the list) and ``trace_search`` (``agent-replay search``: ranked
  traces with their best matches).
- **Live**: ``live`` (incremental reads for ``watch``), ``live_feed`` (the state between
  polls), ``changes`` (has anything been committed since the last ask: the app's refresh).
- **Stats**: ``stats`` (the dashboard's aggregates, grouped by the database).
- **Moving data**: ``transfer`` (``push`` between stores), ``retention`` (pruning).

Everything but the modules listed in ``tests/meta/test_sql_strings.py: KEEP`` (``queries`` and
``trace_detail``, the search backends, the migrations' DDL, ``core``'s one pragma, the vacuums
of ``retention``) builds its SQL with peewee's query builder, so one query runs on both
backends.

peewee imports every database driver it finds when it is first imported (psycopg2 brings ssl
with it), which a local SQLite store never needs: ``_LazyDrivers`` keeps those imports out of
peewee's own start-up, and ``store.db`` hands peewee psycopg2 when a PostgreSQL store is opened
(``enable_psycopg2``). Importing psycopg2 anywhere else works as usual.
"""

from __future__ import annotations

import sys

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_DRIVERS = frozenset({"psycopg2", "psycopg2cffi", "psycopg", "pymysql", "MySQLdb"})


class _LazyDrivers:
    """Fails the driver imports peewee tries while its module is still initializing (a
    meta-path finder; no ``importlib.abc`` base, which the hook's fast path would import)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.partition(".")[0] not in _DRIVERS:
            return None
        peewee = sys.modules.get("peewee")
        if peewee is not None and not hasattr(peewee, "__version__"):  # set after its imports
            raise ImportError(f"{name}: imported when a PostgreSQL store is opened")
        return None


if not any(isinstance(finder, _LazyDrivers) for finder in sys.meta_path):
    sys.meta_path.insert(0, _LazyDrivers())
