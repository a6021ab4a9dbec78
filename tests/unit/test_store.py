"""The store: opening (pragmas, permissions), exact payload round trips, id prefixes, list
filters and keyset pagination, all-or-nothing ingest, and forks."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from agent_replay.errors import (
    AmbiguousIdError,
    NotFoundError,
    StoreError,
    TraceFormatError,
    UsageError,
)
from agent_replay.services.ingest import ingest_many, ingest_trace
from agent_replay.store.core import execute
from agent_replay.store.db import Store, ensure_database, open_store
from agent_replay.store.queries import (
    SORT_COLUMNS,
    TraceFilter,
    count_traces,
    iter_trace_json,
    list_traces,
)
from agent_replay.store.trace_detail import get_trace, resolve_trace_id, step_span, trace_json
from agent_replay.trace.io import iter_jsonl
from agent_replay.trace.models import time_ms

# --- opening --------------------------------------------------------------------------------


def pragma(store: Store, name: str) -> Any:
    return store.db.execute_sql(f"PRAGMA {name}").fetchone()[0]


@pytest.mark.sqlite_only
def test_pragmas_on_open(store: Store) -> None:
    assert pragma(store, "journal_mode") == "wal"
    assert pragma(store, "busy_timeout") >= 10000
    assert pragma(store, "foreign_keys") == 1
    assert pragma(store, "synchronous") == 1  # NORMAL


@pytest.mark.sqlite_only
def test_pragmas_on_reopen(store_dir: Path, store: Store) -> None:
    store.close()
    with open_store(store_dir) as again:
        assert pragma(again, "journal_mode") == "wal"
        assert pragma(again, "busy_timeout") >= 10000
        assert pragma(again, "foreign_keys") == 1
        assert pragma(again, "synchronous") == 1


@pytest.mark.sqlite_only
def test_store_file_and_dir_are_private(store_dir: Path, store: Store, make_trace: Any) -> None:
    ingest_trace(store, make_trace(1))
    assert stat.S_IMODE(os.stat(store_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store_dir / "traces.db").st_mode) == 0o600
    for sidecar in ("traces.db-wal", "traces.db-shm"):
        if (store_dir / sidecar).exists():
            assert stat.S_IMODE(os.stat(store_dir / sidecar).st_mode) & 0o077 == 0


def test_private_even_with_permissive_umask(store_dir: Path) -> None:
    old = os.umask(0)
    try:
        ensure_database(store_dir).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(store_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store_dir / "traces.db").st_mode) == 0o600


def test_ensure_database_accepts_a_db_file(tmp_path: Path) -> None:
    with ensure_database(tmp_path / "custom.db") as db:
        assert db.path == tmp_path / "custom.db"
    assert (tmp_path / "custom.db").is_file()


def test_open_without_create_refuses_missing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no agent-replay store"):
        open_store(tmp_path / "nowhere", create=False)
    assert not (tmp_path / "nowhere").exists()


def test_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    bogus = tmp_path / "traces.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError):
        open_store(bogus)


def test_foreign_keys_cascade_on_trace_delete(store: Store, make_trace: Any) -> None:
    trace = ingest_trace(store, make_trace(2))
    execute(store, "DELETE FROM traces WHERE id = ?", [trace.id])
    assert execute(store, "SELECT COUNT(*) FROM steps").fetchone()[0] == 0
    assert execute(store, "SELECT COUNT(*) FROM tags").fetchone()[0] == 0


# --- payloads round-trip exactly ------------------------------------------------------------


PAYLOADS = [
    "hello",
    "1",
    1,
    1.0,
    -0.0,
    0.1,
    1e-300,
    1.7976931348623157e308,
    2**63 - 1,
    -(2**63),
    True,
    False,
    "",
    "null",
    '"quoted"',
    "line\nbreak\ttab\x00nul",
    "héllo ✓ 日本語 🎉 \u200b",
    [],
    {},
    [1, "1", 1.0, None, True],
    {"b": 1, "a": {"z": [1, {"y": "2"}], "é": None}},
]


def exact(value: Any) -> str:
    """A type-precise rendering: 1 vs 1.0 vs "1" and key order all differ."""
    return json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize("value", PAYLOADS, ids=lambda v: exact(v)[:30])
def test_payloads_round_trip_exactly(store: Store, value: Any) -> None:
    trace = ingest_trace(
        store,
        {
            "agent_name": "a",
            "input": value,
            "output": value,
            "metadata": {"v": value},
            "steps": [
                {
                    "step_number": 1,
                    "step_type": "tool_call",
                    "input": value,
                    "output": value,
                    "metadata": {"v": value},
                    "snapshot": {
                        "context_window": value,
                        "environment": {"v": value},
                        "tool_state": {"v": value},
                    },
                }
            ],
            "evals": [{"evaluator": "e", "score": 0.5, "passed": True, "details": value}],
        },
    )
    assert trace.id is not None
    back = trace_json(store, trace.id)
    step = back["steps"][0]
    assert exact(back["input"]) == exact(value)
    assert exact(back["output"]) == exact(value)
    assert exact(back["metadata"]) == exact({"v": value})
    assert exact(step["input"]) == exact(value)
    assert exact(step["output"]) == exact(value)
    assert exact(step["metadata"]) == exact({"v": value})
    assert exact(step["snapshot"]["context_window"]) == exact(value)
    assert exact(step["snapshot"]["environment"]) == exact({"v": value})
    assert exact(back["evals"][0]["details"]) == exact(value)


def test_string_payload_stored_as_json_string(store: Store) -> None:
    """A string input is stored as its JSON encoding, so it never turns into a number."""
    trace = ingest_trace(store, {"agent_name": "a", "input": "42"})
    raw = execute(store, "SELECT input FROM traces WHERE id = ?", [trace.id])
    assert raw.fetchone()[0] == '"42"'
    assert trace_json(store, trace.id or "")["input"] == "42"


def test_null_payload_stays_null(store: Store) -> None:
    trace = ingest_trace(store, {"agent_name": "a"})
    back = trace_json(store, trace.id or "")
    assert back["input"] is None
    assert back["output"] is None
    assert back["metadata"] == {}


def test_decision_round_trips(store: Store) -> None:
    decision = {
        "options": [
            {"option": "retry", "rationale": "transient", "score": 0.25},
            {"option": "give up", "rationale": None, "score": None},
        ],
        "chosen": "retry",
        "rationale": "the error looked transient",
        "confidence": 0.75,
        "decided_by": "policy",
    }
    trace = ingest_trace(
        store,
        {
            "agent_name": "a",
            "steps": [{"step_number": 1, "step_type": "decision", "decision": decision}],
        },
    )
    assert trace_json(store, trace.id or "")["steps"][0]["decision"] == decision


def test_tags_keep_their_order(store: Store) -> None:
    trace = ingest_trace(store, {"agent_name": "a", "tags": ["zeta", "alpha", "mid"]})
    assert trace_json(store, trace.id or "")["tags"] == ["zeta", "alpha", "mid"]


def test_extra_ingest_tags_added_after_own(store: Store) -> None:
    trace = ingest_trace(store, {"agent_name": "a", "tags": ["b", "a"]}, tags=["c", "a"])
    assert trace_json(store, trace.id or "")["tags"] == ["b", "a", "c"]


def test_ingest_returns_trace_as_stored(store: Store, make_trace: Any) -> None:
    returned = ingest_trace(store, make_trace(3))
    assert returned.id is not None
    assert all(s.id is not None and s.id.startswith("stp_") for s in returned.steps)
    assert get_trace(store, returned.id).model_dump() == returned.model_dump()


def test_ingest_derives_missing_totals(store: Store, make_trace: Any) -> None:
    trace = ingest_trace(store, make_trace(3))
    assert trace.total_tokens == 30
    assert trace.total_duration_ms == 4000.0
    assert [s.duration_ms for s in trace.steps] == [500.0, 500.0, 500.0]


def test_ingest_keeps_given_totals(store: Store, make_trace: Any) -> None:
    trace = ingest_trace(store, make_trace(3, total_tokens=7, total_duration_ms=1.5))
    assert (trace.total_tokens, trace.total_duration_ms) == (7, 1.5)


def test_ingest_strict_refuses_invalid_trace(store: Store) -> None:
    with pytest.raises(TraceFormatError):
        ingest_trace(store, {"agent_name": "a", "steps": [{"step_number": "1"}]})
    assert count_traces(store) == 0


def test_ingest_duplicate_id_refused(store: Store, make_trace: Any) -> None:
    ingest_trace(store, make_trace(1, id="trc_same"))
    with pytest.raises(StoreError, match="already in the store"):
        ingest_trace(store, make_trace(2, id="trc_same"))
    assert len(trace_json(store, "trc_same")["steps"]) == 1


def test_started_at_ms_is_the_ordering_column(store: Store) -> None:
    trace = ingest_trace(store, {"agent_name": "a", "started_at": "2026-01-01T10:00:00+02:00"})
    row = execute(store, "SELECT started_at, started_at_ms FROM traces WHERE id = ?", (trace.id,))
    assert tuple(row.fetchone()) == (
        "2026-01-01T08:00:00.000Z",
        time_ms("2026-01-01T08:00:00.000Z"),
    )


# --- id prefixes ----------------------------------------------------------------------------


@pytest.fixture
def prefixed(store: Store) -> Store:
    for trace_id in ("trc_aaaa1", "trc_aaaa2", "trc_bbbb", "trc_cc", "trc_cc9"):
        ingest_trace(store, {"id": trace_id, "agent_name": "a"})
    return store


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("trc_aaaa1", "trc_aaaa1"),
        ("trc_bb", "trc_bbbb"),
        ("bb", "trc_bbbb"),
        ("aaaa2", "trc_aaaa2"),
        ("  trc_bbbb  ", "trc_bbbb"),
        ("trc_cc", "trc_cc"),  # a full id wins over the longer ids it prefixes
        ("cc9", "trc_cc9"),
    ],
)
def test_resolve_prefix(prefixed: Store, text: str, expected: str) -> None:
    assert resolve_trace_id(prefixed, text) == expected


@pytest.mark.parametrize("text", ["zzz", "trc_zzz", "trc_aaaa3", "stp_aaaa1"])
def test_resolve_not_found(prefixed: Store, text: str) -> None:
    with pytest.raises(NotFoundError):
        resolve_trace_id(prefixed, text)


@pytest.mark.parametrize("text", ["aaaa", "trc_aaaa", "trc_aa", "a"])
def test_resolve_ambiguous_names_candidates(prefixed: Store, text: str) -> None:
    with pytest.raises(AmbiguousIdError) as info:
        resolve_trace_id(prefixed, text)
    assert info.value.candidates == ["trc_aaaa1", "trc_aaaa2"]
    assert "trc_aaaa1" in info.value.message and "trc_aaaa2" in info.value.message
    assert isinstance(info.value, UsageError)
    assert info.value.exit_code == 2


def test_resolve_ambiguous_many_candidates_shows_five_and_says_more(store: Store) -> None:
    for n in range(8):
        ingest_trace(store, {"id": f"trc_x{n}", "agent_name": "a"})
    with pytest.raises(AmbiguousIdError) as info:
        resolve_trace_id(store, "x")
    assert info.value.candidates[:5] == [f"trc_x{n}" for n in range(5)]
    assert info.value.message.endswith("trc_x0, trc_x1, trc_x2, trc_x3, trc_x4 and more")


def test_resolve_two_candidates_does_not_say_more(prefixed: Store) -> None:
    with pytest.raises(AmbiguousIdError) as info:
        resolve_trace_id(prefixed, "aaaa")
    assert "and more" not in info.value.message


def test_resolve_empty_is_usage_error(prefixed: Store) -> None:
    with pytest.raises(UsageError):
        resolve_trace_id(prefixed, "  ")


def test_get_trace_by_prefix(prefixed: Store) -> None:
    assert get_trace(prefixed, "bbb").id == "trc_bbbb"
    with pytest.raises(AmbiguousIdError):
        get_trace(prefixed, "aaaa")


def test_trace_json_step_range(store: Store, make_trace: Any) -> None:
    trace = ingest_trace(store, make_trace(6))
    ranged = trace_json(store, trace.id or "", from_step=2, to_step=4)
    assert [s["step_number"] for s in ranged["steps"]] == [2, 3, 4]
    assert [s["step_number"] for s in trace_json(store, trace.id or "", from_step=5)["steps"]] == [
        5,
        6,
    ]


def test_trace_json_unknown_id(store: Store) -> None:
    with pytest.raises(NotFoundError):
        trace_json(store, "trc_missing")


# --- list filters ---------------------------------------------------------------------------


@pytest.fixture
def listed(store: Store) -> Store:
    rows = [
        ("trc_l1", "alpha", "completed", "2026-01-01T10:00:00Z", ["prod"], "s1"),
        ("trc_l2", "alpha", "failed", "2026-01-02T10:00:00Z", ["prod", "slow"], "s1"),
        ("trc_l3", "beta", "completed", "2026-01-03T10:00:00Z", ["dev"], "s2"),
        ("trc_l4", "beta", "running", "2026-01-04T10:00:00Z", [], None),
        ("trc_l5", "gamma", "timeout", "2026-01-05T10:00:00Z", ["slow"], "s2"),
    ]
    for trace_id, agent, status, started, tags, session in rows:
        ingest_trace(
            store,
            {
                "id": trace_id,
                "agent_name": agent,
                "status": status,
                "started_at": started,
                "tags": tags,
                "session_id": session,
            },
        )
    return store


def listed_ids(store: Store, filters: TraceFilter | None = None, **kwargs: Any) -> list[str]:
    return [item.id for item in list_traces(store, filters, **kwargs).items]


def test_list_newest_first_by_default(listed: Store) -> None:
    assert listed_ids(listed) == ["trc_l5", "trc_l4", "trc_l3", "trc_l2", "trc_l1"]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (TraceFilter(status="completed"), ["trc_l3", "trc_l1"]),
        (TraceFilter(status="forked"), []),
        (TraceFilter(agent="alpha"), ["trc_l2", "trc_l1"]),
        (TraceFilter(agent="alp"), []),
        (TraceFilter(tag="slow"), ["trc_l5", "trc_l2"]),
        (TraceFilter(tag="prod"), ["trc_l2", "trc_l1"]),
        (TraceFilter(session="s2"), ["trc_l5", "trc_l3"]),
        (TraceFilter(since_ms=time_ms("2026-01-03T10:00:00Z")), ["trc_l5", "trc_l4", "trc_l3"]),
        (TraceFilter(since_ms=time_ms("2026-01-03T10:00:00.001Z")), ["trc_l5", "trc_l4"]),
        (TraceFilter(agent="beta", status="running"), ["trc_l4"]),
        (TraceFilter(tag="slow", session="s1"), ["trc_l2"]),
        (TraceFilter(text="gam"), ["trc_l5"]),
        (TraceFilter(text="%"), []),
    ],
    ids=lambda v: repr(v) if isinstance(v, TraceFilter) else None,
)
def test_list_filters(listed: Store, filters: TraceFilter, expected: list[str]) -> None:
    assert listed_ids(listed, filters) == expected


def test_list_summary_json_shape(listed: Store) -> None:
    item = list_traces(listed, TraceFilter(agent="alpha"), limit=1).items[0]
    data = item.to_json()
    assert data["id"] == "trc_l2"
    assert data["tags"] == ["prod", "slow"]
    assert data["step_count"] == 0
    assert data["is_fork"] is False
    assert "steps" not in data


def test_unknown_status_filter_is_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown status"):
        TraceFilter(status="done")


def test_unknown_sort_is_usage_error(store: Store) -> None:
    with pytest.raises(UsageError, match="unknown sort"):
        list_traces(store, sort="name")


# --- sorting and keyset pagination ---------------------------------------------------------

# (id, started_at, tokens, duration, cost): ties and NULLs in every sort column.
SORT_DATA = [
    ("trc_p01", "2026-01-01T00:00:01Z", 50, 10.0, 0.5),
    ("trc_p02", "2026-01-01T00:00:02Z", None, None, None),
    ("trc_p03", "2026-01-01T00:00:02Z", 50, 10.0, 0.5),
    ("trc_p04", "2026-01-01T00:00:03Z", 10, 2.5, 0.01),
    ("trc_p05", "2026-01-01T00:00:04Z", None, 2.5, None),
    ("trc_p06", "2026-01-01T00:00:05Z", 0, 0.0, 0.0),
    ("trc_p07", "2026-01-01T00:00:06Z", 900, None, 3.25),
    ("trc_p08", "2026-01-01T00:00:07Z", 50, 10.0, 0.5),
    ("trc_p09", "2026-01-01T00:00:08Z", None, None, None),
    ("trc_p10", "2026-01-01T00:00:02Z", 10, 99.0, 0.01),
    ("trc_p11", "2026-01-01T00:00:09Z", 10, 2.5, None),
    ("trc_p12", "2026-01-01T00:00:10Z", None, 0.0, 0.0),
    ("trc_p13", "2026-01-01T00:00:01Z", 7, 1.0, 7.0),
]
_SORT_INDEX = {"time": 1, "tokens": 2, "duration": 3, "cost": 4}


@pytest.fixture
def sortable(store: Store) -> Store:
    for trace_id, started, tokens, duration, cost in SORT_DATA:
        ingest_trace(
            store,
            {
                "id": trace_id,
                "agent_name": "a",
                "started_at": started,
                "total_tokens": tokens,
                "total_duration_ms": duration,
                "total_cost_usd": cost,
            },
        )
    return store


def expected_order(sort: str, descending: bool) -> list[str]:
    """SQLite's order: NULL lowest; ties broken by id in the same direction."""
    index = _SORT_INDEX[sort]

    def key(row: tuple[Any, ...]) -> tuple[Any, ...]:
        value = row[index]
        if sort == "time":
            value = time_ms(value)
        return (value is not None, value if value is not None else 0, row[0])

    return [row[0] for row in sorted(SORT_DATA, key=key, reverse=descending)]


