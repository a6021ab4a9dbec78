"""The replay service: pacing from recorded durations, speeds, running totals, cost, elapsed
time and the snapshot at the playhead."""

from __future__ import annotations

from typing import Any

import pytest

from agent_replay.errors import NotFoundError, UsageError
from agent_replay.services.replay import (
    DEFAULT_STEP_MS,
    MAX_STEP_MS,
    SPEEDS,
    Replay,
    check_speed,
    faster,
    slower,
    speed_label,
    step_delay,
)


def _step(n: int, **fields: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "step_number": n,
        "step_type": "thought",
        "name": f"s{n}",
        "duration_ms": None,
        "tokens_used": None,
        "started_at": None,
        "ended_at": None,
        "snapshot": None,
        "metadata": {},
    }
    step.update(fields)
    return step


# --- pacing --------------------------------------------------------------------------------


def test_delay_is_the_recorded_duration_divided_by_the_speed() -> None:
    """A 2 s step waits 2 s at 1×, 0.4 s at 5× and 0.1 s at 20×."""
    step = _step(1, duration_ms=2000)
    assert step_delay(step, 1) == pytest.approx(2.0)
    assert step_delay(step, 5) == pytest.approx(0.4)
    assert step_delay(step, 20) == pytest.approx(0.1)


def test_instant_speed_never_waits() -> None:
    """Speed 0 is instant: no delay however long the step."""
    assert step_delay(_step(1, duration_ms=90_000), 0) == 0.0


def test_a_step_without_duration_gets_the_default() -> None:
    """No (or a nonsensical) duration counts as DEFAULT_STEP_MS."""
    assert step_delay(_step(1), 1) == pytest.approx(DEFAULT_STEP_MS / 1000)
    assert step_delay(_step(1, duration_ms=-5), 1) == pytest.approx(DEFAULT_STEP_MS / 1000)


def test_long_steps_are_capped_before_scaling() -> None:
    """A 41.9 s tool call plays as MAX_STEP_MS (3 s) at 1× and 0.6 s at 5×."""
    step = _step(1, duration_ms=41_877)
    assert step_delay(step, 1) == pytest.approx(MAX_STEP_MS / 1000)
    assert step_delay(step, 5) == pytest.approx(0.6)


def test_delay_before_each_position_is_the_next_steps_duration() -> None:
    """At position p the wait is for step p + 1; at the end there is nothing to wait for."""
    replay = Replay([_step(1, duration_ms=100), _step(2, duration_ms=300)])
    assert replay.delay_before(0, 1) == pytest.approx(0.1)
    assert replay.delay_before(1, 1) == pytest.approx(0.3)
    assert replay.delay_before(2, 1) == 0.0
    assert replay.total_delay(2) == pytest.approx(0.2)
    assert replay.total_delay(1, start=1) == pytest.approx(0.3)


# --- speeds --------------------------------------------------------------------------------


def test_speeds_step_up_to_instant_and_down_to_one() -> None:
    """faster/slower walk 1, 2, 5, 10, 20, instant and stop at both ends."""
    assert SPEEDS == (1, 2, 5, 10, 20, 0)
    up = [1.0]
    for _ in range(6):
        up.append(faster(up[-1]))
    assert up == [1, 2, 5, 10, 20, 0, 0]
    down = [0.0]
    for _ in range(6):
        down.append(slower(down[-1]))
    assert down == [0, 20, 10, 5, 2, 1, 1]


def test_an_unlisted_speed_moves_to_the_nearest_listed_one() -> None:
    """3× speeds up to 5× and slows down to 2×."""
    assert faster(3) == 5
    assert slower(3) == 2


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "fast"])
def test_bad_speeds_are_usage_errors(bad: Any) -> None:
    """Negative, NaN, infinite or non-numeric speeds are rejected as usage errors."""
    with pytest.raises(UsageError):
        check_speed(bad)


def test_speed_labels() -> None:
    """Speeds read as ``5×``, ``0.5×`` and ``instant``."""
    assert [speed_label(s) for s in (5, 0.5, 0)] == ["5×", "0.5×", "instant"]


# --- the playhead --------------------------------------------------------------------------


def test_tokens_accumulate_up_to_the_playhead() -> None:
    """Tokens so far sum the revealed steps; steps without tokens add nothing."""
    replay = Replay([_step(1, tokens_used=10), _step(2), _step(3, tokens_used=5)])
    assert [replay.state_at(p).tokens for p in range(4)] == [0, 10, 10, 15]


def test_position_is_clamped_and_revealed_steps_follow_it() -> None:
    """Position 0 reveals nothing; past the end clamps to the end."""
    replay = Replay([_step(1), _step(2)])
    start = replay.state_at(-3)
    assert (start.position, start.revealed, start.current) == (0, [], None)
    end = replay.state_at(99)
    assert end.position == 2 and end.at_end
    assert [s["step_number"] for s in end.revealed] == [1, 2]
    assert end.current is not None and end.current["step_number"] == 2


