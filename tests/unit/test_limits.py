"""Bounds on one captured value: an over-long text keeps its beginning and a marker with its
original size and digest; a value nested too deep is replaced; both through the recorder, the
one write path."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from agent_replay.services.limits import MARKER, MAX_DEPTH, cap_value
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import get_trace


def test_a_text_over_the_cap_keeps_its_start_size_and_digest() -> None:
    text = "é" * 3000  # 6,000 bytes
    capped = cap_value({"out": [text, "short"]}, max_bytes=2048)
    kept = capped["out"][0]
    assert capped["out"][1] == "short"
    assert len(kept.encode()) <= 2048 and text.startswith(kept[: kept.index("…")])
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert kept.endswith(f"{MARKER} 6000 bytes, sha256:{digest}]")


def test_values_within_bounds_are_the_same_objects() -> None:
    value = {"a": ["x" * 100, {"b": 1}], "c": None}
    assert cap_value(value, max_bytes=1024) is value


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def test_the_recorder_caps_outputs_and_nesting(store: Store) -> None:
    recorder = TraceRecorder(store, lenient=True, max_value_bytes=4096)
    trace_id = recorder.start_trace("bot", input={"deep": _deep(MAX_DEPTH + 50)})
    recorder.step(trace_id, {"step_type": "tool_call", "output": "y" * 100_000})
    recorder.end_trace(trace_id)
    trace = get_trace(store, trace_id)
    output = trace.steps[0].output
    assert len(output) < 4096 and re.search(r"100000 bytes, sha256:[0-9a-f]{64}\]$", output)
    inner, levels = trace.input["deep"], 0
    while isinstance(inner, list):
        inner, levels = inner[0], levels + 1
    assert MAX_DEPTH - 5 < levels < MAX_DEPTH
    assert inner.startswith(f"{MARKER} nested deeper than {MAX_DEPTH} levels")
