"""An importer's record that the recorder refuses is one skipped record, never a failed
import: ``SessionWriter`` raises ``RecordRejected`` (a ``ValueError``, which every parser
counts as a malformed record) and the steps around it land."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_replay.services.capture.session_writer import RecordRejected, SessionWriter
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import get_trace


def test_a_refused_record_is_a_value_error_and_its_neighbours_land(
    store: Store, tmp_path: Path
) -> None:
    writer = SessionWriter(
        store,
        path=tmp_path / "session.jsonl",
        source_format="codex-rollout",
        agent_name="codex",
        session_id="s-1",
        tags=[],
        redact=True,
        clock=None,
    )
    writer.add_step("thought", "before")
    with pytest.raises(ValueError) as refused:
        writer.add_step("not_a_type", "odd")
    assert isinstance(refused.value, RecordRejected) and "step_type" in str(refused.value)
    with pytest.raises(RecordRejected):
        writer.close_step(99, output="nothing to close")
    writer.add_step("output", "after", output="done")
    writer.finish(status="completed")
    assert writer.trace_id is not None
    trace = get_trace(store, writer.trace_id)
    assert [(s.step_number, s.name) for s in trace.steps] == [(1, "before"), (2, "after")]
