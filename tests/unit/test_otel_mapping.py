"""Span and log mapping: GenAI conventions (current and deprecated), OpenInference and
OpenLLMetry when GenAI attributes are absent, errors, token dedup by response id, harness
decisions, redaction. Built through the receiver's decoding and builder, without HTTP."""

from __future__ import annotations

from otelkit import build, log_record, logs_payload, shape, span, traces_payload

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}


def test_genai_current_forms() -> None:
    """invoke_agent root -> trace; chat -> llm_call with model, provider, tokens; tools and
    embeddings; conversation id -> session."""
    (trace,) = build(
        traces_payload(
            span(
                "1",
                "1",
                "invoke_agent support",
                {**AGENT, "gen_ai.conversation.id": "conv-1", "gen_ai.agent.version": "2.0"},
                start=0,
                end=10,
            ),
            span(
                "1",
                "2",
                "embeddings e",
                {
                    "gen_ai.operation.name": "embeddings",
                    "gen_ai.request.model": "e",
                    "gen_ai.usage.input_tokens": 3,
                },
                parent="1",
                start=1,
            ),
            span(
                "1",
                "3",
                "chat m",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "anthropic",
                    "gen_ai.request.model": "m",
                    "gen_ai.response.model": "m-2026",
                    "gen_ai.usage.input_tokens": 10,
                    "gen_ai.usage.output_tokens": 4,
                },
                parent="1",
                start=2,
            ),
            span(
                "1",
                "4",
                "execute_tool lookup",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": '{"id": 7}',
                },
                parent="1",
                start=3,
            ),
        )
    )
    assert trace["agent_name"] == "support"
    assert trace["agent_version"] == "2.0"
    assert trace["session_id"] == "conv-1"
    assert shape(trace) == [
        ("retrieval", "embeddings e", None),
        ("llm_call", "chat m", None),
        ("tool_call", "lookup", None),
    ]
    chat = trace["steps"][1]
    assert (chat["model"], chat["tokens_used"]) == ("m-2026", 14)
    assert chat["metadata"]["provider"] == "anthropic"
    assert trace["steps"][2]["input"] == {"id": 7}


def test_deprecated_forms_are_normalized() -> None:
    """gen_ai.system -> provider; prompt_tokens/completion_tokens -> tokens."""
    (trace,) = build(
        traces_payload(
            span(
                "2",
                "1",
                "chat m",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.system": "openai",
                    "gen_ai.usage.prompt_tokens": 7,
                    "gen_ai.usage.completion_tokens": 5,
                },
            )
        )
    )
    (step,) = trace["steps"]
    assert step["tokens_used"] == 12
    assert step["metadata"]["provider"] == "openai"
    assert step["metadata"]["usage"] == {"input_tokens": 7, "output_tokens": 5}


def test_invoke_workflow_is_a_root_too() -> None:
    (trace,) = build(
        traces_payload(
            span("3", "1", "invoke_workflow etl", {"gen_ai.operation.name": "invoke_workflow"}),
            span("3", "2", "chat m", {"gen_ai.operation.name": "chat"}, parent="1"),
        )
    )
    assert trace["agent_name"] == "etl"  # no agent name: the span's, without the operation
    assert shape(trace) == [("llm_call", "chat m", None)]
    assert "synthetic" not in trace["metadata"]["otel"]


