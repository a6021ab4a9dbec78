"""``agent-replay show ID``: header, step timeline or tree, evals, snapshots, step ranges, the
full trace object under ``--json``, and id prefix resolution."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]


def _step_lines(out: str) -> dict[int, str]:
    """Step number -> the first line of that step in the timeline."""
    lines: dict[int, str] = {}
    for line in out.splitlines():
        head = line[:5].strip()
        if head.isdigit() and line[5:7] == "  ":
            lines[int(head)] = line
    return lines


def test_show_prints_the_header(cli: Run, seeded: Path) -> None:
    """The header names the trace, agent and version, status, session, totals, tags, input."""
    result = cli("show", "trc_sample1")
    assert result.code == 0
    header = result.out.split("\n\n")[0]
    assert "Trace    trc_sample1" in header
    assert "Agent    support-bot 1.2.0" in header
    assert "Status   completed" in header
    assert "Session  sess_a" in header
    assert "Trigger  chat" in header
    assert "Started  2026-01-10 10:00:00" in header
    assert "Duration 5.0s" in header
    assert "Tokens 300" in header
    assert "Cost $0.0300" in header
    assert "Tags     prod" in header
    assert 'Input    {"question":"How do I reset my password?"}' in header
    assert "Output   Use the reset link on the login page." in header


def test_show_prints_one_timeline_line_per_step_in_order(cli: Run, seeded: Path) -> None:
    """The timeline has every step, in step order, with type and name."""
    steps = _step_lines(cli("show", "trc_sample1").out)
    assert list(steps) == [1, 2, 3, 4, 5]
    assert "thought" in steps[1] and "plan" in steps[1]
    assert "tool_call" in steps[3] and "search_api" in steps[3]
    assert "200 tok" in steps[5] and "gpt-x" in steps[5]


def test_show_timeline_shows_decisions_and_outputs(cli: Run, seeded: Path) -> None:
    """A decision step shows the option chosen; other steps preview their output."""
    out = cli("show", "trc_sample1").out
    assert "→ chose search_docs" in out
    assert '→ {"hits":3}' in out


def test_show_prints_the_trace_error_and_step_errors(cli: Run, seeded: Path) -> None:
    """A failed trace shows its error in the header and the failing step's error."""
    out = cli("show", "trc_sample2").out
    assert "Status   failed" in out
    assert "Error    tool timeout" in out
    assert "error: timeout after 30s" in out


def test_show_header_of_a_fork_names_its_parent(cli: Run, seeded: Path) -> None:
    """A fork's header says which trace and step it was forked from."""
    out = cli("show", "trc_sample4_fork").out
    assert "Fork of  trc_sample1 at step 2" in out


def test_show_steps_only_omits_the_header(cli: Run, seeded: Path) -> None:
    """``--steps-only`` prints the timeline without the header."""
    result = cli("show", "trc_sample1", "--steps-only")
    assert result.code == 0
    assert "Trace " not in result.out
    assert "Agent " not in result.out
    assert list(_step_lines(result.out)) == [1, 2, 3, 4, 5]


def test_show_evals_lists_each_evaluation_with_its_verdict(cli: Run, seeded: Path) -> None:
    """``--evals`` prints every stored evaluation: pass/FAIL, evaluator, score, threshold."""
    out = cli("show", "trc_sample1", "--evals").out
    section = out.split("Evaluations", 1)[1]
    assert "pass  groundedness: 0.92 (threshold 0.80)" in section
    assert "FAIL  brevity: 0.30 (threshold 0.50)" in section


def test_show_without_evals_flag_omits_evaluations(cli: Run, seeded: Path) -> None:
    """Evaluations appear only with ``--evals``."""
    assert "groundedness" not in cli("show", "trc_sample1").out


def test_show_evals_of_a_trace_without_evals_says_none(cli: Run, seeded: Path) -> None:
    """``--evals`` on a trace with no evaluations says there are none."""
    out = cli("show", "trc_sample3", "--evals").out
    assert "(none;" in out.split("Evaluations", 1)[1]


