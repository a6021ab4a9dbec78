"""The diff service: steps aligned by content (not step number), kinds, field differences with
their paths, metric deltas, the first divergence, trace input/output differences and totals —
on the demo's good/regressed pair and on crafted pairs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.services.demo import GOOD_RUN_ID, REGRESSED_ID, load_demo
from agent_replay.services.diff import Delta, diff_stored, diff_traces, step_costs
from agent_replay.services.diff_align import NW_MAX_CELLS, align_steps
from agent_replay.services.diff_fields import MISSING, json_differences, value_context
from agent_replay.store.db import Store


def _step(n: int, step_type: str, name: str, **fields: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "id": f"stp_{n}",
        "step_number": n,
        "step_type": step_type,
        "name": name,
        "input": None,
        "output": None,
        "error": None,
        "duration_ms": None,
        "tokens_used": None,
        "model": None,
        "decision": None,
        "metadata": {},
    }
    step.update(fields)
    return step


def _trace(trace_id: str, specs: list[tuple[str, str, dict[str, Any]]], **fields: Any) -> Any:
    """A trace object whose steps are ``(step_type, name, extra fields)``, numbered from 1."""
    trace: dict[str, Any] = {
        "id": trace_id,
        "agent_name": "agent",
        "agent_version": None,
        "status": "completed",
        "input": {"q": "question"},
        "output": "answer",
        "error": None,
        "total_cost_usd": None,
        "parent_trace_id": None,
        "forked_from_step": None,
        "steps": [_step(n, t, name, **extra) for n, (t, name, extra) in enumerate(specs, 1)],
    }
    trace.update(fields)
    return trace


PLAN = ("thought", "plan", {"output": "think"})
SEARCH = ("tool_call", "search", {"input": {"q": "refunds", "k": 3}, "output": {"hits": 2}})
FETCH = ("tool_call", "fetch", {"input": {"url": "https://x/1"}, "output": "doc"})
LLM = ("llm_call", "answer", {"input": {"prompt": "p"}, "model": "gpt-4o", "tokens_used": 100})
OUT = ("output", "reply", {"output": "answer"})


def _kinds(result: Any) -> list[tuple[str, int | None, int | None]]:
    return [(p.kind, p.a_number, p.b_number) for p in result.pairs]


# --- the demo pair ----------------------------------------------------------------------------


@pytest.fixture
def demo_store(store: Store, clock: FixedClock) -> Store:
    load_demo(store, clock)
    return store


def test_demo_regressed_run_aligns_with_one_inserted_step(demo_store: Store) -> None:
    """The regressed run's extra (failed) run_sql is one insertion; its retry pairs with the
    good run's run_sql, and the later steps keep their partners despite the shifted numbers."""
    result = diff_stored(demo_store, GOOD_RUN_ID, REGRESSED_ID)
    assert _kinds(result) == [
        ("matched", 1, 1),
        ("matched", 2, 2),
        ("changed", 3, 3),
        ("changed", 4, 4),
        ("changed", 5, 5),
        ("inserted", None, 6),
        ("changed", 6, 7),
        ("changed", 7, 8),
        ("changed", 8, 9),
    ]
    assert result.counts == {"matched": 2, "changed": 6, "inserted": 1, "deleted": 0}
    inserted = result.pairs[5]
    assert inserted.b is not None and inserted.b["error"].startswith("QueryCanceled")


def test_demo_first_divergence_is_the_date_filter_decision(demo_store: Store) -> None:
    """The first divergence is step 3's decision, and the choice is its first difference."""
    first = diff_stored(demo_store, GOOD_RUN_ID, REGRESSED_ID).first_divergence
    assert first is not None
    assert (first.where, first.a_step, first.b_step, first.name) == ("step", 3, 3, "date_filter")
    chosen = first.differences[0]
    assert (chosen.path, chosen.a, chosen.b) == (
        "decision.chosen",
        "filter_last_quarter",
        "scan_all_orders",
    )


def test_demo_changed_tool_input_names_the_field_path(demo_store: Store) -> None:
    """The run_sql pair reports input.sql and input.timeout_s, each with both values."""
    pair = diff_stored(demo_store, GOOD_RUN_ID, REGRESSED_ID).pairs[6]
    paths = {d.path: d for d in pair.differences if d.field == "input"}
    assert set(paths) == {"input.sql", "input.timeout_s"}
    assert (paths["input.timeout_s"].a, paths["input.timeout_s"].b) == (30, 120)
    assert "created_at >=" in paths["input.sql"].a
    assert "created_at >=" not in paths["input.sql"].b


