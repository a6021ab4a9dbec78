"""The fork service: a first-class trace holding the steps before N and step N, with the fork's
trace input and/or step N's input edited (merged or replaced), written through ingest — and a
diff of the fork against its parent shows exactly the edits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.errors import NotFoundError, UsageError
from agent_replay.services.demo import GOOD_RUN_ID, REGRESSED_ID, load_demo
from agent_replay.services.diff import diff_stored
from agent_replay.services.fork import (
    InputEdit,
    apply_edit,
    build_fork,
    fork_point_input,
    fork_trace,
    merge_patch,
    parse_modification,
)
from agent_replay.services.ingest import ingest_trace
from agent_replay.services.outcome import is_not_rerun, outcome_note
from agent_replay.store.db import Store
from agent_replay.store.queries import TraceFilter, list_traces
from agent_replay.store.trace_detail import trace_json


@pytest.fixture
def demo(store: Store, clock: FixedClock) -> Store:
    load_demo(store, clock)
    return store


# --- the edit ---------------------------------------------------------------------------------


def test_merge_patch_follows_rfc_7386() -> None:
    """Objects merge recursively, null deletes a key, other values replace."""
    target = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]}
    patch = {"b": {"c": None, "x": 9}, "e": [3], "f": "new", "a": None}
    assert merge_patch(target, patch) == {"b": {"d": 3, "x": 9}, "e": [3], "f": "new"}
    assert target == {"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]}  # not mutated


def test_a_non_object_patch_or_target_replaces() -> None:
    """A patch that is not an object replaces; an object patch on a non-object starts from {}."""
    assert merge_patch({"a": 1}, "text") == "text"
    assert merge_patch({"a": 1}, [1]) == [1]
    assert merge_patch("text", {"a": 1, "b": None}) == {"a": 1}


def test_replace_mode_replaces_even_objects() -> None:
    """``replace`` drops the original input entirely."""
    assert apply_edit({"a": 1, "b": 2}, InputEdit({"b": 3}, "replace")) == {"b": 3}
    assert apply_edit({"a": 1, "b": 2}, InputEdit({"b": 3})) == {"a": 1, "b": 3}
    assert apply_edit({"a": 1}, None) == {"a": 1}


def test_parse_modification_names_the_problem() -> None:
    """Bad JSON is a usage error saying where it broke."""
    assert parse_modification('{"a": [1, null]}') == {"a": [1, None]}
    assert parse_modification("null") is None
    with pytest.raises(UsageError, match=r"not valid JSON: .*line 1 column 2"):
        parse_modification("{bad")
    with pytest.raises(UsageError, match="empty"):
        parse_modification("  ")


def test_parse_modification_reads_at_file(tmp_path: Path) -> None:
    """``@path`` reads the JSON from a file; a missing file is a usage error."""
    path = tmp_path / "edit.json"
    path.write_text('{"timeout_s": 120}', encoding="utf-8")
    assert parse_modification(f"@{path}") == {"timeout_s": 120}
    with pytest.raises(UsageError, match="cannot read"):
        parse_modification(f"@{tmp_path / 'missing.json'}")
    path.write_text("{oops", encoding="utf-8")
    with pytest.raises(UsageError, match=r"edit.json is not valid JSON"):
        parse_modification(f"@{path}")
    with pytest.raises(UsageError, match="not valid JSON"):  # an editor never reads files
        parse_modification(f"@{path}", allow_file=False)


# --- the fork ---------------------------------------------------------------------------------


def test_fork_keeps_parent_steps_and_edits_step_n(demo: Store, clock: FixedClock) -> None:
    """Steps before N as recorded, step N with the merged input, nothing after N."""
    result = fork_trace(demo, REGRESSED_ID, 6, InputEdit({"timeout_s": 120}), clock=clock)
    parent = trace_json(demo, REGRESSED_ID)
    fork = trace_json(demo, result.trace_id)
    assert fork["status"] == "forked"
    assert (fork["parent_trace_id"], fork["forked_from_step"]) == (REGRESSED_ID, 6)
    assert [s["step_number"] for s in fork["steps"]] == [1, 2, 3, 4, 5, 6]
    for mine, theirs in zip(fork["steps"][:5], parent["steps"][:5], strict=True):
        assert {k: v for k, v in mine.items() if k != "id"} == {
            k: v for k, v in theirs.items() if k != "id"
        }
    assert fork["steps"][5]["input"] == {**parent["steps"][5]["input"], "timeout_s": 120}
    step = fork["steps"][5]
    assert parent["steps"][5]["error"] and parent["steps"][5]["duration_ms"]
    # Never observed for the fork: no copied outcome, and the step says so.
    assert (step["output"], step["error"], step["tokens_used"], step["duration_ms"]) == (None,) * 4
    assert step["ended_at"] is None and is_not_rerun(step)
    assert outcome_note(step) == "not re-run (recorded error, duration not copied)"
    assert step["name"] == parent["steps"][5]["name"]  # what the step is stays as recorded
    assert fork["input"] == parent["input"]
    (applied,) = result.edits
    assert applied.original_input == parent["steps"][5]["input"]
    assert applied.new_input == fork["steps"][5]["input"]
    assert applied.target == "step_input" and result.step_count == 6


def test_fork_steps_get_fresh_ids_and_the_fork_its_own(demo: Store, clock: FixedClock) -> None:
    """No id is shared with the parent."""
    result = fork_trace(demo, GOOD_RUN_ID, 4, clock=clock)
    parent_ids = {s["id"] for s in trace_json(demo, GOOD_RUN_ID)["steps"]}
    fork_ids = {s["id"] for s in trace_json(demo, result.trace_id)["steps"]}
    assert result.trace_id.startswith("trc_") and result.trace_id != GOOD_RUN_ID
    assert len(fork_ids) == 4 and not fork_ids & parent_ids


def test_fork_drops_tags_session_output_and_evals(demo: Store, clock: FixedClock) -> None:
    """Only the given tags; no session (live capture must never write into a fork), no output."""
    result = fork_trace(demo, GOOD_RUN_ID, 3, tags=["what-if"], clock=clock)
    fork = trace_json(demo, result.trace_id)
    assert fork["tags"] == ["what-if"]
    assert fork["session_id"] is None and fork["output"] is None and fork["evals"] == []
    info = fork["metadata"]["fork"]
    assert info == {"from_step": 3, "created_at": "2026-06-01T12:00:00.000Z"}
    assert fork["metadata"]["ci_run"] == "nightly-1188"  # the parent's metadata is kept
    assert fork["started_at"] == trace_json(demo, GOOD_RUN_ID)["started_at"]
    assert fork["ended_at"] == fork["steps"][-1]["started_at"]  # step N has not run


def test_fork_cost_is_the_copied_steps_share(demo: Store, clock: FixedClock) -> None:
    """The fork's cost covers its copied steps (the parent's total shared by tokens)."""
    parent = trace_json(demo, GOOD_RUN_ID)
    full = fork_trace(demo, GOOD_RUN_ID, 8, clock=clock)
    assert trace_json(demo, full.trace_id)["total_cost_usd"] == pytest.approx(
        parent["total_cost_usd"]
    )
    early = trace_json(demo, fork_trace(demo, GOOD_RUN_ID, 2, clock=clock).trace_id)
    assert early["total_cost_usd"] == 0.0  # plan and get_schema used no tokens


@pytest.mark.parametrize("from_step", [1, 4])
def test_a_trace_edit_changes_the_forks_input_at_any_step(
    demo: Store, clock: FixedClock, from_step: int
) -> None:
    """The trace input is merged with the edit; the steps stay as recorded."""
    edit = InputEdit({"question": "And the quarter before?"})
    result = fork_trace(demo, GOOD_RUN_ID, from_step, trace_edit=edit, clock=clock)
    parent = trace_json(demo, GOOD_RUN_ID)
    fork = trace_json(demo, result.trace_id)
    assert fork["input"] == {**parent["input"], "question": "And the quarter before?"}
    for mine, theirs in zip(fork["steps"], parent["steps"], strict=False):
        assert mine["input"] == theirs["input"]
    assert [e.target for e in result.edits] == ["trace_input"]
    assert fork["metadata"]["fork"]["edits"] == [
        {"target": "trace_input", "mode": "merge", "modification": edit.value}
    ]


def test_both_edits_at_once(demo: Store, clock: FixedClock) -> None:
    """A trace-input edit and a step edit together, trace input first in the result."""
    result = fork_trace(
        demo,
        REGRESSED_ID,
        6,
        InputEdit({"timeout_s": 120}),
        trace_edit=InputEdit({"note": "retry"}),
        clock=clock,
    )
    fork = trace_json(demo, result.trace_id)
    assert fork["input"]["note"] == "retry" and fork["steps"][5]["input"]["timeout_s"] == 120
    assert [e.target for e in result.edits] == ["trace_input", "step_input"]
    assert [e["target"] for e in fork["metadata"]["fork"]["edits"]] == [
        "trace_input",
        "step_input",
    ]


def test_a_step_edit_at_step_1_edits_step_1(demo: Store, clock: FixedClock) -> None:
    """The step edit always targets step N's input, step 1 included; the trace input stays."""
    parent = trace_json(demo, GOOD_RUN_ID)
    result = fork_trace(demo, GOOD_RUN_ID, 1, InputEdit({"extra": True}), clock=clock)
    fork = trace_json(demo, result.trace_id)
    assert fork["input"] == parent["input"]
    assert fork["steps"][0]["input"] == apply_edit(
        parent["steps"][0]["input"], InputEdit({"extra": True})
    )