def test_show_snapshots_prints_each_snapshot_part(cli: Run, seeded: Path) -> None:
    """``--snapshots`` prints the context window, environment and tool state per step."""
    out = cli("show", "trc_sample1", "--snapshots").out
    section = out.split("Snapshots", 1)[1]
    assert "step 2:" in section
    assert "context_window: user asks about passwords" in section
    assert 'environment: {"cwd":"/srv/bot"}' in section
    assert 'tool_state: {"cache":"warm"}' in section


def test_show_snapshots_of_a_trace_without_snapshots_says_so(cli: Run, seeded: Path) -> None:
    """``--snapshots`` on a trace with none prints "(no snapshots)"."""
    assert "(no snapshots)" in cli("show", "trc_sample2", "--snapshots").out


def test_show_tree_indents_steps_under_their_parent_step(cli: Run, seeded: Path) -> None:
    """``--tree`` indents a step one level per parent_step ancestor."""
    steps = _step_lines(cli("show", "trc_sample1", "--tree").out)
    assert steps[2].count("│") == 0  # top level
    assert steps[3].count("│") == 1  # parent_step 2
    assert steps[4].count("│") == 2  # parent_step 3, whose parent is 2
    assert steps[5].count("│") == 0


def test_show_tree_marks_causal_links(cli: Run, seeded: Path) -> None:
    """Steps with caused_by_step are marked "caused by #N"; others are not."""
    steps = _step_lines(cli("show", "trc_sample1", "--tree").out)
    assert "caused by #1" in steps[2]
    assert "caused by #2" in steps[3]
    assert "caused by" not in steps[4]


def test_show_timeline_without_tree_does_not_indent(cli: Run, seeded: Path) -> None:
    """Without ``--tree`` nested steps are not indented."""
    steps = _step_lines(cli("show", "trc_sample1").out)
    assert all("│" not in line for line in steps.values())


def test_show_step_range_prints_only_those_steps(cli: Run, seeded: Path) -> None:
    """``--from-step 2 --to-step 3`` prints steps 2 and 3 only."""
    result = cli("show", "trc_sample1", "--from-step", "2", "--to-step", "3")
    assert result.code == 0
    assert list(_step_lines(result.out)) == [2, 3]


def test_show_from_step_alone_prints_the_rest(cli: Run, seeded: Path) -> None:
    """``--from-step 4`` prints step 4 to the end."""
    assert list(_step_lines(cli("show", "trc_sample1", "--from-step", "4").out)) == [4, 5]


def test_show_to_step_alone_prints_the_start(cli: Run, seeded: Path) -> None:
    """``--to-step 2`` prints the first two steps."""
    assert list(_step_lines(cli("show", "trc_sample1", "--to-step", "2").out)) == [1, 2]


def test_show_step_range_applies_to_json(cli: Run, seeded: Path) -> None:
    """The step range also limits the steps of ``--json``."""
    trace = cli("show", "trc_sample1", "--json", "--from-step", "3", "--to-step", "4").json()
    assert [s["step_number"] for s in trace["steps"]] == [3, 4]


def test_show_to_step_before_from_step_is_a_usage_error(cli: Run, seeded: Path) -> None:
    """``--to-step`` smaller than ``--from-step`` exits 2 with a message."""
    result = cli("show", "trc_sample1", "--from-step", "4", "--to-step", "2")
    assert result.code == 2
    assert "--to-step 2 is before --from-step 4" in result.err


def test_show_step_range_beyond_the_trace_is_a_usage_error(cli: Run, seeded: Path) -> None:
    """A range starting past the last step exits 2 and says which steps there are (as
    ``why`` and ``fork`` do); a range ending past it is fine."""
    result = cli("show", "trc_sample1", "--from-step", "50")
    assert result.code == 2
    assert "--from-step 50 is out of range: trace trc_sample1 has steps 1..5" in result.err
    assert cli("show", "trc_sample1", "--from-step", "5", "--to-step", "50").code == 0


def test_show_json_prints_the_full_trace_object(cli: Run, seeded: Path) -> None:
    """``--json`` prints the trace with id, steps (each with its id), decisions and evals."""
    trace = cli("show", "trc_sample1", "--json").json()
    assert trace["id"] == "trc_sample1"
    assert trace["agent_name"] == "support-bot"
    assert [s["step_number"] for s in trace["steps"]] == [1, 2, 3, 4, 5]
    assert all(s["id"].startswith("stp_") for s in trace["steps"])
    step2 = trace["steps"][1]
    assert step2["caused_by_step"] == 1
    assert step2["decision"]["chosen"] == "search_docs"
    assert step2["snapshot"]["tool_state"] == {"cache": "warm"}
    assert trace["steps"][2]["parent_step"] == 2
    assert sorted(e["evaluator"] for e in trace["evals"]) == ["brevity", "groundedness"]


