"""The proxy's contract beyond the happy path: secrets never stored, bad input forwarded and
recorded, upstream errors passed through, a replay that can't match fails fast (409), the
one tweak (``--override``), streams passed on chunk by chunk and replayed byte for byte,
traces grouped by session (one trace with the hook), by process and into a fixed trace."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aifake import isolate_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proxykit import ANTHROPIC_MODEL, ScriptedModel
from test_proxy_sdks import KEYS, anthropic_agent, gemini_agent, only_trace, run_proxy

from agent_replay.clock import FixedClock
from agent_replay.errors import UsageError
from agent_replay.services.hook.capture import apply_hook_payload
from agent_replay.services.proxy.recording import SessionTraces, end_orphans
from agent_replay.services.proxy.replay import load_plan
from agent_replay.services.proxy.replies import read_reply
from agent_replay.services.proxy.rerun import rerun_command
from agent_replay.services.proxy.session import Grouping
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def upstream() -> Iterator[ScriptedModel]:
    model = ScriptedModel()
    yield model
    model.stop()


def post(
    url: str, path: str, body: bytes | dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A raw POST (status, headers, body bytes as received)."""
    host = url.split("//", 1)[1]
    conn = http.client.HTTPConnection(host, timeout=10)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request(
        "POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    response = conn.getresponse()
    out = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, out


def message_body(text: str = "hello", stream: bool = False) -> dict[str, Any]:
    return {
        "model": ANTHROPIC_MODEL,
        "max_tokens": 64,
        "stream": stream,
        "messages": [{"role": "user", "content": text}],
    }


def wait_for_steps(store: Store, count: int) -> None:
    """Until the writer thread has recorded ``count`` steps (it writes after the reply)."""
    deadline = time.monotonic() + 10
    while execute(store, "SELECT COUNT(*) FROM steps", []).fetchone()[0] < count:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def all_traces(store: Store) -> list[dict[str, Any]]:
    rows = execute(
        store, "SELECT id FROM traces ORDER BY started_at_ms, created_at_ms", []
    ).fetchall()
    return [trace_json(store, r[0]) for r in rows]


def stored_text(store: Store) -> bytes:
    """Everything the store holds: the database files byte-wise (SQLite), plus every row."""
    rows = [
        json.dumps(
            [list(r) for r in execute(store, f"SELECT * FROM {table}", []).fetchall()], default=str
        )
        for table in ("traces", "steps")
    ]
    files = store.path.parent.glob("traces.db*") if store.path is not None else []
    return b"".join(p.read_bytes() for p in files) + "".join(rows).encode()


# --- secrets ------------------------------------------------------------------------------------


def test_credentials_are_forwarded_but_never_stored(store: Store, upstream: ScriptedModel) -> None:
    """API keys in x-api-key, Authorization, x-goog-api-key and ?key= reach the upstream and
    never the store (nor its WAL)."""
    proxy = run_proxy(store, upstream.url)
    try:
        anthropic_agent(proxy.url, True)
        gemini_agent(proxy.url, False)
        post(
            proxy.url,
            f"/v1beta/models/gemini-2.0-flash:generateContent?key={KEYS['gemini']}&alt=json",
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
        post(
            proxy.url,
            "/v1/chat/completions",
            {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
            {"Authorization": f"Bearer {KEYS['openai']}", "Cookie": f"session={KEYS['openai']}"},
        )
    finally:
        proxy.stop_thread()
    forwarded = json.dumps([s.headers for s in upstream.seen]) + json.dumps(
        [s.path for s in upstream.seen]
    )
    for key in KEYS.values():
        assert key in forwarded
    raw = stored_text(store)
    assert len(only_trace(store)["steps"]) == 3 + 3 + 2
    for key in KEYS.values():
        assert key.encode() not in raw
    paths = [s["metadata"]["proxy"]["path"] for s in only_trace(store)["steps"]]
    assert "/v1beta/models/gemini-2.0-flash:generateContent?alt=json" in paths


# --- bad input ----------------------------------------------------------------------------------


def test_unparseable_request_is_forwarded_untouched_and_recorded_as_an_error(
    store: Store, upstream: ScriptedModel
) -> None:
    proxy = run_proxy(store, upstream.url)
    try:
        status, _, body = post(proxy.url, "/v1/messages", b"{not json", {"x-api-key": "k"})
    finally:
        proxy.stop_thread()
    assert upstream.seen[-1].body == b"{not json"
    assert status == 400 and b"upstream: body is not JSON" in body  # the upstream's own answer
    (step,) = only_trace(store)["steps"]
    assert step["step_type"] == "error"
    assert "not JSON" in step["error"]
    assert step["input"] == "{not json"
    assert step["metadata"]["proxy"]["status"] == 400


def test_upstream_errors_pass_through_as_they_are(store: Store, upstream: ScriptedModel) -> None:
    import anthropic

    _, _, direct = post(upstream.url, "/v1/messages", message_body("please fail"))
    proxy = run_proxy(store, upstream.url)
    try:
        status, _, via = post(proxy.url, "/v1/messages", message_body("please fail"))
        client = anthropic.Anthropic(api_key="k", base_url=proxy.url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="scripted failure"):
            client.messages.create(**message_body("please fail"))  # type: ignore[arg-type]
    finally:
        proxy.stop_thread()
    assert status == 400 and via == direct
    steps = only_trace(store)["steps"]
    assert [s["error"] for s in steps] == ["HTTP 400: scripted failure"] * 2


def test_other_endpoints_pass_through_unrecorded(store: Store, upstream: ScriptedModel) -> None:
    proxy = run_proxy(store, upstream.url)
    try:
        conn = http.client.HTTPConnection(proxy.url.split("//")[1], timeout=10)
        conn.request("GET", "/v1/models", headers={"Authorization": "Bearer x"})
        response = conn.getresponse()
        body = response.read()
    finally:
        proxy.stop_thread()
    assert response.status == 200 and b"scripted" in body
    assert all_traces(store) == []


# --- replay refusals and the one tweak ---------------------------------------------------------


def test_replay_without_a_matching_recording_fails_fast_with_409_and_a_hint(
    store: Store, upstream: ScriptedModel
) -> None:
    import anthropic

    proxy = run_proxy(store, upstream.url)
    try:
        anthropic_agent(proxy.url, False)
    finally:
        proxy.stop_thread()
    original = only_trace(store)
    upstream.stop()
    replay = run_proxy(
        store, upstream.url, replay=load_plan(store, original["id"], until_step=None, then="fail")
    )
    client = anthropic.Anthropic(
        api_key="k", base_url=replay.url
    )  # default retries: must not retry
    started = time.perf_counter()
    try:
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(**message_body("a question never recorded"))  # type: ignore[arg-type]
    finally:
        replay.stop_thread()
    assert time.perf_counter() - started < 2
    assert caught.value.status_code == 409
    message = str(caught.value)
    assert "differs from the recording" in message and "Hint" in message
    assert replay.stats.requests == 1  # no SDK retry
    fork = trace_json(store, replay.fork_id)  # type: ignore[arg-type]
    assert fork["forked_from_step"] == 1 and fork["steps"][-1]["error"].startswith(
        "agent-replay proxy:"
    )


def test_then_live_with_the_upstream_gone_is_a_502_naming_it(
    store: Store, upstream: ScriptedModel
) -> None:
    import anthropic

    proxy = run_proxy(store, upstream.url)
    try:
        anthropic_agent(proxy.url, False)
    finally:
        proxy.stop_thread()
    upstream.stop()
    plan = load_plan(store, only_trace(store)["id"], until_step=0, then="live")
    replay = run_proxy(store, upstream.url, replay=plan)
    try:
        client = anthropic.Anthropic(api_key="k", base_url=replay.url, max_retries=0)
        with pytest.raises(anthropic.APIStatusError, match="upstream anthropic API") as caught:
            client.messages.create(**message_body())  # type: ignore[arg-type]
    finally:
        replay.stop_thread()
    assert caught.value.status_code == 502


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_override_replaces_the_response_at_step_n(
    store: Store, upstream: ScriptedModel, tmp_path: Path, stream: bool
) -> None:
    proxy = run_proxy(store, upstream.url)
    try:
        recorded = anthropic_agent(proxy.url, stream)
    finally:
        proxy.stop_thread()
    original = only_trace(store)
    reply = tmp_path / "reply.json"
    reply.write_text(json.dumps({"text": "The tweaked answer."}))
    upstream.stop()
    plan = load_plan(store, original["id"], until_step=3, then="fail", overrides=[f"3=@{reply}"])
    replay = run_proxy(store, upstream.url, replay=plan)
    try:
        rerun = anthropic_agent(replay.url, stream)
    finally:
        replay.stop_thread()
    assert rerun[:2] == recorded[:2]
    assert rerun[2]["content"] == [
        {"type": "text", "text": "The tweaked answer.", "citations": None}
    ]
    fork = trace_json(store, replay.fork_id)  # type: ignore[arg-type]
    assert fork["forked_from_step"] == 3
    assert fork["steps"][2]["metadata"]["replay"]["override"] == "@reply.json"
    assert fork["steps"][2]["output"] == {"text": "The tweaked answer.", "stop_reason": "end_turn"}


def test_bad_overrides_are_usage_errors(
    store: Store, upstream: ScriptedModel, tmp_path: Path
) -> None:
    proxy = run_proxy(store, upstream.url)
    try:
        anthropic_agent(proxy.url, False)
    finally:
        proxy.stop_thread()
    trace_id = only_trace(store)["id"]
    with pytest.raises(UsageError, match="not a recorded model call"):
        load_plan(store, trace_id, until_step=None, then="live", overrides=["9={}"])
    with pytest.raises(UsageError, match="after --until-step"):
        load_plan(store, trace_id, until_step=1, then="live", overrides=["2={}"])
    with pytest.raises(UsageError, match="cannot read"):
        load_plan(
            store,
            trace_id,
            until_step=None,
            then="live",
            overrides=[f"1=@{tmp_path / 'missing.json'}"],
        )
    with pytest.raises(UsageError, match="STEP=@file.json"):
        load_plan(store, trace_id, until_step=None, then="live", overrides=["x"])


def test_a_trace_without_proxy_recordings_cannot_be_replayed(store: Store) -> None:
    from agent_replay.services.recorder import TraceRecorder

    rec = TraceRecorder(store)
    trace_id = rec.start_trace("agent")
    rec.step(trace_id, {"step_type": "llm_call", "name": "m", "output": "hi"})
    with pytest.raises(UsageError, match="no exchanges recorded by the proxy"):
        load_plan(store, trace_id, until_step=None, then="live")


# --- streams ------------------------------------------------------------------------------------


def test_streams_pass_through_chunk_by_chunk_and_replay_byte_identical(
    store: Store, upstream: ScriptedModel
) -> None:
    """The first event reaches the client while the upstream still holds the rest; a replay
    sends the very same bytes in the same chunks."""
    upstream.hold_streams = True
    proxy = run_proxy(store, upstream.url)
    try:
        conn = http.client.HTTPConnection(proxy.url.split("//")[1], timeout=10)
        conn.request(
            "POST",
            "/v1/messages",
            body=json.dumps(message_body(stream=True)),
            headers={"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        first = response.read1(65536)  # arrives although the upstream has not finished
        assert b"message_start" in first and not upstream.release.is_set()
        upstream.release.set()
        rest = response.read()
        conn.close()
    finally:
        proxy.stop_thread()
    streamed = first + rest
    trace = only_trace(store)
    proxy_meta = trace["steps"][0]["metadata"]["proxy"]
    assert proxy_meta["response_body"].encode() == streamed
    assert len(proxy_meta["chunk_sizes"]) > 3  # kept as the upstream sent them

    upstream.stop()
    replay = run_proxy(
        store, upstream.url, replay=load_plan(store, trace["id"], until_step=None, then="fail")
    )
    try:
        status, headers, again = post(replay.url, "/v1/messages", message_body(stream=True))
    finally:
        replay.stop_thread()
    assert status == 200 and again == streamed
    assert headers["content-type"].startswith("text/event-stream")


# --- grouping -----------------------------------------------------------------------------------


def test_session_header_groups_exchanges_and_is_not_forwarded(
    store: Store, upstream: ScriptedModel
) -> None:
    proxy = run_proxy(store, upstream.url)
    try:
        for name in ("alpha", "beta", "alpha"):
            post(
                proxy.url,
                "/v1/messages",
                message_body(f"hi {name}"),
                {"X-Agent-Replay-Session": name, "X-Agent-Replay-Agent": "support-bot"},
            )
    finally:
        proxy.stop_thread()
    traces = all_traces(store)
    assert [(t["session_id"], t["agent_name"], len(t["steps"])) for t in traces] == [
        ("alpha", "support-bot", 2),
        ("beta", "support-bot", 1),
    ]
    assert traces[0]["input"] == "hi alpha"
    assert not any("x-agent-replay" in k.lower() for s in upstream.seen for k in s.headers)


def test_claude_code_session_captured_by_hook_and_proxy_is_one_trace(
    store: Store, upstream: ScriptedModel
) -> None:
    clock = FixedClock(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    session = "0f7e3c1a-1111-4222-8333-944445555666"
    headers = {
        "X-Claude-Code-Session-Id": session,
        "User-Agent": "claude-cli/2.1.332 (external, sdk-cli)",
    }
    proxy = run_proxy(store, upstream.url)
    try:
        post(proxy.url, "/v1/messages?beta=true", message_body("list the files"), headers)
        wait_for_steps(store, 1)
        apply_hook_payload(
            store,
            {
                "session_id": session,
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_input": {"command": "ls"},
                "tool_use_id": "toolu_1",
                "cwd": "/w",
                "transcript_path": f"/home/dev/.claude/projects/w/{session}.jsonl",
            },
            {"dialect": "claude"},
            clock,
        )
        post(proxy.url, "/v1/messages?beta=true", message_body("and then?"), headers)
    finally:
        proxy.stop_thread()
    (trace,) = all_traces(store)
    assert trace["session_id"] == session and trace["agent_name"] == "claude-code"
    assert [s["step_type"] for s in trace["steps"]] == ["llm_call", "tool_call", "llm_call"]


def test_proxy_joins_the_trace_the_hook_opened(store: Store, upstream: ScriptedModel) -> None:
    clock = FixedClock(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    session = "0f7e3c1a-aaaa-4222-8333-944445555666"
    apply_hook_payload(
        store,
        {
            "session_id": session,
            "hook_event_name": "UserPromptSubmit",
            "prompt": "hi",
            "transcript_path": f"/h/.claude/projects/w/{session}.jsonl",
        },
        {"dialect": "claude"},
        clock,
    )
    proxy = run_proxy(store, upstream.url)
    try:
        body = {
            **message_body(),
            "metadata": {"user_id": json.dumps({"device_id": "d", "session_id": session})},
        }
        post(
            proxy.url,
            "/v1/messages",
            body,
            {"User-Agent": "claude-cli/2.1.332 (external, sdk-cli)"},
        )
    finally:
        proxy.stop_thread()
    (trace,) = all_traces(store)
    assert trace["steps"][-1]["step_type"] == "llm_call"
    assert trace["status"] == "running"  # the hook's trace: the hook ends it, not the proxy


def test_trace_per_fixed_records_into_one_named_trace(
    store: Store, upstream: ScriptedModel
) -> None:
    for _ in range(2):
        proxy = run_proxy(store, upstream.url, grouping=Grouping.parse("fixed:trc_nightly_run"))
        try:
            post(proxy.url, "/v1/messages", message_body(), {"X-Agent-Replay-Session": "ignored"})
        finally:
            proxy.stop_thread()
    (trace,) = all_traces(store)
    assert trace["id"] == "trc_nightly_run" and len(trace["steps"]) == 2


CLIENT = """
import http.client, json, sys
for text in ("one", "two"):
    conn = http.client.HTTPConnection(sys.argv[1], timeout=10)
    turn = {"role": "user", "content": text}
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": [turn]})
    conn.request("POST", "/v1/messages", body=body, headers={"Content-Type": "application/json"})
    conn.getresponse().read()
    conn.close()
"""


def test_each_client_process_gets_its_own_trace(store: Store, upstream: ScriptedModel) -> None:
    proxy = run_proxy(store, upstream.url, grouping=Grouping.parse("process"))
    try:
        host = proxy.url.split("//")[1]
        for _ in range(2):
            subprocess.run([sys.executable, "-c", CLIENT, host], check=True, timeout=30)
    finally:
        proxy.stop_thread()
    traces = all_traces(store)
    assert [len(t["steps"]) for t in traces] == [2, 2]
    groups = {t["metadata"]["proxy"]["group"] for t in traces}
    assert len(groups) == 2 and all(
        g.startswith("process:") and g != "process:unknown" for g in groups
    )


def test_a_trace_left_running_by_a_dead_proxy_is_ended(store: Store) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    traces = SessionTraces(store, redact=True)
    trace_id = traces.rec.start_trace(
        "agent",
        source_format="proxy",
        metadata={"proxy": {"pid": dead.pid, "host": os.uname().nodename}},
    )
    alive = traces.rec.start_trace(
        "agent",
        source_format="proxy",
        metadata={"proxy": {"pid": os.getpid(), "host": os.uname().nodename}},
    )
    assert end_orphans(store, redact=True) == [trace_id]
    assert trace_json(store, trace_id)["status"] == "timeout"
    assert trace_json(store, alive)["status"] == "running"


# --- the re-run command -------------------------------------------------------------------------


def test_rerun_command_replays_up_to_the_step_before(store: Store, upstream: ScriptedModel) -> None:
    proxy = run_proxy(store, upstream.url)
    try:
        anthropic_agent(proxy.url, False)
    finally:
        proxy.stop_thread()
    trace = only_trace(store)
    assert rerun_command(trace, 3) == f"agent-replay proxy --replay {trace['id']} --until-step 2"
    assert rerun_command(trace, 1, store_dir="/my store", port=9000) == (
        f"agent-replay proxy --replay {trace['id']} --until-step 0 --port 9000 --dir '/my store'"
    )
    with pytest.raises(UsageError, match="no step 7"):
        rerun_command(trace, 7)


# --- hostile input ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["messages", "chat", "responses", "generate"]),
    status=st.sampled_from([200, 400, 500]),
    stream=st.booleans(),
    body=st.one_of(st.binary(max_size=400), st.text(max_size=400).map(str.encode)),
)
def test_reading_any_reply_never_raises(kind: str, status: int, stream: bool, body: bytes) -> None:
    reply = read_reply(kind, status, b"data: " + body if stream else body, stream)  # type: ignore[arg-type]
    assert reply.output() is None or isinstance(reply.output(), dict)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(
        [
            "/v1/messages",
            "/v1/chat/completions",
            "/v1/responses",
            "/v1beta/models/g:generateContent",
        ]
    ),
    body=st.one_of(st.binary(max_size=200), JSONISH.map(lambda v: json.dumps(v).encode())),
)
def test_hostile_requests_are_forwarded_and_recorded(
    store: Store, upstream: ScriptedModel, path: str, body: bytes
) -> None:
    """Whatever the body, the upstream's answer comes back and one step is recorded."""
    before = len(upstream.seen)
    counted = execute(store, "SELECT COUNT(*) FROM steps", []).fetchone()[0]
    proxy = run_proxy(store, upstream.url)
    try:
        status, _, _ = post(proxy.url, path, body)
    finally:
        proxy.stop_thread()
    assert len(upstream.seen) == before + 1 and upstream.seen[-1].body == body
    assert status in (200, 400, 404)
    assert execute(store, "SELECT COUNT(*) FROM steps", []).fetchone()[0] == counted + 1


def test_an_integer_past_64_bits_in_a_request_is_kept_as_its_digits(
    store: Store, upstream: ScriptedModel
) -> None:
    """The store's JSON holds 64-bit integers: a bigger one (found by hypothesis) is recorded as
    its digits instead of losing the step; the upstream gets the bytes as sent."""
    body = json.dumps({"model": ANTHROPIC_MODEL, "max_tokens": 2**70, "messages": []}).encode()
    counted = execute(store, "SELECT COUNT(*) FROM steps", []).fetchone()[0]
    proxy = run_proxy(store, upstream.url)
    try:
        post(proxy.url, "/v1/messages", body)
    finally:
        proxy.stop_thread()
    assert upstream.seen[-1].body == body
    assert execute(store, "SELECT COUNT(*) FROM steps", []).fetchone()[0] == counted + 1
    inputs = [row[0] or "" for row in execute(store, "SELECT input FROM steps", []).fetchall()]
    assert sum(str(2**70) in text for text in inputs) == 1