def test_demo_deltas_totals_and_trace_output(demo_store: Store) -> None:
    """Per-pair token/duration/cost deltas, totals over the steps, and the output difference."""
    result = diff_stored(demo_store, GOOD_RUN_ID, REGRESSED_ID)
    write_sql = result.pairs[3]
    assert write_sql.tokens == Delta(812, 1394) and write_sql.tokens.delta == 582
    assert write_sql.duration_ms.delta == pytest.approx(2510 - 1744)
    assert write_sql.cost_usd.delta is not None and write_sql.cost_usd.delta > 0
    assert result.totals.steps == Delta(8, 9)
    assert (result.totals.tokens.a, result.totals.tokens.b) == (1346, 2362)
    assert result.cost_estimated  # the demo records trace totals, not step costs
    assert [d.field for d in result.trace_differences] == ["output"]
    assert not result.input_differences
    assert not result.identical


# --- crafted pairs ----------------------------------------------------------------------------


def test_an_inserted_step_does_not_cascade() -> None:
    """One step added in the middle is one insertion; every other step is matched."""
    a = _trace("trc_a", [PLAN, SEARCH, LLM, OUT])
    b = _trace("trc_b", [PLAN, FETCH, SEARCH, LLM, OUT])
    result = diff_traces(a, b)
    assert _kinds(result) == [
        ("matched", 1, 1),
        ("inserted", None, 2),
        ("matched", 2, 3),
        ("matched", 3, 4),
        ("matched", 4, 5),
    ]
    first = result.first_divergence
    assert first is not None and (first.kind, first.b_step, first.name) == ("inserted", 2, "fetch")


def test_a_deleted_step_shows_as_one_deletion() -> None:
    """One step missing from B is one deletion."""
    a = _trace("trc_a", [PLAN, SEARCH, FETCH, LLM, OUT])
    b = _trace("trc_b", [PLAN, SEARCH, LLM, OUT])
    result = diff_traces(a, b)
    assert _kinds(result) == [
        ("matched", 1, 1),
        ("matched", 2, 2),
        ("deleted", 3, None),
        ("matched", 4, 3),
        ("matched", 5, 4),
    ]
    assert result.counts["deleted"] == 1 and result.totals.steps == Delta(5, 4)


def test_an_inserted_step_at_the_start_is_not_a_cascade() -> None:
    """Even before step 1: the rest still match (alignment ignores step numbers)."""
    a = _trace("trc_a", [SEARCH, FETCH, LLM, OUT])
    b = _trace("trc_b", [PLAN, SEARCH, FETCH, LLM, OUT])
    assert [p.kind for p in diff_traces(a, b).pairs] == ["inserted"] + ["matched"] * 4


def test_reordered_steps_show_as_a_move() -> None:
    """Swapped steps: one stays matched, the other is deleted and inserted, linked as a move."""
    a = _trace("trc_a", [PLAN, SEARCH, FETCH, OUT])
    b = _trace("trc_b", [PLAN, FETCH, SEARCH, OUT])
    result = diff_traces(a, b)
    kinds = [p.kind for p in result.pairs]
    assert kinds.count("matched") == 3
    assert kinds.count("deleted") == 1 and kinds.count("inserted") == 1
    deleted = next(p for p in result.pairs if p.kind == "deleted")
    inserted = next(p for p in result.pairs if p.kind == "inserted")
    assert deleted.a is not None and inserted.b is not None
    assert deleted.a["name"] == inserted.b["name"]
    assert deleted.moved_to == inserted.b_number
    assert inserted.moved_from == deleted.a_number


def test_a_changed_tool_input_is_a_changed_pair_with_the_path() -> None:
    """Same tool, another argument: changed, with the differing key and both values."""
    edited = ("tool_call", "search", {"input": {"q": "returns", "k": 3}, "output": {"hits": 2}})
    result = diff_traces(_trace("trc_a", [PLAN, SEARCH, OUT]), _trace("trc_b", [PLAN, edited, OUT]))
    assert [p.kind for p in result.pairs] == ["matched", "changed", "matched"]
    pair = result.pairs[1]
    assert pair.fields == ["input"]
    (only,) = pair.differences
    assert (only.path, only.kind, only.a, only.b) == ("input.q", "changed", "refunds", "returns")
    first = result.first_divergence
    assert first is not None and first.a_step == 2 and first.differences == [only]


