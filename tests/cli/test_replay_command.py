"""``agent-replay replay``: one line a step, paced by recorded durations, in a plain terminal."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from probe import probe

from agent_replay.commands import replay as replay_command
from agent_replay.services.demo import load_demo
from agent_replay.store.db import ensure_database

Run = Callable[..., Any]
TOOLCHAIN = "trc_demo2toolchain"


@pytest.fixture
def demo(store_dir: Path, clock: Any) -> Path:
    """The store (through AGENT_REPLAY_DIR) holding the five demo traces (fixed clock)."""
    store = ensure_database(store_dir)
    load_demo(store, clock)
    store.close()
    return store_dir


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The waits the command asked for (it never really sleeps)."""
    waits: list[float] = []
    monkeypatch.setattr(replay_command, "SLEEP", waits.append)
    yield waits


def _step_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line[:5].strip().isdigit()]


def test_prints_one_line_per_step_with_running_tokens(demo: Path, cli: Run, sleeps) -> None:
    """Every step gets a line with icon, type, name, duration, tokens and the running total."""
    result = cli("replay", TOOLCHAIN)
    assert result.code == 0, result.err
    lines = _step_lines(result.out)
    assert len(lines) == 8
    assert "🤖 llm_call    select_tool" in lines[1]
    assert "1.3s" in lines[1] and "642 tok" in lines[1] and "Σ 642 tok" in lines[1]
    assert "Σ 1,348 tok" in lines[5]
    assert "← #5" in lines[5]
    assert "replaying trc_demo2toolchain (travel-booking-agent, 8 steps) at 5×" in result.out
    assert "end of run: 1,348 tokens, ~$0.0121 (estimated from tokens), 3.1s recorded" in (
        result.out
    )


def test_outputs_errors_and_decisions_are_previewed(demo: Path, cli: Run, sleeps) -> None:
    """Below each step: its error, its decision's choice or a preview of its output."""
    out = cli("replay", TOOLCHAIN).out
    assert "error: ValidationError: date must be an ISO date YYYY-MM-DD (got 'next Friday')" in out
    assert "→ chose retry_with_converted_date" in out
    assert "→ Resolve the date of next Friday" in out


def test_default_speed_sleeps_a_fifth_of_each_duration(demo: Path, cli: Run, sleeps) -> None:
    """At the default 5× the wait before each step is its duration / 5."""
    cli("replay", TOOLCHAIN)
    durations = [35, 1322, 218, 31, 24, 1188, 207, 3]
    assert sleeps == pytest.approx([d / 5 / 1000 for d in durations])


def test_speed_scales_and_caps_long_steps(demo: Path, cli: Run, sleeps) -> None:
    """At 1× a 30 s and a 41.9 s step wait 3 s each (the cap)."""
    cli("replay", "trc_demo5regressed", "--speed", "1", "--from-step", "6", "--to-step", "7")
    assert sleeps == pytest.approx([3.0, 3.0])


def test_speed_zero_is_instant(demo: Path, cli: Run, sleeps) -> None:
    """--speed 0 never sleeps."""
    result = cli("replay", TOOLCHAIN, "--speed", "0")
    assert result.code == 0
    assert sleeps == []
    assert "at instant" in result.out


def test_from_and_to_step_slice_the_replay(demo: Path, cli: Run, sleeps) -> None:
    """--from-step/--to-step replay only those steps; totals still count from the start."""
    result = cli("replay", TOOLCHAIN, "--speed", "0", "--from-step", "3", "--to-step", "6")
    lines = _step_lines(result.out)
    assert [int(line.split()[0]) for line in lines] == [3, 4, 5, 6]
    assert "Σ 642 tok" in lines[0]
    assert "stopped at step 6: 1,348 tokens" in result.out


def test_an_empty_range_says_so(demo: Path, cli: Run, sleeps) -> None:
    """A range with no steps prints a note and exits 0."""
    result = cli("replay", TOOLCHAIN, "--from-step", "50")
    assert result.code == 0
    assert "(no steps in that range)" in result.out


def test_a_prefix_resolves(demo: Path, cli: Run, sleeps) -> None:
    """A unique prefix of the id is enough."""
    result = cli("replay", "demo2", "--speed", "0")
    assert result.code == 0
    assert "replaying trc_demo2toolchain" in result.out


def test_unknown_trace_exits_1(demo: Path, cli: Run, sleeps) -> None:
    """An id matching nothing is a runtime failure (1)."""
    result = cli("replay", "nope")
    assert result.code == 1
    assert "no trace matches 'nope'" in result.err


def test_ambiguous_prefix_exits_2(demo: Path, cli: Run, sleeps) -> None:
    """A prefix matching several traces is a usage error (2) naming them."""
    result = cli("replay", "trc_demo")
    assert result.code == 2
    assert "ambiguous" in result.err and "trc_demo1ungrounded" in result.err


@pytest.mark.parametrize("speed", ["-1", "fast", "nan", "inf"])
def test_bad_speed_exits_2(demo: Path, cli: Run, sleeps, speed: str) -> None:
    """A negative, non-numeric or non-finite speed is a usage error (2)."""
    result = cli("replay", TOOLCHAIN, "--speed", speed)
    assert result.code == 2
    assert "speed" in result.err


def test_reversed_range_exits_2(demo: Path, cli: Run, sleeps) -> None:
    """--to-step before --from-step is a usage error."""
    result = cli("replay", TOOLCHAIN, "--from-step", "5", "--to-step", "2")
    assert result.code == 2


def test_ctrl_c_stops_cleanly_with_130(
    demo: Path, cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during a wait stops the replay, says where, and exits 130."""
    calls = []

    def interrupted_sleep(seconds: float) -> None:
        calls.append(seconds)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(replay_command, "SLEEP", interrupted_sleep)
    result = cli("replay", TOOLCHAIN)
    assert result.code == 130
    assert len(_step_lines(result.out)) == 2
    assert "stopped after step 2 of 8" in result.err
    assert "Traceback" not in result.err


def test_producer_text_is_escaped(cli: Run, store_dir: Path, sleeps) -> None:
    """Control characters in names and outputs are shown as escapes, never sent raw."""
    from agent_replay.services.ingest import ingest_many

    store = ensure_database(store_dir)
    trace = {
        "id": "trc_escapes",
        "agent_name": "bot\x1b[31m",
        "started_at": "2026-05-01T00:00:00Z",
        "steps": [
            {"step_number": 1, "step_type": "thought", "name": "a\x1b]0;x\x07", "output": "o\rk"}
        ],
    }
    ingest_many(store, [("t", trace)])
    store.close()
    result = cli("replay", "trc_escapes", "--speed", "0")
    assert result.code == 0
    assert "\x1b" not in result.out and "\x07" not in result.out and "\r" not in result.out
    assert "a\\x1b]0;x\\x07" in result.out


def test_replay_never_imports_textual_or_rich(demo: Path) -> None:
    """Running ``replay`` in a fresh interpreter leaves textual and rich out of sys.modules."""
    run = probe(argv=["replay", TOOLCHAIN, "--speed", "0"], store_dir=demo)
    assert (run.code, run.loaded) == (0, []), run.stderr
    assert "end of run" in run.stdout


def test_help_has_examples(cli: Run) -> None:
    """``replay --help`` explains pacing and shows examples."""
    result = cli("replay", "--help")
    assert result.code == 0
    assert "Examples:" in result.out
    assert "agent-replay replay trc_demo2 --speed 0" in result.out
