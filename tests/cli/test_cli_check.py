"""``agent-replay export --format golden`` and ``agent-replay check --golden FILE``: export then
check passes on the same runs; each regression is reported (trace, step, field) with exit 1;
``--fields`` narrows and rejects unknown values; ``--strict`` catches unmatched runs; an empty
golden file or no candidates is an error (1); a malformed golden file is a usage error (2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]

GOOD, REGRESSED = "trc_demo4goodrun", "trc_demo5regressed"


def _run(trace_id: str, **fields: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "id": trace_id,
        "agent_name": "support-bot",
        "input": {"question": "refund?"},
        "started_at": "2026-05-01T10:00:00.000Z",
        "steps": [
            {"step_number": 1, "step_type": "thought", "name": "plan"},
            {"step_number": 2, "step_type": "tool_call", "name": "search", "input": {"q": "a"}},
            {"step_number": 3, "step_type": "llm_call", "name": "answer", "model": "gpt-4o"},
        ],
    }
    run.update(fields)
    return run


def _ingest(cli: Run, tmp_path: Path, *runs: dict[str, Any]) -> None:
    path = tmp_path / f"runs-{runs[0]['id']}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in runs), encoding="utf-8")
    result = cli("ingest", path)
    assert result.code == 0, result.err


@pytest.fixture
def golden(cli: Run, tmp_path: Path) -> Path:
    """A golden file of one known-good support-bot run (tagged golden in the store)."""
    _ingest(cli, tmp_path, _run("trc_golden", tags=["golden"]))
    path = tmp_path / "golden.json"
    result = cli("export", "--format", "golden", "--tag", "golden", "--output", path)
    assert result.code == 0, result.err
    assert "exported 1 golden run(s)" in result.err
    return path


def _later(trace_id: str, **fields: Any) -> dict[str, Any]:
    return _run(trace_id, started_at="2026-05-02T10:00:00.000Z", **fields)


# --- export --format golden -------------------------------------------------------------------


def test_export_golden_to_stdout(cli: Run, tmp_path: Path) -> None:
    """Without --output the golden document goes to stdout; forks are left out."""
    _ingest(cli, tmp_path, _run("trc_one"))
    assert cli("fork", "trc_one", "--from-step", "2").code == 0
    result = cli("export", "--format", "golden")
    assert result.code == 0
    document = json.loads(result.out)
    assert document["format"] == "agent-replay/golden"
    assert [r["trace_id"] for r in document["runs"]] == ["trc_one"]
    run = document["runs"][0]
    assert run["step_types"] == ["thought", "tool_call", "llm_call"]
    assert run["tool_inputs"] == [{"q": "a"}] and run["model"] == ["gpt-4o"]
    assert len(run["input_hash"]) == 64


def test_export_golden_of_nothing_warns(cli: Run, tmp_path: Path) -> None:
    """No matching runs: an empty set, exit 0, and a warning that check will refuse it."""
    _ingest(cli, tmp_path, _run("trc_one"))
    result = cli("export", "--format", "golden", "--tag", "absent")
    assert result.code == 0
    assert json.loads(result.out)["runs"] == []
    assert "check` refuses an empty golden set" in result.err


# --- check ------------------------------------------------------------------------------------


def test_check_passes_on_the_runs_it_was_exported_from(cli: Run, golden: Path) -> None:
    """Export then check: exit 0 and a summary."""
    result = cli("check", "--golden", golden)
    assert result.code == 0, result.err
    assert "checked 1 of 1 run(s): 1 passed, 0 regressed" in result.out
    assert "ok: no regressions" in result.out


def test_wording_differences_pass(cli: Run, golden: Path, tmp_path: Path) -> None:
    """Another run of the same input with other outputs and prompts: still a pass."""
    run = _later("trc_reworded", output="different words")
    run["steps"][2]["output"] = "completely different text"
    _ingest(cli, tmp_path, run)
    assert cli("check", "--golden", golden).code == 0


@pytest.mark.parametrize(
    ("change", "fields", "expected"),
    [
        (
            lambda r: r["steps"].insert(
                1, {"step_number": 9, "step_type": "thought", "name": "retry"}
            ),
            "step_count",
            "step_count: expected 3, got 4 (step 2 thought 'retry' is extra)",
        ),
        (
            lambda r: r["steps"].pop(1),
            "step_names",
            "step 2: step_names: missing 'search' (golden step 2)",
        ),
        (
            lambda r: r["steps"].reverse(),
            "step_types",
            "step 1: step_types: ",
        ),
        (
            lambda r: r["steps"][1].update(input={"q": "b"}),
            "tool_inputs",
            "step 2: tool_inputs: tool call 'search' input.q changed: expected a, got b",
        ),
        (
            lambda r: r.update(status="failed"),
            "status",
            "status: expected completed, got failed",
        ),
        (
            lambda r: r["steps"][2].update(model="gpt-4o-mini"),
            "model",
            "step 3: model: expected 'gpt-4o', got 'gpt-4o-mini'",
        ),
    ],
    ids=["inserted", "deleted", "reordered", "tool-input", "status", "model"],
)
def test_each_regression_is_reported(
    cli: Run, golden: Path, tmp_path: Path, change: Any, fields: str, expected: str
) -> None:
    """Exit 1; the report names the trace, the golden run, the step and the field."""
    run = _later("trc_candidate")
    change(run)
    for number, step in enumerate(run["steps"], 1):
        step["step_number"] = number
    _ingest(cli, tmp_path, run)
    result = cli("check", "--golden", golden, "--fields", fields)
    assert result.code == 1, result.out + result.err
    assert "FAIL  trc_candidate  support-bot  vs golden trc_golden" in result.out
    assert expected in result.out
    assert "FAILED: 1 regression(s)" in result.out


def test_model_is_opt_in(cli: Run, golden: Path, tmp_path: Path) -> None:
    """A changed model passes the default fields and fails with --fields ...,model."""
    run = _later("trc_model")
    run["steps"][2]["model"] = "gpt-4o-mini"
    _ingest(cli, tmp_path, run)
    assert cli("check", "--golden", golden).code == 0
    assert cli("check", "--golden", golden, "--fields", "step_count,model").code == 1


def test_fields_narrow_the_check(cli: Run, golden: Path, tmp_path: Path) -> None:
    """A run that only changed a tool input passes when tool_inputs isn't compared."""
    run = _later("trc_narrow")
    run["steps"][1]["input"] = {"q": "other"}
    _ingest(cli, tmp_path, run)
    assert cli("check", "--golden", golden).code == 1
    narrowed = cli("check", "--golden", golden, "--fields", "step_count,step_names,status")
    assert narrowed.code == 0
    assert "fields: step_count, step_names, status" in narrowed.out


