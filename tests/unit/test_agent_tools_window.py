"""``get_trace`` (the MCP tool): a window of a trace's steps says whether steps follow it and
which call reads them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_replay.clock import FixedClock
from agent_replay.services.agent_tool_args import GetTraceArgs
from agent_replay.services.agent_tools import get_trace
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store


def test_a_window_before_the_last_step_names_the_next_call(
    store: Store, clock: FixedClock, make_trace: Callable[..., dict[str, Any]]
) -> None:
    ingest_trace(store, make_trace(5, id="trc_windowed"))
    head = get_trace(store, GetTraceArgs(trace_id="trc_windowed", max_steps=2), clock)
    assert [s["step_number"] for s in head["steps"]] == [1, 2]
    assert head["truncated"] is True and "continue with from_step=3" in head["note"]
    tail = get_trace(store, GetTraceArgs(trace_id="trc_windowed", from_step=4), clock)
    assert [s["step_number"] for s in tail["steps"]] == [4, 5]
    assert "continue with" not in tail["note"] and "earlier steps: from_step=1" in tail["note"]
