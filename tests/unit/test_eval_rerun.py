"""``fork --rerun`` and ``diff --ai`` building blocks, end to end through the real SDKs against
the local provider APIs (``aifake``): re-sending a recorded llm_call's messages to its model,
and an AI account of why two traces diverged."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from aifake import KEY, FakeAI, isolate_env

from agent_replay.config import Config, set_value
from agent_replay.errors import UsageError
from agent_replay.services.demo import demo_traces
from agent_replay.services.evals.budget import Budget
from agent_replay.services.evals.divergence import explain_divergence
from agent_replay.services.evals.errors import BudgetExceeded, NoAIKeyError
from agent_replay.services.evals.providers import resolve_ai
from agent_replay.services.evals.rerun import (
    apply_rerun,
    recorded_call,
    rerun_fork_step,
    rerun_llm_step,
)


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def fake() -> Iterator[FakeAI]:
    with FakeAI() as server:
        yield server


@pytest.fixture
def traces(clock: Any) -> dict[str, dict[str, Any]]:
    return {t["id"]: t for t in demo_traces(clock)}


def config_for(fake: FakeAI, *providers: str) -> Config:
    config = Config()
    for provider in providers:
        config = set_value(config, f"ai.api_keys.{provider}", KEY)
        url = f"{fake.url}/v1" if provider == "openai" else fake.url
        config = set_value(config, f"ai.base_urls.{provider}", url)
    return config


def step_of(trace: dict[str, Any], number: int) -> dict[str, Any]:
    return copy.deepcopy(next(s for s in trace["steps"] if s["step_number"] == number))


def test_rerun_sends_the_edited_messages_to_the_recorded_openai_model(
    fake: FakeAI, traces: dict, clock: Any
) -> None:
    """Step 5 of the ungrounded demo (gpt-4o): system and user turns, temperature and
    max_tokens as recorded; the reply and its cost come back."""
    step = step_of(traces["trc_demo1ungrounded"], 5)
    step["input"]["messages"][1]["content"] = "How long do refunds take? Quote the policy."
    result = rerun_llm_step(step, config_for(fake, "openai"), clock=clock, env={})
    (request,) = fake.requests
    assert request.provider == "openai"
    assert request.body["model"] == "gpt-4o"
    assert request.body["temperature"] == 0.9
    assert request.body["max_completion_tokens"] == 400
    assert "response_format" not in request.body
    system, user = request.body["messages"]
    assert system["role"] == "system" and "Refund policy" in system["content"]
    assert user == {"role": "user", "content": "How long do refunds take? Quote the policy."}
    assert result.output == "A rerun answer: refunds take 5-7 business days."
    assert (result.provider, result.model) == ("openai", "gpt-4o")
    assert result.cost_usd == pytest.approx(1000 * 2.5e-6 + 200 * 10e-6)
    assert result.at == "2026-06-01T12:00:00.000Z"


def test_rerun_uses_the_anthropic_model_a_claude_step_recorded(
    fake: FakeAI, traces: dict, clock: Any
) -> None:
    step = step_of(traces["trc_demo2toolchain"], 2)
    result = rerun_llm_step(step, config_for(fake, "anthropic"), clock=clock, env={})
    (request,) = fake.requests
    assert request.provider == "anthropic"
    assert request.body["model"] == "claude-3-5-sonnet-20241022"
    assert request.body["system"].startswith("You book flights")
    assert request.body["max_tokens"] == 1024  # none recorded: ai.max_tokens
    assert "temperature" not in request.body
    assert result.model == "claude-3-5-sonnet-20241022"


def test_rerun_reads_gemini_style_contents(fake: FakeAI, clock: Any) -> None:
    step = {
        "step_number": 3,
        "step_type": "llm_call",
        "model": "gemini-2.5-flash",
        "input": {
            "system_instruction": "Be brief.",
            "contents": [
                {"role": "user", "parts": [{"text": "Hi"}]},
                {"role": "model", "parts": [{"text": "Hello!"}]},
                {"role": "user", "parts": [{"text": "Refund time?"}]},
            ],
            "temperature": 0.2,
        },
    }
    rerun_llm_step(step, config_for(fake, "google"), clock=clock, env={})
    (request,) = fake.requests
    assert "gemini-2.5-flash:generateContent" in request.path
    assert request.system == "Be brief."
    assert request.turns == [("user", "Hi"), ("model", "Hello!"), ("user", "Refund time?")]
    assert request.body["generationConfig"]["temperature"] == 0.2


def test_recorded_call_normalizes_roles_and_blocks() -> None:
    call = recorded_call(
        [
            {"role": "developer", "content": "rules"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "name": "f", "input": {"x": 1}}],
            },
            {"role": "tool", "content": "42"},
            {"role": "user", "content": "and?"},
        ]
    )
    assert call.system == "rules"
    assert [(m.role, m.text) for m in call.messages] == [
        ("user", "a\nb"),
        ("assistant", '[tool call f({"x":1})]'),
        ("user", "[tool result] 42\n\nand?"),
    ]


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"step_number": 2, "step_type": "tool_call", "model": "gpt-4o"}, "needs an llm_call"),
        (
            {"step_number": 2, "step_type": "llm_call", "model": "gpt-4o", "input": {"q": 1}},
            "no recorded messages",
        ),
        (
            {
                "step_number": 2,
                "step_type": "llm_call",
                "model": "llama-3",
                "input": [{"role": "user", "content": "x"}],
            },
            "can't tell which provider",
        ),
    ],
)
def test_rerun_refuses_what_it_cannot_resend(step: dict, message: str, clock: Any) -> None:
    with pytest.raises(UsageError, match=message):
        rerun_llm_step(step, Config(), clock=clock, env={})


def test_rerun_needs_the_recorded_providers_key(traces: dict, clock: Any) -> None:
    step = step_of(traces["trc_demo1ungrounded"], 5)
    with pytest.raises(NoAIKeyError, match="OPENAI_API_KEY"):
        rerun_llm_step(step, Config(), clock=clock, env={"ANTHROPIC_API_KEY": "a" * 20})


def test_rerun_obeys_the_budget(fake: FakeAI, traces: dict, clock: Any) -> None:
    step = step_of(traces["trc_demo1ungrounded"], 5)
    with pytest.raises(BudgetExceeded):
        rerun_llm_step(step, config_for(fake, "openai"), clock=clock, env={}, budget=Budget(0.0001))
    assert fake.requests == []


def test_the_rerun_becomes_the_forks_step(fake: FakeAI, traces: dict, clock: Any, store) -> None:
    """A fork at step 5 with the rerun applied is a valid trace whose step 5 is the new reply."""
    from agent_replay.services import fork as fork_service
    from agent_replay.services.ingest import ingest_trace
    from agent_replay.store.trace_detail import trace_json

    parent = traces["trc_demo1ungrounded"]
    ingest_trace(store, parent)
    edit = fork_service.InputEdit({"temperature": 0})
    fork = fork_service.build_fork(trace_json(store, parent["id"]), 5, edit, clock=clock)
    rerun, result = rerun_fork_step(fork, 5, config_for(fake, "openai"), clock=clock, env={})
    assert fake.requests[0].body["temperature"] == 0
    assert rerun == apply_rerun(fork, 5, result)
    written = ingest_trace(store, rerun)
    stored = trace_json(store, str(written.id))
    step = stored["steps"][4]
    assert step["output"] == result.output
    assert step["tokens_used"] == 1200
    # The fork never copied the recorded reply (services.outcome); the parent keeps it.
    assert step["metadata"]["rerun"]["original_output"] is None
    assert "outcome" not in step["metadata"]
    assert step["metadata"]["rerun"]["provider"] == "openai"
    assert stored["parent_trace_id"] == parent["id"]


def test_explain_divergence_of_the_regressed_run(fake: FakeAI, traces: dict, clock: Any) -> None:
    """The good and the regressed analytics runs: one call, the model's account parsed."""
    from agent_replay.services import diff as diff_service

    diff = diff_service.diff_traces(traces["trc_demo4goodrun"], traces["trc_demo5regressed"])
    settings = resolve_ai(config_for(fake, "google"), env={})
    explanation = explain_divergence(diff, settings, clock=clock, budget=Budget(0.05))
    (request,) = fake.requests
    assert request.task == "divergence"
    user = request.turns[0][1]
    assert "## RUN A" in user and "## RUN B" in user and "scan_all_orders" in user
    assert explanation.summary == "B skipped the date filter."
    assert (explanation.a_step, explanation.b_step, explanation.better_run) == (3, 3, "a")
    assert explanation.model == "gemini-2.5-flash-lite"
    assert explanation.cost_usd and explanation.cost_usd > 0
    assert any("better run: A" in line for line in explanation.lines())


def test_explain_divergence_obeys_the_budget(fake: FakeAI, traces: dict, clock: Any) -> None:
    from agent_replay.services import diff as diff_service

    diff = diff_service.diff_traces(traces["trc_demo4goodrun"], traces["trc_demo5regressed"])
    settings = resolve_ai(config_for(fake, "anthropic"), env={})
    with pytest.raises(BudgetExceeded, match="divergence explanation"):
        explain_divergence(diff, settings, clock=clock, budget=Budget(0.0005))
    assert fake.requests == []
