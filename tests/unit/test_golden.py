"""Golden datasets and the check: fingerprints, the file format and its validation, matching by
agent name + input hash, one report per kind of regression (naming trace, step and field),
``fields`` narrowing, strict mode, forks left out, and streaming page by page."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.errors import EXIT_FAILURE, EXIT_USAGE, AgentReplayError, UsageError
from agent_replay.services.demo import GOOD_RUN_ID, REGRESSED_ID, load_demo
from agent_replay.services.fork import InputEdit, fork_trace
from agent_replay.services.golden import (
    DEFAULT_FIELDS,
    FINGERPRINT_FIELDS,
    GoldenSet,
    export_golden,
    fingerprint,
    iter_golden_runs,
    load_golden,
    parse_golden,
    write_golden,
)
from agent_replay.services.golden_check import CheckReport, check_runs, compare, parse_fields
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store
from agent_replay.store.queries import TraceFilter
from agent_replay.trace.io import input_hash

Run = dict[str, Any]


def _run(trace_id: str, **fields: Any) -> Run:
    """A small agent run: plan, search tool, fetch tool, LLM answer, output."""
    run: Run = {
        "id": trace_id,
        "agent_name": "support-bot",
        "status": "completed",
        "input": {"question": "refund?"},
        "output": "5-7 days",
        "started_at": "2026-05-01T10:00:00.000Z",
        "steps": [
            {"step_number": 1, "step_type": "thought", "name": "plan", "output": "search"},
            {
                "step_number": 2,
                "step_type": "tool_call",
                "name": "search",
                "input": {"q": "refund policy"},
            },
            {
                "step_number": 3,
                "step_type": "tool_call",
                "name": "fetch",
                "input": {"id": "kb_1"},
            },
            {
                "step_number": 4,
                "step_type": "llm_call",
                "name": "answer",
                "model": "gpt-4o",
                "input": {"prompt": "..."},
                "output": "Refunds take 5-7 days.",
            },
            {"step_number": 5, "step_type": "output", "name": "reply", "output": "5-7 days"},
        ],
    }
    run.update(fields)
    return run


def _renumber(run: Run) -> Run:
    for number, step in enumerate(run["steps"], 1):
        step["step_number"] = number
    return run


def _golden_of(*runs: Run) -> GoldenSet:
    return parse_golden(
        {
            "format": "agent-replay/golden",
            "version": 1,
            "runs": [fingerprint(r).to_json() for r in runs],
        }
    )


def _check(store: Store, golden: GoldenSet, **kwargs: Any) -> dict[str, Any]:
    return {r.trace_id: r for r in check_runs(store, golden, **kwargs)}


# --- fingerprints and the file ----------------------------------------------------------------


def test_fingerprint_records_the_structure() -> None:
    """Agent, input hash and the structure: counts, types, names, tool inputs, status, models."""
    f = fingerprint(_run("trc_g"))
    assert f.to_json() == {
        "trace_id": "trc_g",
        "agent_name": "support-bot",
        "input_hash": input_hash({"question": "refund?"}),
        "step_count": 5,
        "step_types": ["thought", "tool_call", "tool_call", "llm_call", "output"],
        "step_names": ["plan", "search", "fetch", "answer", "reply"],
        "tool_inputs": [{"q": "refund policy"}, {"id": "kb_1"}],
        "status": "completed",
        "model": ["gpt-4o"],
    }


def test_write_golden_is_one_json_document(clock: FixedClock) -> None:
    """The document has the format header and one run a line; it parses back."""
    stream = io.BytesIO()
    count = write_golden(
        [fingerprint(_run("trc_a")), fingerprint(_run("trc_b"))], stream, clock=clock
    )
    document = json.loads(stream.getvalue())
    assert count == 2
    assert document["format"] == "agent-replay/golden" and document["version"] == 1
    assert document["created_at"] == "2026-06-01T12:00:00.000Z"
    assert document["fields"] == list(FINGERPRINT_FIELDS)
    assert [r["trace_id"] for r in document["runs"]] == ["trc_a", "trc_b"]
    assert parse_golden(document).count == 2
    empty = io.BytesIO()
    assert write_golden([], empty, clock=clock) == 0
    assert json.loads(empty.getvalue())["runs"] == []


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="other"), "format: expected 'agent-replay/golden'"),
        (lambda d: d.update(version=2), "version: this build reads version 1"),
        (lambda d: d.update(runs={}), "runs: expected an array, got an object"),
        (lambda d: d["runs"].append(3), r"runs\[1\]: expected an object, got int"),
        (lambda d: d["runs"][0].pop("input_hash"), r"runs\[0\]\.input_hash: missing"),
        (lambda d: d["runs"][0].update(input_hash="abc"), r"input_hash: expected a sha256"),
        (lambda d: d["runs"][0].update(step_count="5"), r"step_count: expected int"),
        (lambda d: d["runs"][0].update(step_count=4), r"step_count is 4 but it lists 5"),
        (lambda d: d["runs"][0]["tool_inputs"].pop(), r"2 tool_call steps but 1 inputs"),
        (lambda d: d["runs"][0].update(model=[1]), r"model: expected an array of strings"),
    ],
)
def test_a_malformed_golden_file_is_a_usage_error(mutate: Any, message: str) -> None:
    """Each problem is named with the entry and field (exit code 2)."""
    document: dict[str, Any] = {
        "format": "agent-replay/golden",
        "version": 1,
        "runs": [fingerprint(_run("trc_g")).to_json()],
    }
    mutate(document)
    with pytest.raises(UsageError, match=message) as caught:
        parse_golden(document)
    assert caught.value.exit_code == EXIT_USAGE


def test_an_empty_golden_file_is_an_error_not_a_pass(tmp_path: Path) -> None:
    """Zero bytes, or no runs: nothing to check against (exit code 1)."""
    path = tmp_path / "golden.json"
    path.write_text("", encoding="utf-8")
    with pytest.raises(AgentReplayError, match="is empty") as caught:
        load_golden(path)
    assert caught.value.exit_code == EXIT_FAILURE
    path.write_text('{"format": "agent-replay/golden", "version": 1, "runs": []}', "utf-8")
    with pytest.raises(AgentReplayError, match="holds no runs") as caught:
        load_golden(path)
    assert caught.value.exit_code == EXIT_FAILURE
    path.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_golden(path)


def test_parse_fields() -> None:
    """Defaults leave ``model`` out; unknown or empty values are rejected."""
    assert parse_fields(None) == DEFAULT_FIELDS and "model" not in DEFAULT_FIELDS
    assert parse_fields("model, status,model") == ("model", "status")
    with pytest.raises(UsageError, match=r"unknown field 'steps'; expected some of step_count"):
        parse_fields("status,steps")
    with pytest.raises(UsageError, match="empty"):
        parse_fields(" , ")


# --- comparing: one report per kind of regression ---------------------------------------------


def _divergences(candidate: Run, fields: tuple[str, ...] = FINGERPRINT_FIELDS) -> dict[str, Any]:
    found = compare(fingerprint(candidate), fingerprint(_run("trc_g")), fields)
    return {d.field: d for d in found}


def test_the_same_structure_passes_whatever_the_wording() -> None:
    """Outputs and LLM wording differ: no divergence (only structure is compared)."""
    run = _run("trc_c", output="about a week")
    run["steps"][3]["output"] = "It takes roughly a week."
    run["steps"][3]["input"] = {"prompt": "other wording"}
    assert _divergences(run) == {}


def test_a_golden_run_recorded_under_an_earlier_answer_name_still_matches() -> None:
    """Golden files recorded when a turn's answer was ``assistant_message`` (hook) or ``final
    answer`` (streams) match today's ``final_answer``; another output name still differs."""
    today = _run("trc_c")
    today["steps"][4]["name"] = "final_answer"

    def differing(golden_name: str) -> set[str]:
        golden = _run("trc_g")
        golden["steps"][4]["name"] = golden_name
        (loaded,) = next(iter(_golden_of(golden).runs.values()))
        return {d.field for d in compare(fingerprint(today), loaded, FINGERPRINT_FIELDS)}

    assert differing("assistant_message") == differing("final answer") == set()
    assert differing("reply") == {"step_names"}


