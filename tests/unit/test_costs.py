"""Cost for every llm_call that has a model and tokens but no producer cost: computed with
``genai-prices`` at the one write path (import, OTLP, record, ingest), cache and reasoning
tokens priced as the table says, the table's version stamped, unknown models explained, trace
totals summed from the steps; the table is imported only when a call needs a price."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS
from genai_prices import Usage, calc_price
from genai_prices import __version__ as TABLE_VERSION
from otelkit import otlp_payload, post_all, receiving, traces
from probe import probe

from agent_replay.clock import FixedClock
from agent_replay.entry import main
from agent_replay.services import costs
from agent_replay.services.capture.importer import import_file
from agent_replay.services.ingest import ingest_trace
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json
from agent_replay.trace.base import parse_time
from agent_replay.trace.models import Step


def expected(model: str, when: str | None, **usage: int) -> float:
    """What genai-prices says the call costs."""
    moment = parse_time(when) if when else None
    return float(calc_price(Usage(**usage), model, genai_request_timestamp=moment).total_price)


def llm_calls(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in trace["steps"] if s["step_type"] == "llm_call"]


def stamped(step: dict[str, Any]) -> None:
    source = step["metadata"]["cost_source"]
    assert source["table"] == "genai-prices" and source["version"] == TABLE_VERSION


def column_cost(store: Store, step_id: str) -> float | None:
    row = execute(store, "SELECT cost_usd FROM steps WHERE id = ?", [step_id]).fetchone()
    return None if row[0] is None else float(row[0])


def test_an_imported_codex_rollout_is_priced_call_by_call(store: Store, clock: FixedClock) -> None:
    """Each reply of the real rollout costs what genai-prices says for its
    ``last_token_usage`` (cached input as cache reads, reasoning as part of the output); the
    trace costs their sum."""
    (path,) = (HARNESS / "codex" / "plain" / "rollout").rglob("rollout-*.jsonl")
    usages = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        info = record.get("payload", {}).get("info") if record["type"] == "event_msg" else None
        if isinstance(info, dict) and info.get("last_token_usage"):
            usages.append(info["last_token_usage"])
    trace = trace_json(store, str(import_file(store, path, clock=clock).trace_id))
    calls = llm_calls(trace)
    assert len(calls) == len(usages) == 5
    for step, usage in zip(calls, usages, strict=True):
        cost = expected(
            "gpt-5.5",
            step["started_at"],
            input_tokens=usage["input_tokens"],
            cache_read_tokens=usage["cached_input_tokens"],
            output_tokens=usage["output_tokens"],
            output_reasoning_tokens=usage["reasoning_output_tokens"],
        )
        assert cost > 0 and step["metadata"]["cost_usd"] == pytest.approx(cost, rel=1e-12)
        assert column_cost(store, step["id"]) == pytest.approx(cost, rel=1e-12)
        stamped(step)
        assert step["metadata"]["cost_source"]["provider"] == "openai"
    assert trace["total_cost_usd"] == pytest.approx(sum(s["metadata"]["cost_usd"] for s in calls))
    assert trace["metadata"]["cost_from_steps"] == 5


def test_anthropic_cache_tokens_are_priced_as_cache_reads_and_writes(
    store: Store, clock: FixedClock
) -> None:
    """Claude Code's usage keeps cache reads and writes apart from ``input_tokens``: they are
    priced at the table's cache rates; the transcript's own total (``cost-state``) stays the
    trace's cost."""
    recorder = TraceRecorder(store, clock=clock)
    trace_id = recorder.start_trace("claude-code")
    usage = {
        "input_tokens": 12,
        "cache_creation_input_tokens": 2000,
        "cache_read_input_tokens": 30000,
        "output_tokens": 400,
    }
    when = "2026-01-05T10:00:00Z"
    number = recorder.start_step(
        trace_id, "llm_call", "claude-sonnet-4-5", model="claude-sonnet-4-5", started_at=when
    )
    recorder.end_step(trace_id, number, tokens_used=412, metadata=usage)
    recorder.end_trace(trace_id, total_cost_usd=1.5)
    trace = trace_json(store, trace_id)
    (step,) = llm_calls(trace)
    cost = expected(
        "claude-sonnet-4-5",
        when,
        input_tokens=32012,
        cache_write_tokens=2000,
        cache_read_tokens=30000,
        output_tokens=400,
    )
    plain = expected("claude-sonnet-4-5", when, input_tokens=32012, output_tokens=400)
    assert step["metadata"]["cost_usd"] == pytest.approx(cost) and cost < plain
    stamped(step)
    assert trace["total_cost_usd"] == 1.5  # the producer's total