def test_openinference_when_genai_attributes_are_absent() -> None:
    """AGENT root, CHAIN/LLM/TOOL/RETRIEVER kinds, llm.token_count.*, session.id, agent.name."""
    (trace,) = build(
        traces_payload(
            span(
                "4",
                "1",
                "Agent",
                {
                    "openinference.span.kind": "AGENT",
                    "agent.name": "oi-bot",
                    "session.id": "s-4",
                    "input.value": "hello?",
                },
                end=9,
            ),
            span("4", "2", "chain", {"openinference.span.kind": "CHAIN"}, parent="1", start=1),
            span(
                "4",
                "3",
                "ChatCompletion",
                {
                    "openinference.span.kind": "LLM",
                    "llm.model_name": "gpt-x",
                    "llm.provider": "openai",
                    "llm.token_count.prompt": 30,
                    "llm.token_count.completion": 6,
                    "llm.token_count.total": 36,
                },
                parent="2",
                start=2,
            ),
            span(
                "4",
                "4",
                "search",
                {
                    "openinference.span.kind": "TOOL",
                    "tool.name": "search",
                    "input.value": '{"q": "x"}',
                },
                parent="2",
                start=3,
            ),
            span(
                "4", "5", "retrieve", {"openinference.span.kind": "RETRIEVER"}, parent="2", start=4
            ),
            span("4", "6", "check", {"openinference.span.kind": "GUARDRAIL"}, parent="2", start=5),
        )
    )
    assert trace["agent_name"] == "oi-bot"
    assert trace["session_id"] == "s-4"
    assert trace["input"] == "hello?"
    assert shape(trace) == [
        ("thought", "chain", None),
        ("llm_call", "ChatCompletion", 1),
        ("tool_call", "search", 1),
        ("retrieval", "retrieve", 1),
        ("guard_check", "check", 1),
    ]
    assert trace["steps"][1]["tokens_used"] == 36
    assert trace["steps"][1]["model"] == "gpt-x"
    assert trace["steps"][2]["input"] == {"q": "x"}


def test_openllmetry_when_genai_attributes_are_absent() -> None:
    """traceloop.span.kind workflow/task/tool, llm.request.type, the flat gen_ai.prompt.N.*
    form, and traceloop.association.properties.session_id."""
    session = {"traceloop.association.properties.session_id": "tl-5"}
    (trace,) = build(
        traces_payload(
            span(
                "5",
                "1",
                "pipeline.workflow",
                {"traceloop.span.kind": "workflow", "traceloop.entity.name": "pipeline", **session},
                end=9,
            ),
            span(
                "5",
                "2",
                "fetch.task",
                {"traceloop.span.kind": "task", "traceloop.entity.name": "fetch"},
                parent="1",
                start=1,
            ),
            span(
                "5",
                "3",
                "lookup.tool",
                {
                    "traceloop.span.kind": "tool",
                    "traceloop.entity.name": "lookup",
                    "traceloop.entity.input": '{"args": [1]}',
                },
                parent="2",
                start=2,
            ),
            span(
                "5",
                "4",
                "openai.chat",
                {
                    "llm.request.type": "chat",
                    "llm.request.model": "gpt-y",
                    "gen_ai.prompt.0.role": "user",
                    "gen_ai.prompt.0.content": "hi there",
                    "gen_ai.completion.0.role": "assistant",
                    "gen_ai.completion.0.content": "hello",
                    "llm.usage.total_tokens": 9,
                    **session,
                },
                parent="2",
                start=3,
            ),
        )
    )
    assert trace["agent_name"] == "pipeline"
    assert trace["session_id"] == "tl-5"
    assert shape(trace) == [
        ("thought", "fetch.task", None),
        ("tool_call", "lookup", 1),
        ("llm_call", "openai.chat", 1),
    ]
    chat = trace["steps"][2]
    assert chat["input"] == [{"role": "user", "content": "hi there"}]
    assert chat["output"] == [{"role": "assistant", "content": "hello"}]
    assert chat["tokens_used"] == 9
    assert trace["input"] == "hi there" and trace["output"] == "hello"


def test_genai_attributes_win_over_other_dialects() -> None:
    (trace,) = build(
        traces_payload(
            span(
                "6",
                "1",
                "x",
                {
                    "gen_ai.operation.name": "chat",
                    "openinference.span.kind": "TOOL",
                    "gen_ai.usage.input_tokens": 1,
                    "llm.token_count.prompt": 99,
                },
            )
        )
    )
    (step,) = trace["steps"]
    assert (step["step_type"], step["tokens_used"]) == ("llm_call", 1)


