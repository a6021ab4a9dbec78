"""The store's read API: the typed shapes (``store/shapes``) name exactly the keys the readers
return, on both backends, and the list's value classes behave as the dataclasses they replaced
(equality, hashing, immutability, validation)."""

from __future__ import annotations

from typing import Any, get_type_hints

import pytest

from agent_replay.errors import UsageError
from agent_replay.services.ingest import ingest_trace
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store import shapes
from agent_replay.store.db import Store
from agent_replay.store.queries import TraceFilter, count_traces, list_traces, step_count
from agent_replay.store.trace_detail import eval_dicts, trace_json


def keys(shape: Any) -> set[str]:
    return set(get_type_hints(shape))


@pytest.fixture
def full(store: Store, make_trace: Any) -> str:
    """A trace with a decision, a snapshot, an eval and an annotation on a step."""
    trace = make_trace(3, id="trc_shapes")
    trace["steps"][0]["step_type"] = "decision"
    trace["steps"][0]["decision"] = {
        "options": [{"option": "a"}, {"option": "b", "score": 0.5}],
        "chosen": "a",
    }
    trace["steps"][1]["snapshot"] = {"context_window": ["hi"], "environment": {"k": 1}}
    trace["evals"] = [{"evaluator": "manual", "score": 0.9, "passed": True}]
    trace["annotations"] = [{"label": "good", "step_number": 2}]
    return str(ingest_trace(store, trace).id)


def test_a_full_trace_has_the_keys_its_shapes_name(store: Store, full: str) -> None:
    data = trace_json(store, full)
    assert set(data) == keys(shapes.TraceJSON)
    step, with_snapshot = data["steps"][0], data["steps"][1]
    assert set(step) == keys(shapes.StepJSON)
    assert step["decision"] is not None and set(step["decision"]) == keys(shapes.DecisionJSON)
    assert with_snapshot["snapshot"] is not None
    assert set(with_snapshot["snapshot"]) == keys(shapes.SnapshotJSON)
    assert set(data["evals"][0]) == keys(shapes.EvalJSON)
    assert set(data["annotations"][0]) == keys(shapes.AnnotationJSON)


def test_a_trace_without_steps_leaves_only_the_optional_keys_out(store: Store, full: str) -> None:
    head = trace_json(store, full, with_steps=False)
    assert set(head) == keys(shapes.TraceJSON) - {"steps"}


def test_a_list_row_has_the_keys_of_its_shape(store: Store, full: str) -> None:
    (item,) = list_traces(store).items
    assert set(item.data) == keys(shapes.TraceFields)
    assert set(item.to_json()) == keys(shapes.TraceListJSON)
    assert (item.to_json()["step_count"], item.to_json()["is_fork"]) == (3, False)


def test_evals_read_back_typed_as_stored(store: Store, full: str) -> None:
    (stored,) = eval_dicts(store, full)
    assert (stored["evaluator"], stored["score"], stored["passed"]) == ("manual", 0.9, True)
    assert stored["id"].startswith("evl_")


def test_counts_read_the_list_and_the_trace_rows(store: Store, make_trace: Any) -> None:
    assert count_traces(store) == 0
    ingest_trace(store, make_trace(2, id="trc_two"))
    ingest_trace(store, make_trace(5, id="trc_five"))
    assert count_traces(store) == 2
    assert (step_count(store, "trc_five"), step_count(store, "trc_none")) == (5, 0)


def test_a_recorded_annotation_comes_back_in_its_shape(store: Store, full: str) -> None:
    added = TraceRecorder(store).annotate(full, label="check", note="look here")
    assert set(added) == keys(shapes.AnnotationJSON)
    assert added in trace_json(store, full)["annotations"]


# --- TraceFilter: what the frozen dataclass gave, written out --------------------------------


def test_filters_compare_and_hash_by_value() -> None:
    one = TraceFilter(status="failed", agent="a")
    assert one == TraceFilter(agent="a", status="failed")
    assert one != TraceFilter(status="failed")
    assert len({one, TraceFilter(status="failed", agent="a"), TraceFilter()}) == 2
    assert "status='failed'" in repr(one)


def test_a_filter_is_immutable_and_replace_makes_a_changed_copy() -> None:
    one = TraceFilter(text="boom", tag="x")
    with pytest.raises(AttributeError):
        one.text = None  # type: ignore[misc]
    other = one.replace(text=None)
    assert (other.text, other.tag, one.text) == (None, "x", "boom")


def test_a_filter_refuses_an_unknown_status() -> None:
    with pytest.raises(UsageError, match="unknown status 'nope'"):
        TraceFilter(status="nope")
    with pytest.raises(UsageError):
        TraceFilter().replace(status="nope")