@pytest.mark.parametrize("descending", [True, False], ids=["desc", "asc"])
@pytest.mark.parametrize("sort", list(SORT_COLUMNS))
def test_sort_single_page(sortable: Store, sort: str, descending: bool) -> None:
    ids = listed_ids(sortable, sort=sort, descending=descending, limit=100)
    assert ids == expected_order(sort, descending)


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 13])
@pytest.mark.parametrize("descending", [True, False], ids=["desc", "asc"])
@pytest.mark.parametrize("sort", list(SORT_COLUMNS))
def test_keyset_pagination_no_gaps_no_duplicates(
    sortable: Store, sort: str, descending: bool, limit: int
) -> None:
    seen: list[str] = []
    after = None
    for _ in range(len(SORT_DATA) + 2):
        page = list_traces(sortable, sort=sort, descending=descending, limit=limit, after=after)
        assert len(page.items) <= limit
        seen.extend(item.id for item in page.items)
        if page.after is None:
            break
        after = page.after
    else:
        pytest.fail("pagination did not terminate")
    assert seen == expected_order(sort, descending)


def test_pagination_with_filter(sortable: Store) -> None:
    filters = TraceFilter(since_ms=time_ms("2026-01-01T00:00:03Z"))
    seen: list[str] = []
    after = None
    while True:
        page = list_traces(sortable, filters, sort="tokens", limit=2, after=after)
        seen.extend(item.id for item in page.items)
        if page.after is None:
            break
        after = page.after
    eligible = {row[0] for row in SORT_DATA if time_ms(row[1]) >= filters.since_ms}  # type: ignore[operator]
    assert seen == [i for i in expected_order("tokens", True) if i in eligible]


