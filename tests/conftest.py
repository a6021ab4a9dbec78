"""Shared fixtures: an isolated store directory per test, a migrated store, a fixed clock and a
factory of valid trace objects."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.store.db import Store, ensure_database

FIXED_NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)

MakeTrace = Callable[..., dict[str, Any]]


@pytest.fixture(autouse=True)
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own store directory, through ``AGENT_REPLAY_DIR``."""
    path = tmp_path / ".agent-replay"
    monkeypatch.setenv("AGENT_REPLAY_DIR", str(path))
    return path


@pytest.fixture
def store(store_dir: Path) -> Iterator[Store]:
    """A freshly created and migrated store in ``store_dir``."""
    db = ensure_database(store_dir)
    yield db
    db.close()


@pytest.fixture
def clock() -> FixedClock:
    """A clock pinned to 2026-06-01 12:00 UTC."""
    return FixedClock(FIXED_NOW)


def _iso(base: dt.datetime, seconds: float) -> str:
    instant = base + dt.timedelta(seconds=seconds)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


_STEP_TYPES = ("thought", "tool_call", "llm_call", "retrieval", "output")


@pytest.fixture
def make_trace() -> MakeTrace:
    """A factory of valid trace objects (the format's JSON) with ``steps`` steps.

    ``make_trace(3, id="trc_x", status="failed")``: keyword arguments override trace fields.
    Steps are one second apart from ``started_at``; each uses 10 tokens and lasts 500 ms.
    """

    def factory(steps: int = 3, **fields: Any) -> dict[str, Any]:
        start = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)
        trace: dict[str, Any] = {
            "agent_name": "test-agent",
            "status": "completed",
            "input": {"question": "what is 2 + 2?"},
            "output": "4",
            "started_at": _iso(start, 0),
            "ended_at": _iso(start, steps + 1),
            "tags": ["unit"],
            "steps": [
                {
                    "step_number": n,
                    "step_type": _STEP_TYPES[(n - 1) % len(_STEP_TYPES)],
                    "name": f"step-{n}",
                    "input": {"n": n},
                    "output": f"result {n}",
                    "started_at": _iso(start, n),
                    "ended_at": _iso(start, n + 0.5),
                    "tokens_used": 10,
                    **({"caused_by_step": n - 1} if n > 1 else {}),
                }
                for n in range(1, steps + 1)
            ],
        }
        trace.update(fields)
        return trace

    return factory
