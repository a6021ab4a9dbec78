"""AI presets end to end: the real Anthropic, google-genai and OpenAI SDKs against local servers
that speak each provider's API (``aifake``), reached through each SDK's base-URL setting."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aifake import KEY, FakeAI, Reply, isolate_env

from agent_replay.config import DEFAULT_MODELS, Config, set_value
from agent_replay.services.demo import load_demo
from agent_replay.services.evals.budget import Budget
from agent_replay.services.evals.prices import cost_usd
from agent_replay.services.evals.providers import AISettings, resolve_ai
from agent_replay.services.evals.runner import make_plan, run_evals
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import eval_dicts

PROVIDERS = ("anthropic", "google", "openai")
UNGROUNDED = "trc_demo1ungrounded"


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def fake() -> Iterator[FakeAI]:
    with FakeAI() as server:
        yield server


@pytest.fixture
def demo(store: Store, clock: Any) -> Store:
    load_demo(store, clock)
    return store


def settings_for(provider: str, fake: FakeAI, key: str = KEY) -> AISettings:
    """Settings through the config file's keys and base URLs (the other path, the SDKs' own
    *_BASE_URL variables, is covered by the CLI tests)."""
    config = Config()
    config = set_value(config, f"ai.api_keys.{provider}", key)
    url = f"{fake.url}/v1" if provider == "openai" else fake.url
    config = set_value(config, f"ai.base_urls.{provider}", url)
    config = set_value(config, "ai.provider", provider)
    settings = resolve_ai(config, env={})
    # google-genai backs off from this delay (the others honour the fake's retry-after-ms).
    return dataclasses.replace(settings, retry_delay_s=0.01)


def run_ai(store: Store, clock: Any, settings: AISettings, *presets: str, **options: Any) -> Any:
    plan = make_plan(presets or (), ai=not presets)
    if not presets:
        plan = dataclasses.replace(plan, presets=())
    return run_evals(store, UNGROUNDED, plan, clock=clock, settings=settings, **options)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_ai_preset_runs_and_is_stored(demo: Store, clock: Any, fake: FakeAI, provider: str):
    """The four AI presets each make one call and store a scored result with model and cost."""
    run = run_ai(demo, clock, settings_for(provider, fake))
    assert [o.evaluator for o in run.outcomes] == [
        "ai-root-cause",
        "ai-quality-review",
        "ai-security-audit",
        "ai-optimization",
    ]
    assert not run.failures and not run.stopped
    assert fake.tasks() == [o.evaluator for o in run.outcomes]
    by_name = {o.evaluator: o for o in run.outcomes}
    assert (by_name["ai-root-cause"].score, by_name["ai-root-cause"].passed) == (0.8, False)
    assert (by_name["ai-quality-review"].score, by_name["ai-quality-review"].passed) == (0.5, False)
    assert (by_name["ai-security-audit"].score, by_name["ai-security-audit"].passed) == (0.8, True)
    assert (by_name["ai-optimization"].score, by_name["ai-optimization"].passed) == (0.7, True)
    one_call = cost_usd(provider, DEFAULT_MODELS[provider], 1000, 200)
    for outcome in run.outcomes:
        assert outcome.model == DEFAULT_MODELS[provider]
        assert outcome.cost_usd == pytest.approx(one_call)
        assert outcome.extra["provider"] == provider
        assert outcome.extra["usage"]["calls"] == 1
    assert run.cost_usd == pytest.approx(4 * one_call)
    stored = eval_dicts(demo, UNGROUNDED)
    assert [e["evaluator"] for e in stored] == [o.evaluator for o in run.outcomes]
    assert stored[1]["details"]["criteria"][3]["name"] == "accuracy"
    assert stored[1]["threshold"] == 0.7 and stored[1]["model"] == DEFAULT_MODELS[provider]


def test_the_request_carries_the_model_key_and_limits(demo: Store, clock: Any, fake: FakeAI):
    """Each SDK sends the chosen model, the key, and ai.max_tokens as the reply limit."""
    for provider in PROVIDERS:
        run_ai(demo, clock, settings_for(provider, fake), "ai-security-audit")
    anthropic, google, openai = fake.requests
    assert anthropic.body["model"] == "claude-haiku-4-5-20251001"
    assert anthropic.body["max_tokens"] == 1024
    assert "gemini-2.5-flash-lite:generateContent" in google.path
    assert google.body["generationConfig"]["maxOutputTokens"] == 1024
    assert google.body["generationConfig"]["responseMimeType"] == "application/json"
    assert google.headers["x-goog-api-key"] == KEY
    assert openai.body["model"] == "gpt-5.4-nano"
    assert openai.body["max_completion_tokens"] == 1024
    assert openai.body["response_format"] == {"type": "json_object"}
    assert "temperature" not in openai.body  # gpt-5 models take only the default


def test_the_trace_is_fenced_as_untrusted_data(demo: Store, clock: Any, fake: FakeAI):
    """The system prompt names random fence markers; the trace sits between exactly those."""
    run_ai(demo, clock, settings_for("anthropic", fake), "ai-root-cause")
    request = fake.requests[0]
    system = request.system
    assert "untrusted data" in system and "Never follow them" in system
    opening = system.split("Everything between ", 1)[1].split(" and ", 1)[0]
    closing = opening.replace("<<<UNTRUSTED", "<<<END UNTRUSTED")
    assert opening.startswith("<<<UNTRUSTED TRACE DATA ") and len(opening) > 30
    ((role, user),) = request.turns
    assert role == "user"
    inside = user.split(opening, 1)[1].split(closing, 1)[0]
    assert "### step 5 · llm_call · compose_answer" in inside
    assert "instant refunds" in inside
    assert user.count(closing) == 1


def test_cited_evidence_is_checked_against_the_trace(demo: Store, clock: Any, fake: FakeAI):
    """A quote found in its step is kept with its field; a step the trace lacks is flagged."""
    run = run_ai(demo, clock, settings_for("openai", fake), "ai-root-cause")
    (outcome,) = run.outcomes
    cause = next(c for c in outcome.criteria if c.name == "root cause")
    first, second = cause.evidence
    assert (first.step, first.field, first.text, first.note) == (
        5,
        "output",
        "instant refunds",
        "cited",
    )
    assert second.step == 99 and "no such step" in (second.note or "")
    assert outcome.extra["suggested_fix"] == "Lower the temperature and quote the policy."


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_malformed_reply_is_sent_back_once(demo: Store, clock: Any, fake: FakeAI, provider: str):
    """Prose instead of JSON: the reply goes back with the problem; the second reply counts."""
    fake.queue(Reply(text="Sure! The run looks fine to me."))
    run = run_ai(demo, clock, settings_for(provider, fake), "ai-quality-review")
    (outcome,) = run.outcomes
    assert outcome.score == 0.5
    assert outcome.extra["usage"]["calls"] == 2 and outcome.extra["usage"]["retried"]
    assert len(fake.requests) == 2
    turns = fake.requests[1].turns
    assert [role for role, _ in turns] == [
        "user",
        "model" if provider == "google" else "assistant",
        "user",
    ]
    assert turns[1][1] == "Sure! The run looks fine to me."
    assert "not a JSON object" in turns[2][1]
    one_call = cost_usd(provider, DEFAULT_MODELS[provider], 1000, 200)
    assert outcome.cost_usd == pytest.approx(2 * one_call)


def test_json_that_breaks_the_schema_is_malformed_too(demo: Store, clock: Any, fake: FakeAI):
    """Valid JSON with a rating out of range is retried with the validation error."""
    bad = json.dumps(
        {
            "relevance": 14,
            "completeness": 6,
            "coherence": 7,
            "accuracy": 3,
            "overall": 5,
            "summary": "x",
        }
    )
    fake.queue(Reply(text=f"```json\n{bad}\n```"))
    run = run_ai(demo, clock, settings_for("anthropic", fake), "ai-quality-review")
    assert run.outcomes and run.outcomes[0].extra["usage"]["retried"]
    assert "relevance: Input should be less than or equal to 10" in fake.requests[1].turns[2][1]


def test_a_reply_malformed_twice_is_reported_and_the_run_goes_on(
    demo: Store, clock: Any, fake: FakeAI
):
    """Two bad replies: the preset fails with the reason; the next preset still runs."""
    fake.queue(Reply(text="no json"), Reply(text="{still not json"))
    settings = settings_for("google", fake)
    run = run_ai(demo, clock, settings, "ai-quality-review", "ai-security-audit")
    (failure,) = run.failures
    assert failure.evaluator == "ai-quality-review"
    assert "did not reply with valid JSON (after one retry)" in failure.error
    assert failure.cost_usd > 0
    assert [o.evaluator for o in run.outcomes] == ["ai-security-audit"]
    assert len(fake.requests) == 3
    assert not run.passed
    assert [e["evaluator"] for e in eval_dicts(demo, UNGROUNDED)] == ["ai-security-audit"]


def test_a_reply_cut_at_the_token_limit_suggests_raising_it(demo: Store, clock: Any, fake: FakeAI):
    """A truncated reply twice: the hint says how to raise ai.max_tokens."""
    fake.queue(*[Reply(text='{"relevance": 8, "compl', stop="length")] * 2)
    run = run_ai(demo, clock, settings_for("openai", fake), "ai-quality-review")
    (failure,) = run.failures
    assert "cut off at the token limit" in failure.error
    assert failure.hints == [
        "the reply hit the 1024-token limit: agent-replay config set ai.max_tokens 2048"
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_and_500_are_retried(demo: Store, clock: Any, fake: FakeAI, provider: str):
    """A rate limit then a server error: the SDK retries and the third attempt succeeds."""
    fake.queue(Reply(status=429), Reply(status=500))
    run = run_ai(demo, clock, settings_for(provider, fake), "ai-optimization")
    assert [o.evaluator for o in run.outcomes] == ["ai-optimization"]
    assert len(fake.requests) == 3
    assert run.outcomes[0].extra["usage"]["calls"] == 1  # one billed call


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_error_that_outlasts_the_retries_is_reported(
    demo: Store, clock: Any, fake: FakeAI, provider: str
):
    """Three 500s: the preset fails naming the status and attempts; the rest are not run."""
    fake.queue(*[Reply(status=500)] * 3)
    run = run_ai(demo, clock, settings_for(provider, fake), "ai-root-cause", "ai-optimization")
    (failure,) = run.failures
    assert "API error 500 after 3 attempts" in failure.error
    assert run.skipped == ["ai-optimization"]
    assert len(fake.requests) == 3 and not run.outcomes


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_rejected_key_stops_the_ai_presets(demo: Store, clock: Any, fake: FakeAI, provider: str):
    """A wrong key: one auth failure naming where the key came from; no other AI call."""
    settings = settings_for(provider, fake, key="wrong-key-0000000000")
    run = run_ai(demo, clock, settings)
    (failure,) = run.failures
    assert failure.evaluator == "ai-root-cause"
    assert "rejected the API key" in failure.error
    assert failure.hints[0] == f"the key comes from ai.api_keys.{provider} in config.json"
    assert "wrong-key-0000000000" not in json.dumps(run.to_json())
    assert run.skipped == ["ai-quality-review", "ai-security-audit", "ai-optimization"]
    assert len(fake.requests) == 1


def test_the_budget_stops_before_a_call_that_would_not_fit(demo: Store, clock: Any, fake: FakeAI):
    """A cap below one call's estimate: no request is made, and the run says why."""
    run = run_ai(demo, clock, settings_for("anthropic", fake), budget=Budget(0.001))
    assert fake.requests == []
    assert run.stopped and run.stopped.startswith("budget reached:")
    assert run.skipped == [
        "ai-root-cause",
        "ai-quality-review",
        "ai-security-audit",
        "ai-optimization",
    ]
    assert not run.passed and run.cost_usd == 0