def test_error_status_fails_the_step_and_a_failed_root_fails_the_trace() -> None:
    (trace,) = build(
        traces_payload(
            span("7", "1", "invoke_agent a", AGENT, error="agent gave up", end=9),
            span(
                "7",
                "2",
                "execute_tool t",
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"},
                parent="1",
                start=1,
                error="boom",
                events=[
                    {
                        "name": "exception",
                        "attributes": {"exception.message": "FileNotFoundError: x"},
                    }
                ],
            ),
            span(
                "7",
                "3",
                "chat m",
                {"gen_ai.operation.name": "chat"},
                parent="1",
                start=2,
                error="rate limited",
            ),
        )
    )
    assert trace["status"] == "failed"
    assert trace["error"] == "agent gave up"
    assert [s["error"] for s in trace["steps"]] == ["FileNotFoundError: x", "rate limited"]


def test_a_failed_llm_client_span_fails_its_synthetic_trace() -> None:
    (trace,) = build(
        traces_payload(
            span("8", "1", "chat m", {"gen_ai.operation.name": "chat"}, error="401 Unauthorized")
        )
    )
    assert (trace["status"], trace["error"]) == ("failed", "401 Unauthorized")
    assert trace["metadata"]["otel"]["synthetic"] is True


def test_one_llm_call_seen_by_two_instrumentations_counts_once() -> None:
    """A framework span and the provider SDK's own span under it, with the same
    gen_ai.response.id (and an OpenInference span whose response carries that id): the
    tokens count once, on the outermost step."""
    usage = {
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.response.id": "resp-1",
    }
    (trace,) = build(
        traces_payload(
            span("9", "1", "invoke_agent a", AGENT, end=9),
            span(
                "9",
                "2",
                "chat framework",
                {"gen_ai.operation.name": "chat", **usage},
                parent="1",
                start=1,
                end=5,
            ),
            span(
                "9",
                "3",
                "chat provider",
                {"gen_ai.operation.name": "chat", **usage},
                parent="2",
                start=1.1,
                end=4.9,
            ),
            span(
                "9",
                "4",
                "ChatCompletion",
                {
                    "openinference.span.kind": "LLM",
                    "llm.token_count.prompt": 40,
                    "llm.token_count.completion": 10,
                    "output.mime_type": "application/json",
                    "output.value": '{"id": "resp-1", "choices": []}',
                },
                parent="3",
                start=1.2,
                end=4.8,
            ),
            span(
                "9",
                "5",
                "chat again",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.usage.input_tokens": 8,
                    "gen_ai.response.id": "resp-2",
                },
                parent="1",
                start=6,
            ),
        )
    )
    assert [s["tokens_used"] for s in trace["steps"]] == [50, None, None, 8]
    assert trace["total_tokens"] == 58
    assert trace["steps"][1]["metadata"]["tokens_counted_in_step"] == 1
    assert shape(trace)[:3] == [
        ("llm_call", "chat framework", None),
        ("llm_call", "chat provider", 1),
        ("llm_call", "ChatCompletion", 2),
    ]


def test_nested_agents_and_an_agent_below_a_server_span() -> None:
    """The outermost agent span is the trace even below an HTTP span; a nested agent is a
    step with its own children."""
    (trace,) = build(
        traces_payload(
            span("a", "1", "POST /chat", {"http.request.method": "POST"}, end=10),
            span(
                "a",
                "2",
                "invoke_agent boss",
                {**AGENT, "gen_ai.agent.name": "boss"},
                parent="1",
                start=0.1,
                end=9,
            ),
            span(
                "a",
                "3",
                "invoke_agent helper",
                {**AGENT, "gen_ai.agent.name": "helper"},
                parent="2",
                start=1,
                end=8,
            ),
            span("a", "4", "chat m", {"gen_ai.operation.name": "chat"}, parent="3", start=2),
        )
    )
    assert trace["agent_name"] == "boss"
    assert shape(trace) == [
        ("thought", "POST /chat", None),
        ("thought", "invoke_agent helper", None),
        ("llm_call", "chat m", 2),
    ]


def test_secrets_are_redacted_unless_asked_not_to() -> None:
    key = "sk-ant-" + "a1B2" * 10
    payload = traces_payload(
        span(
            "b",
            "1",
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": f'[{{"role": "user", "content": "my key is {key}"}}]',
                "api_key": "hunter2hunter2",
            },
        )
    )
    (redacted,) = build(payload)
    (kept,) = build(payload, redact=False)
    assert key not in str(redacted) and "hunter2" not in str(redacted)
    assert "[REDACTED:anthropic_key]" in redacted["input"]
    assert key in kept["input"]


