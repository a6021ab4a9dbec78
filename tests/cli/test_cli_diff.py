"""``agent-replay diff A B``: the aligned report (matched/changed/inserted/deleted, field paths,
deltas), ``--compact``, ``--json``, ``--exit-code``, escaping of producer text, id prefixes, and
the headless import rule for diff, fork, check and ``export --format golden``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from probe import probe

Run = Callable[..., Any]

GOOD, REGRESSED = "trc_demo4goodrun", "trc_demo5regressed"


@pytest.fixture
def demo(cli: Run) -> None:
    assert cli("demo").code == 0


@pytest.fixture
def pair(cli: Run, tmp_path: Path) -> tuple[str, str]:
    """Two crafted traces: B inserts a step, changes a tool input and renames nothing."""
    steps = [
        {"step_number": 1, "step_type": "thought", "name": "plan"},
        {"step_number": 2, "step_type": "tool_call", "name": "search", "input": {"q": "a"}},
        {"step_number": 3, "step_type": "output", "name": "reply", "output": "done"},
    ]
    b_steps = [
        steps[0],
        {"step_number": 2, "step_type": "tool_call", "name": "lookup", "input": {"id": 7}},
        {**steps[1], "step_number": 3, "input": {"q": "b"}},
        {**steps[2], "step_number": 4},
    ]
    lines = [
        {"id": "trc_pair_a", "agent_name": "bot", "input": {"x": 1}, "steps": steps},
        {"id": "trc_pair_b", "agent_name": "bot", "input": {"x": 1}, "steps": b_steps},
        {"id": "trc_pair_c", "agent_name": "bot", "input": {"x": 1}, "steps": steps},
    ]
    path = tmp_path / "pair.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in lines), encoding="utf-8")
    assert cli("ingest", path).code == 0
    return "trc_pair_a", "trc_pair_b"


def test_diff_prints_the_aligned_steps(cli: Run, pair: tuple[str, str]) -> None:
    """Rows marked = ~ + with A/B step numbers; the changed field path with both values."""
    result = cli("diff", *pair)
    assert result.code == 0, result.err
    rows = [line.split() for line in result.out.splitlines()]
    assert ["1", "1", "=", "thought", "plan"] in rows
    assert ["-", "2", "+", "tool_call", "lookup"] in rows
    assert ["2", "3", "~", "tool_call", "search", "changed:", "input"] in rows
    assert ["3", "4", "=", "output", "reply"] in rows
    assert "input.q: a" in result.out and "→ b" in result.out
    assert "Steps: 2 matched, 1 changed, 1 inserted, 0 deleted" in result.out
    assert "First divergence: - / B#2 tool_call lookup: inserted in B" in result.out


def test_diff_of_the_demo_pair(cli: Run, demo: None) -> None:
    """The regressed run: one inserted run_sql, the date filter decision first to diverge,
    token deltas per pair, the output differing, the totals."""
    out = cli("diff", GOOD, REGRESSED).out
    assert "-  6  +  tool_call   run_sql" in out
    assert "error: QueryCanceled" in out
    assert "First divergence: A#3 / B#3 decision date_filter: changed decision" in out
    assert "decision.chosen: filter_last_quarter" in out
    assert "+582 tok" in out
    assert "Trace input: same" in out and "Trace output: differs" in out
    assert "Totals: steps 8 → 9   tokens 1,346 → 2,362" in out


def test_diff_compact_prints_the_summary_only(cli: Run, demo: None) -> None:
    """--compact: counts, first divergence and totals, no step rows."""
    out = cli("diff", GOOD, REGRESSED, "--compact").out
    assert "Steps: 2 matched, 6 changed, 1 inserted, 0 deleted" in out
    assert "First divergence:" in out and "Totals:" in out
    assert "tool_call   run_sql" not in out


def test_diff_json(cli: Run, demo: None) -> None:
    """--json: the references, counts, first divergence, pairs and totals; --compact drops pairs."""
    payload = cli("diff", GOOD, REGRESSED, "--json").json()
    assert payload["a"]["id"] == GOOD and payload["b"]["step_count"] == 9
    assert payload["counts"] == {"matched": 2, "changed": 6, "inserted": 1, "deleted": 0}
    assert payload["identical"] is False
    first = payload["first_divergence"]
    assert (first["a_step"], first["b_step"], first["fields"]) == (3, 3, ["decision"])
    assert first["differences"][0] == {
        "field": "decision",
        "path": "decision.chosen",
        "kind": "changed",
        "a": "filter_last_quarter",
        "b": "scan_all_orders",
    }
    kinds = [p["kind"] for p in payload["pairs"]]
    assert kinds.count("inserted") == 1 and kinds[5] == "inserted"
    assert payload["pairs"][3]["tokens_used"] == {"a": 812, "b": 1394, "delta": 582}
    assert payload["totals"]["step_count"] == {"a": 8, "b": 9, "delta": 1}
    assert [d["field"] for d in payload["trace_differences"]] == ["output"]
    assert "pairs" not in cli("diff", GOOD, REGRESSED, "--json", "--compact").json()


def test_exit_code_flag(cli: Run, pair: tuple[str, str]) -> None:
    """--exit-code: 1 when the traces differ, 0 when they agree; without it, always 0."""
    assert cli("diff", *pair, "--exit-code").code == 1
    assert cli("diff", *pair).code == 0
    same = cli("diff", "trc_pair_a", "trc_pair_c", "--exit-code")
    assert same.code == 0
    assert "First divergence: none, the traces agree" in same.out
    assert "identical" in same.out


def test_diff_accepts_unique_prefixes(cli: Run, demo: None) -> None:
    """Ids may be prefixes; an ambiguous one is a usage error, a missing one a failure."""
    assert cli("diff", "demo4", "trc_demo5", "--compact").code == 0
    ambiguous = cli("diff", "trc_demo", GOOD)
    assert ambiguous.code == 2 and "ambiguous" in ambiguous.err
    assert cli("diff", "trc_missing", GOOD).code == 1


def test_diff_escapes_producer_text(cli: Run, tmp_path: Path) -> None:
    """Names, values and field paths with control characters are printed escaped."""
    evil = "\x1b[31mred\x07"
    a = {
        "id": "trc_evil_a",
        "agent_name": f"bot{evil}",
        "steps": [
            {"step_number": 1, "step_type": "tool_call", "name": f"t{evil}", "input": {"k": "v"}}
        ],
    }
    b = json.loads(json.dumps(a))
    b["id"] = "trc_evil_b"
    b["steps"][0]["input"] = {"k": f"v{evil}", f"key{evil}": 1}
    path = tmp_path / "evil.jsonl"
    path.write_text(json.dumps(a) + "\n" + json.dumps(b), encoding="utf-8")
    assert cli("ingest", path).code == 0
    out = cli("diff", "trc_evil_a", "trc_evil_b").out
    assert "\x1b" not in out and "\x07" not in out
    assert "t\\x1b[31mred\\x07" in out
    assert "key\\x1b[31mred\\x07" in out


# --- headless: diff, fork, check and the golden export never import Textual or Rich -----------


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["diff", GOOD, REGRESSED], 0),
        (["diff", GOOD, REGRESSED, "--json", "--exit-code"], 1),
        (["fork", GOOD, "--from-step", "3", "--modify-input", '{"a": 1}'], 0),
        (["export", "--format", "golden", "--tag", "golden"], 0),
        (["check", "--help"], 0),
        (["diff", "--help"], 0),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_runs_without_importing_textual_or_rich(
    cli: Run, demo: None, store_dir: Path, argv: list[str], code: int
) -> None:
    """Run in a fresh interpreter: textual and rich stay out of sys.modules."""
    result = probe(argv=argv, store_dir=store_dir)
    assert (result.code, result.loaded) == (code, []), result.stderr


def test_check_runs_without_importing_textual_or_rich(
    cli: Run, demo: None, store_dir: Path, tmp_path: Path
) -> None:
    """A real check (exit 1 on the demo's regression) stays headless too."""
    golden = tmp_path / "golden.json"
    assert cli("export", "--format", "golden", "--tag", "golden", "-o", golden).code == 0
    argv = ["check", "--golden", str(golden)]
    result = probe(argv=argv, store_dir=store_dir)
    assert (result.code, result.loaded) == (1, []), result.stderr
