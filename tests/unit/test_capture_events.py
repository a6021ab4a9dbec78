"""The native event protocol v1 engine: every event type, warnings and problems, traces left
open, producer ids, redaction, group commit (coalesced batches record exactly what one-by-one
recording does), and the recorder's one-pass batch write it relies on."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.services.capture.events import EventEngine
from agent_replay.services.capture.protocol import EventReport
from agent_replay.services.capture.pump import FdReader, NativeSink, finish, pump
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.queries import list_traces
from agent_replay.store.trace_detail import get_trace, trace_json

T = "2026-01-01T10:00:{:06.3f}Z".format


def ev(kind: str, trace_id: str | None = "p1", **fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"v": 1, "type": kind, **fields}
    if trace_id is not None:
        event["trace_id"] = trace_id
    return event


def lines_of(events: list[Any]) -> list[str]:
    return [e if isinstance(e, str) else json.dumps(e) for e in events]


class Recorded:
    """What a stream recorded: the report, the engine, the warnings printed."""

    def __init__(self, engine: EventEngine, report: EventReport, warnings: list[str]) -> None:
        self.engine = engine
        self.report = report
        self.warnings = warnings

    @property
    def trace_ids(self) -> list[str]:
        return self.report.traces


def record(
    store: Store,
    tmp_path: Path,
    events: list[Any],
    *,
    window_s: float = 0.1,
    leave_open: bool = False,
    **options: Any,
) -> Recorded:
    """Write the events to a file and pump it through the engine, as ``record`` does."""
    path = tmp_path / f"events-{len(list(tmp_path.iterdir()))}.jsonl"
    path.write_text("".join(line + "\n" for line in lines_of(events)))
    warnings: list[str] = []
    options.setdefault("clock", FixedClock(__import__("datetime").datetime(2026, 6, 1, 12)))
    engine = EventEngine(store, warn=warnings.append, **options)
    sink = NativeSink(engine)
    fd = os.open(path, os.O_RDONLY)
    try:
        pump(FdReader(fd), sink, window_s=window_s)
    finally:
        os.close(fd)
    report = finish(sink, leave_open=leave_open)
    return Recorded(engine, report, warnings)


def without_ids(trace: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in trace.items() if k != "id"}
    out["steps"] = [{k: v for k, v in s.items() if k != "id"} for s in trace["steps"]]
    return out


DECISION = {
    "options": [{"option": "refund", "score": 0.8}, {"option": "escalate", "score": 0.2}],
    "chosen": "refund",
    "rationale": "late delivery",
    "confidence": 0.9,
}

FULL_STREAM = [
    ev(
        "trace_start",
        agent_name="support-bot",
        agent_version="1.2",
        session_id="sess-9",
        input={"q": "refund?"},
        tags=["support"],
        metadata={"region": "eu"},
        started_at=T(0),
    ),
    ev(
        "step_start",
        step_type="tool_call",
        name="lookup",
        input={"id": 7},
        call_id="c1",
        started_at=T(1),
    ),
    ev(
        "step",
        step_type="thought",
        name="plan",
        output="check the order",
        started_at=T(1.5),
        ended_at=T(1.75),
        tokens_used=3,
    ),
    ev(
        "step_end",
        call_id="c1",
        output={"status": "late"},
        ended_at=T(2),
        tokens_used=10,
        metadata={"http": 200},
    ),
    ev(
        "step_start",
        step_type="llm_call",
        name="draft",
        model="m1",
        started_at=T(3),
        caused_by_step=1,
    ),
    ev("step_end", step_number=3, output="Refunded.", ended_at=T(4), tokens_used=50),
    ev("decision", name="refund?", started_at=T(4.5), caused_by_step=1, **DECISION),
    ev("snapshot", step_number=4, environment={"cwd": "/srv"}, tool_state={"orders": 1}),
    ev(
        "step",
        step_type="decision",
        name="second",
        started_at=T(5),
        decision=DECISION,
        snapshot={"context_window": ["hi"]},
    ),
    ev("trace_end", output="done", ended_at=T(6), total_cost_usd=0.5),
]


# --- every event type ------------------------------------------------------------------------


def test_every_event_type_lands_in_the_trace(store: Store, tmp_path: Path) -> None:
    """trace_start, step_start/step_end (by call id and by number), step, decision, snapshot
    and trace_end all map onto the trace."""
    done = record(store, tmp_path, FULL_STREAM)
    assert done.report.ok, done.report.as_json()
    assert done.report.skipped == {}
    assert done.report.events == 10 and done.report.steps == 5
    trace = get_trace(store, done.trace_ids[0])
    assert (trace.agent_name, trace.agent_version, trace.session_id) == (
        "support-bot",
        "1.2",
        "sess-9",
    )
    assert trace.status == "completed" and trace.output == "done"
    assert trace.input == {"q": "refund?"} and trace.tags == ["support"]
    assert trace.metadata == {"region": "eu", "producer_trace_id": "p1"}
    assert trace.total_tokens == 63 and trace.total_cost_usd == 0.5
    assert trace.started_at == T(0) and trace.ended_at == T(6)
    steps = {s.step_number: s for s in trace.steps}
    assert [(n, s.step_type, s.name) for n, s in sorted(steps.items())] == [
        (1, "tool_call", "lookup"),
        (2, "thought", "plan"),
        (3, "llm_call", "draft"),
        (4, "decision", "refund?"),
        (5, "decision", "second"),
    ]
    assert steps[1].output == {"status": "late"} and steps[1].duration_ms == 1000.0
    assert steps[1].metadata == {"http": 200} and steps[1].tokens_used == 10
    assert steps[3].model == "m1" and steps[3].caused_by_step == 1
    assert steps[4].decision is not None and steps[4].decision.chosen == "refund"
    assert steps[4].snapshot is not None and steps[4].snapshot.environment == {"cwd": "/srv"}
    assert steps[5].decision is not None and steps[5].snapshot is not None


def test_decision_event_attaches_to_an_existing_decision_step(store: Store, tmp_path: Path) -> None:
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", agent_name="a"),
            ev("step", step_type="decision", name="pick"),
            ev("decision", step_number=1, decision={"chosen": "x", "options": [{"option": "x"}]}),
            ev("trace_end"),
        ],
    )
    steps = get_trace(store, done.trace_ids[0]).steps
    assert len(steps) == 1 and steps[0].decision is not None
    assert steps[0].decision.chosen == "x"


def test_snapshot_event_by_call_id_and_by_default_the_last_step(
    store: Store, tmp_path: Path
) -> None:
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", agent_name="a"),
            ev("step_start", step_type="tool_call", call_id="k"),
            ev("snapshot", call_id="k", snapshot={"tool_state": {"a": 1}}),
            ev("step", step_type="thought"),
            ev("snapshot", context_window=["last"]),
        ],
    )
    assert done.report.ok, done.report.as_json()
    steps = get_trace(store, done.trace_ids[0]).steps
    assert steps[0].snapshot is not None and steps[0].snapshot.tool_state == {"a": 1}
    assert steps[1].snapshot is not None and steps[1].snapshot.context_window == ["last"]


def test_step_start_and_step_end_pair_by_call_id_out_of_order(store: Store, tmp_path: Path) -> None:
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", agent_name="a"),
            ev("step_start", step_type="tool_call", name="a", call_id="A", started_at=T(1)),
            ev("step_start", step_type="tool_call", name="b", call_id="B", started_at=T(2)),
            ev("step_end", call_id="B", output="b!", ended_at=T(3)),
            ev("step_end", call_id="A", output="a!", ended_at=T(4)),
            ev("trace_end"),
        ],
    )
    steps = get_trace(store, done.trace_ids[0]).steps
    assert [(s.name, s.output, s.duration_ms) for s in steps] == [
        ("a", "a!", 3000.0),
        ("b", "b!", 1000.0),
    ]


# --- one-pass batches == one by one --------------------------------------------------------


@pytest.mark.parametrize("window_s", [0.0, 0.1, 30.0], ids=["per-event", "100ms", "one-batch"])
def test_group_commit_records_what_one_by_one_recording_does(
    store: Store, tmp_path: Path, window_s: float
) -> None:
    """Coalesced batches (a pair closed in one batch becomes one row) give exactly the trace
    that committing every event on its own gives."""
    reference = record(store, tmp_path, FULL_STREAM, window_s=0.0)
    other = record(store, tmp_path, FULL_STREAM, window_s=window_s)
    first = trace_json(store, reference.trace_ids[0])
    second = trace_json(store, other.trace_ids[0])
    assert without_ids(first) == without_ids(second)


def test_a_batch_needing_repairs_falls_back_to_one_by_one(store: Store, tmp_path: Path) -> None:
    """A bad link in a batch: nothing is written in one pass; the steps are recorded one by one
    and the link is dropped with a repair warning, as the recorder does."""
    events = [
        ev("trace_start", agent_name="a"),
        ev("step", step_type="thought", name="one"),
        ev("step", step_type="thought", name="two", parent_step=9),
        ev("step_start", step_type="tool_call", name="three", call_id="c", tokens_used=None),
        ev("step_end", call_id="c", output="x"),
        ev("trace_end"),
    ]
    done = record(store, tmp_path, events, window_s=30.0)
    assert done.engine.replayed_batches == 1
    assert done.report.ok and done.report.repairs == 1
    assert "parent_step" in done.report.repair_samples[0][1]
    steps = get_trace(store, done.trace_ids[0]).steps
    assert [(s.step_number, s.name, s.parent_step, s.output) for s in steps] == [
        (1, "one", None, None),
        (2, "two", None, None),
        (3, "three", None, "x"),
    ]


def test_clean_batches_take_the_one_pass_path(store: Store, tmp_path: Path) -> None:
    done = record(store, tmp_path, FULL_STREAM, window_s=30.0)
    assert done.engine.fast_batches >= 1 and done.engine.replayed_batches == 0


# --- warnings and problems -----------------------------------------------------------------


def test_unknown_types_and_fields_are_skipped_with_one_warning_per_kind(
    store: Store, tmp_path: Path
) -> None:
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", agent_name="a"),
            ev("heartbeat"),
            ev("heartbeat"),
            ev("step", step_type="thought", colour="red"),
            ev("step", step_type="thought", colour="blue"),
            ev("trace_end"),
        ],
    )
    assert done.report.ok  # warnings, not problems
    assert done.report.skipped == {
        "unknown event type 'heartbeat'": 2,
        "unknown field 'colour' in step": 2,
    }
    assert len(done.warnings) == 2
    assert done.warnings[0].startswith("line 2: unknown event type 'heartbeat'")
    assert len(get_trace(store, done.trace_ids[0]).steps) == 2


def test_malformed_lines_are_counted_with_their_line_numbers(store: Store, tmp_path: Path) -> None:
    events: list[Any] = [ev("trace_start", agent_name="a")]
    events += ["{not json", "[1, 2]", '{"v": 1}', '"text"', "", "{}", "nope", "{"]
    events += [ev("trace_end")]
    done = record(store, tmp_path, events)
    assert not done.report.ok
    assert done.report.malformed == 7
    assert [w for w, _ in done.report.malformed_samples] == [
        "line 2",
        "line 3",
        "line 4",
        "line 5",
        "line 7",
    ]
    assert "not valid JSON" in done.report.malformed_samples[0][1]
    assert "not a JSON object" in done.report.malformed_samples[1][1]
    assert get_trace(store, done.trace_ids[0]).status == "completed"


def test_an_event_for_an_unknown_trace_id_is_rejected(store: Store, tmp_path: Path) -> None:
    done = record(
        store,
        tmp_path,
        [ev("trace_start", agent_name="a"), ev("step", "ghost", step_type="thought")],
    )
    assert done.report.rejected == 1 and not done.report.ok
    where, reason = done.report.rejected_samples[0]
    assert where == "line 2" and "unknown trace_id 'ghost'" in reason


def test_step_end_with_nothing_to_close_is_rejected(store: Store, tmp_path: Path) -> None:
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", agent_name="a"),
            ev("step_end", call_id="never-started", output=1),
            ev("step_end", output=2),
        ],
    )
    assert done.report.rejected == 2
    assert "no open step" in done.report.rejected_samples[0][1]
    assert "needs a step_number or a call_id" in done.report.rejected_samples[1][1]


def test_protocol_version_is_checked(store: Store, tmp_path: Path) -> None:
    """No ``v`` is taken as v1 with a warning; another version is rejected."""
    done = record(
        store,
        tmp_path,
        [
            {"type": "trace_start", "trace_id": "p1", "agent_name": "a"},
            ev("step", step_type="thought", v=2),
        ],
    )
    assert done.report.skipped == {"event without 'v' (taken as v1)": 1}
    assert done.report.rejected == 1
    assert "unsupported protocol version v=2" in done.report.rejected_samples[0][1]


def test_trace_start_needs_an_agent_name(store: Store, tmp_path: Path) -> None:
    done = record(store, tmp_path, [ev("trace_start")])
    assert done.report.rejected == 1 and done.report.traces == []
    named = record(store, tmp_path, [ev("trace_start", "p2")], default_agent_name="fallback")
    assert get_trace(store, named.trace_ids[0]).agent_name == "fallback"


def test_a_second_trace_start_for_an_open_trace_is_rejected(store: Store, tmp_path: Path) -> None:
    done = record(
        store, tmp_path, [ev("trace_start", agent_name="a"), ev("trace_start", agent_name="a")]
    )
    assert done.report.rejected == 1 and len(done.report.traces) == 1


def test_lenient_repairs_are_counted_not_fatal(store: Store, tmp_path: Path) -> None:
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", agent_name="a", tags="not-a-list"),
            ev("step", step_type=" Tool_Call ", tokens_used=-5, metadata=[1]),
            ev("trace_end", status="weird"),
        ],
    )
    assert done.report.ok
    assert done.report.repairs >= 2
    assert set(done.report.skipped) == {
        "tags that are not a list of strings",
        "metadata that is not an object",
    }
    trace = get_trace(store, done.trace_ids[0])
    assert trace.steps[0].step_type == "tool_call" and trace.steps[0].tokens_used is None


def test_an_unknown_step_type_is_rejected_not_guessed(store: Store, tmp_path: Path) -> None:
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", agent_name="a"),
            ev("step", step_type="no-such-type", name="odd"),
            ev("step_start", step_type=None, name="untyped", call_id="c"),
            ev("step", step_type="output", name="fine"),
        ],
    )
    assert done.report.rejected == 2 and not done.report.ok
    assert [w for w in done.warnings if "rejected" in w] == [
        "line 2: step rejected: unknown step_type 'no-such-type' (one of thought, tool_call, "
        "llm_call, retrieval, output, decision, error, guard_check)",
        "line 3: step_start rejected: needs a step_type (one of thought, tool_call, llm_call, "
        "retrieval, output, decision, error, guard_check)",
    ]
    trace = get_trace(store, done.trace_ids[0])
    assert [(s.step_number, s.name) for s in trace.steps] == [(1, "fine")]


# --- traces: open at the end, producer ids, defaults ---------------------------------------


def test_a_trace_open_at_the_end_of_the_stream_is_finalized_as_timeout(
    store: Store, tmp_path: Path
) -> None:
    done = record(
        store,
        tmp_path,
        [ev("trace_start", agent_name="a"), ev("step_start", step_type="tool_call", call_id="c")],
    )
    trace = get_trace(store, done.trace_ids[0])
    assert trace.status == "timeout" and trace.ended_at is not None
    assert trace.error == "the event stream ended before trace_end"
    assert done.report.timed_out == done.trace_ids


def test_leave_open_keeps_the_trace_running(store: Store, tmp_path: Path) -> None:
    done = record(store, tmp_path, [ev("trace_start", agent_name="a")], leave_open=True)
    assert get_trace(store, done.trace_ids[0]).status == "running"
    assert done.report.left_open == done.trace_ids and done.report.timed_out == []


def test_events_for_a_trace_already_in_the_store_are_recorded_into_it(
    store: Store, tmp_path: Path
) -> None:
    """A producer id that is one of our ids (``run`` hands it to the child) names that trace;
    a stream that didn't start it doesn't finalize it."""
    ours = TraceRecorder(store).start_trace("pre-made")
    done = record(store, tmp_path, [ev("step", ours, step_type="thought", name="late")])
    assert done.report.ok and done.report.timed_out == []
    trace = get_trace(store, ours)
    assert trace.status == "running" and [s.name for s in trace.steps] == ["late"]


def test_trace_start_with_our_id_attaches_and_keeps_metadata(store: Store, tmp_path: Path) -> None:
    ours = TraceRecorder(store).start_trace("pre-made")
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", ours, agent_name="x", metadata={"k": 1}),
            ev("trace_end", ours, output="o"),
        ],
    )
    assert done.trace_ids == [ours]
    trace = get_trace(store, ours)
    assert (trace.status, trace.output, trace.agent_name) == ("completed", "o", "pre-made")
    assert trace.metadata == {"k": 1, "producer_trace_start": {"agent_name": "x"}}
    assert len(list_traces(store).items) == 1


def test_several_traces_interleaved_in_one_stream(store: Store, tmp_path: Path) -> None:
    events = [ev("trace_start", f"p{i}", agent_name=f"a{i}") for i in range(3)]
    for n in range(5):
        for i in range(3):
            events.append(ev("step_start", f"p{i}", step_type="tool_call", call_id=f"c{n}"))
            events.append(ev("step", f"p{(i + 1) % 3}", step_type="thought"))
            events.append(ev("step_end", f"p{i}", call_id=f"c{n}", output=n))
    events += [ev("trace_end", f"p{i}") for i in range(3)]
    done = record(store, tmp_path, events, window_s=30.0)
    assert done.report.ok and len(done.trace_ids) == 3
    for trace_id in done.trace_ids:
        trace = get_trace(store, trace_id)
        assert len(trace.steps) == 10 and trace.status == "completed"
        assert [s.output for s in trace.steps if s.step_type == "tool_call"] == [0, 1, 2, 3, 4]
        assert trace.metadata["producer_trace_id"].startswith("p")


def test_events_without_trace_id_go_to_the_only_open_trace(store: Store, tmp_path: Path) -> None:
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", None, agent_name="a"),
            ev("step", None, step_type="thought"),
            ev("trace_end", None),
            ev("trace_start", "x", agent_name="b"),
            ev("trace_start", "y", agent_name="c"),
            ev("step", None, step_type="thought"),
        ],
    )
    assert len(get_trace(store, done.trace_ids[0]).steps) == 1
    assert get_trace(store, done.trace_ids[0]).status == "completed"
    assert done.report.rejected == 1
    assert "more than one trace is open" in done.report.rejected_samples[0][1]


def test_default_trace_receives_events_without_trace_id(store: Store, tmp_path: Path) -> None:
    """``run``'s mode: the child's first trace_start claims the pre-made trace, which the
    engine leaves for the wrapper to finalize."""
    run_trace = TraceRecorder(store).start_trace("run")
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", "child-own-id", agent_name="inner", metadata={"m": 1}),
            ev("step", "child-own-id", step_type="thought"),
            ev("step", None, step_type="thought"),
            ev("trace_start", "second", agent_name="other"),
        ],
        default_trace=run_trace,
    )
    assert done.report.ok
    assert len(get_trace(store, run_trace).steps) == 2
    assert get_trace(store, run_trace).status == "running"
    state = done.engine.trace_state(run_trace)
    assert state is not None and state.pending_metadata == {
        "m": 1,
        "producer_trace_id": "child-own-id",
        "producer_trace_start": {"agent_name": "inner"},
    }
    other = [t for t in done.trace_ids if t != run_trace]
    assert len(other) == 1 and get_trace(store, other[0]).status == "timeout"


def test_tags_from_the_event_and_the_engine(store: Store, tmp_path: Path) -> None:
    done = record(
        store, tmp_path, [ev("trace_start", agent_name="a", tags=["x"])], tags=["nightly"]
    )
    assert get_trace(store, done.trace_ids[0]).tags == ["x", "nightly"]


def test_producer_step_numbers_are_kept_and_renumbered_on_collision(
    store: Store, tmp_path: Path
) -> None:
    done = record(
        store,
        tmp_path,
        [
            ev("trace_start", agent_name="a"),
            ev("step", step_type="thought", step_number=5),
            ev("step_start", step_type="tool_call", step_number=5),
            ev("step_end", step_number=5, output="closed"),
            ev("step", step_type="thought", caused_by_step=5),
        ],
    )
    steps = get_trace(store, done.trace_ids[0]).steps
    assert [(s.step_number, s.step_type) for s in steps] == [
        (5, "thought"),
        (6, "tool_call"),
        (7, "thought"),
    ]
    assert steps[1].output == "closed"  # step_end's producer number 5 -> our 6
    assert steps[2].caused_by_step == 6


# --- redaction ---------------------------------------------------------------------------

SECRET = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2"


def test_secrets_are_redacted_by_default(store: Store, tmp_path: Path) -> None:
    events = [
        ev("trace_start", agent_name="a", input=f"key {SECRET}"),
        ev("step_start", step_type="tool_call", input={"api_key": "plain-value-123"}, call_id="c"),
        ev("step_end", call_id="c", output=f"echo {SECRET}"),
        ev("step", step_type="thought", output=SECRET),
        ev("trace_end", output=SECRET),
    ]
    done = record(store, tmp_path, events)
    dumped = json.dumps(trace_json(store, done.trace_ids[0]))
    assert SECRET not in dumped and "plain-value-123" not in dumped
    assert "[REDACTED:openai_key]" in dumped and "[REDACTED:secret_field]" in dumped


def test_no_redact_keeps_secrets(store: Store, tmp_path: Path) -> None:
    done = record(
        store,
        tmp_path,
        [ev("trace_start", agent_name="a"), ev("step", step_type="thought", output=SECRET)],
        redact=False,
    )
    assert get_trace(store, done.trace_ids[0]).steps[0].output == SECRET


# --- the recorder's one-pass write -----------------------------------------------------------


def test_record_steps_if_clean_writes_the_rows_one_by_one_recording_would(
    store: Store, clock: FixedClock
) -> None:
    rec = TraceRecorder(store, clock=clock, lenient=True)
    one, two = rec.start_trace("a"), rec.start_trace("a")
    rec.step(one, {"step_type": "thought", "output": "x", "started_at": T(1)})
    rec.start_step(
        one, "tool_call", "t", input={"i": 1}, started_at=T(2), caused_by_step=1, call_id="c"
    )
    rec.end_step(one, call_id="c", output="y", ended_at=T(3), tokens_used=4)
    rec.start_step(one, "llm_call", "open", started_at=T(4), call_id="o")
    assert rec.record_steps_if_clean(
        two,
        [
            (
                {"step_number": 1, "step_type": "thought", "output": "x", "started_at": T(1)},
                None,
                False,
            ),
            (
                {
                    "step_number": 2,
                    "step_type": "tool_call",
                    "name": "t",
                    "input": {"i": 1},
                    "started_at": T(2),
                    "caused_by_step": 1,
                    "output": "y",
                    "ended_at": T(3),
                    "tokens_used": 4,
                },
                "c",
                False,
            ),
            (
                {"step_number": 3, "step_type": "llm_call", "name": "open", "started_at": T(4)},
                "o",
                True,
            ),
        ],
    )
    first, second = trace_json(store, one), trace_json(store, two)
    assert without_ids(first)["steps"] == without_ids(second)["steps"]
    assert rec.find_open_step(two, "o") == 3 and rec.find_open_step(two, "c") is None
    assert list_traces(store).items[0].step_count == 3


@pytest.mark.parametrize(
    "step",
    [
        {"step_number": 1, "step_type": "thought"},  # number already used
        {"step_number": 2, "step_type": "nope"},  # needs a repair
        {"step_number": 2, "step_type": "thought", "caused_by_step": 7},  # missing target
        {"step_number": 2, "step_type": "thought", "parent_step": 2},  # not earlier
    ],
)
def test_record_steps_if_clean_refuses_and_writes_nothing(
    store: Store, step: dict[str, Any]
) -> None:
    rec = TraceRecorder(store, lenient=True)
    trace_id = rec.start_trace("a")
    rec.step(trace_id, {"step_type": "thought"})
    good = {"step_number": 3, "step_type": "thought"}
    assert not rec.record_steps_if_clean(trace_id, [(good, None, False), (step, None, False)])
    assert [s.step_number for s in get_trace(store, trace_id).steps] == [1]
    assert rec.warnings == []


@pytest.mark.sqlite_only  # (a TEMP trigger; PostgreSQL keeps its savepoint)
def test_record_steps_if_clean_in_a_batch_leaves_nothing_when_an_insert_fails(
    store: Store,
) -> None:
    """Inside the caller's transaction there is no savepoint: a failing insert (the database
    refusing a row) still leaves none of the batch's rows behind."""
    rec = TraceRecorder(store, lenient=True)
    trace_id = rec.start_trace("a")
    execute(
        store,
        "CREATE TEMP TRIGGER refuse BEFORE INSERT ON snapshots "
        "BEGIN SELECT RAISE(ABORT, 'disk says no'); END",
    )
    items = [
        ({"step_number": 1, "step_type": "thought", "output": "x"}, None, False),
        ({"step_number": 2, "step_type": "thought", "snapshot": {"tool_state": {}}}, None, False),
    ]
    with store.write():
        with pytest.raises(sqlite3.IntegrityError):
            rec.record_steps_if_clean(trace_id, items)
        left = execute(store, "SELECT COUNT(*) FROM steps WHERE trace_id = ?", [trace_id])
        assert left.fetchone()[0] == 0
    execute(store, "DROP TRIGGER refuse")
    assert rec.record_steps_if_clean(trace_id, items)
    assert [s.step_number for s in get_trace(store, trace_id).steps] == [1, 2]


