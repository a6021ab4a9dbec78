"""TraceRecorder: step-by-step recording equals ingesting at once, call-id pairing, strict and
lenient link checks, derived totals, and concurrent writers."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.errors import NotFoundError, TraceFormatError, UsageError
from agent_replay.services.ingest import ingest_trace
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store, ensure_database
from agent_replay.store.queries import list_traces, step_count
from agent_replay.store.trace_detail import get_trace, trace_json

T = "2026-01-01T10:00:{:06.3f}Z".format


def without_ids(dump: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in dump.items() if k != "id"}
    out["steps"] = [{k: v for k, v in s.items() if k != "id"} for s in dump["steps"]]
    out["evals"] = [{k: v for k, v in e.items() if k != "id"} for e in dump["evals"]]
    return out


@pytest.fixture
def rec(store: Store, clock: FixedClock) -> TraceRecorder:
    return TraceRecorder(store, clock=clock)


@pytest.fixture
def lenient_rec(store: Store, clock: FixedClock) -> TraceRecorder:
    return TraceRecorder(store, clock=clock, lenient=True)


# --- recorded step by step == ingested at once ---------------------------------------------

DECISION = {
    "options": [
        {"option": "refund", "rationale": "policy allows", "score": 0.8},
        {"option": "escalate", "rationale": None, "score": 0.2},
    ],
    "chosen": "refund",
    "rationale": "order shipped late",
    "confidence": 0.9,
    "decided_by": "agent",
}
SNAPSHOT = {
    "context_window": [{"role": "user", "content": "refund?"}],
    "environment": {"cwd": "/srv", "python": "3.12"},
    "tool_state": {"orders": {"7": "shipped"}},
}


def record_the_trace(rec: TraceRecorder) -> str:
    tid = rec.start_trace(
        "support-bot",
        input={"question": "Can I get a refund?", "order": 7},
        tags=["support", "refunds"],
        session_id="sess-1",
        started_at=T(0),
        agent_version="1.2.0",
        trigger="chat",
        metadata={"region": "eu"},
    )
    rec.step(
        tid,
        {
            "step_type": "thought",
            "name": "plan",
            "output": "look the order up",
            "started_at": T(0.5),
            "ended_at": T(0.75),
            "tokens_used": 12,
        },
    )
    lookup = rec.start_step(
        tid,
        "tool_call",
        "lookup_order",
        input={"id": 7},
        started_at=T(1),
        parent_step=1,
        caused_by_step=1,
        call_id="call-lookup",
    )
    rec.end_step(
        tid,
        call_id="call-lookup",
        output={"status": "shipped", "late": True},
        ended_at=T(2.5),
        metadata={"http": 200},
    )
    rec.start_step(tid, "llm_call", "draft", input="write a reply", started_at=T(3), model="gpt-x")
    rec.end_step(tid, 3, output="Sure, refunded.", ended_at=T(4), tokens_used=100)
    rec.decision(tid, DECISION, name="refund?", started_at=T(4.5), caused_by_step=lookup)
    rec.snapshot(tid, 4, SNAPSHOT)
    rec.end_trace(tid, output="Refund issued.", ended_at=T(5), total_cost_usd=0.0125)
    return tid


INGESTED = {
    "agent_name": "support-bot",
    "agent_version": "1.2.0",
    "trigger": "chat",
    "status": "completed",
    "input": {"question": "Can I get a refund?", "order": 7},
    "output": "Refund issued.",
    "started_at": T(0),
    "ended_at": T(5),
    "total_cost_usd": 0.0125,
    "tags": ["support", "refunds"],
    "session_id": "sess-1",
    "metadata": {"region": "eu"},
    "steps": [
        {
            "step_number": 1,
            "step_type": "thought",
            "name": "plan",
            "output": "look the order up",
            "started_at": T(0.5),
            "ended_at": T(0.75),
            "tokens_used": 12,
        },
        {
            "step_number": 2,
            "step_type": "tool_call",
            "name": "lookup_order",
            "input": {"id": 7},
            "output": {"status": "shipped", "late": True},
            "started_at": T(1),
            "ended_at": T(2.5),
            "parent_step": 1,
            "caused_by_step": 1,
            "metadata": {"http": 200},
        },
        {
            "step_number": 3,
            "step_type": "llm_call",
            "name": "draft",
            "input": "write a reply",
            "output": "Sure, refunded.",
            "started_at": T(3),
            "ended_at": T(4),
            "model": "gpt-x",
            "tokens_used": 100,
        },
        {
            "step_number": 4,
            "step_type": "decision",
            "name": "refund?",
            "started_at": T(4.5),
            "caused_by_step": 2,
            "decision": DECISION,
            "snapshot": SNAPSHOT,
        },
    ],
}


def test_recorded_trace_identical_to_ingested(store: Store, rec: TraceRecorder) -> None:
    recorded = get_trace(store, record_the_trace(rec)).model_dump()
    ingested = get_trace(store, ingest_trace(store, INGESTED).id or "").model_dump()
    assert without_ids(recorded) == without_ids(ingested)
    # the derived values are the expected ones, not merely equal
    assert recorded["total_tokens"] == 112
    assert recorded["total_duration_ms"] == 5000.0
    assert [s["duration_ms"] for s in recorded["steps"]] == [250.0, 1500.0, 1000.0, None]
    assert rec.warnings == []


def test_recorded_export_identical_to_ingested(store: Store, rec: TraceRecorder) -> None:
    """The format's JSON (what export prints) matches too, and so does the list row."""
    rec_id = record_the_trace(rec)
    ing_id = ingest_trace(store, INGESTED).id or ""
    assert without_ids(trace_json(store, rec_id)) == without_ids(trace_json(store, ing_id))
    summaries = {i.id: i for i in list_traces(store).items}
    assert summaries[rec_id].step_count == summaries[ing_id].step_count == 4
    assert step_count(store, rec_id) == 4


