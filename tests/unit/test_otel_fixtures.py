"""``otel serve`` on the real captures: every payload of ``fixtures/otlp`` and both harnesses'
OTLP posts, POSTed to a receiver on a free loopback port, land as the traces a user expects
(agents, step types, parentage, token totals, sessions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from otelkit import (
    Payload,
    all_payloads,
    by_otel_id,
    by_session,
    count,
    harness_payloads,
    otlp_payload,
    post_all,
    receiving,
    shape,
    traces,
)

WEATHER = [
    ("retrieval", "embeddings text-embedding-3-small", None),
    ("llm_call", "chat gpt-4o-mini", None),
    ("tool_call", "get_weather", None),
    ("llm_call", "chat gpt-4o-mini", None),
]
PARIS = "What's the weather in Paris?"
ANSWER = "The weather in Paris is 18°C and sunny."
PROMPT = (
    "List the files in this directory, read notes.txt, write a short summary.txt, then check "
    "whether does_not_exist.txt exists."
)
DONE = (
    "Done. I listed the directory, read notes.txt, wrote summary.txt, and confirmed that "
    "does_not_exist.txt is missing."
)


def otel_trace_ids(payload: Payload) -> list[str]:
    """The OTel trace ids in a traces payload, in order of first appearance (read with the
    official messages for protobuf; OTLP/JSON carries them as hex already)."""
    import gzip
    import json

    body = payload.body
    if payload.headers.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    request = ExportTraceServiceRequest()
    if payload.headers["Content-Type"] == "application/x-protobuf":
        request.ParseFromString(body)
        ids = [
            s.trace_id.hex()
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]
    else:
        data = json.loads(body)
        ids = [
            s["traceId"]
            for rs in data["resourceSpans"]
            for ss in rs["scopeSpans"]
            for s in ss["spans"]
        ]
    return list(dict.fromkeys(ids))


def assert_weather_agent(trace: dict[str, Any]) -> None:
    """The manual GenAI fixtures: one invoke_agent root with four children."""
    assert trace["agent_name"] == "weather_agent"
    assert trace["session_id"] == "conv-weather-0001"
    assert trace["status"] == "completed"
    assert shape(trace) == WEATHER
    assert [s["tokens_used"] for s in trace["steps"]] == [10, 59, None, 69]
    assert trace["total_tokens"] == 138
    assert trace["input"] == PARIS
    assert trace["output"] == ANSWER
    embed, chat, tool, answer = trace["steps"]
    assert chat["model"] == "gpt-4o-mini-2024-07-18"
    assert chat["metadata"]["provider"] == "openai"  # gen_ai.system normalized too
    assert chat["metadata"]["usage"] == {"input_tokens": 42, "output_tokens": 17}
    assert tool["input"] == {"city": "Paris"}
    assert tool["output"] == {"city": "Paris", "temperature_c": 18, "conditions": "sunny"}
    assert tool["caused_by_step"] == 2  # the chat whose output asked for call_weather_001
    assert answer["output"] and "18°C" in str(answer["output"])
    assert trace["metadata"]["agent_id"] == "agent_weather_001"


@pytest.mark.parametrize(
    "names",
    [("0001", "0002"), ("0005", "0006"), ("0007",), ("0009",), ("0010",)],
    ids=[
        "current-protobuf+logs",
        "current-json+logs",
        "json-gzip",
        "deprecated-protobuf",
        "deprecated-json",
    ],
)
def test_genai_agent_fixtures_become_one_trace_each(
    store_dir: Path, names: tuple[str, ...]
) -> None:
    """invoke_agent roots become traces; logs of the same calls add no tokens."""
    payloads = [otlp_payload(n) for n in names]
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, payloads)
        (otel_id,) = otel_trace_ids(payloads[0])
        assert [t["id"] for t in traces(store)] == [by_otel_id(store, otel_id)["id"]]
        trace = by_otel_id(store, otel_id)
    assert_weather_agent(trace)
    if len(names) == 2:  # the log records' messages were merged into their spans' steps
        assert trace["metadata"]["otel"]["log_records"] == 2


def test_deprecated_fixture_messages_come_from_span_events(store_dir: Path) -> None:
    """gen_ai.*.message / gen_ai.choice span events become the LLM step's input and output."""
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, [otlp_payload("0010")])
        (trace,) = traces(store)
    chat = trace["steps"][1]
    assert [m["role"] for m in chat["input"]] == ["system", "user"]
    assert chat["input"][1]["content"] == PARIS
    assert chat["output"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    ("name", "service", "session", "kinds"),
    [
        (
            "0017",
            "openai-session-openinference",
            "conv-oi-openai-0001",
            ["CreateEmbeddings", "ChatCompletion", "ChatCompletion", "ChatCompletion"],
        ),
        (
            "0018",
            "openai-session-openinference",
            "conv-oi-openai-0001",
            ["CreateEmbeddings", "ChatCompletion", "ChatCompletion", "ChatCompletion"],
        ),
        (
            "0019",
            "openai-session-traceloop",
            None,
            ["openai.embeddings", "openai.chat", "openai.chat", "openai.chat"],
        ),
        (
            "0022",
            "openai-session-v2",
            None,
            [
                "embeddings text-embedding-3-small",
                "chat gpt-4o-mini",
                "chat gpt-4o-mini",
                "chat gpt-4o-mini",
            ],
        ),
    ],
    ids=["openinference-protobuf", "openinference-json", "openllmetry", "openai-v2"],
)
def test_llm_client_fixtures_land_as_one_trace_per_call(
    store_dir: Path, name: str, service: str, session: str | None, kinds: list[str]
) -> None:
    """Plain LLM-client instrumentations (no agent root) give one synthetic trace per OTel
    trace id, named after the service, with the call's tokens and session."""
    payload = otlp_payload(name)
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, [payload])
        got = [by_otel_id(store, otel_id) for otel_id in otel_trace_ids(payload)]
        assert count(store, "traces") == 4
    assert [t["agent_name"] for t in got] == [service] * 4
    assert [t["session_id"] for t in got] == [session] * 4
    assert [shape(t) for t in got] == [
        [("retrieval" if i == 0 else "llm_call", kind, None)] for i, kind in enumerate(kinds)
    ]
    assert [t["total_tokens"] for t in got] == [10, 59, 69, 28]
    assert all(t["status"] == "completed" and t["metadata"]["otel"]["synthetic"] for t in got)
    if name != "0022":  # openai-v2 records no message content by default
        assert got[1]["input"] == PARIS
        assert got[3]["output"] == "Hello! How can I help you today?"


