"""``agent-replay why`` (the causal chain behind a step) and ``agent-replay decisions`` (a
trace's decision points).

In ``trc_sample1``: 2 is caused by 1; 3 sits inside 2 and is caused by 2; 4 sits inside 3;
5 has no link, and step 2 is its nearest earlier decision.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Run = Callable[..., Any]


def _chain(cli: Run, step: int) -> list[tuple[int, str]]:
    result = cli("why", "trc_sample1", "--step", str(step), "--json")
    assert result.code == 0, result.err
    return [(hop["step_number"], hop["reason"]) for hop in result.json()["chain"]]


# --- why -----------------------------------------------------------------------------------


def test_why_follows_caused_by_links(cli: Run, seeded: Path) -> None:
    """The chain walks caused_by_step back to a step with no cause."""
    assert _chain(cli, 3) == [(3, "start"), (2, "caused_by"), (1, "caused_by")]


def test_why_falls_back_to_the_parent_step(cli: Run, seeded: Path) -> None:
    """A step without caused_by_step is explained by its parent_step."""
    assert _chain(cli, 4) == [(4, "start"), (3, "parent"), (2, "caused_by"), (1, "caused_by")]


def test_why_falls_back_to_the_nearest_earlier_decision(cli: Run, seeded: Path) -> None:
    """A step with neither link is explained by the nearest earlier decision step."""
    assert _chain(cli, 5) == [(5, "start"), (2, "prior_decision"), (1, "caused_by")]


def test_why_json_has_the_documented_shape(cli: Run, seeded: Path) -> None:
    """``--json``: {trace_id, step, chain: [{step_number, step_type, name, reason, decision}]}."""
    payload = cli("why", "sample1", "--step", "5", "--json").json()
    assert payload["trace_id"] == "trc_sample1"
    assert payload["step"] == 5
    first, decision, _ = payload["chain"]
    assert first == {
        "step_number": 5,
        "step_type": "output",
        "name": "final_answer",
        "reason": "start",
        "decision": None,
    }
    assert decision["step_type"] == "decision"
    assert decision["decision"]["chosen"] == "search_docs"
    assert decision["decision"]["rationale"] == "the question needs sources"


def test_why_prints_the_chain_with_its_reasons(cli: Run, seeded: Path) -> None:
    """The human output asks about the step, then one line per hop with how it was reached."""
    result = cli("why", "trc_sample1", "--step", "4")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == "why #4 retrieval fetch_doc?"
    assert "↑ inside #3 tool_call search_api" in result.out
    assert "↑ caused by #2 decision pick_tool" in result.out
    assert "↑ caused by #1 thought plan" in result.out


def test_why_prints_the_chosen_option_and_rationale_of_a_prior_decision(
    cli: Run, seeded: Path
) -> None:
    """Falling back to a decision prints the option chosen and why."""
    out = cli("why", "trc_sample1", "--step", "5").out
    assert "↑ after decision #2 decision pick_tool" in out
    assert "chose search_docs" in out
    assert "because the question needs sources" in out


def test_why_of_a_first_step_says_there_is_no_recorded_cause(cli: Run, seeded: Path) -> None:
    """A step with no link and no earlier decision exits 0 saying no cause was recorded."""
    result = cli("why", "trc_sample1", "--step", "1")
    assert result.code == 0
    assert "no recorded cause" in result.out
    assert _chain(cli, 1) == [(1, "start")]


def test_why_nonexistent_step_is_a_usage_error(cli: Run, seeded: Path) -> None:
    """A step number the trace doesn't have exits 2 (as in ``show`` and ``fork``) and names
    the steps it has."""
    result = cli("why", "trc_sample1", "--step", "9")
    assert result.code == 2
    assert "--step 9 is out of range: trace trc_sample1 has steps 1..5" in result.err


def test_why_nonexistent_step_under_json_prints_the_error_object(cli: Run, seeded: Path) -> None:
    """Under ``--json`` the missing step is reported as {ok: false, ...} on stdout."""
    result = cli("why", "trc_sample1", "--step", "9", "--json")
    assert result.code == 2
    assert result.json()["ok"] is False


def test_why_unknown_trace_exits_1(cli: Run, seeded: Path) -> None:
    """An unknown trace id exits 1."""
    assert cli("why", "trc_nothing", "--step", "1").code == 1


def test_why_requires_the_step_option(cli: Run, seeded: Path) -> None:
    """``why ID`` without ``--step`` is a usage error."""
    result = cli("why", "trc_sample1")
    assert result.code == 2
    assert "--step" in result.err


def test_why_ambiguous_prefix_is_a_usage_error(cli: Run, seeded: Path) -> None:
    """``why`` resolves prefixes like ``show``: an ambiguous one exits 2."""
    assert cli("why", "trc_sample", "--step", "1").code == 2


# --- decisions -----------------------------------------------------------------------------


def test_decisions_prints_the_choice_rationale_confidence_and_decider(
    cli: Run, seeded: Path
) -> None:
    """Each decision point shows its step, who decided, confidence, the choice and why."""
    result = cli("decisions", "trc_sample1")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == "#2 pick_tool  (by agent, confidence 0.85)"
    assert lines[1] == "  chose: search_docs"
    assert lines[2] == "  because: the question needs sources"


def test_decisions_lists_every_option_with_rationale_and_score(cli: Run, seeded: Path) -> None:
    """Options are listed with score and rationale, the chosen one marked ●."""
    out = cli("decisions", "trc_sample1").out
    assert "● search_docs [0.90] — needs facts" in out
    assert "○ answer_directly [0.40] — faster" in out


def test_decisions_json_has_the_documented_shape(cli: Run, seeded: Path) -> None:
    """``--json``: {trace_id, decisions: [{step_number, name, options, chosen, ...}]}."""
    payload = cli("decisions", "trc_sample1", "--json").json()
    assert payload == {
        "trace_id": "trc_sample1",
        "decisions": [
            {
                "step_number": 2,
                "name": "pick_tool",
                "options": [
                    {"option": "search_docs", "rationale": "needs facts", "score": 0.9},
                    {"option": "answer_directly", "rationale": "faster", "score": 0.4},
                ],
                "chosen": "search_docs",
                "rationale": "the question needs sources",
                "confidence": 0.85,
                "decided_by": "agent",
            }
        ],
    }


def test_decisions_of_a_trace_without_decisions_exits_0(cli: Run, seeded: Path) -> None:
    """No decision points: exit 0, nothing on stdout, a note on stderr."""
    result = cli("decisions", "trc_sample3")
    assert result.code == 0
    assert result.out == ""
    assert "no decision points" in result.err


def test_decisions_json_of_a_trace_without_decisions_is_an_empty_list(
    cli: Run, seeded: Path
) -> None:
    """``--json`` with no decision points prints an empty list."""
    result = cli("decisions", "trc_sample3", "--json")
    assert result.code == 0
    assert result.json() == {"trace_id": "trc_sample3", "decisions": []}


def test_decisions_shows_a_user_decision_without_confidence(cli: Run, tmp_path: Path) -> None:
    """decided_by is printed as given; a missing confidence is left out."""
    trace = {
        "id": "trc_user_choice",
        "agent_name": "a",
        "steps": [
            {
                "step_number": 1,
                "step_type": "decision",
                "name": "approve",
                "decision": {"chosen": "yes", "decided_by": "user"},
            }
        ],
    }
    source = tmp_path / "user.json"
    source.write_text(json.dumps(trace))
    assert cli("ingest", source).code == 0
    out = cli("decisions", "trc_user").out
    assert out.splitlines()[0] == "#1 approve  (by user)"


def test_decisions_unknown_trace_exits_1(cli: Run, seeded: Path) -> None:
    """An unknown trace id exits 1."""
    assert cli("decisions", "trc_nothing").code == 1
