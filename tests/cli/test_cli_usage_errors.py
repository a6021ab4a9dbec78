"""Usage errors stay usage errors (exit 2, naming the option), and the CLI says what it did:
range-checked numbers and durations, an out-of-range step alike in ``show``, ``why`` and
``fork``, an unsupported ``--db-url`` scheme, the trace ids ``ingest`` and ``run`` wrote, the
effective ``ai.model``, and AI-key hints for the command at hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

Cli = Any  # the `cli` fixture: cli(*args) -> Result(code, out, err)
HUGE = "9223372036854775808"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["list", "--limit", HUGE], "'--limit'"),
        (["list", "--since", "99999999d"], "--since '99999999d'"),
        (["prune", "--older-than", "99999999999d"], "--older-than '99999999999d'"),
        (["prune", "--older-than", "banana"], "--older-than 'banana'"),
        (["show", "trc_sample1", "--from-step", "99999999999999999999"], "'--from-step'"),
        (["search", "reset", "--hits", HUGE], "'--hits'"),
        (["export", "--output", "missing/dir/x.jsonl"], "--output"),
        (["list", "--db-url", "mysql://u@h/db"], "unsupported database 'mysql'"),
    ],
)
def test_out_of_range_values_are_usage_errors_naming_the_option(
    cli: Cli, seeded: Path, args: list[str], named: str
) -> None:
    result = cli(*args)
    assert result.code == 2, result.err
    assert named in result.err and "unexpected" not in result.err


@pytest.mark.parametrize(
    "args",
    [
        ["show", "trc_sample1", "--from-step", "99"],
        ["why", "trc_sample1", "--step", "99"],
        ["fork", "trc_sample1", "--from-step", "99"],
    ],
)
def test_an_out_of_range_step_is_the_same_usage_error_everywhere(
    cli: Cli, seeded: Path, args: list[str]
) -> None:
    result = cli(*args)
    assert result.code == 2
    assert f"{args[2]} 99 is out of range: trace trc_sample1 has steps 1..5" in result.err


def test_ingest_prints_the_ids_it_wrote(cli: Cli, data: Path) -> None:
    result = cli("ingest", data / "traces.jsonl")
    assert result.code == 0, result.err
    assert result.out.splitlines()[1:] == [
        "  trc_sample1",
        "  trc_sample2",
        "  trc_sample3",
        "  trc_sample4_fork",
    ]


def test_run_json_gives_the_trace_id(cli: Cli, proc: Any) -> None:
    result = proc("run", "--json", "--", sys.executable, "-c", "print('child says hi')")
    out = result.stdout.splitlines()
    assert result.returncode == 0 and out[0] == "child says hi", result.stderr
    summary = json.loads(out[-1])
    assert summary["trace_id"].startswith("trc_") and summary["traces"] == [summary["trace_id"]]
    assert cli("show", summary["trace_id"], "--json").json()["status"] == "completed"


def test_config_get_ai_model_prints_the_model_in_effect(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000000000000000000000")
    result = cli("config", "get", "ai.model", "--json")
    assert result.json()["value"] == "gpt-5.4-nano"
    assert result.json()["source"] == "default for openai"


def test_ai_key_hints_speak_of_the_command_at_hand(
    cli: Cli, seeded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = cli("diff", "trc_sample1", "trc_sample2", "--ai")
    assert "without --ai the diff needs no key" in result.err
    assert "agent-replay eval" not in result.err
