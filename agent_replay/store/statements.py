"""Statements the hot paths run once per row, built once by Peewee's query builder.

Compiling a peewee query costs tens of microseconds, which is a large share of a step on the
paths that write per row (record, ingest, the OTLP writer, the hook's drainer). A ``Statement``
builds its query once per backend and keeps the SQL text; each run passes fresh parameters to
``execute_sql`` (or ``executemany``). The text still comes from the query builder, so one
statement runs on SQLite and PostgreSQL alike and no module writes SQL by hand.

Every parameter of a statement is an ``arg()`` placeholder, in the order the compiled SQL reads
them (a constant would compile to a parameter too, which a run would then have to repeat):
building checks that the compiled query has no other parameter.

    _CLOSE = Statement(lambda: StepRow.update(is_open=arg()).where(StepRow.id == arg()))
    _CLOSE.run(store, (0, step_id))

An ``UPDATE``'s SET columns compile in the model's field order whatever order they are given
in; a statement whose columns are given in another order is refused, since its parameters
would land in the wrong columns.

An ``INSERT`` built from a dict orders its columns as the model does; ``insert_statement``
keeps the order of the fields given, so each row's values line up with them. A column it
leaves out takes the table's own ``DEFAULT``, as in a hand-written ``INSERT`` (a model insert
would add the model's default as a constant, which a statement refuses).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from peewee import Field, Insert, Model, Query, Update, Value

from agent_replay.store.core import Store

_MARK = "\x00agent-replay:arg\x00"


def arg() -> Value:
    """A parameter placeholder (no converter: the run's value is passed as it is)."""
    return Value(_MARK, converter=False, unpack=False)


def _check_set_order(query: Query, context: Any) -> None:
    """An ``UPDATE``'s SET list compiles in the model's field order, not the order given: its
    ``arg()`` values would then read the run's parameters into the wrong columns. Refused
    unless the columns are given in the order they compile in."""
    if not isinstance(query, Update):
        return
    given = list(query._update.items())  # type: ignore[attr-defined]  # peewee's, untyped
    compiled = [column.name for column, _ in sorted(given, key=context.column_sort_key)]
    if [column.name for column, _ in given] != compiled:  # names: a field's == is an expression
        raise TypeError(
            f"an update compiles its columns in the model's order: give them as {compiled}"
        )


class Statement:
    """A query built once per backend by ``build``, run many times with fresh parameters."""

    __slots__ = ("_build", "_sql")

    def __init__(self, build: Callable[[], Query]) -> None:
        self._build = build
        self._sql: dict[str, tuple[str, int]] = {}

    def sql(self, store: Store) -> str:
        """The statement's SQL text in the store's dialect (and placeholder style)."""
        return self._compiled(store)[0]

    def _compiled(self, store: Store) -> tuple[str, int]:
        found = self._sql.get(store.backend)
        if found is None:
            query = self._build()
            context = store.db.get_sql_context()
            _check_set_order(query, context)
            sql, params = context.sql(query).query()
            if any(param != _MARK for param in params):
                raise TypeError(f"a Statement's parameters must all be arg(): {sql}")
            found = self._sql[store.backend] = (sql, len(params))
        return found

    def run(self, store: Store, params: Sequence[Any] = ()) -> Any:
        """Execute once; returns the driver's cursor."""
        sql, count = self._compiled(store)
        if len(params) != count:
            raise TypeError(f"{count} parameters expected, got {len(params)}: {sql}")
        return store.db.execute_sql(sql, params)

    def run_many(self, store: Store, rows: Iterable[Sequence[Any]]) -> None:
        """Execute once per row of parameters (``executemany`` on SQLite; one statement per
        row through the database on PostgreSQL, which maps each row's values)."""
        if store.is_sqlite:
            found = self._sql.get("sqlite")  # the hot path: one lookup
            sql = found[0] if found is not None else self._compiled(store)[0]
            store.db.cursor().executemany(sql, rows)
            return
        sql, _count = self._compiled(store)
        for row in rows:
            store.db.execute_sql(sql, row)


def insert_statement(
    model: type[Model], fields: Sequence[Field], *, ignore: bool = False, rows: int = 1
) -> Statement:
    """``INSERT INTO model (fields) VALUES (...)``, the columns in the order given; ``ignore``
    skips a row whose key is already stored (``ON CONFLICT DO NOTHING``). ``rows``: a
    multi-row ``INSERT`` of that many rows, run with their values one row after the other."""
    columns = tuple(fields)

    def build() -> Query:
        values = [tuple(arg() for _ in columns) for _ in range(rows)]
        # Insert, not model.insert_many: no model defaults for the columns left out
        query = Insert(model, values, columns=list(columns))
        return query.on_conflict_ignore() if ignore else query

    return Statement(build)
