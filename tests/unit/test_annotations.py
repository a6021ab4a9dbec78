"""Annotations: a person's label (note, score) on a run or a step, written through the recorder
(validated, redacted), read back in the trace object, filtered by label, carried by ingest and
by ``push`` into a team store, turned into a golden set, and deleted with their trace. Each test
runs on SQLite and PostgreSQL (the ``store`` fixture)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.errors import NotFoundError, TraceFormatError
from agent_replay.services.demo import load_demo
from agent_replay.services.golden import export_golden
from agent_replay.services.ingest import ingest_many, ingest_trace
from agent_replay.services.prune import remove
from agent_replay.services.push import push
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.core import execute
from agent_replay.store.db import Store, ensure_database
from agent_replay.store.queries import TraceFilter, list_traces
from agent_replay.store.trace_detail import trace_json
from agent_replay.trace.validate import validate_trace

SECRET = "ghp_" + "a1B2" * 10


def test_annotations_on_a_run_and_a_step_read_back_in_order(
    store: Store, clock: FixedClock, make_trace: Any
) -> None:
    """Each annotation gets an id and a time; the trace object lists them oldest first."""
    ingest_trace(store, make_trace(3, id="trc_a"))
    recorder = TraceRecorder(store, clock=clock)
    first = recorder.annotate("trc_a", label=" good ", note="solid", score=0.9, author="ana")
    second = recorder.annotate("trc_a", label="wrong-tool", step_number=2)
    assert first["id"].startswith("ann_") and first["label"] == "good"
    assert first["created_at"] == "2026-06-01T12:00:00.000Z"
    assert trace_json(store, "trc_a")["annotations"] == [first, second]
    assert second == {**second, "step_number": 2, "note": None, "score": None, "author": None}
    window = trace_json(store, "trc_a", from_step=3)["annotations"]
    assert window == [first]  # the run's annotation, not step 2's


def test_an_annotation_is_checked_and_redacted(
    store: Store, clock: FixedClock, make_trace: Any
) -> None:
    """A blank label, a missing trace or step is refused; a secret in the note never lands."""
    ingest_trace(store, make_trace(2, id="trc_b"))
    recorder = TraceRecorder(store, clock=clock)
    with pytest.raises(TraceFormatError):
        recorder.annotate("trc_b", label="   ")
    with pytest.raises(NotFoundError, match="no step 9"):
        recorder.annotate("trc_b", label="x", step_number=9)
    with pytest.raises(NotFoundError):
        recorder.annotate("trc_missing", label="x")
    assert trace_json(store, "trc_b")["annotations"] == []
    recorder.annotate("trc_b", label="leak", note=f"token={SECRET}")
    rows = execute(store, "SELECT note FROM annotations").fetchall()
    assert SECRET not in str(rows) and "[REDACTED:" in rows[0][0]


def test_list_filters_by_label(store: Store, clock: FixedClock) -> None:
    """``label`` finds runs annotated on the run or on a step, each once."""
    load_demo(store, clock)
    recorder = TraceRecorder(store, clock=clock)
    recorder.annotate("trc_demo4goodrun", label="good")
    recorder.annotate("trc_demo1ungrounded", label="good", step_number=2)
    recorder.annotate("trc_demo1ungrounded", label="good", step_number=3)
    recorder.annotate("trc_demo2toolchain", label="bad")
    page = list_traces(store, TraceFilter(label="good"))
    assert [s.id for s in page.items] == ["trc_demo4goodrun", "trc_demo1ungrounded"]


def test_annotations_travel_with_ingest_and_a_missing_step_is_refused(store: Store) -> None:
    """The trace format carries annotations: ingest writes them with their ids; one naming a
    step the trace lacks is a problem with its path."""
    trace = {
        "id": "trc_c",
        "agent_name": "a",
        "steps": [{"step_number": 1, "step_type": "thought"}],
        "annotations": [
            {"id": "ann_fixed1", "label": "good", "created_at": "2026-01-01T00:00:00Z"},
            {"label": "typo", "step_number": 1, "note": "n"},
        ],
    }
    ingest_trace(store, trace)
    stored = trace_json(store, "trc_c")["annotations"]
    assert [a["label"] for a in stored] == ["typo", "good"]  # untimed first, then by time
    assert stored[1]["id"] == "ann_fixed1" and stored[0]["id"].startswith("ann_")
    bad = {**trace, "id": "trc_d", "annotations": [{"label": "x", "step_number": 5}]}
    report = ingest_many(store, [("line 1", bad)])
    (rejection,) = report.rejected
    assert ("annotations[0].step_number", "references step 5, which does not exist") in (
        rejection.problems
    )
    lenient = validate_trace(bad, lenient=True)
    assert lenient.trace.annotations[0].step_number is None and lenient.warnings


def test_push_carries_annotations_and_keeps_the_team_stores_own(
    store: Store, tmp_path: Path, clock: FixedClock
) -> None:
    """Annotations survive push; one added locally later re-pushes the trace; one a teammate
    made on the team store stays."""
    local = ensure_database(tmp_path / "laptop")
    try:
        load_demo(local, clock)
        mine = TraceRecorder(local, clock=clock)
        first = mine.annotate("trc_demo4goodrun", label="good", note="reference")
        assert push(local, store).new
        assert trace_json(store, "trc_demo4goodrun")["annotations"] == [first]
        theirs = TraceRecorder(store, clock=clock).annotate(
            "trc_demo4goodrun", label="agree", author="teammate"
        )
        again = push(local, store)
        assert again.new == [] and again.updated == []
        second = mine.annotate("trc_demo4goodrun", label="golden", step_number=2)
        later = push(local, store)
        assert later.updated == ["trc_demo4goodrun"]
        labels = [a["label"] for a in trace_json(store, "trc_demo4goodrun")["annotations"]]
        assert sorted(labels) == ["agree", "golden", "good"]
        assert {a["id"] for a in trace_json(store, "trc_demo4goodrun")["annotations"]} == {
            first["id"],
            second["id"],
            theirs["id"],
        }
    finally:
        local.close()


def test_golden_set_from_hand_approved_runs(store: Store, clock: FixedClock) -> None:
    """``export --format golden --label good``: exactly the runs a person labelled good."""
    load_demo(store, clock)
    TraceRecorder(store, clock=clock).annotate("trc_demo4goodrun", label="good")
    out = io.BytesIO()
    count = export_golden(store, TraceFilter(label="good"), None, stream=out, clock=clock)
    assert count == 1
    golden = json.loads(out.getvalue())
    assert [run["trace_id"] for run in golden["runs"]] == ["trc_demo4goodrun"]


def test_annotations_go_with_their_trace(store: Store, clock: FixedClock) -> None:
    """Deleting a trace deletes its annotations, and says how many."""
    load_demo(store, clock)
    TraceRecorder(store, clock=clock).annotate("trc_demo1ungrounded", label="bad")
    report = remove(store, ["trc_demo1ungrounded"])
    assert report.counts.annotations == 1
    assert execute(store, "SELECT COUNT(*) FROM annotations").fetchone()[0] == 0
