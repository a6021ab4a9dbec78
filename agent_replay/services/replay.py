"""Replay (time travel): the state of a trace at a playhead, and the pacing of playback.

Both front ends play a trace through this module: the ``replay`` command prints steps to a plain
terminal, the TUI's replay screen reveals them on a timer. It owns the arithmetic only — what has
happened by step N (tokens, cost, elapsed time, the latest snapshot) and how long to wait before
the next step — and works on the format's JSON objects, as the store returns them.

Pure functions and plain data: no I/O, no clock, no sleeping. Must not import Textual or Rich.

The playhead
    ``position`` counts the steps revealed: 0 is "before the first step", ``total`` is the end,
    and at position ``p`` the current step is ``steps[p - 1]``.

Pacing
    The wait before a step appears is that step's recorded ``duration_ms`` divided by the speed:
    a step shows up when it finished, as it did in the recorded run. The gaps *between* steps are
    not replayed (agents often idle between turns for minutes). A step without a duration counts
    as ``DEFAULT_STEP_MS``, and a recorded duration is capped at ``MAX_STEP_MS`` before scaling,
    so a 40-second tool call plays as 3 s at 1×, 0.6 s at 5×, and nothing ever stalls a replay.
    Speed 0 means instant (no waits at all).

Cost
    A step's cost is its ``metadata.cost_usd`` when the producer recorded one. Otherwise the part
    of the trace's ``total_cost_usd`` not covered by per-step costs is shared among the remaining
    steps in proportion to their tokens, and the running cost is flagged as an estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from agent_replay.errors import NotFoundError, UsageError
from agent_replay.trace.base import time_ms

SPEEDS: tuple[float, ...] = (1, 2, 5, 10, 20, 0)
"""The speeds the TUI steps through with +/-, slowest first; 0 (instant) is the fastest."""
INSTANT = 0.0
"""The speed that reveals steps without waiting."""
DEFAULT_SPEED = 5.0
"""The ``replay`` command's default speed."""
DEFAULT_STEP_MS = 100.0
"""The recorded duration assumed for a step that has none."""
MAX_STEP_MS = 3000.0
"""The longest recorded duration replayed: longer steps are cut to this before scaling."""
SNAPSHOT_FIELDS: tuple[str, ...] = ("context_window", "environment", "tool_state")
"""The parts of a snapshot, each carried forward from the latest step that recorded it."""


# --- speeds --------------------------------------------------------------------------------


def check_speed(speed: float) -> float:
    """A valid speed (a finite number ≥ 0; 0 is instant).

    Raises:
        UsageError: the speed is negative, infinite or not a number.
    """
    if not isinstance(speed, int | float) or math.isnan(speed) or math.isinf(speed) or speed < 0:
        shown = f"{speed:g}" if isinstance(speed, int | float) else repr(speed)
        raise UsageError(
            f"speed must be a number ≥ 0 (0 is instant), not {shown}",
            hints=["e.g. --speed 1 (as recorded), --speed 10, --speed 0 (instant)"],
        )
    return float(speed)


def speed_label(speed: float) -> str:
    """``5×``, ``0.5×`` or ``instant``."""
    if speed == INSTANT:
        return "instant"
    return f"{speed:g}×"


def _rank(speed: float) -> float:
    return math.inf if speed == INSTANT else speed


def faster(speed: float) -> float:
    """The next speed of ``SPEEDS`` above ``speed`` (instant stays instant)."""
    for candidate in SPEEDS:
        if _rank(candidate) > _rank(speed):
            return candidate
    return speed


def slower(speed: float) -> float:
    """The next speed of ``SPEEDS`` below ``speed`` (1× stays 1×, as does anything slower)."""
    for candidate in reversed(SPEEDS):
        if _rank(candidate) < _rank(speed):
            return candidate
    return speed