def test_claude_code_session_becomes_one_trace(store_dir: Path) -> None:
    """Claude Code's claude_code.* log events: one trace for the session, prompts, API calls
    with tokens and cost, tool decisions (by policy: source config) and results, the failed
    ``cat`` as a failed tool step; metrics are accepted and dropped."""
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, harness_payloads("claude-code"))
        (trace,) = traces(store)
    assert trace["agent_name"] == "claude-code"
    assert trace["agent_version"] == "2.1.332"
    assert trace["session_id"] == "2859795b-db92-4875-87cd-19512a3e477d"
    assert trace["status"] == "completed"
    assert trace["input"] == PROMPT
    assert trace["output"] == DONE
    assert [s["step_type"] for s in trace["steps"]] == [
        "thought",
        *["llm_call", "decision", "tool_call"] * 4,
        "llm_call",
        "output",
    ]
    assert_turn_linked(trace)
    assert trace["total_tokens"] == 9000 + 290
    assert trace["total_cost_usd"] == pytest.approx(0.0418)
    tools = [s for s in trace["steps"] if s["step_type"] == "tool_call"]
    assert [t["name"] for t in tools] == ["Bash", "Read", "Write", "Bash"]
    assert [t["error"] for t in tools] == [None, None, None, "ShellError"]
    decisions = [s for s in trace["steps"] if s["step_type"] == "decision"]
    assert {(d["decision"]["chosen"], d["decision"]["decided_by"]) for d in decisions} == {
        ("accept", "policy")
    }
    for tool, decision in zip(tools, decisions, strict=True):  # why: tool <- decision <- call
        assert tool["caused_by_step"] == decision["step_number"]
        assert trace["steps"][decision["caused_by_step"] - 1]["step_type"] == "llm_call"
    llm = [s for s in trace["steps"] if s["step_type"] == "llm_call"]
    assert [s["tokens_used"] for s in llm] == [1460, 1660, 1860, 2060, 2250]
    assert {s["model"] for s in llm} == {"claude-opus-5-5"}


GEMINI_TYPES = [
    "thought",
    "llm_call",
    *["llm_call", "thought", "decision", "tool_call"] * 4,
    "llm_call",
    "output",
]


def assert_turn_linked(trace: dict[str, Any]) -> None:
    """A harness turn as every capture path records it (``vocabulary``): the prompt is
    ``user_prompt``, each model call is named after its model and caused by the tool call it
    answers, each permission decision by the call that asked, and the turn ends in a
    ``final_answer`` caused by its last model call, holding the trace's output."""
    steps = trace["steps"]
    assert steps[0]["name"] == "user_prompt"
    tool = None
    for step in steps:
        if step["step_type"] == "llm_call":
            assert step["name"] == step["model"]
            if step["metadata"].get("role") != "utility_router":
                assert step.get("caused_by_step") == (tool["step_number"] if tool else None)
                reply, tool = step, None
        elif step["step_type"] == "tool_call":
            tool = step
        elif step["step_type"] == "decision":
            assert steps[step["caused_by_step"] - 1]["step_type"] == "llm_call"
    answer = steps[-1]
    assert (answer["step_type"], answer["name"]) == ("output", "final_answer")
    assert answer["caused_by_step"] == reply["step_number"]
    assert answer["output"] == trace["output"] == reply["output"]


