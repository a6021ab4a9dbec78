"""Producer text never reaches the terminal raw: names, outputs and field paths holding control
characters (ESC, BEL) are printed as visible ``\\xNN`` escapes.

``escapes.json``: agent ``evil<ESC>[31mbot<BEL>``; step 1 (a decision) named
``pick<ESC>[31mred<BEL>``; step 2 named ``run<ESC>[31mred<BEL>``, caused by step 1, with output
``out<ESC>[2Jclear``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]


@pytest.fixture
def escapes(cli: Run, data: Path) -> None:
    assert cli("ingest", data / "escapes.json").code == 0


def _assert_no_raw_controls(text: str) -> None:
    assert "\x1b" not in text
    assert "\x07" not in text


def test_list_escapes_the_agent_name(cli: Run, escapes: None) -> None:
    """list prints the agent name with ESC and BEL escaped."""
    out = cli("list").out
    _assert_no_raw_controls(out)
    assert "evil\\x1b[31mbot\\x07" in out


@pytest.mark.parametrize("flags", [[], ["--tree"], ["--steps-only"]])
def test_show_escapes_step_names_and_outputs(cli: Run, escapes: None, flags: list[str]) -> None:
    """show prints step names and output previews escaped, in timeline and tree."""
    out = cli("show", "trc_escape1", *flags).out
    _assert_no_raw_controls(out)
    assert "run\\x1b[31mred\\x07" in out
    assert "out\\x1b[2Jclear" in out


def test_show_escapes_the_agent_name_in_the_header(cli: Run, escapes: None) -> None:
    """The header's agent name is escaped too."""
    assert "Agent    evil\\x1b[31mbot\\x07" in cli("show", "trc_escape1").out


def test_why_escapes_step_names(cli: Run, escapes: None) -> None:
    """why prints every step name of the chain escaped."""
    out = cli("why", "trc_escape1", "--step", "2").out
    _assert_no_raw_controls(out)
    assert "why #2 tool_call run\\x1b[31mred\\x07?" in out
    assert "pick\\x1b[31mred\\x07" in out


def test_decisions_escapes_step_names(cli: Run, escapes: None) -> None:
    """decisions prints the decision step's name escaped."""
    out = cli("decisions", "trc_escape1").out
    _assert_no_raw_controls(out)
    assert "#1 pick\\x1b[31mred\\x07" in out


def test_show_json_keeps_producer_text_exact(cli: Run, escapes: None) -> None:
    """``--json`` is JSON-encoded, not terminal-escaped: the value decodes to the original."""
    result = cli("show", "trc_escape1", "--json")
    _assert_no_raw_controls(result.out)
    assert result.json()["steps"][1]["name"] == "run\x1b[31mred\x07"


def test_ingest_escapes_a_rejected_field_path(cli: Run, tmp_path: Path) -> None:
    """A rejection naming a producer's field prints that name escaped."""
    source = tmp_path / "bad.json"
    source.write_text(json.dumps({"agent_name": "a", "evil\x1b[2J": 1}))
    result = cli("ingest", source)
    assert result.code == 1
    _assert_no_raw_controls(result.err)
    assert "evil\\x1b[2J" in result.err
