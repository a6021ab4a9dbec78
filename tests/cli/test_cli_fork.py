"""``agent-replay fork ID --from-step N``: prints the fork's full id; ``list`` marks it ⑂;
``--modify-input`` edits the fork's (trace) input, ``--modify-step-input`` step N's; ``diff``
against the parent shows exactly the edit; bad JSON and a step out of range are usage errors
(exit 2) naming the problem."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]

GOOD, REGRESSED = "trc_demo4goodrun", "trc_demo5regressed"


@pytest.fixture
def demo(cli: Run) -> None:
    assert cli("demo").code == 0


def test_fork_prints_the_full_id(cli: Run, demo: None, db: Run) -> None:
    """stdout is exactly the new id; stderr says what was forked and how to compare."""
    result = cli("fork", "demo5", "--from-step", "6", "--modify-step-input", '{"timeout_s": 120}')
    assert result.code == 0, result.err
    fork_id = result.out.strip()
    assert re.fullmatch(r"trc_[A-Za-z0-9_-]+", fork_id)
    assert f"agent-replay diff {REGRESSED} {fork_id}" in result.err
    assert "step 6 input merged" in result.err
    assert "step 6: not re-run (recorded error, duration not copied)" in result.err
    row = db(
        "SELECT status, parent_trace_id, forked_from_step, step_count FROM traces WHERE id = ?",
        (fork_id,),
    )
    assert row == [("forked", REGRESSED, 6, 6)]


def test_list_shows_the_fork(cli: Run, demo: None) -> None:
    """``list`` marks the fork ⑂ and ``list --json`` says is_fork."""
    fork_id = cli("fork", GOOD, "--from-step", "2").out.strip()
    assert f"{fork_id} ⑂" in cli("list").out
    listed = {t["id"]: t for t in cli("list", "--json").json()}
    assert listed[fork_id]["is_fork"] is True
    assert listed[fork_id]["status"] == "forked"


def test_diff_against_the_parent_shows_exactly_the_edit(cli: Run, demo: None) -> None:
    """Five matched steps, step 6 changed in input.timeout_s and its cleared error."""
    edit = '{"timeout_s": 120}'
    fork_id = cli("fork", REGRESSED, "--from-step", "6", "--modify-step-input", edit).out.strip()
    payload = cli("diff", REGRESSED, fork_id, "--json").json()
    assert payload["counts"] == {"matched": 5, "changed": 1, "inserted": 0, "deleted": 0}
    assert payload["trace_differences"] == []
    assert payload["fork_scope"] == {"parent": "a", "beyond_fork": 3}
    (changed,) = [p for p in payload["pairs"] if p["kind"] == "changed"]
    edited, cleared = changed["differences"]
    assert edited == {
        "field": "input",
        "path": "input.timeout_s",
        "kind": "changed",
        "a": 30,
        "b": 120,
    }
    assert (cleared["path"], cleared["kind"]) == ("error", "removed")  # step 6 not re-run
    shown = cli("show", fork_id).out
    step_6 = shown[shown.index("    6  ") :]
    assert "○ not re-run (recorded error, duration not copied)" in step_6
    assert "statement timeout" not in step_6
    text = cli("diff", REGRESSED, fork_id).out
    assert "Steps: 5 matched, 1 changed, 0 inserted, 0 deleted (3 beyond the fork)" in text
    assert "First divergence: A#6 / B#6 tool_call run_sql: changed input" in text
    assert "changed: input, error; B not re-run" in text


FLIGHT = {
    "id": "trc_flight",
    "agent_name": "travel-agent",
    "input": {"task": "book a flight"},
    "steps": [
        {"step_number": 1, "step_type": "thought", "name": "plan", "input": {"goal": "flight"}},
        {"step_number": 2, "step_type": "tool_call", "name": "search", "input": {"q": "LIS"}},
        {"step_number": 3, "step_type": "output", "name": "reply", "output": "booked"},
    ],
}


def test_the_readmes_fork_example_changes_the_runs_input(cli: Run, tmp_path: Path) -> None:
    """``fork <id> --from-step 2 --modify-input '{"task":"revised prompt"}'`` changes the
    fork's input ({"task": ...} is the trace format's input); step 2 stays as recorded."""
    path = tmp_path / "flight.json"
    path.write_text(json.dumps(FLIGHT), encoding="utf-8")
    assert cli("ingest", path).code == 0
    result = cli(
        "fork", "trc_flight", "--from-step", "2", "--modify-input", '{"task":"revised prompt"}'
    )
    assert result.code == 0, result.err
    assert "trace input merged" in result.err
    fork = cli("show", result.out.strip(), "--json").json()
    assert fork["input"] == {"task": "revised prompt"}
    assert [s["input"] for s in fork["steps"]] == [{"goal": "flight"}, {"q": "LIS"}]
    payload = cli("diff", "trc_flight", fork["id"], "--json").json()
    assert payload["first_divergence"]["where"] == "input"
    assert [(d["path"], d["b"]) for d in payload["trace_differences"]] == [
        ("input.task", "revised prompt")
    ]
    assert payload["counts"]["changed"] == 0


def test_modify_step_input_edits_step_n_and_both_flags_combine(cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "flight.json"
    path.write_text(json.dumps(FLIGHT), encoding="utf-8")
    assert cli("ingest", path).code == 0
    result = cli(
        "fork",
        "trc_flight",
        "--from-step",
        "2",
        "--modify-input",
        '{"task": "book a train"}',
        "--modify-step-input",
        '{"q": "OPO"}',
        "--json",
    )
    assert result.code == 0, result.err
    payload = result.json()
    assert [(e["target"], e["input"]) for e in payload["edits"]] == [
        ("trace_input", {"task": "book a train"}),
        ("step_input", {"q": "OPO"}),
    ]
    fork = cli("show", payload["id"], "--json").json()
    assert fork["input"] == {"task": "book a train"} and fork["steps"][1]["input"] == {"q": "OPO"}


def test_fork_replace_and_json(cli: Run, demo: None, tmp_path: Path) -> None:
    """--replace with @FILE replaces the input; --json describes the fork."""
    edit = tmp_path / "input.json"
    edit.write_text('{"sql": "SELECT 1"}', encoding="utf-8")
    result = cli(
        "fork", GOOD, "--from-step", "6", "--replace", "--modify-step-input", f"@{edit}", "--json"
    )
    assert result.code == 0, result.err
    payload = result.json()
    (applied,) = payload["edits"]
    assert applied["input"] == {"sql": "SELECT 1"}
    assert applied["original_input"]["timeout_s"] == 30
    assert (applied["mode"], applied["target"], payload["status"]) == (
        "replace",
        "step_input",
        "forked",
    )
    shown = cli("show", payload["id"], "--json").json()
    assert shown["steps"][5]["input"] == {"sql": "SELECT 1"}


def test_fork_tags(cli: Run, demo: None) -> None:
    """--tag (repeatable) tags the fork; the parent's tags are not copied."""
    fork_id = cli("fork", GOOD, "--from-step", "2", "--tag", "what-if", "--tag", "x").out.strip()
    assert cli("show", fork_id, "--json").json()["tags"] == ["what-if", "x"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from-step", "2", "--modify-input", "{bad"], "--modify-input is not valid JSON"),
        (["--from-step", "2", "--modify-input", ""], "--modify-input: empty"),
        (["--from-step", "2", "--modify-step-input", "[1"], "--modify-step-input is not valid"),
        (["--from-step", "9"], "--from-step 9 is out of range: trace trc_demo4goodrun has"),
        (["--from-step", "0"], "Invalid value for '--from-step'"),
        (["--from-step", "2", "--replace"], "--replace needs --modify-input"),
        (["--modify-input", "{}"], "Missing option '--from-step'"),
        (["--from-step", "2", "--tag", " "], "--tag must not be blank"),
    ],
)
def test_usage_errors_exit_2(cli: Run, demo: None, db: Run, args: list[str], message: str) -> None:
    """Each is exit 2 with a message naming the problem, and nothing is written."""
    result = cli("fork", GOOD, *args)
    assert result.code == 2
    assert message in result.err
    assert db("SELECT COUNT(*) FROM traces")[0][0] == 5


