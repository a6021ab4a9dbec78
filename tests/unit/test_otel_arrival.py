"""Arrival order and retries: a batch delivered twice adds nothing; spans of one trace arriving
over several requests, children before parents, merge into one trace with the right hierarchy;
a rebuilt trace keeps its id, its evals and its first-seen time."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from otelkit import (
    Payload,
    all_payloads,
    count,
    otlp_payload,
    post_all,
    receiving,
    shape,
    span,
    traces,
    traces_payload,
)

from agent_replay.services.otel.build import trace_id_for
from agent_replay.store.core import execute

WEATHER_ID = "23c11c66e93ed00bec72a044ccf095d2"  # fixture 0005's OTel trace


def split_spans(payload: Payload) -> list[Payload]:
    """One request per span of an OTLP/JSON traces payload, latest-starting span first (so
    children come before their parent)."""
    data = json.loads(payload.body)
    resource = data["resourceSpans"][0]
    scope = resource["scopeSpans"][0]
    spans = sorted(scope["spans"], key=lambda s: -int(s["startTimeUnixNano"]))
    out = []
    for item in spans:
        one = {
            "resourceSpans": [
                {"resource": resource["resource"], "scopeSpans": [{**scope, "spans": [item]}]}
            ]
        }
        out.append(Payload(item["name"], payload.path, json.dumps(one).encode(), payload.headers))
    return out


def test_redelivery_adds_nothing(store_dir: Path) -> None:
    """Every fixture posted twice (an exporter retry): same traces, same rows, same ids."""
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, all_payloads())
        first = traces(store)
        rows = {t: count(store, t) for t in ("traces", "steps", "otel_spans", "otel_logs")}
        staged = receiver.writer.stats.spans_staged, receiver.writer.stats.logs_staged
        post_all(client, receiver, all_payloads())
        assert traces(store) == first
        assert {t: count(store, t) for t in rows} == rows
        assert (receiver.writer.stats.spans_staged, receiver.writer.stats.logs_staged) == staged


def test_duplicate_log_records_in_one_request_count_once(store_dir: Path) -> None:
    """The same Claude Code record twice in a request is one step, its tokens counted once."""
    from otelkit import harness_payloads

    (payload,) = [p for p in harness_payloads("claude-code") if p.name.endswith("0005-logs.json")]
    data = json.loads(payload.body)
    records = data["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    records.extend(list(records))
    doubled = Payload("doubled", payload.path, json.dumps(data).encode(), payload.headers)
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, [doubled])
        (trace,) = traces(store)
    assert trace["total_tokens"] == 2250
    assert [s["step_type"] for s in trace["steps"]] == ["llm_call", "output"]


def test_children_before_parents_merge_into_one_trace(tmp_path: Path) -> None:
    """Fixture 0005 one span per request, children first: until the agent root comes the
    spans form a running trace; then the same trace id holds the agent's trace, identical to
    the one built from a single request."""
    with receiving(tmp_path / "whole") as (receiver, client, store):
        post_all(client, receiver, [otlp_payload("0005")])
        (expected,) = traces(store)
    parts = split_spans(otlp_payload("0005"))
    assert parts[-1].name == "invoke_agent weather_agent"
    with receiving(tmp_path / "split") as (receiver, client, store):
        post_all(client, receiver, parts[:-1])
        (partial,) = traces(store)
        assert partial["id"] == trace_id_for(f"t:{WEATHER_ID}")
        assert partial["status"] == "running"  # the parent of every span is still missing
        assert partial["agent_name"] == "weather-agent-manual"  # the service, for now
        assert len(partial["steps"]) == 4
        post_all(client, receiver, parts[-1:])
        (merged,) = traces(store)
    assert merged == expected
    assert merged["status"] == "completed"
    assert merged["agent_name"] == "weather_agent"


def test_deep_hierarchy_out_of_order_and_skewed(store_dir: Path) -> None:
    """A grandchild, then its parent, then the root, in separate requests; the child's clock
    says it started before its parent: parents still come first, links are right."""
    root = span(
        "a1",
        "1",
        "invoke_agent planner",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
        start=0,
        end=10,
    )
    step = span("a1", "2", "plan", {}, parent="1", start=1, end=9)
    call = span(
        "a1",
        "3",
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": 5,
            "gen_ai.usage.output_tokens": 2,
        },
        parent="2",
        start=0.5,
        end=2,
    )  # skewed: "before" its parent
    tool = span(
        "a1",
        "4",
        "execute_tool grep",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"},
        parent="2",
        start=3,
        end=4,
    )
    with receiving(store_dir) as (receiver, client, store):
        for spans in ([tool], [call], [step], [root]):
            post_all(client, receiver, [traces_payload(*spans)])
        (trace,) = traces(store)
    assert trace["agent_name"] == "planner"
    assert shape(trace) == [
        ("thought", "plan", None),
        ("llm_call", "chat m", 1),
        ("tool_call", "grep", 1),
    ]
    assert trace["total_tokens"] == 7


def test_logs_before_their_spans_count_tokens_once(tmp_path: Path) -> None:
    """GenAI log records (0006) arriving before their spans (0005) end up merged into the
    span steps: the same trace as spans-then-logs, 138 tokens."""
    built = []
    for name, order in (("a", ["0005", "0006"]), ("b", ["0006", "0005"])):
        with receiving(tmp_path / name) as (receiver, client, store):
            post_all(client, receiver, [otlp_payload(n) for n in order])
            built.append(traces(store))
    assert built[0] == built[1]
    (trace,) = built[0]
    assert trace["total_tokens"] == 138


def test_a_late_agent_root_moves_spans_out_of_a_session(store_dir: Path) -> None:
    """Spans that declare agent and session but have no agent root yet are grouped by
    session; when their invoke_agent root arrives they move to their own trace, and the
    session trace they left is rebuilt without them (deleted when empty)."""
    attrs = {"gen_ai.agent.name": "helper", "gen_ai.conversation.id": "conv-9"}
    child = span(
        "b7", "2", "chat m", {**attrs, "gen_ai.operation.name": "chat"}, parent="1", start=1, end=2
    )
    root = span(
        "b7",
        "1",
        "invoke_agent helper",
        {**attrs, "gen_ai.operation.name": "invoke_agent"},
        start=0,
        end=3,
    )
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, [traces_payload(child)])
        (before,) = traces(store)
        assert before["metadata"]["otel"]["group"] == "s:test-app:conv-9"
        post_all(client, receiver, [traces_payload(root)])
        (after,) = traces(store)
    assert after["metadata"]["otel"]["group"] == f"t:{'b7'.rjust(32, '0')}"
    assert after["agent_name"] == "helper"
    assert after["session_id"] == "conv-9"
    assert shape(after) == [("llm_call", "chat m", None)]


def test_rebuild_keeps_evals_and_first_seen_time(store_dir: Path) -> None:
    """An eval stored on an OTLP trace survives the rebuild more spans cause."""
    first = span(
        "c3",
        "1",
        "invoke_agent a",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"},
        start=0,
        end=5,
    )
    later = span("c3", "2", "chat m", {"gen_ai.operation.name": "chat"}, parent="1", start=1)
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, [traces_payload(first)])
        (trace,) = traces(store)
        execute(
            store,
            "INSERT INTO evals (id, trace_id, evaluator, score, passed) VALUES (?, ?, ?, ?, ?)",
            ["evl_kept", trace["id"], "rubric", 0.9, 1],
        )
        created = execute(store, "SELECT created_at_ms FROM traces").fetchone()[0]
        post_all(client, receiver, [traces_payload(later)])
        (rebuilt,) = traces(store)
        assert execute(store, "SELECT created_at_ms FROM traces").fetchone()[0] == created
    assert rebuilt["id"] == trace["id"]
    assert len(rebuilt["steps"]) == 1
    assert [e["id"] for e in rebuilt["evals"]] == ["evl_kept"]


def test_concurrent_clients_build_what_one_client_builds(tmp_path: Path) -> None:
    """Four clients posting every fixture at once, each on its own connection: every span
    lands, and the traces equal those of one client posting in order."""
    from otelkit import Client

    payloads = all_payloads()
    with receiving(tmp_path / "one") as (receiver, client, store):
        post_all(client, receiver, payloads)
        expected = traces(store)
        spans = count(store, "otel_spans")
    with receiving(tmp_path / "four") as (receiver, client, store):
        errors: list[Any] = []

        def send(offset: int) -> None:
            mine = Client(*receiver.address)
            for payload in payloads[offset::4]:
                reply = mine.post(payload)
                if reply.status != 200:
                    errors.append((payload.name, reply.status))
            mine.close()

        threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert receiver.flush(timeout=60)
        assert count(store, "otel_spans") == spans == receiver.stats.spans
        assert traces(store) == expected