def scaled_ms(step: dict[str, Any]) -> float:
    """The recorded duration a step is replayed with, at 1× (default for none, capped)."""
    duration = step.get("duration_ms")
    if not isinstance(duration, int | float) or isinstance(duration, bool) or duration < 0:
        duration = DEFAULT_STEP_MS
    return min(float(duration), MAX_STEP_MS)


def step_delay(step: dict[str, Any], speed: float) -> float:
    """Seconds to wait before ``step`` is revealed when playing at ``speed``."""
    if speed == INSTANT:
        return 0.0
    return scaled_ms(step) / speed / 1000.0


# --- the playhead --------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotPart:
    """One part of the agent's state, as last recorded at or before the playhead."""

    value: Any
    """The recorded value (a context window, an environment, a tool state)."""
    step_number: int
    """The step that recorded it."""


@dataclass(frozen=True)
class PlayheadState:
    """Everything that has happened by a playhead position."""

    position: int
    """Steps revealed: 0 is before the first step, ``total`` the end."""
    total: int
    """Steps in the replay."""
    revealed: Sequence[dict[str, Any]]
    """The steps revealed so far, in order (the last one is current)."""
    tokens: int
    """Tokens used by the revealed steps."""
    cost_usd: float | None
    """Cost of the revealed steps; ``None`` when neither steps nor trace record a cost."""
    cost_estimated: bool
    """Whether ``cost_usd`` pro-rates the trace's total cost by tokens (no per-step costs)."""
    elapsed_ms: float
    """Recorded time from the start of the run to the end of the current step."""
    snapshot: dict[str, SnapshotPart]
    """Each snapshot part (``SNAPSHOT_FIELDS``) last recorded at or before the playhead."""

    @property
    def current(self) -> dict[str, Any] | None:
        """The step at the playhead (``None`` before the first step)."""
        return self.revealed[-1] if self.revealed else None

    @property
    def at_end(self) -> bool:
        return self.position >= self.total


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _tokens(step: dict[str, Any]) -> int:
    value = step.get("tokens_used")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