def test_bad_json_under_json_prints_the_error_object(cli: Run, demo: None) -> None:
    """--json failures carry ok: false and the message on stdout."""
    result = cli("fork", GOOD, "--from-step", "2", "--modify-input", "[1,", "--json")
    assert result.code == 2
    payload = json.loads(result.out)
    assert payload["ok"] is False and "not valid JSON" in payload["error"]


def test_fork_of_an_unknown_trace_fails(cli: Run, demo: None) -> None:
    """An id that matches nothing is a runtime failure (exit 1) with a hint."""
    result = cli("fork", "trc_nothing", "--from-step", "1")
    assert result.code == 1
    assert "no trace matches" in result.err


def test_diff_full_compares_whole_traces(cli: Run, demo: None) -> None:
    """--full drops the fork scope: the parent's later steps show as deleted."""
    fork_id = cli("fork", GOOD, "--from-step", "3").out.strip()
    scoped = cli("diff", GOOD, fork_id, "--exit-code")
    assert scoped.code == 0 and "5 later step(s) are left out" in scoped.out
    whole = cli("diff", GOOD, fork_id, "--full", "--json").json()
    assert whole["counts"]["deleted"] == 5 and whole["fork_scope"] is None


def test_edits_are_redacted_unless_no_redact(cli: Run, tmp_path: Path) -> None:
    """A secret typed into an edit is redacted on its way to the store like any other write;
    ``--no-redact`` keeps it, for this command only."""
    path = tmp_path / "flight.json"
    path.write_text(json.dumps(FLIGHT), encoding="utf-8")
    assert cli("ingest", path).code == 0
    token = "ghp_" + "k3Jd9sLq0ZpX7vB2nM4cR8tY1wE6uA5hG0fQ"
    edit = json.dumps({"task": f"deploy with GITHUB_TOKEN={token}"})
    inputs = []
    for flags in ([], ["--no-redact"]):
        forked = cli("fork", "trc_flight", "--from-step", "2", "--modify-input", edit, *flags)
        assert forked.code == 0, forked.err
        inputs.append(cli("show", forked.out.strip(), "--json").json()["input"]["task"])
    assert token not in inputs[0] and "[REDACTED:" in inputs[0]
    assert inputs[1] == f"deploy with GITHUB_TOKEN={token}"
