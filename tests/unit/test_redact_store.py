"""``redact_store.scrub``: today's rules applied to rows already stored, table by table in
primary-key batches (a composite key too), on SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
from typing import Any

from agent_replay.services.ingest import ingest_trace
from agent_replay.services.redact_store import TABLES, scrub, text_columns
from agent_replay.store.db import Store
from agent_replay.store.models import OtelSpanRow, StepRow, TraceRow
from agent_replay.store.trace_detail import trace_json

TOKEN = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


def _trace(trace_id: str, steps: int = 5) -> dict[str, Any]:
    return {
        "id": trace_id,
        "agent_name": "old-build",
        "input": f"export GITHUB_TOKEN={TOKEN}",
        "steps": [
            {
                "step_number": n,
                "step_type": "tool_call",
                "name": "sh",
                "input": {"cmd": f"echo {TOKEN}" if n % 2 else "ls"},
                "output": "ordinary words",
            }
            for n in range(1, steps + 1)
        ],
    }


def _spans(store: Store, count: int) -> None:
    rows = [
        ("0" * 31 + str(n // 3), f"span{n % 3}", "group", 0, json.dumps({"cmd": f"echo {TOKEN}"}))
        for n in range(count)
    ]
    fields = [
        OtelSpanRow.otel_trace_id,
        OtelSpanRow.span_id,
        OtelSpanRow.group_key,
        OtelSpanRow.received_ms,
        OtelSpanRow.data,
    ]
    with store.write():
        OtelSpanRow.insert_many(rows, fields=fields).execute(store.db)


def test_scrub_redacts_every_batch_and_reports_each_table(store: Store) -> None:
    """Batches of two: every row of every table is looked at once, each secret replaced."""
    ingest_trace(store, _trace("trc_scrubbed"), redact=False)
    _spans(store, 7)
    seen: list[tuple[str, int]] = []
    report = scrub(store, progress=lambda table, n: seen.append((table, n)), batch=2)
    assert report.rows["traces"] == 1 and report.rows["steps"] == 3
    assert report.rows["otel_spans"] == 7  # the composite key's keyset visits each row once
    assert report.kinds == {"github_token": 1 + 3 + 7}
    assert [n for table, n in seen if table == "steps"] == [2, 4, 5]
    assert [n for table, n in seen if table == "otel_spans"] == [2, 4, 6, 7]
    stored = json.dumps(trace_json(store, "trc_scrubbed"))
    assert TOKEN not in stored and "ordinary words" in stored
    spans = OtelSpanRow.select(OtelSpanRow.data).tuples().execute(store.db)
    assert all(TOKEN not in data for (data,) in spans)
    assert report.reclaimed in ("vacuum", "vacuum_analyze")


def test_a_dry_run_counts_and_changes_nothing(store: Store) -> None:
    ingest_trace(store, _trace("trc_dry", steps=2), redact=False)
    report = scrub(store, dry_run=True)
    assert report.rows["steps"] == 1 and report.kinds["github_token"] == 2
    assert report.reclaimed == "none"
    assert TOKEN in json.dumps(trace_json(store, "trc_dry"))


def test_a_trace_filter_scrubs_only_those_traces(store: Store) -> None:
    """Other traces, and the rows of no trace (OTLP staging), are left as they are."""
    ingest_trace(store, _trace("trc_wanted", steps=2), redact=False)
    ingest_trace(store, _trace("trc_other", steps=2), redact=False)
    _spans(store, 2)
    report = scrub(store, ["trc_wanted"], batch=3)
    assert "otel_spans" not in report.rows and report.rows["steps"] == 1
    assert TOKEN not in json.dumps(trace_json(store, "trc_wanted"))
    assert TOKEN in json.dumps(trace_json(store, "trc_other"))
    other = StepRow.select(StepRow.input).where(StepRow.trace_id == "trc_other")
    assert any(TOKEN in text for (text,) in other.tuples().execute(store.db))


def test_text_columns_are_the_producer_text() -> None:
    """Ids, times, digests and the fixed vocabularies are never rewritten."""
    names = [f.column_name for f in text_columns(TraceRow)]
    assert names == [
        "agent_name",
        "agent_version",
        "trigger",
        "input",
        "output",
        "error",
        "metadata",
        "source_format",
    ]
    assert all(text_columns(model) for model in TABLES)