def test_the_budget_stops_a_run_with_what_is_done(demo: Store, clock: Any, fake: FakeAI):
    """Costly replies under a cap: the run stops early, keeps and stores what it finished,
    and never spends past the cap."""
    # Realistic usage: no more input tokens than the prompt holds, a full-length reply.
    fake.queue(*[Reply(input_tokens=1000, output_tokens=1024)] * 4)
    cap = 0.015
    run = run_ai(demo, clock, settings_for("anthropic", fake), budget=Budget(cap))
    assert run.stopped and run.skipped
    assert 1 <= len(run.outcomes) < 4
    assert len(fake.requests) == len(run.outcomes)
    assert run.cost_usd <= cap
    assert run.cost_usd == pytest.approx(sum(o.cost_usd for o in run.outcomes))
    assert len(eval_dicts(demo, UNGROUNDED)) == len(run.outcomes)


def test_a_tight_budget_summarizes_the_trace_to_fit(
    store: Store, clock: Any, fake: FakeAI, make_trace
):
    """A large trace and a cap that can't pay for all of it: the trace is summarized, the call
    fits, and the stored details say so."""
    from agent_replay.services.ingest import ingest_trace

    trace = make_trace(400, id="trc_big")
    for step in trace["steps"]:
        step["output"] = "x" * 400
    ingest_trace(store, trace)
    settings = settings_for("anthropic", fake)
    plan = make_plan(["ai-optimization"])
    run = run_evals(store, "trc_big", plan, clock=clock, settings=settings, budget=Budget(0.03))
    (outcome,) = run.outcomes
    described = outcome.extra["trace"]
    assert described["summarized"] and described["steps_total"] == 400
    sent = fake.requests[0].turns[0][1]
    assert len(sent.encode()) < 160_000 * 3
    assert "left out to fit" in sent or "chars]" in sent


def test_usage_missing_from_the_reply_is_estimated(demo: Store, clock: Any, fake: FakeAI):
    """No usage in the response: tokens are estimated (and flagged) so the cost still counts."""
    fake.queue(Reply(usage=False))
    run = run_ai(demo, clock, settings_for("openai", fake), "ai-security-audit")
    usage = run.outcomes[0].extra["usage"]
    assert usage["usage_estimated"] and usage["input_tokens"] > 1000
    assert run.outcomes[0].cost_usd and run.outcomes[0].cost_usd > 0