def test_fork_rejects_a_step_the_trace_does_not_have(demo: Store, clock: FixedClock) -> None:
    """N beyond the last step (or 0) is a usage error naming the range."""
    with pytest.raises(UsageError, match=r"out of range: .* has steps 1\.\.8"):
        fork_trace(demo, GOOD_RUN_ID, 9, clock=clock)
    with pytest.raises(UsageError, match="out of range"):
        fork_trace(demo, GOOD_RUN_ID, 0, clock=clock)
    with pytest.raises(NotFoundError):
        fork_trace(demo, "trc_nope", 1, clock=clock)


def test_fork_rejects_a_gap_in_the_step_numbers(store: Store, clock: FixedClock) -> None:
    """A step number inside the range that the trace skips is refused too."""
    trace: dict[str, Any] = {
        "id": "trc_gaps",
        "agent_name": "a",
        "steps": [
            {"step_number": 1, "step_type": "thought"},
            {"step_number": 3, "step_type": "thought"},
        ],
    }
    ingest_trace(store, trace)
    with pytest.raises(UsageError, match="has no step 2"):
        fork_trace(store, "trc_gaps", 2, clock=clock)
    with pytest.raises(UsageError, match="no steps to fork"):
        build_fork({"id": "trc_x", "steps": []}, 1)