# --- reading the descriptor --------------------------------------------------------------------


def test_fd_reader_joins_lines_split_across_reads_and_keeps_a_last_unterminated_line() -> None:
    read_fd, write_fd = os.pipe()
    reader = FdReader(read_fd)
    os.write(write_fd, b'{"a": 1}\n{"b"')
    assert reader.wait()
    assert [(n, line) for n, line, _ in reader.lines] == [(1, b'{"a": 1}')]
    reader.lines.clear()
    os.write(write_fd, b': 2}\n\n{"c": 3}')
    os.close(write_fd)
    assert reader.wait()
    while reader.poll():
        pass
    assert [(n, line) for n, line, _ in reader.lines] == [
        (2, b'{"b": 2}'),
        (3, b""),
        (4, b'{"c": 3}'),
    ]
    reader.lines.clear()
    assert not reader.wait() and reader.eof
    os.close(read_fd)


def test_fd_reader_follows_a_growing_file_until_told_the_writer_is_done(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"one\n")
    done = False
    fd = os.open(path, os.O_RDONLY)
    reader = FdReader(fd, follow=lambda: done, poll_s=0.001)
    assert reader.wait() and [(n, line) for n, line, _ in reader.lines] == [(1, b"one")]
    reader.lines.clear()
    assert not reader.poll()  # at the current end, but not finished
    with path.open("ab") as out:
        out.write(b"two\nthr")
    done = True
    got = []
    while reader.wait():
        got.extend(line for _, line, _ in reader.lines)
        reader.lines.clear()
    assert got == [b"two", b"thr"] and reader.eof
    os.close(fd)


def test_an_event_without_a_time_is_stamped_when_its_line_was_read(store: Store) -> None:
    """Live capture stamps the moment a line was read from the pipe (``pump`` sets it), not
    the moment the recorder got to it: a busy batch must not shift the steps' times."""
    engine = EventEngine(store)  # the system clock: stamps are real times
    read_at = 1_767_261_600.25  # 2026-01-01T10:00:00.250Z
    with store.write():
        engine.begin_batch()
        engine.arrived_at = read_at
        engine.feed_line(json.dumps(ev("trace_start", agent_name="a")).encode(), "line 1")
        engine.feed_line(json.dumps(ev("step", step_type="thought")).encode(), "line 2")
        engine.end_batch()
    [trace_id] = engine.report.traces
    trace = get_trace(store, trace_id)
    assert trace.started_at == trace.steps[0].started_at == "2026-01-01T10:00:00.250Z"
