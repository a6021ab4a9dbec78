"""The OTLP writer stores only what changed when a batch rebuilds a trace already stored (a
long session, batch after batch): the stored trace is the one built from everything at once,
in whatever order the items came; steps that did not change are not written again; what
belongs to the trace rather than to one build of it (evals, annotations) stays. On both
backends (the ``store`` fixture)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from otelkit import harness_payloads
from peewee import SQL

from agent_replay.services.ingest import ingest_trace
from agent_replay.services.otel import normalize
from agent_replay.services.otel.protocol import parse_request
from agent_replay.services.otel.writer_process import BatchWriter
from agent_replay.services.redact import redact_value
from agent_replay.store.db import Store, ensure_database
from agent_replay.store.models import AnnotationRow, EvalRow, StepRow, TraceRow
from agent_replay.store.trace_detail import trace_json

NOW_MS = 1_780_000_000_000
_IDS = ("prompt.id", "request_id", "tool_use_id", "message.uuid", "event.sequence")


def session_records(copies: int) -> list[dict[str, Any]]:
    """Claude Code's log records of one real session, ``copies`` times in a row (each copy
    later, with its own ids): one long session, as the receiver stages it."""
    one: list[dict[str, Any]] = []
    for payload in harness_payloads("claude-code"):
        if payload.path.endswith("/logs"):
            message = parse_request("logs", payload.headers["Content-Type"], payload.body)
            one += normalize.logs_from(message, redact_value).logs
    times = [r["time_ns"] for r in one if r.get("time_ns")]
    width = max(times) - min(times) + 1_000_000_000
    out = []
    for n in range(copies):
        for record in one:
            item = copy.deepcopy(record)
            item["key"] = f"{record['key']}-{n}"
            for name in ("time_ns", "observed_ns"):
                if item.get(name):
                    item[name] += n * width
            for name in _IDS:
                if name in item["attributes"]:
                    item["attributes"][name] = f"{item['attributes'][name]}-{n}"
            out.append(item)
    return out


def write(store: Store, batches: list[list[dict[str, Any]]]) -> BatchWriter:
    target = store.target if store.url else store.path
    writer = BatchWriter(target if store.url else Path(target), log=print)
    opened = writer.open(lambda: True)
    assert opened is not None
    try:
        for batch in batches:
            writer.write_batch(opened, [], batch, NOW_MS)
    finally:
        opened.close()
    assert writer.stats.build_errors == writer.stats.write_errors == 0
    return writer


def only_trace(store: Store) -> dict[str, Any]:
    (trace_id,) = TraceRow.select(TraceRow.id).tuples().execute(store.db)
    return trace_json(store, trace_id[0])


def step_places(store: Store) -> dict[str, int]:
    """Each step's place in the table (SQLite's rowid, PostgreSQL's arrival sequence): a
    step written again gets a new one."""
    place = SQL("rowid") if store.is_sqlite else SQL("seq")
    return dict(StepRow.select(StepRow.id, place).tuples().execute(store.db))


def test_a_session_written_batch_by_batch_is_the_session_written_at_once(
    store: Store, tmp_path: Path
) -> None:
    records = session_records(3)
    batches = [records[start : start + 5] for start in range(0, len(records), 5)]
    # Latest first: every batch puts steps before the stored ones (all renumbered).
    write(store, batches[::-1])
    reference = ensure_database(tmp_path / "reference")
    try:
        write(reference, [records])
        built, expected = only_trace(store), only_trace(reference)
    finally:
        reference.close()
    assert len(built["steps"]) > 20
    assert built == expected


def test_steps_that_did_not_change_are_not_written_again(store: Store, make_trace: Any) -> None:
    records = session_records(4)
    half = len(records) // 2
    write(store, [records[:half]])
    before = step_places(store)
    ingest_trace(store, make_trace(3))  # rows after the session's: a step written again moves
    write(store, [records[half:]])
    after = step_places(store)
    assert len(after) > len(before) + 3
    kept = [step_id for step_id in before if after.get(step_id) == before[step_id]]
    # The last turn of the first half may change (a record of it can come later); the rest
    # of the session is left alone.
    assert len(kept) >= len(before) - 3


def test_what_belongs_to_the_trace_stays_when_it_is_rebuilt(store: Store) -> None:
    records = session_records(2)
    write(store, [records[:10]])
    trace_id = only_trace(store)["id"]
    AnnotationRow.insert(id="ann_1", trace_id=trace_id, label="good").execute(store.db)
    EvalRow.insert(id="evl_1", trace_id=trace_id, evaluator="manual", score=1.0, passed=1).execute(
        store.db
    )
    write(store, [records[10:]])
    trace = only_trace(store)
    assert [a["label"] for a in trace["annotations"]] == ["good"]
    assert [e["evaluator"] for e in trace["evals"]] == ["manual"]
    assert len(trace["steps"]) > 10