def test_unknown_fields_are_rejected(cli: Run, golden: Path) -> None:
    """An unknown --fields value is a usage error (exit 2) naming it."""
    result = cli("check", "--golden", golden, "--fields", "status,wording")
    assert result.code == 2
    assert "unknown field 'wording'" in result.err


def test_strict_fails_runs_without_a_golden_counterpart(
    cli: Run, golden: Path, tmp_path: Path
) -> None:
    """Another input: listed but not a failure; with --strict, exit 1 naming it."""
    _ingest(cli, tmp_path, _later("trc_newinput", input={"question": "other"}))
    lenient = cli("check", "--golden", golden)
    assert lenient.code == 0
    assert "not checked: 1 run(s) without a golden counterpart: trc_newinput" in lenient.out
    strict = cli("check", "--golden", golden, "--strict")
    assert strict.code == 1
    assert "FAIL  trc_newinput  support-bot  no golden run with this agent name" in strict.out
    assert "1 run(s) without a golden counterpart (--strict)" in strict.out


def test_agent_and_since_filter_the_candidates(cli: Run, golden: Path, tmp_path: Path) -> None:
    """--agent/--since choose the candidates; no candidate at all is an error (exit 1)."""
    bad = _later("trc_bad", status="failed")
    _ingest(cli, tmp_path, bad)
    assert cli("check", "--golden", golden).code == 1
    assert cli("check", "--golden", golden, "--since", "2026-05-03").code == 1  # none: error
    none = cli("check", "--golden", golden, "--agent", "other-bot")
    assert none.code == 1
    assert "no candidate runs in the store (agent other-bot): nothing was checked" in none.err