CLAUDE = {"service.name": "claude-code", "service.version": "9.9"}


def claude(event: str, at: float, **attrs: object) -> dict[str, object]:
    return log_record(
        {"session.id": "cc-1", "event.name": event, **attrs}, at=at, body=f"claude_code.{event}"
    )


def test_claude_code_decisions_by_user_errors_and_a_failed_session() -> None:
    """A user's rejection is a decision by the user; an API error as the last model call
    fails the session's trace."""
    (trace,) = build(
        logs_payload(
            claude("user_prompt", 0, prompt="delete it all"),
            claude(
                "api_request",
                1.0,
                model="c",
                input_tokens=10,
                output_tokens=2,
                duration_ms=500,
                request_id="r1",
                cost_usd=0.5,
            ),
            claude(
                "tool_decision",
                1.1,
                decision="reject",
                source="user_reject",
                tool_name="Bash",
                tool_use_id="t1",
                request_id="r1",
            ),
            claude(
                "api_error", 3.0, model="c", error="Overloaded", status_code=529, duration_ms=100
            ),
            service="claude-code",
            scope="com.anthropic.claude_code.events",
        )
    )
    assert [s["step_type"] for s in trace["steps"]] == [
        "thought",
        "llm_call",
        "decision",
        "llm_call",
    ]
    decision = trace["steps"][2]["decision"]
    assert (decision["chosen"], decision["decided_by"]) == ("reject", "user")
    assert trace["steps"][3]["error"] == "Overloaded (status 529)"
    assert (trace["status"], trace["error"]) == ("failed", "Overloaded (status 529)")
    assert trace["total_cost_usd"] == 0.5
    assert trace["input"] == "delete it all"


def gemini(event: str, at: float, **attrs: object) -> dict[str, object]:
    return log_record({"session.id": "g-1", "event.name": f"gemini_cli.{event}", **attrs}, at=at)


def test_gemini_cli_decisions_by_user_or_policy() -> None:
    """auto_accept is the policy's decision; accept outside yolo mode is the user's; a
    rejected call that didn't run is a failed tool step."""
    (trace,) = build(
        logs_payload(
            gemini(
                "tool_call",
                1,
                function_name="ls",
                decision="auto_accept",
                success="true",
                duration_ms=10,
            ),
            gemini(
                "tool_call",
                2,
                function_name="rm",
                decision="accept",
                success="true",
                duration_ms=10,
            ),
            gemini(
                "tool_call",
                3,
                function_name="dd",
                decision="reject",
                success="false",
                error="rejected by the user",
                duration_ms=0,
            ),
            service="gemini-cli",
        )
    )
    decisions = [s["decision"] for s in trace["steps"] if s["step_type"] == "decision"]
    assert [(d["chosen"], d["decided_by"]) for d in decisions] == [
        ("auto_accept", "policy"),
        ("accept", "user"),
        ("reject", "user"),
    ]
    tools = [s for s in trace["steps"] if s["step_type"] == "tool_call"]
    assert [t["error"] for t in tools] == [None, None, "rejected by the user"]


def test_unmapped_log_events_are_dropped_and_unlinked_genai_records_make_steps() -> None:
    """Harness chatter (hook timings) is ignored; a GenAI operation-details record with no
    span becomes an LLM step of its OTel trace."""
    (trace,) = build(
        logs_payload(
            log_record({"event.name": "gemini_cli.hook_call", "session.id": "z"}),
            log_record(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "m",
                    "gen_ai.response.id": "r9",
                    "gen_ai.usage.input_tokens": 4,
                    "gen_ai.usage.output_tokens": 1,
                },
                event_name="gen_ai.client.inference.operation.details",
                trace="c0",
            ),
        )
    )
    assert shape(trace) == [("llm_call", "chat m", None)]
    assert trace["total_tokens"] == 5