def test_the_real_transcripts_calls_are_priced_and_its_total_kept(
    store: Store, clock: FixedClock
) -> None:
    (path,) = (HARNESS / "claude-code" / "plain" / "transcript").rglob("*.jsonl")
    trace = trace_json(store, str(import_file(store, path, clock=clock).trace_id))
    for step in llm_calls(trace):
        meta = step["metadata"]
        cost = expected(
            step["model"],
            step["started_at"],
            input_tokens=meta["input_tokens"]
            + meta.get("cache_read_input_tokens", 0)
            + meta.get("cache_creation_input_tokens", 0),
            cache_read_tokens=meta.get("cache_read_input_tokens", 0),
            cache_write_tokens=meta.get("cache_creation_input_tokens", 0),
            output_tokens=meta["output_tokens"],
        )
        assert meta["cost_usd"] == pytest.approx(cost)
    assert trace["total_cost_usd"] == pytest.approx(0.0418)  # cost-state, Claude Code's own


def test_otel_chat_spans_get_a_cost_and_the_trace_their_sum(store_dir: Path) -> None:
    """The GenAI semconv fixture: ``chat gpt-4o-mini`` spans with tokens and no cost (it used
    to show ``Cost -``)."""
    with receiving(store_dir) as (receiver, client, store):
        post_all(client, receiver, [otlp_payload("0005")])
        (trace,) = traces(store)
    chats = [s for s in llm_calls(trace) if s["name"].startswith("chat")]
    assert len(chats) == 2
    for step in chats:
        usage = step["metadata"]["usage"]
        cost = expected(
            step["model"],
            step["started_at"],
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
        )
        assert step["metadata"]["cost_usd"] == pytest.approx(cost)
        stamped(step)
    total = sum(costs_of(trace))
    assert total > 0 and trace["total_cost_usd"] == pytest.approx(total)


def costs_of(trace: dict[str, Any]) -> list[float]:
    return [s["metadata"]["cost_usd"] for s in trace["steps"] if "cost_usd" in s["metadata"]]


def test_an_unknown_model_has_no_cost_and_says_why(store: Store, clock: FixedClock) -> None:
    trace = ingest_trace(
        store,
        {
            "agent_name": "a",
            "steps": [
                {
                    "step_number": 1,
                    "step_type": "llm_call",
                    "model": "acme-brain-9000",
                    "tokens_used": 30,
                    "metadata": {"input_tokens": 20, "output_tokens": 10},
                },
                {"step_number": 2, "step_type": "llm_call", "model": "gpt-4o", "tokens_used": 9},
            ],
        },
        clock=clock,
    )
    stored = trace_json(store, str(trace.id))
    unknown, total_only = stored["steps"]
    assert "cost_usd" not in unknown["metadata"]
    assert unknown["metadata"]["cost_missing"] == (
        f"genai-prices {TABLE_VERSION} has no price for model 'acme-brain-9000'"
    )
    assert total_only["metadata"] == {}  # a total alone can't be priced: left as it is
    assert stored["total_cost_usd"] is None


def test_a_producers_cost_is_kept_and_the_total_mixes_both(store: Store, clock: FixedClock) -> None:
    trace = ingest_trace(
        store,
        {
            "agent_name": "a",
            "steps": [
                {
                    "step_number": 1,
                    "step_type": "llm_call",
                    "model": "gpt-4o",
                    "metadata": {"input_tokens": 1000, "output_tokens": 100, "cost_usd": 0.5},
                },
                {
                    "step_number": 2,
                    "step_type": "llm_call",
                    "model": "gpt-4o",
                    "started_at": "2026-01-01T00:00:00Z",
                    "metadata": {"usage": {"prompt_tokens": 1000, "completion_tokens": 100}},
                },
                {"step_number": 3, "step_type": "tool_call", "name": "x", "tokens_used": 5},
            ],
        },
        clock=clock,
    )
    stored = trace_json(store, str(trace.id))
    producer, table, tool = stored["steps"]
    assert producer["metadata"] == {"input_tokens": 1000, "output_tokens": 100, "cost_usd": 0.5}
    priced = expected("gpt-4o", table["started_at"], input_tokens=1000, output_tokens=100)
    assert table["metadata"]["cost_usd"] == pytest.approx(priced)
    assert tool["metadata"] == {}
    assert stored["total_cost_usd"] == pytest.approx(0.5 + priced)