class _Prefix(Sequence[dict[str, Any]]):
    """The first ``length`` steps, without copying them: a move at step 5,000 must cost what
    one at step 1 does."""

    def __init__(self, steps: list[dict[str, Any]], length: int) -> None:
        self._steps = steps
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return self._steps[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._steps[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class Replay:
    """A trace's steps, ready to be looked at from any playhead position in O(1).

    Args:
        steps: the format's step objects, in step order.
        total_cost_usd: the trace's total cost (pro-rated over steps without ``cost_usd``).
        started_at: the trace's start (elapsed time counts from it; else from the first step).
    """

    def __init__(
        self,
        steps: Sequence[dict[str, Any]],
        *,
        total_cost_usd: float | None = None,
        started_at: str | None = None,
    ) -> None:
        self.steps: list[dict[str, Any]] = list(steps)
        """The steps, in order."""
        self._tokens = [0]
        self._cost: list[float | None] = []
        self._estimated = [False]
        self._elapsed = [0.0]
        self._snapshot_at: dict[str, list[int]] = {name: [-1] for name in SNAPSHOT_FIELDS}
        self._positions: dict[int, int] | None = None
        self._accumulate(total_cost_usd, started_at)

    @classmethod
    def from_trace(cls, trace: Mapping[str, Any]) -> Replay:
        """A replay of a full trace object (``trace_json``)."""
        return cls(
            trace.get("steps") or [],
            total_cost_usd=trace.get("total_cost_usd"),
            started_at=trace.get("started_at"),
        )

    @property
    def total(self) -> int:
        return len(self.steps)

    def _accumulate(self, total_cost_usd: float | None, started_at: str | None) -> None:
        steps = self.steps
        known = [_number((s.get("metadata") or {}).get("cost_usd")) for s in steps]
        known = [c if c is not None and c >= 0 else None for c in known]
        total_cost = _number(total_cost_usd)
        uncosted_tokens = sum(_tokens(s) for s, c in zip(steps, known, strict=True) if c is None)
        share: float | None = None
        if total_cost is not None and any(c is None for c in known):
            remainder = max(total_cost - sum(c for c in known if c is not None), 0.0)
            share = remainder / uncosted_tokens if uncosted_tokens else 0.0
        has_cost = total_cost is not None or any(c is not None for c in known)
        self._cost.append(0.0 if has_cost else None)

        origin = self._origin(started_at)
        for index, step in enumerate(steps):
            self._tokens.append(self._tokens[-1] + _tokens(step))
            cost = known[index]
            estimated = False
            if cost is None and share is not None:
                cost, estimated = share * _tokens(step), True
            previous = self._cost[-1]
            self._cost.append(None if previous is None else previous + (cost or 0.0))
            self._estimated.append(self._estimated[-1] or estimated)
            self._elapsed.append(self._end_of(step, origin, self._elapsed[-1]))
            snapshot = step.get("snapshot") or {}
            for name in SNAPSHOT_FIELDS:
                marks = self._snapshot_at[name]
                marks.append(index if snapshot.get(name) is not None else marks[-1])

    def _origin(self, started_at: str | None) -> int | None:
        candidates = [started_at] + [s.get("started_at") for s in self.steps[:1]]
        for value in candidates:
            if value:
                try:
                    return time_ms(value)
                except ValueError:
                    continue
        return None

    @staticmethod
    def _end_of(step: dict[str, Any], origin: int | None, before: float) -> float:
        """Elapsed ms at the end of ``step``: from its timestamps, else the previous end plus its
        duration. Never earlier than ``before`` (steps of a parallel run overlap)."""
        duration = _number(step.get("duration_ms")) or 0.0
        end: float | None = None
        if origin is not None:
            try:
                if step.get("ended_at"):
                    end = float(time_ms(step["ended_at"]) or 0) - origin
                elif step.get("started_at"):
                    end = float(time_ms(step["started_at"]) or 0) - origin + duration
            except ValueError:
                end = None
        if end is None:
            end = before + duration
        return max(end, before)

    def clamp(self, position: int) -> int:
        """A position within ``0..total``."""
        return min(max(position, 0), self.total)

    def state_at(self, position: int) -> PlayheadState:
        """The state once ``position`` steps have been revealed (clamped to ``0..total``)."""
        p = self.clamp(position)
        snapshot = {}
        for name in SNAPSHOT_FIELDS:
            index = self._snapshot_at[name][p]
            if index >= 0:
                step = self.steps[index]
                snapshot[name] = SnapshotPart(step["snapshot"][name], step["step_number"])
        return PlayheadState(
            position=p,
            total=self.total,
            revealed=_Prefix(self.steps, p),
            tokens=self._tokens[p],
            cost_usd=self._cost[p],
            cost_estimated=self._estimated[p],
            elapsed_ms=self._elapsed[p],
            snapshot=snapshot,
        )

    def tokens_at(self, position: int) -> int:
        """Tokens used by the first ``position`` steps (the running total)."""
        return self._tokens[self.clamp(position)]

    def delay_before(self, position: int, speed: float) -> float:
        """Seconds to wait at ``position`` before revealing the next step (0 at the end)."""
        if position >= self.total or position < 0:
            return 0.0
        return step_delay(self.steps[position], speed)

    def position_of(self, step_number: int) -> int:
        """The playhead position at which step ``step_number`` is the current step.

        Raises:
            NotFoundError: the replay has no such step.
        """
        if self._positions is None:  # built once, on the first jump: O(1) from then on
            self._positions = {}
            for index, step in enumerate(self.steps):
                self._positions.setdefault(step["step_number"], index + 1)
        position = self._positions.get(step_number)
        if position is None:
            raise NotFoundError(f"the trace has no step {step_number}")
        return position

    def total_delay(self, speed: float, start: int = 0) -> float:
        """Seconds a playback from ``start`` to the end takes at ``speed``."""
        return sum(self.delay_before(p, speed) for p in range(max(start, 0), self.total))