def test_per_step_costs_are_used_when_recorded() -> None:
    """metadata.cost_usd on every step: exact costs, not an estimate."""
    steps = [
        _step(1, tokens_used=100, metadata={"cost_usd": 0.01}),
        _step(2, tokens_used=100, metadata={"cost_usd": 0.03}),
    ]
    replay = Replay(steps, total_cost_usd=1.0)
    state = replay.state_at(2)
    assert state.cost_usd == pytest.approx(0.04)
    assert not state.cost_estimated


def test_without_step_costs_the_total_is_pro_rated_by_tokens() -> None:
    """$0.03 over 100 + 200 tokens: $0.01 after the first step, flagged as an estimate."""
    replay = Replay(
        [_step(1, tokens_used=100), _step(2), _step(3, tokens_used=200)], total_cost_usd=0.03
    )
    assert replay.state_at(0).cost_usd == 0.0
    first = replay.state_at(1)
    assert first.cost_usd == pytest.approx(0.01) and first.cost_estimated
    assert replay.state_at(2).cost_usd == pytest.approx(0.01)
    assert replay.state_at(3).cost_usd == pytest.approx(0.03)


def test_mixed_costs_pro_rate_only_the_uncovered_remainder() -> None:
    """One step costs $0.02 of a $0.05 total; the other $0.03 goes to the uncosted steps."""
    replay = Replay(
        [
            _step(1, tokens_used=50, metadata={"cost_usd": 0.02}),
            _step(2, tokens_used=100),
            _step(3, tokens_used=200),
        ],
        total_cost_usd=0.05,
    )
    assert not replay.state_at(1).cost_estimated
    assert replay.state_at(2).cost_usd == pytest.approx(0.03)
    assert replay.state_at(2).cost_estimated
    assert replay.state_at(3).cost_usd == pytest.approx(0.05)


def test_no_cost_anywhere_is_none() -> None:
    """Neither steps nor trace record a cost: the cost is unknown, not zero."""
    replay = Replay([_step(1, tokens_used=10)])
    assert replay.state_at(1).cost_usd is None


def test_elapsed_comes_from_timestamps_relative_to_the_trace_start() -> None:
    """Elapsed is the current step's end minus the trace start (gaps included)."""
    steps = [
        _step(1, started_at="2026-01-01T00:00:01.000Z", ended_at="2026-01-01T00:00:01.500Z"),
        _step(2, started_at="2026-01-01T00:00:05.000Z", duration_ms=250),
    ]
    replay = Replay(steps, started_at="2026-01-01T00:00:00.000Z")
    assert [replay.state_at(p).elapsed_ms for p in range(3)] == [0.0, 1500.0, 5250.0]


def test_elapsed_falls_back_to_summed_durations() -> None:
    """Without timestamps, elapsed is the sum of the revealed durations."""
    replay = Replay([_step(1, duration_ms=100), _step(2), _step(3, duration_ms=40)])
    assert [replay.state_at(p).elapsed_ms for p in range(4)] == [0.0, 100.0, 100.0, 140.0]


def test_snapshot_at_the_playhead_is_the_latest_recorded_part() -> None:
    """Each part carries forward from the last step that recorded it."""
    steps = [
        _step(1, snapshot={"context_window": ["a"], "environment": {"e": 1}, "tool_state": None}),
        _step(2),
        _step(3, snapshot={"context_window": None, "environment": None, "tool_state": {"t": 2}}),
        _step(4, snapshot={"context_window": ["a", "b"], "environment": None, "tool_state": None}),
    ]
    replay = Replay(steps)
    assert replay.state_at(0).snapshot == {}
    at2 = replay.state_at(2).snapshot
    assert (at2["context_window"].value, at2["context_window"].step_number) == (["a"], 1)
    assert "tool_state" not in at2
    at3 = replay.state_at(3).snapshot
    assert at3["tool_state"].step_number == 3
    assert at3["environment"].step_number == 1
    at4 = replay.state_at(4).snapshot
    assert at4["context_window"].value == ["a", "b"]
    assert at4["tool_state"].value == {"t": 2}


def test_position_of_a_step_number() -> None:
    """The position at which a step is current; an unknown step number is not found."""
    replay = Replay([_step(3), _step(7)])
    assert replay.position_of(7) == 2
    with pytest.raises(NotFoundError):
        replay.position_of(4)


def test_from_trace_reads_the_trace_totals(make_trace: Any) -> None:
    """A full trace object: steps, its total cost and its start."""
    trace = make_trace(3, total_cost_usd=0.3)
    replay = Replay.from_trace(trace)
    assert replay.total == 3
    end = replay.state_at(3)
    assert end.tokens == 30
    assert end.cost_usd == pytest.approx(0.3) and end.cost_estimated
    assert end.elapsed_ms == 3500.0  # third step ends 3.5 s after the trace started