def test_a_changed_model_is_a_changed_pair() -> None:
    """Same LLM call on another model: changed, field ``model``."""
    other = ("llm_call", "answer", {**LLM[2], "model": "gpt-4o-mini"})
    result = diff_traces(_trace("trc_a", [PLAN, LLM]), _trace("trc_b", [PLAN, other]))
    pair = result.pairs[1]
    assert pair.kind == "changed" and pair.fields == ["model"]
    assert (pair.differences[0].a, pair.differences[0].b) == ("gpt-4o", "gpt-4o-mini")


def test_a_renamed_step_with_the_same_input_pairs_as_changed() -> None:
    """A new name on the same input is a rename (changed ``name``), not delete + insert."""
    renamed = ("tool_call", "web_search", SEARCH[2])
    result = diff_traces(_trace("trc_a", [SEARCH]), _trace("trc_b", [renamed]))
    assert [p.kind for p in result.pairs] == ["changed"]
    assert result.pairs[0].fields == ["name"]


def test_an_unrelated_step_of_the_same_type_is_not_paired() -> None:
    """Another name and another input: a deletion and an insertion, not a "change"."""
    result = diff_traces(_trace("trc_a", [SEARCH]), _trace("trc_b", [FETCH]))
    assert [p.kind for p in result.pairs] == ["deleted", "inserted"]


def test_steps_of_different_types_never_pair() -> None:
    """Same name, different type: never aligned."""
    thought = ("thought", "search", {"input": SEARCH[2]["input"]})
    result = diff_traces(_trace("trc_a", [SEARCH]), _trace("trc_b", [thought]))
    assert [p.kind for p in result.pairs] == ["deleted", "inserted"]


def test_a_failed_attempt_is_the_inserted_one_and_the_retry_pairs() -> None:
    """B retried a tool: the failed attempt is inserted, the success pairs with A's call."""
    failed = ("tool_call", "search", {"input": SEARCH[2]["input"], "error": "timeout"})
    result = diff_traces(_trace("trc_a", [PLAN, SEARCH]), _trace("trc_b", [PLAN, failed, SEARCH]))
    assert _kinds(result) == [("matched", 1, 1), ("inserted", None, 2), ("matched", 2, 3)]


def test_normalized_input_ignores_key_order_whitespace_and_int_floats() -> None:
    """Alignment keys normalize the input; the field diff still reports real differences."""
    a = _trace("trc_a", [("tool_call", "t", {"input": {"a": 1, "b": "x  y"}})])
    b = _trace("trc_b", [("tool_call", "t", {"input": {"b": "x y", "a": 1.0}})])
    assert align_steps(a["steps"], b["steps"]) == [(0, 0)]
    pair = diff_traces(a, b).pairs[0]
    assert [d.path for d in pair.differences] == ["input.b"]  # 1 == 1.0, "x  y" != "x y"


def test_identical_traces_have_no_divergence() -> None:
    """Same steps and fields: identical, every pair matched, no first divergence."""
    a = _trace("trc_a", [PLAN, SEARCH, LLM, OUT])
    b = _trace("trc_b", [PLAN, SEARCH, LLM, OUT])
    result = diff_traces(a, b)
    assert result.identical and result.first_divergence is None
    assert result.counts == {"matched": 4, "changed": 0, "inserted": 0, "deleted": 0}


def test_a_different_input_is_the_first_divergence() -> None:
    """The trace input precedes every step: when it differs, it is the first divergence."""
    a = _trace("trc_a", [PLAN, SEARCH])
    b = _trace("trc_b", [PLAN, ("tool_call", "search", {"input": {"q": "x"}})], input={"q": "new"})
    first = diff_traces(a, b).first_divergence
    assert first is not None and first.where == "input" and first.pair_index is None
    assert [(d.path, d.a, d.b) for d in first.differences] == [("input.q", "question", "new")]


def test_trace_output_status_and_error_differences() -> None:
    """Output, status and error are compared at the trace level."""
    a = _trace("trc_a", [PLAN])
    b = _trace("trc_b", [PLAN], output=None, status="failed", error="boom")
    found = {d.field: d for d in diff_traces(a, b).trace_differences}
    assert set(found) == {"output", "status", "error"}
    assert found["output"].kind == "removed" and found["output"].b is MISSING
    assert found["error"].kind == "added"