def test_a_cost_follows_the_tokens_as_a_call_streams_in(store: Store, clock: FixedClock) -> None:
    """A step closed again with larger counts (Gemini's hook merges chunks) is priced again;
    the trace total follows."""
    recorder = TraceRecorder(store, clock=clock, lenient=True)
    trace_id = recorder.start_trace("gemini-cli")
    number = recorder.start_step(trace_id, "llm_call", "m", model="gemini-2.5-flash")
    recorder.end_step(trace_id, number, metadata={"input_tokens": 100, "output_tokens": 1})
    first = trace_json(store, trace_id)["steps"][0]["metadata"]["cost_usd"]
    recorder.end_step(trace_id, number, metadata={"input_tokens": 100, "output_tokens": 500})
    recorder.end_trace(trace_id)
    trace = trace_json(store, trace_id)
    step = trace["steps"][0]
    now = step["started_at"]
    assert first == pytest.approx(
        expected("gemini-2.5-flash", now, input_tokens=100, output_tokens=1)
    )
    assert step["metadata"]["cost_usd"] == pytest.approx(
        expected("gemini-2.5-flash", now, input_tokens=100, output_tokens=500)
    )
    assert trace["total_cost_usd"] == pytest.approx(step["metadata"]["cost_usd"])


@pytest.mark.parametrize(
    ("metadata", "usage"),
    [
        (
            {"input_tokens": 900, "cached_input_tokens": 600, "output_tokens": 20},
            {"input_tokens": 900, "cache_read_tokens": 600, "output_tokens": 20},
        ),
        (
            {"input_tokens": 10, "output_tokens": 20, "thoughts_tokens": 30, "tool_tokens": 5},
            {"input_tokens": 15, "output_tokens": 50, "output_reasoning_tokens": 30},
        ),
        (
            {
                "usage": {
                    "prompt_tokens": 50,
                    "completion_tokens": 70,
                    "prompt_tokens_details": {"cached_tokens": 40},
                    "completion_tokens_details": {"reasoning_tokens": 60},
                }
            },
            {
                "input_tokens": 50,
                "cache_read_tokens": 40,
                "output_tokens": 70,
                "output_reasoning_tokens": 60,
            },
        ),
        (
            {
                "usage": {
                    "input_tokens": 3,
                    "output_tokens": 4,
                    "cache_read_tokens": 8,
                    "cache_creation_tokens": 2,
                }
            },
            {
                "input_tokens": 13,
                "cache_read_tokens": 8,
                "cache_write_tokens": 2,
                "output_tokens": 4,
            },
        ),
        (  # Gemini CLI's telemetry (api_response), as the OTLP receiver keeps it
            {
                "usage": {
                    "input_token_count": 2150,
                    "output_token_count": 30,
                    "cached_content_token_count": 1000,
                    "thoughts_token_count": 12,
                    "tool_token_count": 7,
                    "total_token_count": 2199,
                }
            },
            {
                "input_tokens": 2157,
                "cache_read_tokens": 1000,
                "output_tokens": 42,
                "output_reasoning_tokens": 12,
            },
        ),
        ({"total_tokens": 5}, None),
        ({"input_tokens": True, "output_tokens": -3}, None),
    ],
)
def test_token_conventions_become_the_tables(
    metadata: dict[str, Any], usage: dict[str, int] | None
) -> None:
    """OpenAI/Codex (cached is part of the input), Gemini (thoughts and tool prompts on top),
    OpenAI chat details, Claude Code's OTel (cache on top), Gemini CLI's OTel; no split, no
    price."""
    assert costs.usage_of(metadata) == usage


def test_the_price_table_is_imported_only_for_a_call_to_price(tmp_path: Path) -> None:
    """``record`` of a stream without llm_calls never loads genai-prices; one with an
    unpriced llm_call does."""
    banned = ("genai_prices",)
    plain = '{"v": 1, "type": "trace_start", "trace_id": "t1", "agent_name": "a"}\n'
    plain += '{"v": 1, "type": "step", "trace_id": "t1", "step_type": "tool_call", "name": "x"}\n'
    plain += '{"v": 1, "type": "trace_end", "trace_id": "t1"}\n'
    quiet = probe(argv=["record"], stdin=plain, banned=banned, store_dir=tmp_path / "a")
    assert quiet.code == 0 and quiet.loaded == []
    call = (
        '{"v": 1, "type": "step", "trace_id": "t1", "step_type": "llm_call", "model": "gpt-4o",'
        ' "metadata": {"input_tokens": 5, "output_tokens": 5}}\n'
    )
    start, rest = plain.split("\n", 1)
    mixed = f"{start}\n{call}{rest}"
    priced = probe(argv=["record"], stdin=mixed, banned=banned, store_dir=tmp_path / "b")
    assert priced.code == 0 and "genai_prices" in priced.loaded


def test_the_hook_drainer_never_loads_the_table_for_tool_calls(
    tmp_path: Path, clock: FixedClock
) -> None:
    """The Claude Code hook capture has no llm_calls: draining it loads no price table."""
    lines = (HARNESS / "claude-code" / "plain" / "hooks.jsonl").read_text().splitlines()
    body = f"""
import json
from pathlib import Path
from agent_replay.services.hook.drain import drain_with_lock
from agent_replay.store.db import ensure_database
store = ensure_database(Path({str(tmp_path)!r}))
rows = [json.dumps(json.loads(line)["payload"]) for line in {lines!r}]
with store.write():
    for n, raw in enumerate(rows):
        store.db.execute_sql(
            "INSERT INTO hook_inbox (received_ms, payload, options) VALUES (?, ?, ?)",
            (1_800_000_000_000 + n, raw, "{{}}"),
        )
store.close()
drain_with_lock(Path({str(tmp_path)!r}))
"""
    drained = probe(body, banned=("genai_prices",))
    assert drained.loaded == [], drained.stderr