def assert_gemini_session(trace: dict[str, Any], *, with_logs: bool, with_spans: bool) -> None:
    assert trace["agent_name"] == "gemini-cli"
    assert trace["session_id"] == "f15e6bc8-12f0-4de7-845a-02db13b48bbc"
    assert trace["status"] == "completed"
    steps = trace["steps"]
    tools = [s for s in steps if s["step_type"] == "tool_call"]
    assert [t["name"] for t in tools] == [
        "run_shell_command",
        "read_file",
        "write_file",
        "run_shell_command",
    ]
    llm = [s for s in steps if s["step_type"] == "llm_call"]
    assert len(llm) == 6
    if with_spans:
        schedules = [s for s in steps if s["name"] == "schedule_tool_calls"]
        assert len(schedules) == 4
        for tool in tools:  # span parentage: schedule_tool_calls -> tool_call
            assert steps[tool["parent_step"] - 1]["name"] == "schedule_tool_calls"
    if with_logs:
        assert trace["input"] == PROMPT
        assert trace["output"] == DONE
        assert trace["total_tokens"] == 2330 + 2180 + 2480 + 2780 + 3080 + 3380
        assert [s["tokens_used"] for s in llm] == [2330, 2180, 2480, 2780, 3080, 3380]
        assert llm[0]["model"] == "gemini-3.5-flash-lite"
        # The shell command that exited 1 is a failed step, with what it ran.
        assert tools[3]["error"] == "exit code 1"
        assert tools[3]["input"]["command"] == "cat does_not_exist.txt"
        assert [t["error"] for t in tools[:3]] == [None, None, None]
        assert_turn_linked(trace)
        decisions = [s for s in steps if s["step_type"] == "decision"]
        assert len(decisions) == 4
        for tool, decision in zip(tools, decisions, strict=True):
            assert decision["decision"]["chosen"] == "accept"
            assert decision["decision"]["decided_by"] == "policy"  # approval mode yolo
            assert tool["caused_by_step"] == decision["step_number"]
            assert decision["step_number"] < tool["step_number"]
            assert decision["parent_step"] == tool["parent_step"]
    else:
        assert trace["total_tokens"] is None


def test_gemini_cli_session_becomes_one_trace(store_dir: Path) -> None:
    """Gemini CLI's spans (a new OTel trace per call, no agent root, the session on every
    span) and its gemini_cli.* log events merge into one trace for the session: each model
    call counted once although reported as a span, an api_response and an operation-details
    record."""
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, harness_payloads("gemini-cli"))
        (trace,) = traces(store)
    assert [s["step_type"] for s in trace["steps"]] == GEMINI_TYPES
    assert_gemini_session(trace, with_logs=True, with_spans=True)


@pytest.mark.parametrize("part", ["traces", "logs"])
def test_gemini_cli_spans_or_logs_alone_make_the_same_session_trace(
    store_dir: Path, part: str
) -> None:
    """With only one of the two signals exported, the session is still one trace."""
    payloads = [p for p in harness_payloads("gemini-cli") if p.path == f"/v1/{part}"]
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, payloads)
        (trace,) = traces(store)
    assert_gemini_session(trace, with_logs=part == "logs", with_spans=part == "traces")


def test_gemini_cli_signals_in_either_order_build_the_same_trace(tmp_path: Path) -> None:
    """Logs before traces or traces before logs: the same trace, ids and all."""
    payloads = harness_payloads("gemini-cli")
    built = []
    for order in (payloads, list(reversed(payloads))):
        folder = tmp_path / str(len(built))
        with receiving(folder) as (receiver, client, store):
            post_all(client, receiver, order)
            built.append(traces(store))
    assert built[0] == built[1]


def test_every_fixture_together(store_dir: Path) -> None:
    """All payloads into one store: each producer's traces, nothing merged across them."""
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, all_payloads())
        everything = traces(store)
        assert len(by_session(store, "conv-weather-0001")) == 5
        assert len(by_session(store, "conv-oi-openai-0001")) == 8
        assert len(by_session(store, "2859795b-db92-4875-87cd-19512a3e477d")) == 1
        assert len(by_session(store, "f15e6bc8-12f0-4de7-845a-02db13b48bbc")) == 1
    # + Traceloop Anthropic (4 single-call traces), openai-v2 util-genai's workflow (its log
    # records merge into it) and OpenInference openai-agents' workflow.
    assert len(everything) == 5 + 8 + 4 + 4 + 1 + 1 + 4 + 1 + 1
    assert {t["agent_name"] for t in everything} == {
        "weather_agent",
        "openai-session-openinference",
        "openai-session-traceloop",
        "openai-session-v2",
        "claude-code",
        "gemini-cli",
        "anthropic-session-traceloop",
        "weather_workflow",
    }
    assert all(t["status"] == "completed" for t in everything)