def test_empty_traces() -> None:
    """No steps on either side: no pairs; one side empty: all insertions."""
    assert diff_traces(_trace("trc_a", []), _trace("trc_b", [])).pairs == []
    result = diff_traces(_trace("trc_a", []), _trace("trc_b", [PLAN, OUT]))
    assert [p.kind for p in result.pairs] == ["inserted", "inserted"]


def test_to_json_is_plain_json_and_compact_drops_pairs() -> None:
    """The JSON object encodes (no MISSING leaks) and ``compact`` leaves the pairs out."""
    a = _trace("trc_a", [PLAN, SEARCH, OUT])
    b = _trace("trc_b", [PLAN, FETCH, OUT], output=None)
    full = diff_traces(a, b).to_json()
    text = json.dumps(full)
    assert "MISSING" not in text
    assert [p["kind"] for p in full["pairs"]] == ["matched", "deleted", "inserted", "matched"]
    assert full["pairs"][1]["a"] == {
        "id": "stp_2",
        "step_number": 2,
        "step_type": "tool_call",
        "name": "search",
    }
    assert full["trace_differences"] == [
        {"field": "output", "path": "output", "kind": "removed", "a": "answer"}
    ]
    compact = diff_traces(a, b).to_json(compact=True)
    assert "pairs" not in compact and compact["counts"]["inserted"] == 1


def test_a_large_trace_aligns_fast_through_the_anchored_path() -> None:
    """3,000-step traces differing near both ends (a middle beyond NW_MAX_CELLS) align in
    well under a few seconds, still as one insertion and two changes."""
    n = 3000
    specs = [("tool_call", f"t{i % 7}", {"input": {"i": i}}) for i in range(n)]
    changed = list(specs)
    changed[5] = ("tool_call", "t5", {"input": {"i": 5, "extra": True}})
    changed[n - 5] = ("tool_call", changed[n - 5][1], {"input": {"i": n - 5, "x": 1}})
    changed.insert(1500, ("thought", "inserted", {}))
    assert (n - 10) ** 2 > NW_MAX_CELLS
    started = time.perf_counter()
    result = diff_traces(_trace("trc_a", specs), _trace("trc_b", changed))
    assert time.perf_counter() - started < 10
    assert result.counts == {"matched": n - 2, "changed": 2, "inserted": 1, "deleted": 0}


# --- helpers ----------------------------------------------------------------------------------


def test_json_differences_align_list_elements() -> None:
    """A message inserted into a list is one ``added`` difference, not a cascade."""
    a = {"messages": [{"r": "system"}, {"r": "user"}]}
    b = {"messages": [{"r": "system"}, {"r": "tool"}, {"r": "user"}]}
    found, more = json_differences(a, b, "input", "input")
    assert [(d.path, d.kind) for d in found] == [("input.messages[1]", "added")]
    assert more == 0


def test_json_differences_are_capped() -> None:
    """Past the limit, differences are counted, not listed."""
    found, more = json_differences(list(range(10)), list(range(10, 20)), "input", "input", limit=3)
    assert len(found) == 3 and more == 7


def test_value_context_windows_around_the_first_difference() -> None:
    """Long strings are cut around where they start to differ, with ellipses."""
    a = "x" * 200 + "AAA" + "y" * 200
    b = "x" * 200 + "BBB" + "y" * 200
    left, right = value_context(a, b, 40)
    assert "AAA" in left and "BBB" in right
    assert left.startswith("…") and left.endswith("…") and len(left) == 40
    assert value_context("short", "other") == ("short", "other")
    assert value_context(MISSING, 3) == ("(absent)", "3")


def test_step_costs_recorded_and_prorated() -> None:
    """Recorded ``metadata.cost_usd`` wins; the rest of the total is shared by tokens."""
    trace = _trace(
        "trc_a",
        [
            ("llm_call", "a", {"tokens_used": 100, "metadata": {"cost_usd": 0.5}}),
            ("llm_call", "b", {"tokens_used": 100}),
            ("llm_call", "c", {"tokens_used": 300}),
        ],
        total_cost_usd=1.5,
    )
    costs, estimated = step_costs(trace)
    assert costs == pytest.approx([0.5, 0.25, 0.75]) and estimated
    assert step_costs(_trace("trc_b", [PLAN])) == ([None], False)
