"""What ``agent-replay doctor`` reads from the store: a harness's newest hook trace and its tool
calls without a pre-tool event, the hook payloads waiting, and the importers' skipped records
(format drift)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_replay.services.doctor import drift, last_payload, pending_payloads
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store
from agent_replay.store.models import HookInboxRow, StepRow


def test_last_payload_is_the_newest_hook_trace_and_its_unpaired_tool_calls(
    store: Store, make_trace: Callable[..., dict[str, Any]]
) -> None:
    assert last_payload(store, "claude") is None
    older = make_trace(2, id="trc_older", session_id="s1", started_at="2026-01-01T09:00:00.000Z")
    ingest_trace(store, older, source_format="claude-code-hook")
    # Steps 2 and 7 are tool calls (make_trace cycles through five step types).
    newer = make_trace(7, id="trc_newer", session_id="s2", status="running")
    ingest_trace(store, newer, source_format="claude-code-hook")
    ingest_trace(store, make_trace(1, id="trc_codex"), source_format="codex-hook")
    with store.write():
        StepRow.update(call_id="call_1").where(
            (StepRow.trace_id == "trc_newer") & (StepRow.step_number == 2)
        ).execute(store.db)
    found = last_payload(store, "claude")
    assert found == {
        "trace_id": "trc_newer",
        "session_id": "s2",
        "trace_status": "running",
        "at": newer["steps"][-1]["started_at"],
        "last_step": "tool_call step-7",
        "tool_calls": 2,
        "tool_calls_without_pre_tool": 1,
    }
    assert last_payload(store, "gemini") is None


def test_pending_counts_the_hook_inbox(store: Store) -> None:
    assert pending_payloads(store) == 0
    with store.write():
        HookInboxRow.insert_many(
            [(1, "{}", "{}"), (2, "{}", "{}")],
            fields=[HookInboxRow.received_ms, HookInboxRow.payload, HookInboxRow.options],
        ).execute(store.db)
    assert pending_payloads(store) == 2


def test_drift_sums_the_kinds_each_importer_skipped(
    store: Store, make_trace: Callable[..., dict[str, Any]]
) -> None:
    def imported(trace_id: str, fmt: str, version: str, skipped: dict[str, int]) -> None:
        source: dict[str, Any] = {"format": fmt, "version": version}
        if skipped:
            source |= {"skipped_records": sum(skipped.values()), "skipped_kinds": skipped}
        trace = make_trace(1, id=trace_id, metadata={"source": source})
        ingest_trace(store, trace, source_format=fmt)

    imported("trc_c1", "claude-transcript", "2.1.0", {"new-kind": 3})
    imported("trc_c2", "claude-transcript", "2.2.0", {"new-kind": 1, "other": 2})
    imported("trc_c3", "claude-transcript", "2.2.0", {})
    imported("trc_g1", "gemini-chat", "0.9", {"x": 1})
    imported("trc_hook", "claude-code-hook", "2.2.0", {"ignored": 5})
    assert [d.to_json() for d in drift(store)] == [
        {
            "format": "claude-transcript",
            "sessions": 2,
            "records": 6,
            "kinds": {"new-kind": 4, "other": 2},
            "harness_versions": ["2.1.0", "2.2.0"],
        },
        {
            "format": "gemini-chat",
            "sessions": 1,
            "records": 1,
            "kinds": {"x": 1},
            "harness_versions": ["0.9"],
        },
    ]