def test_iter_trace_json_streams_every_trace_once(sortable: Store) -> None:
    streamed = list(iter_trace_json(sortable, page_size=4))
    assert [t["id"] for t in streamed] == expected_order("time", True)
    assert all("steps" in t and "evals" in t for t in streamed)


def test_iter_trace_json_limit(sortable: Store) -> None:
    streamed = list(iter_trace_json(sortable, limit=5, page_size=2))
    assert [t["id"] for t in streamed] == expected_order("time", True)[:5]


def test_iter_trace_json_equals_trace_json(store: Store, make_trace: Any) -> None:
    trace = ingest_trace(store, make_trace(4))
    (streamed,) = list(iter_trace_json(store))
    assert streamed == trace_json(store, trace.id or "")


# --- ingest_many: all or nothing per trace -------------------------------------------------


def table_counts(store: Store) -> dict[str, int]:
    return {
        table: execute(store, f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        for table in ("traces", "steps", "tags", "decisions", "snapshots", "evals")
    }


def test_ingest_many_rejects_duplicate_of_existing(store: Store, make_trace: Any) -> None:
    ingest_trace(store, make_trace(1, id="trc_dup", tags=["original"]))
    before = table_counts(store)
    report = ingest_many(
        store,
        [
            ("line 1", make_trace(2, id="trc_one")),
            ("line 2", make_trace(5, id="trc_dup", tags=["imposter"])),
            ("line 3", make_trace(3, id="trc_two")),
        ],
    )
    assert report.ingested == ["trc_one", "trc_two"]
    assert [(r.where, "already in the store" in r.reason) for r in report.rejected] == [
        ("line 2", True)
    ]
    assert report.steps == 5
    after = table_counts(store)
    assert after["traces"] == before["traces"] + 2
    assert after["steps"] == before["steps"] + 5
    kept = trace_json(store, "trc_dup")
    assert len(kept["steps"]) == 1
    assert kept["tags"] == ["original"]


def test_ingest_many_constraint_failure_leaves_nothing_partial(
    store: Store, make_trace: Any
) -> None:
    """A trace whose step id collides fails at insert time; the batch is retried per trace."""
    first = make_trace(2, id="trc_first")
    first["steps"][1]["id"] = "stp_shared"
    clash = make_trace(3, id="trc_clash", tags=["x"])
    clash["steps"][2]["id"] = "stp_shared"
    clash["steps"][0]["step_type"] = "decision"
    clash["steps"][0]["decision"] = {"chosen": "go"}
    clash["steps"][0]["snapshot"] = {"context_window": "ctx"}
    clash["evals"] = [{"evaluator": "e", "score": 1, "passed": True}]
    report = ingest_many(
        store, [("line 1", first), ("line 2", clash), ("line 3", make_trace(1, id="trc_last"))]
    )
    assert report.ingested == ["trc_first", "trc_last"]
    assert [r.where for r in report.rejected] == ["line 2"]
    assert table_counts(store) == {
        "traces": 2,
        "steps": 3,
        "tags": 2,
        "decisions": 0,
        "snapshots": 0,
        "evals": 0,
    }
    with pytest.raises(NotFoundError):
        trace_json(store, "trc_clash")


def test_ingest_many_collects_format_and_parse_failures(store: Store, make_trace: Any) -> None:
    data = b"\n".join(
        [
            json.dumps(make_trace(1, id="trc_ok1")).encode(),
            b"{not json",
            json.dumps({"agent_name": "a", "steps": [{"step_number": 0}]}).encode(),
            b"",
            json.dumps(make_trace(1, id="trc_ok1")).encode(),
            json.dumps(make_trace(2, id="trc_ok2")).encode(),
        ]
    )
    items = ((f"line {n}", obj) for n, obj in iter_jsonl(io.BytesIO(data)))
    report = ingest_many(store, items)
    assert report.ingested == ["trc_ok1", "trc_ok2"]
    rejected = {r.where: r for r in report.rejected}
    assert set(rejected) == {"line 2", "line 3", "line 5"}
    assert "not valid JSON" in rejected["line 2"].reason
    assert ("steps[0].step_number", "Input should be greater than 0 (got 0)") in rejected[
        "line 3"
    ].problems
    assert rejected["line 3"].reason.startswith("invalid line 3:")
    assert "appears twice" in rejected["line 5"].reason
    assert count_traces(store) == 2


def test_ingest_many_across_batches(store: Store, make_trace: Any) -> None:
    progress: list[tuple[int, int]] = []
    items = [(f"trace {n}", make_trace(2, id=f"trc_b{n:02d}")) for n in range(7)]
    report = ingest_many(store, items, batch_size=3, progress=lambda t, s: progress.append((t, s)))
    assert len(report.ingested) == 7
    assert progress == [(3, 6), (6, 12), (7, 14)]
    assert count_traces(store) == 7


def test_ingest_many_dry_run_writes_nothing(store: Store, make_trace: Any) -> None:
    report = ingest_many(
        store, [("line 1", make_trace(2)), ("line 2", {"agent_name": ""})], dry_run=True
    )
    assert len(report.ingested) == 1
    assert len(report.rejected) == 1
    assert report.steps == 2
    assert count_traces(store) == 0


def test_ingest_many_out_of_range_total_rejects_only_that_trace(store: Store) -> None:
    data = b'{"agent_name":"ok1"}\n{"agent_name":"big","total_tokens":9223372036854775808}\n'
    items = ((f"line {n}", obj) for n, obj in iter_jsonl(io.BytesIO(data)))
    report = ingest_many(store, items)
    assert len(report.ingested) == 1
    assert [r.where for r in report.rejected] == ["line 2"]
    assert count_traces(store) == 1


def test_ingest_many_unencodable_payload_rejects_only_that_trace(store: Store) -> None:
    """Python callers can hand over values JSON can't hold; that trace alone is refused."""
    report = ingest_many(
        store,
        [
            ("trace 1", {"agent_name": "ok"}),
            ("trace 2", {"agent_name": "big", "input": 2**70}),
            ("trace 3", {"agent_name": "lone surrogate", "output": "\ud800"}),
        ],
    )
    assert len(report.ingested) == 1
    assert [r.where for r in report.rejected] == ["trace 2", "trace 3"]
    assert count_traces(store) == 1


@pytest.mark.parametrize("field", ["step_number", "forked_from_step"])
def test_ingest_many_out_of_range_step_number_rejects_only_that_trace(
    store: Store, field: str
) -> None:
    big = b"9223372036854775808"
    bad = (
        b'{"agent_name":"big","steps":[{"step_type":"thought","step_number":' + big + b"}]}"
        if field == "step_number"
        else b'{"agent_name":"big","forked_from_step":' + big + b"}"
    )
    data = b'{"agent_name":"ok1"}\n' + bad + b"\n"
    items = ((f"line {n}", obj) for n, obj in iter_jsonl(io.BytesIO(data)))
    report = ingest_many(store, items)
    assert len(report.ingested) == 1
    assert [r.where for r in report.rejected] == ["line 2"]


@pytest.mark.parametrize("value", [2**70, "\ud800"], ids=["big-int", "surrogate"])
def test_ingest_trace_unencodable_payload_is_an_agent_replay_error(
    store: Store, value: Any
) -> None:
    with pytest.raises((TraceFormatError, StoreError)):
        ingest_trace(store, {"agent_name": "a", "input": value})
    assert count_traces(store) == 0


# --- forks ------------------------------------------------------------------------------------


def test_fork_fields_stored_and_returned(store: Store, make_trace: Any) -> None:
    parent = ingest_trace(store, make_trace(3, id="trc_parent"))
    fork = ingest_trace(
        store,
        make_trace(
            2, id="trc_fork", status="forked", parent_trace_id=parent.id, forked_from_step=2
        ),
    )
    loaded = get_trace(store, "trc_fork")
    assert (loaded.parent_trace_id, loaded.forked_from_step, loaded.status) == (
        "trc_parent",
        2,
        "forked",
    )
    assert fork.parent_trace_id == "trc_parent"
    exported = trace_json(store, "trc_fork")
    assert (exported["parent_trace_id"], exported["forked_from_step"]) == ("trc_parent", 2)
    assert get_trace(store, "trc_parent").parent_trace_id is None


def test_forks_listed_by_parent(store: Store, make_trace: Any) -> None:
    ingest_trace(store, make_trace(1, id="trc_parent"))
    ingest_trace(store, make_trace(1, id="trc_other"))
    for n in (1, 2):
        ingest_trace(
            store,
            make_trace(1, id=f"trc_fork{n}", parent_trace_id="trc_parent", forked_from_step=1),
        )
    page = list_traces(store, TraceFilter(forks_of="trc_parent"))
    assert sorted(item.id for item in page.items) == ["trc_fork1", "trc_fork2"]
    assert all(item.is_fork and item.to_json()["is_fork"] for item in page.items)
    others = {i.id: i.is_fork for i in list_traces(store).items}
    assert others["trc_parent"] is False and others["trc_other"] is False


def test_fork_parent_id_must_be_a_trace_id(store: Store) -> None:
    with pytest.raises(TraceFormatError) as info:
        ingest_trace(store, {"agent_name": "a", "parent_trace_id": "nope", "forked_from_step": 0})
    assert sorted(p for p, _ in info.value.problems) == ["forked_from_step", "parent_trace_id"]


def test_step_span_is_the_first_and_last_step_number(store: Store, make_trace: Any) -> None:
    """What the timeline's first read and ``show --from`` plan with, on both backends."""
    ingest_trace(store, make_trace(7, id="trc_span"))
    ingest_trace(store, make_trace(0, id="trc_nosteps"))
    assert step_span(store, "trc_span") == (1, 7)
    assert step_span(store, "trc_nosteps") is None
    assert step_span(store, "trc_unknown") is None