OFFSET = "2026-01-01T12:00:{:02d}+02:00".format


def test_recorded_offset_times_identical_to_ingested(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot", started_at=OFFSET(0))
    rec.step(tid, {"step_type": "thought", "started_at": OFFSET(1), "ended_at": OFFSET(2)})
    number = rec.start_step(tid, "tool_call", started_at=OFFSET(3))
    rec.end_step(tid, number, ended_at=OFFSET(4))
    rec.end_trace(tid, ended_at=OFFSET(5))
    ingested = ingest_trace(
        store,
        {
            "agent_name": "bot",
            "started_at": OFFSET(0),
            "ended_at": OFFSET(5),
            "steps": [
                {
                    "step_number": 1,
                    "step_type": "thought",
                    "started_at": OFFSET(1),
                    "ended_at": OFFSET(2),
                },
                {
                    "step_number": 2,
                    "step_type": "tool_call",
                    "started_at": OFFSET(3),
                    "ended_at": OFFSET(4),
                },
            ],
        },
    )
    recorded = get_trace(store, tid)
    assert recorded.metadata["original_times"] == {"started_at": OFFSET(0), "ended_at": OFFSET(5)}
    assert without_ids(recorded.model_dump()) == without_ids(
        get_trace(store, ingested.id or "").model_dump()
    )


def test_recorded_step_offset_times_kept(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    number = rec.start_step(tid, "tool_call", started_at=OFFSET(3))
    rec.end_step(tid, number, ended_at=OFFSET(4))
    step = get_trace(store, tid).steps[0]
    assert step.started_at == "2026-01-01T10:00:03.000Z"
    assert step.metadata == {"original_times": {"started_at": OFFSET(3), "ended_at": OFFSET(4)}}


def test_recorder_uses_clock_for_missing_times(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.step(tid, {"step_type": "thought"})
    rec.end_trace(tid)
    trace = get_trace(store, tid)
    assert trace.started_at == "2026-06-01T12:00:00.000Z"
    assert trace.ended_at == "2026-06-01T12:00:00.000Z"
    assert trace.total_duration_ms == 0.0


def test_open_trace_is_running(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot", trace_id="trc_live")
    assert tid == "trc_live"
    assert get_trace(store, tid).status == "running"
    assert get_trace(store, tid).ended_at is None


def test_start_trace_duplicate_id_refused(rec: TraceRecorder) -> None:
    rec.start_trace("bot", trace_id="trc_once")
    with pytest.raises(UsageError, match="already in the store"):
        rec.start_trace("bot", trace_id="trc_once")


def test_start_trace_strict_validation(store: Store, rec: TraceRecorder) -> None:
    with pytest.raises(TraceFormatError):
        rec.start_trace("")
    assert list_traces(store).items == []


def test_recording_into_missing_trace(rec: TraceRecorder) -> None:
    with pytest.raises(NotFoundError):
        rec.step("trc_nope", {"step_type": "thought"})
    with pytest.raises(NotFoundError):
        rec.start_step("trc_nope", "tool_call")
    with pytest.raises(NotFoundError):
        rec.end_trace("trc_nope")


# --- pairing end_step with start_step ------------------------------------------------------


def test_end_step_paired_by_call_id(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot", started_at=T(0))
    a = rec.start_step(tid, "tool_call", "a", started_at=T(1), call_id="call-a")
    b = rec.start_step(tid, "tool_call", "b", started_at=T(2), call_id="call-b")
    assert (a, b) == (1, 2)
    assert rec.find_open_step(tid, "call-a") == 1
    # results arrive out of order
    assert rec.end_step(tid, call_id="call-b", output="B", ended_at=T(3)) == 2
    assert rec.end_step(tid, call_id="call-a", output="A", ended_at=T(4)) == 1
    steps = {s.step_number: s for s in get_trace(store, tid).steps}
    assert (steps[1].name, steps[1].output, steps[1].duration_ms) == ("a", "A", 3000.0)
    assert (steps[2].name, steps[2].output, steps[2].duration_ms) == ("b", "B", 1000.0)
    assert rec.find_open_step(tid, "call-a") is None
    assert rec.find_open_step(tid, "call-b") is None


def test_closed_call_cannot_be_closed_again(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.start_step(tid, "tool_call", call_id="call-1")
    rec.end_step(tid, call_id="call-1", output=1)
    with pytest.raises(NotFoundError, match="no open step"):
        rec.end_step(tid, call_id="call-1", output=2)


def test_reused_call_id_pairs_with_the_open_one(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.start_step(tid, "tool_call", call_id="same")
    rec.end_step(tid, call_id="same", output="first")
    rec.start_step(tid, "tool_call", call_id="same")
    assert rec.end_step(tid, call_id="same", output="second") == 2
    assert [s.output for s in get_trace(store, tid).steps] == ["first", "second"]


def test_call_ids_are_per_trace(store: Store, rec: TraceRecorder) -> None:
    one = rec.start_trace("bot")
    two = rec.start_trace("bot")
    rec.start_step(one, "tool_call", call_id="c")
    rec.start_step(two, "tool_call", call_id="c")
    rec.end_step(two, call_id="c", output="two")
    assert rec.find_open_step(one, "c") == 1
    assert get_trace(store, one).steps[0].output is None


def test_end_step_needs_number_or_call_id(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.start_step(tid, "tool_call")
    with pytest.raises(UsageError):
        rec.end_step(tid)
    with pytest.raises(NotFoundError):
        rec.end_step(tid, 9)


def test_end_step_keeps_start_fields(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.start_step(tid, "llm_call", "ask", input={"p": 1}, model="m1", metadata={"a": 1})
    rec.end_step(tid, 1, output="x", metadata={"b": 2})
    step = get_trace(store, tid).steps[0]
    assert (step.name, step.input, step.model, step.output) == ("ask", {"p": 1}, "m1", "x")
    assert step.metadata == {"a": 1, "b": 2}


def test_end_step_before_start_refused(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.start_step(tid, "tool_call", started_at=T(5))
    with pytest.raises(TraceFormatError):
        rec.end_step(tid, 1, ended_at=T(4))
    assert get_trace(store, tid).steps[0].ended_at is None


# --- links: strict raises, lenient drops ---------------------------------------------------


def test_strict_caused_by_later_step_raises(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.step(tid, {"step_type": "thought"})
    with pytest.raises(TraceFormatError) as info:
        rec.step(tid, {"step_type": "thought", "step_number": 2, "caused_by_step": 5})
    assert info.value.problems == [
        ("step 2.caused_by_step", "must reference an earlier step (got 5)")
    ]
    assert [s.step_number for s in get_trace(store, tid).steps] == [1]
    assert step_count(store, tid) == 1


def test_strict_caused_by_missing_step_raises(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.step(tid, {"step_type": "thought", "step_number": 1})
    rec.step(tid, {"step_type": "thought", "step_number": 3})
    with pytest.raises(TraceFormatError) as info:
        rec.step(tid, {"step_type": "thought", "caused_by_step": 2})
    assert info.value.problems == [
        ("step 4.caused_by_step", "references step 2, which does not exist")
    ]
    assert step_count(store, tid) == 2


def test_strict_parent_step_to_itself_raises(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    with pytest.raises(TraceFormatError):
        rec.start_step(tid, "thought", parent_step=1)


def test_strict_decision_caused_by_later_raises(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    with pytest.raises(TraceFormatError):
        rec.decision(tid, {"chosen": "a"}, caused_by_step=3)


def test_lenient_drops_bad_link_with_warning(store: Store, lenient_rec: TraceRecorder) -> None:
    tid = lenient_rec.start_trace("bot")
    lenient_rec.step(tid, {"step_type": "thought"})
    number = lenient_rec.step(tid, {"step_type": "thought", "caused_by_step": 7, "parent_step": 1})
    step = get_trace(store, tid).step(number)
    assert step is not None
    assert (step.caused_by_step, step.parent_step) == (None, 1)
    assert lenient_rec.warnings == [
        "step 2.caused_by_step: must reference an earlier step (got 7); dropped"
    ]


def test_lenient_coerces_link_strings(store: Store, lenient_rec: TraceRecorder) -> None:
    tid = lenient_rec.start_trace("bot")
    lenient_rec.step(tid, {"step_type": "thought"})
    number = lenient_rec.step(tid, {"step_type": "thought", "caused_by_step": "1"})
    step = get_trace(store, tid).step(number)
    assert step is not None and step.caused_by_step == 1


def test_strict_start_step_refuses_step_number_zero(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    with pytest.raises(TraceFormatError):
        rec.start_step(tid, "thought", step_number=0)


def test_strict_step_refuses_step_number_zero(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    with pytest.raises(TraceFormatError):
        rec.step(tid, {"step_type": "thought", "step_number": 0})


def test_strict_duplicate_step_number_refused(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.step(tid, {"step_type": "thought", "step_number": 1})
    with pytest.raises(UsageError, match="already exists"):
        rec.step(tid, {"step_type": "output", "step_number": 1})
    assert [s.step_type for s in get_trace(store, tid).steps] == ["thought"]


def test_lenient_duplicate_step_number_renumbered(store: Store, lenient_rec: TraceRecorder) -> None:
    tid = lenient_rec.start_trace("bot")
    lenient_rec.step(tid, {"step_type": "thought", "step_number": 1})
    assert lenient_rec.step(tid, {"step_type": "output", "step_number": 1}) == 2
    assert [s.step_type for s in get_trace(store, tid).steps] == ["thought", "output"]
    assert len(lenient_rec.warnings) == 1


def test_lenient_coerces_and_drops_unknown(store: Store, lenient_rec: TraceRecorder) -> None:
    tid = lenient_rec.start_trace("bot")
    number = lenient_rec.step(
        tid, {"step_type": "tool_call", "tokens_used": "40", "vendor_field": {"x": 1}}
    )
    step = get_trace(store, tid).step(number)
    assert step is not None and step.tokens_used == 40
    assert any("vendor_field" in w for w in lenient_rec.warnings)


def test_strict_step_rejects_unknown_field(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    with pytest.raises(TraceFormatError) as info:
        rec.step(tid, {"step_type": "thought", "vendor_field": 1})
    assert any(msg == "unknown field" for _, msg in info.value.problems)


# --- decisions and snapshots ---------------------------------------------------------------


def test_decision_attached_to_existing_decision_step(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.step(tid, {"step_type": "decision", "decision": {"chosen": "a"}})
    assert rec.decision(tid, DECISION, step_number=1) == 1
    trace = get_trace(store, tid)
    assert len(trace.steps) == 1
    assert trace.steps[0].decision.model_dump() == DECISION  # type: ignore[union-attr]


def test_decision_on_non_decision_step_refused(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.step(tid, {"step_type": "tool_call"})
    with pytest.raises(TraceFormatError):
        rec.decision(tid, {"chosen": "a"}, step_number=1)


def test_decision_chosen_must_be_an_option(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    with pytest.raises(TraceFormatError):
        rec.decision(tid, {"options": [{"option": "a"}], "chosen": "b"})


def test_snapshot_replaced(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    rec.step(tid, {"step_type": "thought"})
    rec.snapshot(tid, 1, {"context_window": "first"})
    rec.snapshot(tid, 1, SNAPSHOT)
    assert get_trace(store, tid).steps[0].snapshot.model_dump() == SNAPSHOT  # type: ignore[union-attr]
    count = store.db.execute_sql("SELECT COUNT(*) FROM snapshots").fetchone()[0]
    assert count == 1


def test_snapshot_of_missing_step(rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    with pytest.raises(NotFoundError):
        rec.snapshot(tid, 3, SNAPSHOT)


# --- end_trace ------------------------------------------------------------------------------


def test_end_trace_derives_totals(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot", started_at=T(0))
    rec.step(tid, {"step_type": "llm_call", "tokens_used": 30})
    rec.step(tid, {"step_type": "thought"})
    rec.step(tid, {"step_type": "llm_call", "tokens_used": 12})
    rec.end_trace(tid, ended_at=T(2.25), status="failed", error="boom")
    trace = get_trace(store, tid)
    assert trace.total_tokens == 42
    assert trace.total_duration_ms == 2250.0
    assert (trace.status, trace.error) == ("failed", "boom")


def test_end_trace_costs_the_priced_steps_and_counts_the_unpriced_calls(
    store: Store, rec: TraceRecorder
) -> None:
    """Without a producer total, the trace costs its steps' costs; an ``llm_call`` whose
    model has no price is counted as unpriced (the same figures ingest derives)."""
    tid = rec.start_trace("bot", started_at=T(0))
    rec.step(tid, {"step_type": "tool_call", "metadata": {"cost_usd": 0.25}})
    rec.step(tid, {"step_type": "llm_call", "metadata": {"cost_usd": 0.5}})
    unknown = {"input_tokens": 10, "output_tokens": 5}
    rec.step(tid, {"step_type": "llm_call", "model": "no-such-model-x", "metadata": unknown})
    rec.end_trace(tid, ended_at=T(1))
    trace = get_trace(store, tid)
    assert trace.total_cost_usd == 0.75
    assert trace.metadata["cost_from_steps"] == 2
    assert trace.metadata["cost_unpriced_steps"] == 1


def test_end_trace_without_token_counts_leaves_none(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot", started_at=T(0))
    rec.step(tid, {"step_type": "thought"})
    rec.end_trace(tid, ended_at=T(1))
    assert get_trace(store, tid).total_tokens is None


def test_end_trace_keeps_explicit_totals(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot", started_at=T(0))
    rec.step(tid, {"step_type": "llm_call", "tokens_used": 30})
    rec.end_trace(tid, ended_at=T(1), total_tokens=5, total_duration_ms=7.5)
    trace = get_trace(store, tid)
    assert (trace.total_tokens, trace.total_duration_ms) == (5, 7.5)


def test_end_trace_merges_metadata(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot", metadata={"a": 1, "b": 1})
    rec.end_trace(tid, metadata={"b": 2, "c": 3})
    assert get_trace(store, tid).metadata == {"a": 1, "b": 2, "c": 3}


def test_end_trace_refuses_bad_status(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot")
    with pytest.raises(TraceFormatError):
        rec.end_trace(tid, status="finished")
    assert get_trace(store, tid).status == "running"


def test_end_trace_before_start_refused(store: Store, rec: TraceRecorder) -> None:
    tid = rec.start_trace("bot", started_at=T(5))
    with pytest.raises(TraceFormatError):
        rec.end_trace(tid, ended_at=T(1))
    assert get_trace(store, tid).status == "running"


# --- concurrent writers ---------------------------------------------------------------------

WORKERS = 4
STEPS_EACH = 15


def _record_steps(target: str, trace_id: str, worker: int, start: Any) -> list[int]:
    """One writer with its own connection; alternates whole steps and start/end pairs."""
    db = ensure_database(target)
    try:
        rec = TraceRecorder(db)
        start.wait()
        numbers = []
        for i in range(STEPS_EACH):
            if i % 2:
                call = f"w{worker}-{i}"
                number = rec.start_step(trace_id, "tool_call", call, call_id=call)
                rec.end_step(trace_id, call_id=call, output=call)
            else:
                number = rec.step(trace_id, {"step_type": "thought", "name": f"w{worker}-{i}"})
            numbers.append(number)
        return numbers
    finally:
        db.close()


def _process_entry(target: str, trace_id: str, worker: int, start: Any, out: Any) -> None:
    out.put((worker, _record_steps(target, trace_id, worker, start)))


def _check_concurrent_result(store: Store, trace_id: str, results: dict[int, list[int]]) -> None:
    total = WORKERS * STEPS_EACH
    every = sorted(n for numbers in results.values() for n in numbers)
    assert every == list(range(1, total + 1))
    for numbers in results.values():
        assert numbers == sorted(numbers)  # each writer sees its own steps in order
    trace = get_trace(store, trace_id)
    assert [s.step_number for s in trace.steps] == list(range(1, total + 1))
    assert step_count(store, trace_id) == total
    names = {s.name for s in trace.steps}
    assert names == {f"w{w}-{i}" for w in range(WORKERS) for i in range(STEPS_EACH)}
    for s in trace.steps:
        if s.step_type == "tool_call":
            assert s.output == s.name  # each result paired with its own call


def test_concurrent_processes_get_unique_consecutive_numbers(store_dir: Path, store: Store) -> None:
    trace_id = TraceRecorder(store).start_trace("bot")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_process_entry, args=(store.target, trace_id, w, start, out))
        for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    start.set()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    _check_concurrent_result(store, trace_id, results)


def test_concurrent_threads_get_unique_consecutive_numbers(store_dir: Path, store: Store) -> None:
    trace_id = TraceRecorder(store).start_trace("bot")
    start = threading.Event()
    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def run(worker: int) -> None:
        try:
            results[worker] = _record_steps(store.target, trace_id, worker, start)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(WORKERS)]
    for t in threads:
        t.start()
    start.set()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    _check_concurrent_result(store, trace_id, results)