def test_show_json_keeps_the_order_of_evals(cli: Run, tmp_path: Path) -> None:
    """Evaluations are shown in the order the ingested trace listed them."""
    trace = {
        "id": "trc_eval_order",
        "agent_name": "a",
        "evals": [
            {"id": "evl_zzz", "evaluator": "first", "score": 1.0, "passed": True},
            {"id": "evl_aaa", "evaluator": "second", "score": 0.0, "passed": False},
        ],
    }
    source = tmp_path / "evals.json"
    source.write_text(json.dumps(trace))
    assert cli("ingest", source).code == 0
    shown = cli("show", "trc_eval_order", "--json").json()
    assert [e["evaluator"] for e in shown["evals"]] == ["first", "second"]


def test_show_json_round_trips_through_ingest(cli: Run, seeded: Path, tmp_path: Path) -> None:
    """``show --json`` ingested into another store shows back as the same object."""
    first = cli("show", "trc_sample1", "--json")
    exported = tmp_path / "trace.json"
    exported.write_text(first.out)
    other = tmp_path / "other"
    assert cli("ingest", exported, "--dir", other).code == 0
    second = cli("show", "trc_sample1", "--json", "--dir", other)
    assert second.json() == first.json()


def test_show_unique_prefix_resolves_the_trace(cli: Run, seeded: Path) -> None:
    """A unique prefix of an id shows that trace."""
    result = cli("show", "trc_sample4", "--json")
    assert result.code == 0
    assert result.json()["id"] == "trc_sample4_fork"


def test_show_prefix_without_trc_resolves_the_trace(cli: Run, seeded: Path) -> None:
    """The ``trc_`` type prefix may be left out."""
    assert cli("show", "sample4", "--json").json()["id"] == "trc_sample4_fork"


def test_show_ambiguous_prefix_is_a_usage_error_naming_the_candidates(
    cli: Run, seeded: Path
) -> None:
    """A prefix matching several traces exits 2 and names the candidate ids."""
    result = cli("show", "trc_sample")
    assert result.code == 2
    assert "ambiguous" in result.err
    assert "trc_sample1" in result.err
    assert "trc_sample2" in result.err


def test_show_ambiguous_prefix_under_json_prints_the_error_object(cli: Run, seeded: Path) -> None:
    """Under ``--json`` the ambiguity is reported as {ok: false, error, hints} on stdout."""
    result = cli("show", "sample", "--json")
    assert result.code == 2
    payload = result.json()
    assert payload["ok"] is False
    assert "trc_sample1" in payload["error"]
    assert "trc_sample3" in payload["error"]


def test_show_unknown_id_exits_1(cli: Run, seeded: Path) -> None:
    """An id matching nothing exits 1 and says so."""
    result = cli("show", "trc_nothing")
    assert result.code == 1
    assert "no trace matches 'trc_nothing'" in result.err


def test_show_missing_store_exits_1(cli: Run, store_dir: Path) -> None:
    """show on a missing store exits 1 without creating it."""
    assert cli("show", "trc_sample1").code == 1
    assert not store_dir.exists()


def test_show_trace_without_steps_says_so(cli: Run, tmp_path: Path) -> None:
    """A trace with no steps shows its header and "(no steps)"."""
    source = tmp_path / "empty.json"
    source.write_text(json.dumps({"id": "trc_empty", "agent_name": "idle"}))
    assert cli("ingest", source).code == 0
    out = cli("show", "trc_empty").out
    assert "Trace    trc_empty" in out
    assert "(no steps)" in out


@pytest.mark.parametrize("flag", ["--from-step", "--to-step"])
def test_show_step_bounds_must_be_positive(cli: Run, seeded: Path, flag: str) -> None:
    """Step bounds below 1 are usage errors."""
    assert cli("show", "trc_sample1", flag, "0").code == 2