def test_an_inserted_step_is_reported_at_its_step() -> None:
    """An extra tool call: step_count, step_types, step_names and tool_inputs name step 3."""
    run = _run("trc_c")
    run["steps"].insert(
        2, {"step_number": 0, "step_type": "tool_call", "name": "search", "input": {"q": "x"}}
    )
    found = _divergences(_renumber(run))
    assert set(found) == {"step_count", "step_types", "step_names", "tool_inputs"}
    assert found["step_count"].message.startswith("step_count: expected 5, got 6")
    assert "is extra" in found["step_count"].message
    assert found["tool_inputs"].step == 3
    assert "tool call 'search'" in found["tool_inputs"].message


def test_a_deleted_step_is_reported_as_missing() -> None:
    """A skipped tool call: missing, with the golden step it was."""
    run = _run("trc_c")
    del run["steps"][2]
    found = _divergences(_renumber(run))
    assert found["step_count"].message == (
        "step_count: expected 5, got 4 (golden step 3 tool_call 'fetch' is missing)"
    )
    assert found["step_names"].golden_step == 3
    assert found["step_names"].message == "step 3: step_names: missing 'fetch' (golden step 3)"
    assert found["tool_inputs"].message.endswith("missing tool call 'fetch' (golden step 3)")


def test_reordered_steps_fail_names_but_not_the_count() -> None:
    """Swapped tool calls: same count, names and tool inputs out of order."""
    run = _run("trc_c")
    run["steps"][1], run["steps"][2] = run["steps"][2], run["steps"][1]
    found = _divergences(_renumber(run))
    assert "step_count" not in found and "step_types" not in found
    assert found["step_names"].step == 2
    assert found["tool_inputs"].step == 2


