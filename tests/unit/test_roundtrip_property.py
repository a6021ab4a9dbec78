"""Property: any valid trace survives ingest -> export -> ingest -> export unchanged, and the
export says what the producer wrote (payloads exact, times canonical)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.services.ingest import ingest_many, ingest_trace
from agent_replay.store.db import Store, ensure_database
from agent_replay.store.queries import iter_trace_json
from agent_replay.store.trace_detail import trace_json
from agent_replay.trace.models import (
    MAX_SAFE_INT,
    MAX_STEP_TOKENS,
    STEP_TYPES,
    TRACE_STATUSES,
    canonical_time,
    parse_time,
)

PROPERTY = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- strategies -----------------------------------------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.text(max_size=12)  # any unicode but surrogates, including NUL and emoji
SCALARS = (
    st.none()
    | st.booleans()
    | INT64
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
    | st.sampled_from(["1", "1.0", "null", "true", "", '"x"', "日本語", "🎉"])
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=8,
)
JSON_OBJECT = st.dictionaries(TEXT, JSON, max_size=4)
NAME = st.text(min_size=1, max_size=10)
ID_PART = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
    min_size=1,
    max_size=12,
)

ZONES = st.sampled_from(
    [
        dt.UTC,
        dt.timezone(dt.timedelta(hours=2)),
        dt.timezone(dt.timedelta(hours=-5, minutes=-30)),
        None,  # a naive timestamp, taken as UTC
    ]
)
INSTANTS = st.datetimes(
    min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2099, 1, 1), timezones=st.just(dt.UTC)
)


@st.composite
def timestamp(draw: st.DrawFn, instant: dt.datetime) -> str:
    """The instant rendered the way some producer might: Z, an offset, or naive."""
    zone = draw(ZONES)
    if zone is None:
        return instant.replace(tzinfo=None).isoformat()
    text = instant.astimezone(zone).isoformat()
    if zone is dt.UTC and draw(st.booleans()):
        text = text.replace("+00:00", "Z")
    return text


@st.composite
def span(draw: st.DrawFn) -> dict[str, str]:
    """started_at / ended_at (either may be missing); the end is never before the start."""
    out: dict[str, str] = {}
    start = draw(INSTANTS)
    end = start + draw(st.timedeltas(min_value=dt.timedelta(0), max_value=dt.timedelta(days=2)))
    if draw(st.booleans()):
        out["started_at"] = draw(timestamp(start))
    if draw(st.booleans()):
        out["ended_at"] = draw(timestamp(end))
    return out


def maybe(draw: st.DrawFn, out: dict[str, Any], key: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        out[key] = draw(strategy)


@st.composite
def decision(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(NAME, unique=True, max_size=4))
    options = []
    for name in names:
        option: dict[str, Any] = {"option": name}
        maybe(draw, option, "rationale", TEXT)
        maybe(draw, option, "score", st.floats(allow_nan=False, allow_infinity=False))
        options.append(option)
    out: dict[str, Any] = {
        "options": options,
        "chosen": draw(st.sampled_from(names)) if names else draw(NAME),
    }
    maybe(draw, out, "rationale", TEXT)
    maybe(draw, out, "confidence", st.floats(min_value=0, max_value=1))
    maybe(draw, out, "decided_by", st.sampled_from(["agent", "user", "policy"]))
    return out


@st.composite
def snapshot(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    maybe(draw, out, "context_window", JSON)
    maybe(draw, out, "environment", JSON_OBJECT)
    maybe(draw, out, "tool_state", JSON_OBJECT)
    return out


@st.composite
def step(draw: st.DrawFn, number: int, earlier: list[int]) -> dict[str, Any]:
    step_type = draw(st.sampled_from(STEP_TYPES))
    out: dict[str, Any] = {"step_number": number, "step_type": step_type, **draw(span())}
    if earlier:
        maybe(draw, out, "parent_step", st.sampled_from(earlier))
        maybe(draw, out, "caused_by_step", st.sampled_from(earlier))
    if step_type == "decision":
        maybe(draw, out, "decision", decision())
    maybe(draw, out, "snapshot", snapshot())
    maybe(draw, out, "id", ID_PART.map(lambda s: f"stp_{s}"))
    for key in ("input", "output"):
        maybe(draw, out, key, JSON)
    for key in ("name", "error", "model"):
        maybe(draw, out, key, TEXT)
    maybe(draw, out, "tokens_used", st.integers(min_value=0, max_value=MAX_STEP_TOKENS))
    maybe(draw, out, "duration_ms", st.floats(min_value=0, allow_infinity=False))
    maybe(draw, out, "metadata", JSON_OBJECT)
    return out


@st.composite
def evaluation(draw: st.DrawFn) -> dict[str, Any]:
    finite = st.floats(allow_nan=False, allow_infinity=False)
    out: dict[str, Any] = {
        "evaluator": draw(NAME),
        "score": draw(finite),
        "passed": draw(st.booleans()),
    }
    maybe(draw, out, "threshold", finite)
    maybe(draw, out, "details", JSON)
    maybe(draw, out, "model", TEXT)
    maybe(draw, out, "cost_usd", st.floats(min_value=0, allow_infinity=False))
    maybe(draw, out, "created_at", INSTANTS.flatmap(timestamp))
    return out


@st.composite
def valid_trace(draw: st.DrawFn) -> dict[str, Any]:
    numbers = sorted(draw(st.sets(st.integers(min_value=1, max_value=10_000), max_size=6)))
    steps = [draw(step(n, numbers[:i])) for i, n in enumerate(numbers)]
    # step numbers, not list positions, carry the order: producers may list steps in any order
    steps = draw(st.permutations(steps))
    # explicit step ids must be unique within the trace
    seen: set[str] = set()
    for s in steps:
        if s.get("id") in seen:
            del s["id"]
        elif "id" in s:
            seen.add(s["id"])
    out: dict[str, Any] = {"agent_name": draw(NAME), "steps": steps, **draw(span())}
    maybe(draw, out, "id", ID_PART.map(lambda s: f"trc_{s}"))
    maybe(draw, out, "status", st.sampled_from(TRACE_STATUSES))
    maybe(draw, out, "tags", st.lists(NAME.filter(str.strip), max_size=4))
    for key in ("input", "output"):
        maybe(draw, out, key, JSON)
    for key in ("agent_version", "trigger", "error", "session_id"):
        maybe(draw, out, key, TEXT)
    maybe(draw, out, "metadata", JSON_OBJECT)
    maybe(draw, out, "total_tokens", st.integers(min_value=0, max_value=MAX_SAFE_INT))
    maybe(draw, out, "total_duration_ms", st.floats(min_value=0, allow_infinity=False))
    maybe(draw, out, "total_cost_usd", st.floats(min_value=0, allow_infinity=False))
    maybe(draw, out, "evals", st.lists(evaluation(), max_size=3))
    if draw(st.booleans()):
        out["parent_trace_id"] = "trc_" + draw(ID_PART)
        maybe(draw, out, "forked_from_step", st.integers(min_value=1, max_value=10_000))
    return out


# --- helpers --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Store]]:
    """Two stores, emptied at the start of every example (cheaper than a new file each)."""
    first = ensure_database(tmp_path_factory.mktemp("first"))
    second = ensure_database(tmp_path_factory.mktemp("second"))
    yield first, second
    first.close()
    second.close()


def emptied(store: Store) -> Store:
    """The store with every trace gone (rows of steps, tags, evals... cascade)."""
    with store.write():
        store.db.execute_sql("DELETE FROM traces")
    assert store.db.execute_sql("SELECT COUNT(*) FROM steps").fetchone()[0] == 0
    return store


def exact(value: Any) -> str:
    """Type- and order-precise JSON text: 1 vs 1.0 vs "1", key order, -0.0."""
    return json.dumps(value, ensure_ascii=False)


def canonical(text: str | None) -> str | None:
    return None if text is None else canonical_time(parse_time(text))


def export_again(store: Store, exported: dict[str, Any]) -> dict[str, Any]:
    stored = ingest_trace(emptied(store), exported)
    assert stored.id == exported["id"]
    return trace_json(store, exported["id"])


# --- properties -----------------------------------------------------------------------------


@PROPERTY
@given(data=valid_trace())
def test_ingest_export_ingest_export_is_stable(
    stores: tuple[Store, Store], data: dict[str, Any]
) -> None:
    first, second = stores
    stored = ingest_trace(emptied(first), data)
    assert stored.id is not None
    exported = trace_json(first, stored.id)
    assert exact(export_again(second, exported)) == exact(exported)


@PROPERTY
@given(data=valid_trace())
def test_export_says_what_the_producer_wrote(
    stores: tuple[Store, Store], data: dict[str, Any]
) -> None:
    store = emptied(stores[0])
    exported = trace_json(store, ingest_trace(store, data).id or "")

    assert exported["agent_name"] == data["agent_name"]
    if "id" in data:
        assert exported["id"] == data["id"]
    for key in ("input", "output"):
        assert exact(exported[key]) == exact(data.get(key))
    for key in ("started_at", "ended_at"):
        assert exported[key] == canonical(data.get(key))
    for key in ("total_tokens", "total_duration_ms", "total_cost_usd"):
        if key in data:
            assert exact(exported[key]) == exact(data[key])
    own_metadata = {k: v for k, v in exported["metadata"].items() if k != "original_times"}
    given_metadata = {k: v for k, v in data.get("metadata", {}).items() if k != "original_times"}
    assert exact(own_metadata) == exact(given_metadata)
    assert exported["tags"] == list(dict.fromkeys(t.strip() for t in data.get("tags", [])))
    assert exported["parent_trace_id"] == data.get("parent_trace_id")
    assert exported["forked_from_step"] == data.get("forked_from_step")

    given_steps = {s["step_number"]: s for s in data["steps"]}
    assert [s["step_number"] for s in exported["steps"]] == sorted(given_steps)
    for out in exported["steps"]:
        src = given_steps[out["step_number"]]
        assert out["step_type"] == src["step_type"]
        for key in ("input", "output", "name", "error", "model", "tokens_used"):
            assert exact(out[key]) == exact(src.get(key)), key
        for key in ("parent_step", "caused_by_step"):
            assert out[key] == src.get(key)
        for key in ("started_at", "ended_at"):
            assert out[key] == canonical(src.get(key))
        if "id" in src:
            assert out["id"] == src["id"]
        if "duration_ms" in src:
            assert exact(out["duration_ms"]) == exact(src["duration_ms"])
        if "decision" in src:
            want = {"options": [], "rationale": None, "confidence": None, "decided_by": "agent"}
            want |= src["decision"]
            want["options"] = [
                {"option": o["option"], "rationale": None, "score": None} | o
                for o in want["options"]
            ]
            got = out["decision"]
            assert exact(sorted(got.items())) == exact(sorted(want.items()))
        else:
            assert out["decision"] is None
        if "snapshot" in src:
            want = {"context_window": None, "environment": None, "tool_state": None}
            assert exact(out["snapshot"]) == exact(want | src["snapshot"])
        else:
            assert out["snapshot"] is None

    given_evals = data.get("evals", [])
    assert len(exported["evals"]) == len(given_evals)
    assert sorted(exact(e["details"]) for e in exported["evals"]) == sorted(
        exact(e.get("details")) for e in given_evals
    )


def step_ids_unique_across(traces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Step ids are global primary keys: keep an explicit one only the first time it appears."""
    seen: set[str] = set()
    for trace in traces:
        for s in trace["steps"]:
            if s.get("id") in seen:
                del s["id"]
            elif "id" in s:
                seen.add(s["id"])
    return traces


@settings(PROPERTY, max_examples=25)
@given(
    traces=st.lists(valid_trace(), min_size=1, max_size=3, unique_by=lambda t: t.get("id")).map(
        step_ids_unique_across
    )
)
def test_bulk_export_round_trip_is_stable(
    stores: tuple[Store, Store], traces: list[dict[str, Any]]
) -> None:
    """iter_trace_json (export --format jsonl) -> ingest_many -> iter_trace_json again."""
    first, second = (emptied(s) for s in stores)
    report = ingest_many(first, [(f"line {n}", t) for n, t in enumerate(traces, 1)])
    assert report.rejected == []
    exported = list(iter_trace_json(first, page_size=2))
    assert sorted(t["id"] for t in exported) == sorted(report.ingested)
    again = ingest_many(second, [(f"line {n}", t) for n, t in enumerate(exported, 1)])
    assert again.rejected == []
    exported_again = list(iter_trace_json(second, page_size=3))
    by_id = {t["id"]: exact(t) for t in exported}
    assert {t["id"]: exact(t) for t in exported_again} == by_id
