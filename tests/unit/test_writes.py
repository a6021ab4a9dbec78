"""The write layer (``store/writes``): rows by model and fields, on both backends."""

from __future__ import annotations

from agent_replay.store.db import Store
from agent_replay.store.models import DecisionRow, StepRow, TagRow, TraceRow
from agent_replay.store.writes import (
    PG_MAX_ROWS,
    existing_trace_ids,
    insert_rows,
    replace_rows,
    update_rows,
)

TRACE = (TraceRow.id, TraceRow.agent_name, TraceRow.status, TraceRow.started_at_ms)
TRACE_ROW = TRACE + (TraceRow.created_at_ms,)
TAG = (TagRow.trace_id, TagRow.tag, TagRow.position)
DECISION = (
    DecisionRow.step_id,
    DecisionRow.trace_id,
    DecisionRow.options,
    DecisionRow.chosen,
    DecisionRow.decided_by,
)


def _traces(store: Store, count: int) -> list[str]:
    ids = [f"trc_{i:05d}" for i in range(count)]
    with store.write():
        insert_rows(
            store, TraceRow, TRACE_ROW, [(i, "agent", "ok", n, n) for n, i in enumerate(ids)]
        )
    return ids


def _all(store: Store, *fields: object) -> list[tuple[object, ...]]:
    model = fields[0].model  # type: ignore[attr-defined]
    query = model.select(*fields).order_by(*fields)
    return list(query.tuples().execute(store.db))


def test_a_batch_longer_than_a_chunk_lands_whole(store: Store) -> None:
    """More rows than one multi-row INSERT holds (PostgreSQL: full chunks, then power-of-two
    pieces of the rest): every row lands once, in its columns."""
    count = 2 * PG_MAX_ROWS + 37
    ids = _traces(store, count)
    rows = _all(store, TraceRow.id, TraceRow.started_at_ms, TraceRow.step_count)
    assert rows == [(i, n, 0) for n, i in enumerate(ids)]  # step_count: the table's DEFAULT


def test_ignore_skips_rows_already_stored_and_keeps_the_rest(store: Store) -> None:
    ids = _traces(store, 2)
    with store.write():
        rows = [(ids[0], "a", 0), (ids[1], "b", 1)]
        insert_rows(store, TagRow, TAG, rows)
        insert_rows(store, TagRow, TAG, [(ids[0], "a", 9), (ids[0], "c", 2)], ignore=True)
    assert _all(store, TagRow.trace_id, TagRow.tag, TagRow.position) == [
        (ids[0], "a", 0),
        (ids[0], "c", 2),
        (ids[1], "b", 1),
    ]


def test_text_with_a_nul_and_a_bool_flag_are_written_on_both_backends(store: Store) -> None:
    (trace,) = _traces(store, 1)
    step = (StepRow.id, StepRow.trace_id, StepRow.step_number, StepRow.step_type, StepRow.is_open)
    with store.write():
        insert_rows(store, StepRow, step, [("stp_1", trace, 1, "a\x00b", True)])
    nul = "a\x00b" if store.is_sqlite else "a\ufffdb"  # PostgreSQL text holds no NUL
    assert _all(store, StepRow.id, StepRow.step_type, StepRow.is_open) == [("stp_1", nul, 1)]


def test_a_replaced_row_arrives_anew(store: Store) -> None:
    """replace_rows deletes and inserts: the replacement comes after the rows written since
    the first one (rowid / seq), which is how the live view notices it."""
    (trace,) = _traces(store, 1)
    step = (StepRow.id, StepRow.trace_id, StepRow.step_number, StepRow.step_type)
    order = "rowid" if store.is_sqlite else "seq"
    with store.write():
        insert_rows(store, StepRow, step, [("s1", trace, 1, "decision"), ("s2", trace, 2, "x")])
        insert_rows(store, DecisionRow, DECISION, [("s1", trace, "[]", '"a"', "agent")])
        insert_rows(store, DecisionRow, DECISION, [("s2", trace, "[]", '"b"', "agent")])
        replace_rows(store, DecisionRow, DECISION, [("s1", trace, "[]", '"c"', "human")])
    rows = store.db.execute_sql(f"SELECT step_id, chosen FROM decisions ORDER BY {order}")
    assert list(rows.fetchall()) == [("s2", '"b"'), ("s1", '"c"')]


def test_an_update_binds_values_given_in_any_order_to_their_columns(store: Store) -> None:
    ids = _traces(store, 2)
    with store.write():
        changed = update_rows(
            store,
            TraceRow,
            {TraceRow.id: ids[1]},
            {TraceRow.source_format: "otlp", TraceRow.status: "failed", TraceRow.error: "boom"},
        )
        assert changed == 1
        assert (
            update_rows(
                store, TraceRow, {TraceRow.id: ids[0]}, {TraceRow.error: "e", TraceRow.status: "x"}
            )
            == 1
        )
        assert update_rows(store, TraceRow, {TraceRow.id: "missing"}, {TraceRow.error: "e"}) == 0
    rows = _all(store, TraceRow.id, TraceRow.status, TraceRow.error, TraceRow.source_format)
    assert rows == [(ids[0], "x", "e", None), (ids[1], "failed", "boom", "otlp")]


def test_existing_trace_ids_finds_them_across_chunks(store: Store) -> None:
    ids = _traces(store, 1200)
    asked = ids[::2] + ["trc_missing"]
    assert existing_trace_ids(store, asked) == set(ids[::2])
    assert existing_trace_ids(store, []) == set()


def test_a_replacement_finds_its_key_wherever_the_fields_put_it(store: Store) -> None:
    (trace,) = _traces(store, 1)
    step = (StepRow.id, StepRow.trace_id, StepRow.step_number, StepRow.step_type)
    late_key = (DecisionRow.trace_id, DecisionRow.chosen, DecisionRow.step_id)
    late_key += (DecisionRow.options, DecisionRow.decided_by)
    with store.write():
        insert_rows(store, StepRow, step, [("s1", trace, 1, "decision"), ("s2", trace, 2, "x")])
        insert_rows(store, DecisionRow, DECISION, [("s1", trace, "[]", '"a"', "agent")])
        insert_rows(store, DecisionRow, DECISION, [("s2", trace, "[]", '"b"', "agent")])
        replace_rows(store, DecisionRow, late_key, [(trace, '"c"', "s2", "[]", "human")])
    rows = _all(store, DecisionRow.step_id, DecisionRow.chosen, DecisionRow.decided_by)
    assert rows == [("s1", '"a"', "agent"), ("s2", '"c"', "human")]
