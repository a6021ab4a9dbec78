"""The proxy end to end with the real SDKs: anthropic, openai (Chat Completions and Responses)
and google-genai, streamed and not, each running a small tool-using agent loop through the
proxy to a scripted upstream (``proxykit``); then again in replay mode with the upstream
stopped (identical SDK results), and with ``--then live`` after a step (the upstream answers
the rest)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aifake import isolate_env
from proxykit import ANTHROPIC_MODEL, GEMINI_MODEL, OPENAI_MODEL, TOOL_TURNS, ScriptedModel

from agent_replay.services.proxy.replay import load_plan
from agent_replay.services.proxy.server import ProxyConfig, ProxyServer
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json

KEYS = {
    "anthropic": "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 3,
    "openai": "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 3,
    "gemini": "AIzaSyD" + "k3Y9mQ2xT7vB4nL8pR1sW6cF0hJ5gZ",
}
"""Realistic-looking keys: they must never reach the store."""

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
PROMPT = "What is the weather like?"


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def upstream() -> Iterator[ScriptedModel]:
    model = ScriptedModel()
    yield model
    model.stop()


def run_proxy(store: Store, upstream_url: str, **config: Any) -> ProxyServer:
    upstreams = {"anthropic": upstream_url, "openai": upstream_url, "gemini": upstream_url}
    proxy = ProxyServer(store, ProxyConfig(port=0, upstreams=upstreams, **config))  # type: ignore[arg-type]
    proxy.start_in_thread()
    return proxy


# --- the agent loops, one per SDK: what they return is what the "agent" saw ------------------


def anthropic_agent(url: str, stream: bool) -> list[Any]:
    import anthropic

    client = anthropic.Anthropic(api_key=KEYS["anthropic"], base_url=url, max_retries=0)
    tools = [
        {
            "name": WEATHER["name"],
            "description": WEATHER["description"],
            "input_schema": WEATHER["parameters"],
        }
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    seen = []
    for _ in range(TOOL_TURNS + 1):
        args = {"model": ANTHROPIC_MODEL, "max_tokens": 256, "messages": messages, "tools": tools}
        if stream:
            with client.messages.stream(**args) as events:  # type: ignore[arg-type]
                message = events.get_final_message()
        else:
            message = client.messages.create(**args)  # type: ignore[arg-type]
        seen.append(message.model_dump())
        uses = [b for b in message.content if b.type == "tool_use"]
        if not uses:
            break
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in message.content],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u.id, "content": "sunny"} for u in uses
                ],
            }
        )
    return seen


def chat_agent(url: str, stream: bool) -> list[Any]:
    import openai

    client = openai.OpenAI(api_key=KEYS["openai"], base_url=f"{url}/v1", max_retries=0)
    tools = [{"type": "function", "function": WEATHER}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    seen: list[Any] = []
    for _ in range(TOOL_TURNS + 1):
        if stream:
            chunks = list(
                client.chat.completions.create(
                    model=OPENAI_MODEL,
                    messages=messages,
                    tools=tools,
                    stream=True,  # type: ignore[arg-type]
                    stream_options={"include_usage": True},
                )
            )
            seen.append([c.model_dump() for c in chunks])
            calls: dict[int, dict[str, Any]] = {}
            text = ""
            for c in chunks:
                for choice in c.choices:
                    text += choice.delta.content or ""
                    for tc in choice.delta.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] += tc.id or ""
                        slot["name"] += (tc.function.name or "") if tc.function else ""
                        slot["arguments"] += (tc.function.arguments or "") if tc.function else ""
            tool_calls = [
                {
                    "id": s["id"],
                    "type": "function",
                    "function": {"name": s["name"], "arguments": s["arguments"]},
                }
                for s in calls.values()
            ]
        else:
            completion = client.chat.completions.create(
                model=OPENAI_MODEL, messages=messages, tools=tools
            )  # type: ignore[arg-type]
            seen.append(completion.model_dump())
            message = completion.choices[0].message
            text = message.content or ""
            tool_calls = [tc.model_dump() for tc in message.tool_calls or []]
        if not tool_calls:
            break
        messages.append({"role": "assistant", "content": text or None, "tool_calls": tool_calls})
        messages += [
            {"role": "tool", "tool_call_id": tc["id"], "content": "sunny"} for tc in tool_calls
        ]
    return seen


def responses_agent(url: str, stream: bool) -> list[Any]:
    import openai

    client = openai.OpenAI(api_key=KEYS["openai"], base_url=f"{url}/v1", max_retries=0)
    tools = [{"type": "function", **WEATHER}]
    items: list[Any] = [{"role": "user", "content": PROMPT}]
    seen: list[Any] = []
    for _ in range(TOOL_TURNS + 1):
        if stream:
            events = list(
                client.responses.create(model=OPENAI_MODEL, input=items, tools=tools, stream=True)
            )  # type: ignore[arg-type]
            seen.append([e.model_dump() for e in events])
            final = next(e.response for e in events if e.type == "response.completed")
        else:
            final = client.responses.create(model=OPENAI_MODEL, input=items, tools=tools)  # type: ignore[arg-type]
            seen.append(final.model_dump())
        calls = [o for o in final.output if o.type == "function_call"]
        if not calls:
            break
        for call in calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
            )
    return seen


def gemini_agent(url: str, stream: bool) -> list[Any]:
    from google import genai
    from google.genai import types

    client = genai.Client(api_key=KEYS["gemini"], http_options=types.HttpOptions(base_url=url))
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(**WEATHER)])],  # type: ignore[arg-type]
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents: list[Any] = [types.Content(role="user", parts=[types.Part(text=PROMPT)])]
    seen: list[Any] = []
    for _ in range(TOOL_TURNS + 1):
        if stream:
            chunks = list(
                client.models.generate_content_stream(
                    model=GEMINI_MODEL, contents=contents, config=config
                )
            )
            seen.append([c.model_dump(exclude={"sdk_http_response"}) for c in chunks])
            parts = [p for c in chunks for p in (c.candidates[0].content.parts or [])]  # type: ignore[index,union-attr]
        else:
            response = client.models.generate_content(
                model=GEMINI_MODEL, contents=contents, config=config
            )
            seen.append(response.model_dump(exclude={"sdk_http_response"}))
            parts = list(response.candidates[0].content.parts or [])  # type: ignore[index,union-attr]
        calls = [p.function_call for p in parts if p.function_call]
        if not calls:
            break
        contents.append(types.Content(role="model", parts=parts))
        contents.append(
            types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            name=c.name, response={"weather": "sunny"}
                        )
                    )
                    for c in calls
                ],
            )
        )
    return seen


AGENTS: dict[str, Callable[[str, bool], list[Any]]] = {
    "anthropic": anthropic_agent,
    "chat": chat_agent,
    "responses": responses_agent,
    "gemini": gemini_agent,
}
CASES = [(api, stream) for api in AGENTS for stream in (False, True)]
IDS = [f"{api}-{'stream' if stream else 'plain'}" for api, stream in CASES]


def final_text(api: str, seen: list[Any]) -> str:
    """The last answer's text, whatever the SDK's shape."""
    return json.dumps(seen[-1])


def only_trace(store: Store) -> dict[str, Any]:
    from agent_replay.store.core import execute

    rows = execute(store, "SELECT id FROM traces ORDER BY started_at_ms", []).fetchall()
    assert len(rows) == 1, rows
    return trace_json(store, rows[0][0])


# --- recording -------------------------------------------------------------------------------


@pytest.mark.parametrize(("api", "stream"), CASES, ids=IDS)
def test_sdk_calls_are_recorded_as_llm_steps(
    store: Store, upstream: ScriptedModel, api: str, stream: bool
) -> None:
    """Every exchange of a tool-using agent becomes an llm_call with model, request, tool calls,
    tokens, cost and latency; the SDK sees exactly what the upstream sent."""
    direct = AGENTS[api](upstream.url, stream)
    calls_direct = upstream.calls
    proxy = run_proxy(store, upstream.url)
    try:
        via = AGENTS[api](proxy.url, stream)
    finally:
        proxy.stop_thread()
    assert len(via) == len(direct) == TOOL_TURNS + 1
    # Same conversation through the proxy: only the upstream's call numbers differ.
    assert json.dumps(via).count("get_weather") == json.dumps(direct).count("get_weather")
    assert f"call {calls_direct + TOOL_TURNS + 1}" in final_text(api, via)

    trace = only_trace(store)
    assert trace["status"] == "completed"
    steps = trace["steps"]
    assert [s["step_type"] for s in steps] == ["llm_call"] * (TOOL_TURNS + 1)
    first, last = steps[0], steps[-1]
    model = {"anthropic": ANTHROPIC_MODEL, "gemini": GEMINI_MODEL}.get(api, OPENAI_MODEL)
    assert first["model"] == model
    request = json.dumps(first["input"])
    assert PROMPT in request and "get_weather" in request  # the messages and the tool definitions
    assert first["output"]["tool_calls"][0]["name"] == "get_weather"
    assert first["output"]["tool_calls"][0]["input"] == {"city": "City0"}
    assert "sunny everywhere" in last["output"]["text"]
    n = calls_direct + 1
    assert first["tokens_used"] == (100 + 10 * n) + (20 + n)
    assert first["metadata"]["cost_usd"] > 0
    assert (
        first["metadata"]["latency_ms"]["total"]
        >= first["metadata"]["latency_ms"]["first_byte"]
        > 0
    )
    assert first["metadata"]["proxy"]["stream"] is stream
    assert trace["total_cost_usd"] == pytest.approx(sum(s["metadata"]["cost_usd"] for s in steps))


# --- replay with the upstream stopped ---------------------------------------------------------


@pytest.mark.parametrize(("api", "stream"), CASES, ids=IDS)
def test_replay_serves_the_recording_without_the_upstream(
    store: Store, upstream: ScriptedModel, api: str, stream: bool
) -> None:
    """With the upstream stopped, the same agent gets identical SDK results from the replay,
    and the re-run is a fork whose steps are marked as served."""
    proxy = run_proxy(store, upstream.url)
    try:
        recorded = AGENTS[api](proxy.url, stream)
    finally:
        proxy.stop_thread()
    original = only_trace(store)
    dead = upstream.url
    upstream.stop()

    plan = load_plan(store, original["id"], until_step=None, then="fail")
    replay = run_proxy(store, dead, replay=plan)
    try:
        replayed = AGENTS[api](replay.url, stream)
    finally:
        replay.stop_thread()
    assert replayed == recorded
    assert replay.stats.served == TOOL_TURNS + 1 and replay.stats.live == replay.stats.refused == 0

    fork = trace_json(store, replay.fork_id)  # type: ignore[arg-type]
    assert fork["parent_trace_id"] == original["id"]
    assert fork["status"] == "forked"
    assert [s["metadata"]["replay"] for s in fork["steps"]] == [
        {"served": True, "trace": original["id"], "step": s["step_number"]}
        for s in original["steps"]
    ]


@pytest.mark.parametrize(
    ("api", "stream"),
    [("anthropic", True), ("chat", False), ("responses", True), ("gemini", False)],
    ids=["anthropic-stream", "chat-plain", "responses-stream", "gemini-plain"],
)
def test_then_live_continues_against_the_upstream_after_step_n(
    store: Store, upstream: ScriptedModel, api: str, stream: bool
) -> None:
    """--until-step 1 --then live: step 1 comes from the recording, the rest from the upstream;
    the fork holds the served step and the live ones, and departs at step 2."""
    proxy = run_proxy(store, upstream.url)
    try:
        recorded = AGENTS[api](proxy.url, stream)
    finally:
        proxy.stop_thread()
    original = only_trace(store)
    before = upstream.calls

    replay = run_proxy(
        store, upstream.url, replay=load_plan(store, original["id"], until_step=1, then="live")
    )
    try:
        rerun = AGENTS[api](replay.url, stream)
    finally:
        replay.stop_thread()
    assert rerun[0] == recorded[0]  # served
    assert rerun[1] != recorded[1]  # asked again: a new call of the upstream
    assert upstream.calls == before + TOOL_TURNS
    assert (replay.stats.served, replay.stats.live) == (1, TOOL_TURNS)

    fork = trace_json(store, replay.fork_id)  # type: ignore[arg-type]
    assert fork["forked_from_step"] == 2
    assert fork["metadata"]["replay"]["diverged_at"] == 2
    assert "until-step" in fork["metadata"]["replay"]["reason"]
    assert [("replay" in s["metadata"]) for s in fork["steps"]] == [True] + [False] * TOOL_TURNS
    assert f"call {before + TOOL_TURNS}" in json.dumps(fork["steps"][-1]["output"])

    from agent_replay.services.diff import diff_stored

    diff = diff_stored(store, original["id"], fork["id"])
    kinds = [pair.kind for pair in diff.pairs]
    assert kinds[0] == "matched" and "changed" in kinds[1:]