def test_list_and_show_use_the_computed_cost(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """``list --sort cost`` orders by it (most expensive first); ``show`` prints it, per step
    too, and says where it came from."""

    def call(tokens: int) -> dict[str, Any]:
        meta = {"input_tokens": tokens, "output_tokens": tokens}
        return {"step_number": 1, "step_type": "llm_call", "model": "gpt-4o", "metadata": meta}

    ids = {}
    for tokens in (10, 10_000, 1000):
        ids[tokens] = ingest_trace(store, {"agent_name": "a", "steps": [call(tokens)]}).id
    capsys.readouterr()
    assert main(["list", "--sort", "cost", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [t["id"] for t in listed] == [ids[10_000], ids[1000], ids[10]]
    assert all(t["total_cost_usd"] > 0 for t in listed)
    assert main(["show", str(ids[1000])]) == 0
    shown = capsys.readouterr().out
    cost = listed[1]["total_cost_usd"]
    assert f"Cost ${cost:.4f}" in shown
    assert f"1 llm_call(s) from genai-prices {TABLE_VERSION}" in shown
    assert shown.count(f"${cost:.4f}") == 2  # the header and the step


def test_a_days_old_call_is_priced_at_that_days_prices() -> None:
    """The call's own time picks the table's price (genai-prices keeps each model's history)."""
    step = Step(
        step_number=1,
        step_type="llm_call",
        model="gpt-4o",
        started_at="2024-06-01T00:00:00Z",
        metadata={"input_tokens": 1_000_000, "output_tokens": 0},
    )
    costs.price_step(step)
    when = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    then = calc_price(
        Usage(input_tokens=1_000_000, output_tokens=0), "gpt-4o", genai_request_timestamp=when
    )
    assert step.metadata["cost_usd"] == pytest.approx(float(then.total_price))


def test_the_dashboard_has_cost_by_model_and_by_day(store: Store, clock: FixedClock) -> None:
    """``load_dashboard``: each day's cost (the traces' totals) and each model's (its calls'
    costs, the table's where the producer gave none), unpriced calls counted, not summed."""
    from agent_replay.services.dashboard import load_dashboard

    def call(n: int, model: str, tokens: int, **meta: Any) -> dict[str, Any]:
        usage = {"input_tokens": tokens, "output_tokens": tokens, **meta}
        return {"step_number": n, "step_type": "llm_call", "model": model, "metadata": usage}

    today, yesterday = "2026-06-01T09:00:00Z", "2026-05-31T09:00:00Z"
    ingest_trace(
        store,
        {
            "agent_name": "a",
            "started_at": today,
            "steps": [call(1, "gpt-4o", 1000), call(2, "gpt-4o-mini", 1000)],
        },
        clock=clock,
    )
    ingest_trace(
        store,
        {
            "agent_name": "b",
            "started_at": yesterday,
            "steps": [call(1, "gpt-4o", 500, cost_usd=2.0), call(2, "mystery-1", 10)],
        },
        clock=clock,
    )
    data = load_dashboard(store, clock)
    big = expected("gpt-4o", None, input_tokens=1000, output_tokens=1000)
    small = expected("gpt-4o-mini", None, input_tokens=1000, output_tokens=1000)
    by_model = {m.model: m for m in data.cost_by_model}
    assert [m.model for m in data.cost_by_model] == ["gpt-4o", "gpt-4o-mini", "mystery-1"]
    assert by_model["gpt-4o"].cost_usd == pytest.approx(2.0 + big)
    assert (by_model["gpt-4o"].calls, by_model["gpt-4o"].priced) == (2, 2)
    assert by_model["gpt-4o-mini"].cost_usd == pytest.approx(small)
    assert by_model["mystery-1"].unpriced == 1 and by_model["mystery-1"].cost_usd == 0
    days = {b.day.isoformat(): b for b in data.per_day}
    assert days["2026-06-01"].cost_usd == pytest.approx(big + small)
    assert days["2026-05-31"].cost_usd == pytest.approx(2.0)
    assert data.totals.cost_usd == pytest.approx(2.0 + big + small)
    per_day = data.cost_by_model_per_day
    assert [m.model for m in per_day[dt.date(2026, 5, 31)]] == ["gpt-4o", "mystery-1"]
    cached = load_dashboard(store, clock, step_cache=data.step_cache)
    assert cached.cost_by_model == data.cost_by_model