def test_fork_point_input_prefills_the_editor(demo: Store) -> None:
    """What the editor starts from: the step's own input, step 1 included."""
    parent = trace_json(demo, GOOD_RUN_ID)
    assert fork_point_input(parent, 1) == parent["steps"][0]["input"]
    assert fork_point_input(parent, 2) == {"tables": ["orders", "regions"]}


def test_a_fork_is_listed_as_a_fork(demo: Store, clock: FixedClock) -> None:
    """``list`` (``TraceSummary.is_fork``) and ``forks_of`` find it."""
    result = fork_trace(demo, GOOD_RUN_ID, 2, clock=clock)
    (summary,) = list_traces(demo, TraceFilter(forks_of=GOOD_RUN_ID)).items
    assert summary.id == result.trace_id and summary.is_fork
    assert summary.data["status"] == "forked"


def test_a_fork_of_a_fork(demo: Store, clock: FixedClock) -> None:
    """Forks chain: a fork can be forked again."""
    first = fork_trace(demo, GOOD_RUN_ID, 5, clock=clock)
    second = fork_trace(demo, first.trace_id, 3, InputEdit({"x": 1}), clock=clock)
    assert trace_json(demo, second.trace_id)["parent_trace_id"] == first.trace_id


# --- fork, then diff --------------------------------------------------------------------------


