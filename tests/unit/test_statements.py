"""Statements built once by the query builder (``store/statements``), on both backends."""

from __future__ import annotations

import pytest

from agent_replay.store.db import Store
from agent_replay.store.models import TraceRow
from agent_replay.store.statements import Statement, arg, insert_statement

FIELDS = (
    TraceRow.id,
    TraceRow.created_at_ms,
    TraceRow.agent_name,
    TraceRow.status,
    TraceRow.started_at_ms,
    TraceRow.step_count,
)


def test_a_statement_runs_with_fresh_parameters_on_each_backend(store: Store) -> None:
    insert = insert_statement(TraceRow, FIELDS, ignore=True)
    rename = Statement(lambda: TraceRow.update(agent_name=arg()).where(TraceRow.id == arg()))
    with store.write():
        insert.run_many(store, [("t1", 5, "a\x00b", "ok", 1, 0), ("t2", 6, "b", "ok", 2, 0)])
        insert.run_many(store, [("t1", 7, "again", "failed", 3, 0)])  # the key is there: skipped
        assert rename.run(store, ("renamed", "t2")).rowcount == 1
    rows = TraceRow.select(TraceRow.id, TraceRow.created_at_ms, TraceRow.agent_name).order_by(
        TraceRow.id
    )
    got = list(rows.tuples().execute(store.db))
    nul = "a\x00b" if store.is_sqlite else "a\ufffdb"  # PostgreSQL text holds no NUL
    assert got == [("t1", 5, nul), ("t2", 6, "renamed")]


def test_a_constant_in_a_statement_is_refused(store: Store) -> None:
    """A constant compiles to a parameter that every run would have to repeat: refused."""
    with pytest.raises(TypeError, match="arg"):
        Statement(lambda: TraceRow.update(status="failed").where(TraceRow.id == arg())).sql(store)
    with pytest.raises(TypeError, match="2 parameters expected, got 1"):
        Statement(lambda: TraceRow.update(status=arg()).where(TraceRow.id == arg())).run(
            store, ("x",)
        )


def test_an_insert_leaving_out_a_column_takes_the_tables_default(store: Store) -> None:
    """As a hand-written INSERT does: the table's DEFAULT, no constant in the statement."""
    with store.write():
        insert_statement(TraceRow, FIELDS[:-1]).run_many(store, [("t1", 5, "a", "ok", 1)])
    query = TraceRow.select(TraceRow.id, TraceRow.step_count)
    assert list(query.tuples().execute(store.db)) == [("t1", 0)]


def test_a_multi_row_insert_takes_its_rows_one_after_the_other(store: Store) -> None:
    insert = insert_statement(TraceRow, FIELDS, rows=3)
    with store.write():
        insert.run(store, [v for i in range(3) for v in (f"t{i}", i, "a", "ok", i, i)])
    query = TraceRow.select(TraceRow.id, TraceRow.step_count).order_by(TraceRow.id)
    assert list(query.tuples().execute(store.db)) == [("t0", 0), ("t1", 1), ("t2", 2)]


def test_set_columns_out_of_the_models_order_are_refused(store: Store) -> None:
    """Peewee compiles SET in the model's order: given otherwise, the run's values would land
    in each other's columns, so building refuses and names the order to use."""
    swapped = Statement(
        lambda: TraceRow.update({TraceRow.status: arg(), TraceRow.agent_name: arg()}).where(
            TraceRow.id == arg()
        )
    )
    with pytest.raises(TypeError, match=r"\['agent_name', 'status'\]"):
        swapped.sql(store)
    ordered = Statement(
        lambda: TraceRow.update({TraceRow.agent_name: arg(), TraceRow.status: arg()}).where(
            TraceRow.id == arg()
        )
    )
    assert "SET" in ordered.sql(store)