def test_a_changed_tool_input_names_step_and_key() -> None:
    """A different argument: tool_inputs at that step, with the JSON path and both values."""
    run = _run("trc_c")
    run["steps"][1]["input"] = {"q": "refund status"}
    found = _divergences(run)
    assert set(found) == {"tool_inputs"}
    d = found["tool_inputs"]
    assert (d.step, d.golden_step) == (2, 2)
    assert (d.expected, d.actual) == ({"q": "refund policy"}, {"q": "refund status"})
    assert d.message == (
        "step 2: tool_inputs: tool call 'search' input.q changed: "
        "expected refund policy, got refund status"
    )


def test_a_changed_model_fails_only_when_model_is_compared() -> None:
    """``model`` is opt-in: it names the step that switched models."""
    run = _run("trc_c")
    run["steps"][3]["model"] = "gpt-4o-mini"
    assert _divergences(run, DEFAULT_FIELDS) == {}
    found = _divergences(run)
    assert set(found) == {"model"}
    assert found["model"].step == 4
    assert found["model"].message == "step 4: model: expected 'gpt-4o', got 'gpt-4o-mini'"


def test_a_changed_status_is_reported() -> None:
    """The final status is compared."""
    found = _divergences(_run("trc_c", status="failed"))
    assert set(found) == {"status"}
    assert found["status"].message == "status: expected completed, got failed"


def test_fields_narrow_the_comparison() -> None:
    """Only the chosen fields are compared."""
    run = _run("trc_c", status="failed")
    del run["steps"][2]
    assert set(_divergences(_renumber(run), ("status",))) == {"status"}
    assert set(_divergences(run, ("step_count",))) == {"step_count"}


# --- checking a store -------------------------------------------------------------------------


@pytest.fixture
def runs(store: Store) -> Store:
    """golden-1 (good), good-again (same input, same structure), regressed (an extra step),
    other-input (no golden counterpart) and a fork of golden-1."""
    ingest_trace(store, _run("trc_golden1", tags=["golden"]))
    ingest_trace(store, _run("trc_goodagain", started_at="2026-05-02T10:00:00.000Z"))
    regressed = _run("trc_regressed", started_at="2026-05-03T10:00:00.000Z")
    regressed["steps"].insert(1, {"step_number": 0, "step_type": "thought", "name": "retry"})
    ingest_trace(store, _renumber(regressed))
    ingest_trace(
        store, _run("trc_otherinput", input={"q": "x"}, started_at="2026-05-04T10:00:00.000Z")
    )
    fork_trace(store, "trc_golden1", 2, InputEdit({"q": "other"}))
    return store


def test_check_passes_good_runs_and_reports_the_regression(runs: Store) -> None:
    """Matched by agent + input hash; forks are not candidates; order is oldest first."""
    golden = _golden_of(_run("trc_golden1"))
    results = list(check_runs(runs, golden))
    assert [r.trace_id for r in results] == [
        "trc_golden1",
        "trc_goodagain",
        "trc_regressed",
        "trc_otherinput",
    ]
    outcome = {r.trace_id: r.outcome for r in results}
    assert outcome == {
        "trc_golden1": "pass",
        "trc_goodagain": "pass",
        "trc_regressed": "regression",
        "trc_otherinput": "unmatched",
    }
    regressed = results[2]
    assert regressed.golden_trace_id == "trc_golden1"
    assert {d.field for d in regressed.divergences} == {"step_count", "step_types", "step_names"}
    steps = {d.field: d.step for d in regressed.divergences}
    # By type alone, the extra thought could be step 1 or 2; by name it is step 2 ('retry').
    assert steps["step_count"] == steps["step_names"] == 2 and steps["step_types"] in (1, 2)


def test_export_then_check_passes_on_the_same_runs(runs: Store, tmp_path: Path) -> None:
    """A golden file exported from runs checks those very runs clean."""
    path = tmp_path / "golden.json"
    count = export_golden(runs, TraceFilter(tag="golden"), path)
    assert count == 1 and not list(tmp_path.glob(".*.tmp"))
    golden = load_golden(path)
    report = CheckReport(golden.count, DEFAULT_FIELDS)
    for result in check_runs(runs, golden, filters=TraceFilter(tag="golden")):
        report.add(result)
    assert (report.candidates, report.passed, report.ok) == (1, 1, True)


def test_export_leaves_forks_out(runs: Store) -> None:
    """Forks are never golden."""
    ids = {f.trace_id for f in iter_golden_runs(runs)}
    assert ids == {"trc_golden1", "trc_goodagain", "trc_regressed", "trc_otherinput"}


