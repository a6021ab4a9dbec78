"""What capture accepts, it keeps: random native streams mixing valid events with hostile ones
(every field of the protocol with wrong types, out-of-range numbers, deep nesting, huge strings)
through ``record``, ``run`` and the ``TraceRecorder`` SDK never raise past the reader, and every
valid event lands with its content."""

from __future__ import annotations

import inspect
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.cli import main
from agent_replay.errors import AgentReplayError
from agent_replay.services.capture.protocol import EVENT_TYPES, FIELDS
from agent_replay.services.capture.run import run_traced
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store, open_store

SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ALL_FIELDS = sorted(set().union(*FIELDS.values()))


class Deep:
    """A list nested ``depth`` deep (built only when written: shown as ``Deep(2000)``)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def __repr__(self) -> str:
        return f"Deep({self.depth})"

    def json(self) -> str:
        return "[" * self.depth + '"bottom"' + "]" * self.depth

    def value(self) -> Any:
        return json.loads(self.json()) if self.depth < 900 else "deep"


def _dumps(event: dict[str, Any]) -> str:
    deep = {k: v for k, v in event.items() if isinstance(v, Deep)}
    text = json.dumps({k: v for k, v in event.items() if k not in deep}, allow_nan=True)
    for key, value in deep.items():
        text = text[:-1] + f", {json.dumps(key)}: {value.json()}}}"
    return text


HOSTILE_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**53, 2**63 - 1, 2**63, 2**64, -(2**63) - 1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["x" * 200_000, "", "\x00\x1b[31m", "12", "not_a_type", "2026-13-45"]),
    st.builds(Deep, st.sampled_from([50, 500, 2000])),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
HOSTILE = st.builds(
    lambda kind, fields: {"v": 1, "type": kind, "trace_id": "p", **fields},
    st.one_of(st.sampled_from(EVENT_TYPES), st.text(max_size=8)),
    st.dictionaries(st.sampled_from(ALL_FIELDS), HOSTILE_VALUE, max_size=6),
)
# A stream: a sequence where each item is a valid step (True) or a hostile event.
STREAM = st.lists(st.one_of(st.just(True), HOSTILE), min_size=1, max_size=12)


def _lines(items: list[Any], tag: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The stream's lines, and the (name, output) of each valid step in it."""
    lines = [json.dumps({"v": 1, "type": "trace_start", "trace_id": "p", "agent_name": "bot"})]
    valid: list[tuple[str, str]] = []
    for index, item in enumerate(items):
        if item is True:
            name, output = f"valid-{tag}-{index}", f"kept {index}"
            valid.append((name, output))
            event = {"v": 1, "type": "step", "trace_id": "p", "step_type": "tool_call"}
            lines.append(json.dumps({**event, "name": name, "output": output}))
        else:
            lines.append(_dumps(item))
    return lines, valid


def _landed(store: Store, valid: list[tuple[str, str]]) -> None:
    """Every valid step is stored with its type and output."""
    for name, output in valid:
        rows = store.db.execute_sql(
            "SELECT step_type, output FROM steps WHERE name = ?", (name,)
        ).fetchall()
        assert [(r[0], json.loads(r[1])) for r in rows] == [("tool_call", output)], name


@pytest.fixture
def shared_store(tmp_path: Path) -> Iterator[Path]:
    """One store for every example (examples use step names of their own)."""
    yield tmp_path / "store"


_counter = iter(range(10**6))


@SETTINGS
@given(items=STREAM)
def test_record_keeps_every_valid_event(
    shared_store: Path, capsys: pytest.CaptureFixture[str], items: list[Any]
) -> None:
    lines, valid = _lines(items, f"r{next(_counter)}")
    data = "".join(line + "\n" for line in lines).encode()
    with mock.patch.object(sys, "stdin", io.TextIOWrapper(io.BytesIO(data))):
        code = main(["record", "--dir", str(shared_store), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert "unexpected" not in err and "Traceback" not in err
    summary = json.loads(out)
    assert summary["ok"] is (code == 0)
    with open_store(shared_store / "traces.db") as store:
        _landed(store, valid)


@settings(SETTINGS, max_examples=6)
@given(items=STREAM)
def test_run_keeps_every_valid_event(shared_store: Path, tmp_path: Path, items: list[Any]) -> None:
    tag = f"u{next(_counter)}"
    lines, valid = _lines(items, tag)
    events = tmp_path / f"{tag}.jsonl"
    # The child's events go to run's own trace: no trace_start of its own.
    events.write_text("".join(line + "\n" for line in lines[1:]).replace('"trace_id": "p", ', ""))
    outcome = run_traced(
        ["/bin/sh", "-c", 'cat "$0" >> "$AGENT_REPLAY_EVENTS"', str(events)],
        store_dir=shared_store,
    )
    assert outcome.exit_status == 0
    with open_store(shared_store / "traces.db") as store:
        _landed(store, valid)
        status = store.db.execute_sql(
            "SELECT status FROM traces WHERE id = ?", (outcome.trace_id,)
        ).fetchone()[0]
    assert status in ("completed", "failed", "timeout")


SDK_CALLS = st.sampled_from(["step", "start_step", "end_step", "decision", "snapshot"])


@SETTINGS
@given(calls=st.lists(st.one_of(st.just(True), st.tuples(SDK_CALLS, HOSTILE)), max_size=12))
def test_sdk_raises_only_its_own_errors_and_keeps_every_valid_step(
    shared_store: Path, calls: list[Any]
) -> None:
    tag = f"s{next(_counter)}"
    store = open_store(shared_store / "traces.db", create=True)
    try:
        recorder = TraceRecorder(store)
        trace_id = recorder.start_trace("sdk")
        valid: list[tuple[str, str]] = []
        for index, call in enumerate(calls):
            if call is True:
                name, output = f"valid-{tag}-{index}", f"kept {index}"
                recorder.step(trace_id, {"step_type": "tool_call", "name": name, "output": output})
                valid.append((name, output))
                continue
            method, event = call
            fields = {
                k: v.value() if isinstance(v, Deep) else v
                for k, v in event.items()
                if k not in ("v", "type", "trace_id")
            }
            try:
                if method == "step":
                    recorder.step(trace_id, fields)
                elif method == "start_step":
                    step_type = fields.pop("step_type", None)
                    recorder.start_step(trace_id, step_type, **_only(recorder.start_step, fields))
                elif method == "end_step":
                    number = fields.pop("step_number", None)
                    recorder.end_step(trace_id, number, **_only(recorder.end_step, fields))
                elif method == "decision":
                    recorder.decision(trace_id, fields)
                else:
                    recorder.snapshot(trace_id, fields.pop("step_number", 1), fields)
            except AgentReplayError:
                pass  # the SDK is strict: it refuses, with its own error, and nothing else
        recorder.end_trace(trace_id)
        _landed(store, valid)
    finally:
        store.close()


def _only(method: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields the method takes as keywords."""
    names = inspect.signature(method).parameters
    return {k: v for k, v in fields.items() if k in names}