@pytest.mark.parametrize("parent_first", [True, False], ids=["parent-fork", "fork-parent"])
def test_diff_against_the_parent_shows_exactly_the_edit(
    demo: Store, clock: FixedClock, parent_first: bool
) -> None:
    """Steps before N matched; step N changed in the edited key and its cleared outcome."""
    result = fork_trace(demo, REGRESSED_ID, 6, InputEdit({"timeout_s": 120}), clock=clock)
    a, b = (REGRESSED_ID, result.trace_id) if parent_first else (result.trace_id, REGRESSED_ID)
    diff = diff_stored(demo, a, b)
    assert diff.counts == {"matched": 5, "changed": 1, "inserted": 0, "deleted": 0}
    assert diff.beyond_fork == 3 and diff.trace_differences == []
    (changed,) = [p for p in diff.pairs if p.kind == "changed"]
    assert (changed.a_number, changed.b_number) == (6, 6)
    edited, error = changed.differences
    expected = (30, 120) if parent_first else (120, 30)
    assert (edited.path, edited.kind, (edited.a, edited.b)) == (
        "input.timeout_s",
        "changed",
        expected,
    )
    assert (error.path, error.kind) == ("error", "removed" if parent_first else "added")
    first = diff.first_divergence
    assert first is not None and first.a_step == 6 and first.differences == [edited, error]


def test_diff_of_a_step_1_fork_shows_only_the_trace_input(demo: Store, clock: FixedClock) -> None:
    """N = 1: step 1 differs only in its cleared outcome; the trace input is the edit."""
    edit = InputEdit({"question": "Q2?"})
    result = fork_trace(demo, GOOD_RUN_ID, 1, trace_edit=edit, clock=clock)
    diff = diff_stored(demo, GOOD_RUN_ID, result.trace_id)
    (pair,) = diff.pairs
    assert {d.field for d in pair.differences} <= {"output", "error"}
    assert [(d.path, d.b) for d in diff.trace_differences] == [("input.question", "Q2?")]
    first = diff.first_divergence
    assert first is not None and first.where == "input"


def test_diff_of_a_replaced_input_lists_every_changed_key(demo: Store, clock: FixedClock) -> None:
    """--replace with a new object: removed keys show as removed, new ones as added."""
    edit = InputEdit({"sql": "SELECT 1"}, "replace")
    result = fork_trace(demo, GOOD_RUN_ID, 6, edit, clock=clock)
    diff = diff_stored(demo, GOOD_RUN_ID, result.trace_id)
    (changed,) = [p for p in diff.pairs if p.kind == "changed"]
    assert {(d.path, d.kind) for d in changed.differences} == {
        ("input.sql", "changed"),
        ("input.timeout_s", "removed"),
        ("output", "removed"),  # not re-run
    }


def test_an_unmodified_fork_is_identical_within_its_scope(demo: Store, clock: FixedClock) -> None:
    """No edit: the diff against the parent agrees but for step N's outcome (not re-run; the
    parent's later steps are out of scope), and ``fork_scope=False`` compares whole traces."""
    result = fork_trace(demo, GOOD_RUN_ID, 4, clock=clock)
    scoped = diff_stored(demo, GOOD_RUN_ID, result.trace_id)
    assert scoped.counts == {"matched": 3, "changed": 1, "inserted": 0, "deleted": 0}
    assert {d.path for d in scoped.pairs[3].differences} == {"output"}
    assert scoped.fork_parent == "a" and scoped.beyond_fork == 4
    whole = diff_stored(demo, GOOD_RUN_ID, result.trace_id, fork_scope=False)
    assert whole.counts["deleted"] == 4
    assert {d.field for d in whole.trace_differences} == {"output", "status"}
