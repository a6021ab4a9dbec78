"""``otel serve`` on the real captures the first mapping got wrong: Claude Code with traces and
logs both on, OpenInference openai-agents, Traceloop Anthropic, openai-v2 with util-genai, and
Codex CLI's own telemetry — POSTed to one receiver on a loopback port, each checked against
what the same session gives on the other capture paths (the transcript or rollout import) and
against the price table."""

from __future__ import annotations

from typing import Any

import pytest
from captures import HARNESS
from otelkit import harness_payloads, otlp_payload, post_all, receiving, traces

from agent_replay.services.capture.importer import import_path
from agent_replay.store.db import Store

PARIS = "What's the weather in Paris?"
ANSWER = "The weather in Paris is 18°C and sunny."
CLAUDE_SESSION = "be8f81b4-d40b-4ef3-be33-065e591c0e0c"
CODEX_CONVERSATION = "01a231e6-dab3-7d31-a1b4-37190adefc88"


@pytest.fixture(scope="module")
def received(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every trace one receiver built from the five captures (posted once for the module)."""
    payloads = [
        *harness_payloads("claude-code", "otel-enhanced"),
        *harness_payloads("codex", "otel"),
        otlp_payload("0030"),  # Traceloop Anthropic
        otlp_payload("0031"),  # openai-v2 + util-genai: spans
        otlp_payload("0032"),  # ... and their log records
        otlp_payload("0033"),  # OpenInference openai-agents
    ]
    with receiving(tmp_path_factory.mktemp("otel") / "store") as (receiver, client, store):
        post_all(client, receiver, payloads)
        return traces(store)


def of(received: list[dict[str, Any]], service: str) -> list[dict[str, Any]]:
    return [t for t in received if t["metadata"].get("otel", {}).get("service") == service]


def typed(trace: dict[str, Any], step_type: str) -> list[dict[str, Any]]:
    return [s for s in trace["steps"] if s["step_type"] == step_type]


def imported(store: Store, *parts: str) -> dict[str, Any]:
    """The import of a capture's session file, in the test's own store."""
    from agent_replay.store.trace_detail import trace_json

    report = import_path(store, HARNESS.joinpath(*parts))
    (file,) = report.files
    assert file.trace_id is not None
    return trace_json(store, file.trace_id)


def test_claude_code_spans_and_logs_make_each_call_one_step(
    received: list[dict[str, Any]], store: Store
) -> None:
    """``CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1`` with the traces exporter: each model call is
    one step (its span and its api_request/assistant_response records merged by request id),
    each tool call one step (span and tool_result merged by tool_use_id, its permission wait
    and execution folded in as phases): 14 steps, not 31, in the session's one trace; the
    agent is ``claude-code``; the calls' tokens are those of the transcript's import."""
    (trace,) = [t for t in received if t["session_id"] == CLAUDE_SESSION]
    assert trace["agent_name"] == "claude-code"
    # One trace per session, as with logs alone (the prompt's interaction span is its turn).
    assert trace["metadata"]["otel"]["group"] == f"s:claude-code:{CLAUDE_SESSION}"
    assert [s["step_type"] for s in trace["steps"]] == [
        "thought",
        *["llm_call", "decision", "tool_call"] * 4,
        "llm_call",
        "output",
    ]
    assert not [s for s in trace["steps"] if str(s["name"]).startswith("claude_code.")]
    tools = typed(trace, "tool_call")
    assert [t["input"] for t in tools][:2] == [
        {"command": "ls -la", "description": "Run ls -la"},
        {"file_path": "/home/dev/claude-otel-enhanced/work/notes.txt"},
    ]
    assert [p["name"] for p in tools[0]["metadata"]["otel"]["phases"]] == [
        "claude_code.tool.blocked_on_user",
        "claude_code.tool.execution",
    ]
    assert tools[3]["error"] and not any(t["error"] for t in tools[:3])
    for tool in tools:  # why: tool <- its permission decision <- the call that asked for it
        decision = trace["steps"][tool["caused_by_step"] - 1]
        assert decision["step_type"] == "decision"
        assert trace["steps"][decision["caused_by_step"] - 1]["step_type"] == "llm_call"
    llm = typed(trace, "llm_call")
    transcript = imported(
        store,
        "claude-code",
        "otel-enhanced",
        "transcript",
        "projects",
        "-home-dev-claude-otel-enhanced-work",
        f"{CLAUDE_SESSION}.jsonl",
    )
    assert [s["tokens_used"] for s in llm] == [
        s["tokens_used"] for s in typed(transcript, "llm_call")
    ]
    assert trace["total_tokens"] == transcript["total_tokens"] == 9290
    assert trace["total_cost_usd"] == pytest.approx(transcript["total_cost_usd"])
    assert llm[-1]["output"] == trace["output"] and trace["output"].startswith("Done.")


def test_openinference_agents_tool_input_is_the_calls_arguments(
    received: list[dict[str, Any]],
) -> None:
    """OpenInference openai-agents: the tool step's input is the call's ``input.value``, not
    the ``tool.parameters`` JSON schema; the workflow's output is its final answer."""
    (trace,) = of(received, "openai-agents-openinference")
    (tool,) = [s for s in typed(trace, "tool_call") if s["name"] == "get_weather"]
    assert tool["input"] == {"city": "Paris"}
    assert "tool.parameters" in tool["metadata"]["attributes"]  # kept, as what it is
    assert trace["agent_name"] == "weather_workflow"
    assert (trace["input"], trace["output"]) == (PARIS, ANSWER)


def test_a_workflow_trace_has_its_own_output_and_name(received: list[dict[str, Any]]) -> None:
    """openai-v2 with util-genai: the ``invoke_workflow`` root has no output of its own; the
    trace's output answers its input (not the later, unrelated "Say hello" call in the same
    OTel trace), and its agent is the workflow's name, not the span's name."""
    (trace,) = of(received, "openai-session-v2")
    assert trace["agent_name"] == "weather_workflow"
    assert (trace["input"], trace["output"]) == (PARIS, ANSWER)
    assert "Say hello" in str([s["input"] for s in typed(trace, "llm_call")])


def test_a_response_reported_in_two_traces_is_counted_once(
    received: list[dict[str, Any]],
) -> None:
    """Traceloop Anthropic reports each call twice (``anthropic.messages.create`` and
    ``anthropic.chat``, in two OTel traces): the store counts 799 tokens, not 1,598; each
    duplicate says which trace counts it; the counted call's cost is the price table's."""
    from genai_prices import Usage, calc_price

    found = of(received, "anthropic-session-traceloop")
    assert len(found) == 4
    calls = [s for t in found for s in typed(t, "llm_call")]
    counted = [s for s in calls if s["tokens_used"] is not None]
    assert sorted(s["tokens_used"] for s in counted) == [395, 404]
    assert sum(t["total_tokens"] or 0 for t in found) == 799
    ids = {t["id"] for t in found}
    for step in calls:
        if step["tokens_used"] is None:
            assert step["metadata"]["tokens_counted_in"]["trace_id"] in ids
            assert "cost_usd" not in step["metadata"]
    first = next(s for s in counted if s["tokens_used"] == 395)
    price = calc_price(Usage(input_tokens=350, output_tokens=45), "claude-sonnet-4-5")
    assert first["metadata"]["cost_usd"] == pytest.approx(float(price.total_price))
    assert sum(t["total_cost_usd"] or 0 for t in found) == pytest.approx(
        float(price.total_price)
        + float(
            calc_price(Usage(input_tokens=380, output_tokens=24), "claude-sonnet-4-5").total_price
        )
    )


def test_codex_telemetry_is_one_trace_per_conversation(
    received: list[dict[str, Any]], store: Store
) -> None:
    """Codex CLI's own OTel: its log events become the model calls (tokens from the
    ``response.completed`` records), permission decisions and tool calls — named, shaped and
    failed as the rollout import records them — in one trace for the conversation; its ~850
    internal spans are counted in metadata, not made steps."""
    (trace,) = of(received, "codex_exec")
    assert (trace["agent_name"], trace["session_id"]) == ("codex", CODEX_CONVERSATION)
    assert not typed(trace, "thought")[1:]  # only the prompt
    assert trace["input"].startswith("List the files in this directory")
    assert trace["metadata"]["otel"]["internal_spans"]["count"] > 800
    (rollout_file,) = (HARNESS / "codex" / "otel" / "rollout").rglob("rollout-*.jsonl")
    rollout = imported(store, *rollout_file.relative_to(HARNESS).parts)
    llm = typed(trace, "llm_call")
    assert [(s["model"], s["tokens_used"]) for s in llm] == [
        (s["model"], s["tokens_used"]) for s in typed(rollout, "llm_call")
    ]
    assert trace["total_tokens"] == rollout["total_tokens"] == 9800
    assert trace["total_cost_usd"] == pytest.approx(rollout["total_cost_usd"])
    tools = typed(trace, "tool_call")
    assert [(t["name"], t["input"]) for t in tools] == [
        (t["name"], t["input"]) for t in typed(rollout, "tool_call")
    ]
    assert [bool(t["error"]) for t in tools] == [
        bool(t["error"]) for t in typed(rollout, "tool_call")
    ]
    assert len(typed(trace, "decision")) == 4


def test_claude_code_turns_with_traces_on_are_one_session_trace() -> None:
    """Claude Code exports an OTel trace per prompt (its ``claude_code.interaction`` span):
    a session of two prompts is one trace, each turn's calls at its top level."""
    from otelkit import build, span, traces_payload

    session = {"session.id": "s-1", "gen_ai.conversation.id": "s-1"}
    turn = {"gen_ai.operation.name": "invoke_agent", "span.type": "interaction", **session}
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-opus-5-5", **session}
    (trace,) = build(
        traces_payload(
            span("1", "a", "claude_code.interaction", turn, start=0, end=3),
            span("1", "b", "claude_code.llm_request", chat, parent="a", start=1, end=2),
            span("2", "c", "claude_code.interaction", turn, start=10, end=13),
            span("2", "d", "claude_code.llm_request", chat, parent="c", start=11, end=12),
            service="claude-code",
        )
    )
    assert trace["agent_name"] == "claude-code" and trace["session_id"] == "s-1"
    assert [(s["step_type"], s["parent_step"]) for s in trace["steps"]] == [
        ("llm_call", None),
        ("llm_call", None),
    ]
