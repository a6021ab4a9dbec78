"""Running the OTLP writer's statements: built once by Peewee's query builder, run many times.

The writer process runs about a dozen statements per batch, and at one client a batch is one
request of a few spans: compiling a peewee query per statement (tens of microseconds) would be
a large share of a span's cost. So each statement is a ``store.statements.Statement``, built
once per backend; a lookup by a list of keys (``IN (...)``) is an ``InList``, which keeps one
statement per list length (at most ``CHUNK`` of them, built on first use).

``run`` executes on SQLite's own cursor: a statement of a batch costs SQLite's time, not also
the database wrapper's per-statement bookkeeping. On PostgreSQL it goes through the database
(``Statement.run``), which maps the parameters (NUL, bool) as PostgreSQL takes them. The SQL
text is the builder's on both: only the call that runs it differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from peewee import Query, Value

from agent_replay.store.core import Store
from agent_replay.store.statements import Statement, arg

CHUNK = 500
"""Keys per ``IN (...)`` list, well under SQLite's variable limit."""


def run(store: Store, statement: Statement, params: Sequence[Any] = ()) -> Any:
    """Execute ``statement`` once with ``params``; returns the driver's cursor."""
    if store.is_sqlite:
        return store.db.cursor().execute(statement.sql(store), params)
    return statement.run(store, params)


class InList:
    """A statement with one ``IN (...)`` list of keys, run chunk by chunk.

    ``build`` makes the query from the list's placeholders (one ``arg()`` a key).
    """

    __slots__ = ("_build", "_by_size")

    def __init__(self, build: Callable[[list[Value]], Query]) -> None:
        self._build = build
        self._by_size: dict[int, Statement] = {}

    def statement(self, size: int) -> Statement:
        """The statement for a list of ``size`` keys."""
        found = self._by_size.get(size)
        if found is None:
            build = self._build
            found = self._by_size[size] = Statement(lambda: build([arg() for _ in range(size)]))
        return found

    def run(self, store: Store, keys: Sequence[Any]) -> None:
        """Execute for every key (a write: ``DELETE ... WHERE key IN (...)``)."""
        for start in range(0, len(keys), CHUNK):
            chunk = keys[start : start + CHUNK]
            run(store, self.statement(len(chunk)), chunk)

    def rows(self, store: Store, keys: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows the statement reads for every key (none for no keys)."""
        out: list[tuple[Any, ...]] = []
        for start in range(0, len(keys), CHUNK):
            chunk = keys[start : start + CHUNK]
            out.extend(tuple(row) for row in run(store, self.statement(len(chunk)), chunk))
        return out