def test_strict_fails_unmatched_runs(runs: Store) -> None:
    """Unmatched runs are listed; only ``strict`` makes them failures."""
    golden = _golden_of(_run("trc_golden1"))
    lenient = CheckReport(golden.count, DEFAULT_FIELDS)
    strict = CheckReport(golden.count, DEFAULT_FIELDS, strict=True)
    for result in check_runs(runs, golden, filters=TraceFilter(agent="support-bot")):
        if result.trace_id == "trc_regressed":
            continue
        lenient.add(result)
        strict.add(result)
    assert lenient.ok and lenient.unmatched == 1
    assert not strict.ok and [r.trace_id for r in strict.failures] == ["trc_otherinput"]
    assert strict.to_json()["unmatched_runs"][0]["trace_id"] == "trc_otherinput"


def test_several_golden_runs_for_one_input_pass_if_any_matches(runs: Store) -> None:
    """Two acceptable structures for one input: a run matching either passes."""
    alternative = _run("trc_alt")
    alternative["steps"].insert(1, {"step_number": 0, "step_type": "thought", "name": "retry"})
    golden = _golden_of(_run("trc_golden1"), _renumber(alternative))
    outcome = {r.trace_id: r.outcome for r in check_runs(runs, golden)}
    assert outcome["trc_regressed"] == "pass" and outcome["trc_goodagain"] == "pass"


def test_the_closest_golden_run_is_reported(runs: Store) -> None:
    """A regression is reported against the golden run with the fewest divergences."""
    far = _run("trc_far", status="failed")
    far["steps"] = far["steps"][:2]
    golden = _golden_of(far, _run("trc_golden1"))
    result = _check(runs, golden)["trc_regressed"]
    assert result.golden_trace_id == "trc_golden1"


def test_nothing_checked_is_an_error(runs: Store) -> None:
    """No candidates, or none matched: an error (exit 1), never a silent pass."""
    golden = _golden_of(_run("trc_golden1"))
    report = CheckReport(golden.count, DEFAULT_FIELDS)
    for result in check_runs(runs, golden, filters=TraceFilter(agent="nobody")):
        report.add(result)
    with pytest.raises(AgentReplayError, match="no candidate runs") as caught:
        report.require_something_checked("agent nobody")
    assert caught.value.exit_code == EXIT_FAILURE
    other = _golden_of(_run("trc_x", input={"unrelated": True}))
    report = CheckReport(other.count, DEFAULT_FIELDS)
    for result in check_runs(runs, other):
        report.add(result)
    with pytest.raises(AgentReplayError, match="none of the 4 candidate run"):
        report.require_something_checked()


def test_check_streams_page_by_page(runs: Store) -> None:
    """A page size of 1 still visits every candidate once, in order."""
    golden = _golden_of(_run("trc_golden1"))
    paged = [r.trace_id for r in check_runs(runs, golden, page_size=1)]
    assert paged == [r.trace_id for r in check_runs(runs, golden)]
    assert len(paged) == 4


def test_the_demo_regression_is_caught(store: Store, clock: FixedClock, tmp_path: Path) -> None:
    """The demo: the good run is golden, the regressed run fails with its extra run_sql and the
    dropped date filter in the SQL."""
    load_demo(store, clock)
    path = tmp_path / "golden.json"
    export_golden(store, TraceFilter(tag="golden"), path, clock=clock)
    results = _check(store, load_golden(path))
    assert results[GOOD_RUN_ID].outcome == "pass"
    regressed = results[REGRESSED_ID]
    assert regressed.outcome == "regression"
    found = {d.field: d for d in regressed.divergences}
    assert set(found) == {"step_count", "step_types", "step_names", "tool_inputs"}
    assert found["tool_inputs"].step == 6
    assert "input.sql changed" in found["tool_inputs"].message
    assert found["step_count"].message.startswith("step_count: expected 8, got 9")


def test_check_report_json(runs: Store) -> None:
    """The report object: ok, counts, the regressions with their divergences."""
    golden = _golden_of(_run("trc_golden1"))
    report = CheckReport(golden.count, DEFAULT_FIELDS, golden_inputs=len(golden.runs))
    for result in check_runs(runs, golden):
        report.add(copy.deepcopy(result))
    out = report.to_json()
    assert out["ok"] is False
    assert (out["candidates"], out["checked"], out["passed"], out["regressed"]) == (4, 3, 2, 1)
    assert out["golden_inputs_exercised"] == 1 and out["golden_inputs"] == 1
    (regression,) = out["regressions"]
    assert regression["trace_id"] == "trc_regressed"
    assert {d["field"] for d in regression["divergences"]} == {
        "step_count",
        "step_types",
        "step_names",
    }
    json.dumps(out)