def test_candidates_with_no_golden_match_are_an_error(
    cli: Run, golden: Path, tmp_path: Path
) -> None:
    """Only unmatched runs: nothing was compared, so it is not a pass (exit 1)."""
    _ingest(cli, tmp_path, _later("trc_other", agent_name="other-bot"))
    result = cli("check", "--golden", golden, "--agent", "other-bot")
    assert result.code == 1
    assert "has a golden counterpart" in result.err


def test_an_empty_golden_file_is_an_error(cli: Run, golden: Path, tmp_path: Path) -> None:
    """Zero bytes or no runs: exit 1 with a clear message."""
    empty = tmp_path / "empty.json"
    empty.write_text("", encoding="utf-8")
    result = cli("check", "--golden", empty)
    assert result.code == 1 and "is empty" in result.err
    empty.write_text(cli("export", "--format", "golden", "--tag", "absent").out, "utf-8")
    result = cli("check", "--golden", empty)
    assert result.code == 1 and "holds no runs" in result.err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[]", "top level: expected an object, got an array"),
        ('{"format": "agent-replay/golden", "version": 1, "runs": [{}]}', "agent_name: missing"),
    ],
)
def test_a_malformed_golden_file_is_a_usage_error(
    cli: Run, golden: Path, tmp_path: Path, content: str, message: str
) -> None:
    """A bad file the user passed: exit 2, naming the problem."""
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    result = cli("check", "--golden", bad)
    assert result.code == 2
    assert message in result.err


def test_a_missing_golden_file_is_a_usage_error(cli: Run, tmp_path: Path) -> None:
    """--golden must exist."""
    assert cli("check", "--golden", tmp_path / "nope.json").code == 2


def test_check_json(cli: Run, golden: Path, tmp_path: Path) -> None:
    """--json: ok, counts, and each regression with its divergences (trace, step, field)."""
    run = _later("trc_json")
    run["steps"][1]["input"] = {"q": "b"}
    _ingest(cli, tmp_path, run)
    result = cli("check", "--golden", golden, "--json")
    assert result.code == 1
    payload = result.json()
    assert payload["ok"] is False and payload["error"] == "1 regression(s)"
    assert (payload["candidates"], payload["passed"], payload["regressed"]) == (2, 1, 1)
    (regression,) = payload["regressions"]
    assert regression["trace_id"] == "trc_json"
    assert regression["golden_trace_id"] == "trc_golden"
    (divergence,) = regression["divergences"]
    assert (divergence["field"], divergence["step"]) == ("tool_inputs", 2)
    assert (divergence["expected"], divergence["actual"]) == ({"q": "a"}, {"q": "b"})


def test_check_json_error_object_when_nothing_checked(cli: Run, golden: Path) -> None:
    """Under --json, 'nothing checked' prints the error object."""
    result = cli("check", "--golden", golden, "--agent", "nobody", "--json")
    assert result.code == 1
    payload = result.json()
    assert payload["ok"] is False and "no candidate runs" in payload["error"]


def test_the_demo_regression_fails_the_check(cli: Run, tmp_path: Path) -> None:
    """The demo's golden-tagged good run as the golden set: the regressed run fails."""
    assert cli("demo").code == 0
    path = tmp_path / "golden.json"
    assert cli("export", "--format", "golden", "--tag", "golden", "-o", path).code == 0
    result = cli("check", "--golden", path, "--agent", "analytics-sql-agent")
    assert result.code == 1
    assert f"FAIL  {REGRESSED}  analytics-sql-agent  vs golden {GOOD}" in result.out
    assert "step 6: tool_inputs: tool call 'run_sql' input.sql changed" in result.out
    assert "checked 2 of 2 run(s): 1 passed, 1 regressed" in result.out


def test_golden_trace_ids_are_escaped(cli: Run, golden: Path, tmp_path: Path) -> None:
    """The golden file is user input: a trace id with control characters prints escaped."""
    document = json.loads(golden.read_text(encoding="utf-8"))
    document["runs"][0]["trace_id"] = "trc_\x1b[31mevil"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(document), encoding="utf-8")
    _ingest(cli, tmp_path, _later("trc_failing", status="failed"))
    out = cli("check", "--golden", edited).out
    assert "\x1b" not in out and "vs golden trc_\\x1b[31mevil" in out
