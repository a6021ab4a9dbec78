"""Full-text search on both backends: what is indexed (names, inputs, outputs, errors of traces
and steps), the query language (words, "phrases", prefix*), ranking, the matching step and its
snippet, filters, the index following every write, and the trace list's free-text filter."""

from __future__ import annotations

import random
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.clock import FixedClock
from agent_replay.services.ingest import ingest_trace
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.core import execute
from agent_replay.store.db import Store
from agent_replay.store.queries import TraceFilter, list_traces, where_sql
from agent_replay.store.search import (
    catch_up,
    cut_snippet,
    fts5_query,
    parse_search,
    rank_sqlite,
    tsquery,
)
from agent_replay.store.trace_search import search


def ids(results: list[Any]) -> list[str]:
    return [r.trace.id for r in results]


@pytest.fixture
def corpus(store: Store) -> Store:
    """Three traces: a refund bot that failed on a connection, a travel bot, a SQL agent."""
    ingest_trace(
        store,
        {
            "id": "trc_refund",
            "agent_name": "support-bot",
            "status": "failed",
            "started_at": "2026-01-03T10:00:00Z",
            "input": {"question": "Where is my refund for order 7?"},
            "error": "ECONNREFUSED calling api.payments.example.com",
            "tags": ["prod"],
            "steps": [
                {"step_number": 1, "step_type": "thought", "name": "plan", "output": "look up"},
                {
                    "step_number": 2,
                    "step_type": "tool_call",
                    "name": "lookup_order",
                    "input": {"order_id": 7},
                    "output": {"status": "shipped", "note": "line one\nrefund pending"},
                },
                {
                    "step_number": 3,
                    "step_type": "tool_call",
                    "name": "issue_refund",
                    "input": {"order_id": 7},
                    "error": "connection refused by the payments gateway",
                },
            ],
        },
    )
    ingest_trace(
        store,
        {
            "id": "trc_travel",
            "agent_name": "travel-agent",
            "status": "completed",
            "started_at": "2026-01-02T10:00:00Z",
            "input": "book a flight to Lisbon",
            "steps": [
                {
                    "step_number": 1,
                    "step_type": "tool_call",
                    "name": "search_flights",
                    "output": "3 flights found; refund policy: none",
                },
            ],
        },
    )
    ingest_trace(
        store,
        {
            "id": "trc_sql",
            "agent_name": "analytics-sql-agent",
            "status": "completed",
            "started_at": "2026-01-01T10:00:00Z",
            "session_id": "sess-42",
            "steps": [
                {
                    "step_number": 1,
                    "step_type": "llm_call",
                    "name": "write_query",
                    "output": "SELECT region, SUM(amount) FROM orders GROUP BY region",
                },
            ],
        },
    )
    return store


# --- the query language --------------------------------------------------------------------


def test_queries_split_like_the_index() -> None:
    """Words fold case; punctuation splits a token into a phrase; quotes make a phrase; a
    trailing star makes a prefix."""
    terms = parse_search('Refund "Order 7" api.example.com canc*')
    assert [(t.words, t.prefix) for t in terms] == [
        (("refund",), False),
        (("order", "7"), False),
        (("api", "example", "com"), False),
        (("canc",), True),
    ]
    assert fts5_query(terms) == '"refund" AND "order 7" AND "api example com" AND "canc"*'
    assert tsquery(terms) == (
        "('refund') & ('order' <-> '7') & ('api' <-> 'example' <-> 'com') & ('canc':*)"
    )
    assert parse_search("% -- !!") == []


def test_a_query_without_words_finds_nothing(corpus: Store) -> None:
    assert search(corpus, "%%") == []
    assert search(corpus, "nosuchword") == []


# --- what is found ---------------------------------------------------------------------------


def test_words_in_step_outputs_errors_and_trace_fields_are_found(corpus: Store) -> None:
    assert ids(search(corpus, "shipped")) == ["trc_refund"]  # a step output (JSON)
    assert ids(search(corpus, "gateway")) == ["trc_refund"]  # a step error
    assert ids(search(corpus, "Lisbon")) == ["trc_travel"]  # the trace input
    assert ids(search(corpus, "ses")) == []  # words, not substrings
    assert ids(search(corpus, "sess-42")) == ["trc_sql"]  # the session id
    assert set(ids(search(corpus, "refund"))) == {"trc_refund", "trc_travel"}


def test_every_word_must_appear_in_one_place(corpus: Store) -> None:
    """Words AND together within a step (or within the trace's own fields)."""
    assert ids(search(corpus, "refund pending")) == ["trc_refund"]
    assert ids(search(corpus, "flights Lisbon")) == []  # one in a step, one in the trace


def test_json_escapes_do_not_glue_words(corpus: Store) -> None:
    """A newline inside a JSON string is stored as backslash-n; "line one\\nrefund" still has
    the word "refund" (and no word "nrefund")."""
    (hit,) = search(corpus, '"one refund"')
    assert hit.hits[0].step_number == 2
    assert search(corpus, "nrefund") == []


def test_phrases_prefixes_and_punctuation(corpus: Store) -> None:
    assert ids(search(corpus, '"connection refused"')) == ["trc_refund"]
    assert ids(search(corpus, '"refused connection"')) == []
    assert ids(search(corpus, "lookup_order")) == ["trc_refund"]  # name words: lookup, order
    assert ids(search(corpus, "api.payments.example.com")) == ["trc_refund"]
    assert ids(search(corpus, "gate*")) == ["trc_refund"]
    assert ids(search(corpus, "gate")) == []


def test_the_matching_step_and_a_snippet(corpus: Store) -> None:
    (result,) = search(corpus, "gateway")
    (hit,) = result.hits
    assert (hit.step_number, hit.step_type, hit.name, hit.field) == (
        3,
        "tool_call",
        "issue_refund",
        "error",
    )
    assert hit.snippet == "connection refused by the payments gateway"
    (span,) = hit.highlights
    assert hit.snippet[span[0] : span[1]] == "gateway"
    assert result.matches == 1
    data = result.to_json()
    assert data["id"] == "trc_refund" and data["agent_name"] == "support-bot"
    assert data["search"]["hits"][0]["step_number"] == 3


def test_a_trace_level_match_has_no_step(corpus: Store) -> None:
    (result,) = search(corpus, "Lisbon")
    (hit,) = result.hits
    assert (hit.step_number, hit.field, hit.snippet) == (None, "input", "book a flight to Lisbon")


def test_name_matches_rank_first(store: Store) -> None:
    """A word in a step's name weighs more than the same word in a payload."""
    for trace_id, step in (
        ("trc_body", {"name": "step", "output": "deploy the service now please"}),
        ("trc_name", {"name": "deploy", "output": "the service now please"}),
    ):
        ingest_trace(
            store,
            {
                "id": trace_id,
                "agent_name": "a",
                "steps": [{"step_number": 1, "step_type": "tool_call", **step}],
            },
        )
    for n in range(6):  # enough documents for bm25's idf to tell the two apart
        ingest_trace(store, {"agent_name": "filler", "input": f"nothing relevant {n}"})
    assert ids(search(store, "deploy")) == ["trc_name", "trc_body"]


def test_best_matching_steps_come_first_and_are_capped(store: Store) -> None:
    steps = [
        {"step_number": n, "step_type": "thought", "output": "alpha " + "beta " * (n % 3)}
        for n in range(1, 8)
    ]
    ingest_trace(store, {"id": "trc_many", "agent_name": "a", "steps": steps})
    (result,) = search(store, "alpha", per_trace=3)
    assert result.matches == 7 and len(result.hits) == 3
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True)


def test_filters_narrow_the_results(corpus: Store) -> None:
    assert ids(search(corpus, "refund", TraceFilter(status="completed"))) == ["trc_travel"]
    assert ids(search(corpus, "refund", TraceFilter(tag="prod"))) == ["trc_refund"]
    assert search(corpus, "refund", TraceFilter(agent="analytics-sql-agent")) == []
    assert len(search(corpus, "refund", limit=1)) == 1


# --- the index follows every write -----------------------------------------------------------


def test_the_index_follows_recorder_writes(store: Store) -> None:
    rec = TraceRecorder(store, clock=FixedClock(__import__("datetime").datetime(2026, 1, 1)))
    trace = rec.start_trace("bot", input="start here")
    n = rec.start_step(trace, "tool_call", "fetch", input={"url": "x"}, call_id="c1")
    assert search(store, "zebra") == []
    rec.end_step(trace, call_id="c1", output="a zebra appeared")
    assert ids(search(store, "zebra")) == [trace]
    rec.end_trace(trace, error="stopped by zebra")
    (result,) = search(store, "zebra")
    assert result.matches == 2  # the step and the trace itself
    with store.write():
        execute(
            store,
            "UPDATE steps SET output = ? WHERE trace_id = ? AND step_number = ?",
            ['"a horse"', trace, n],
        )
    assert [h.step_number for h in search(store, "zebra")[0].hits] == [None]
    assert ids(search(store, "horse")) == [trace]
    with store.write():
        execute(store, "DELETE FROM traces WHERE id = ?", [trace])
    assert search(store, "horse") == [] and search(store, "zebra") == []


def test_a_huge_payload_is_indexed_and_stored(store: Store) -> None:
    """PostgreSQL's tsvector holds at most 1 MB: the head of a huge payload is indexed and the
    row is stored whole (SQLite indexes all of it)."""
    rng = random.Random(7)
    words = ["".join(rng.choices(string.ascii_lowercase, k=8)) for _ in range(250_000)]
    text = "needle " + " ".join(words)  # ~2.2 MB of distinct words
    trace = ingest_trace(
        store,
        {"agent_name": "a", "steps": [{"step_number": 1, "step_type": "output", "output": text}]},
    )
    assert ids(search(store, "needle")) == [trace.id]
    stored = execute(store, "SELECT output FROM steps WHERE trace_id = ?", [trace.id])
    assert len(stored.fetchone()[0]) == len(text) + 2


def test_diacritics_fold_on_sqlite(store: Store, backend: str) -> None:
    """SQLite folds diacritics (héllo = hello); PostgreSQL's simple configuration does not."""
    ingest_trace(store, {"id": "trc_e", "agent_name": "a", "input": "héllo wörld"})
    assert ids(search(store, "héllo")) == ["trc_e"]
    assert ids(search(store, "hello")) == (["trc_e"] if backend == "sqlite" else [])


# --- the trace list's free text ----------------------------------------------------------------


def listed(store: Store, text: str) -> list[str]:
    return [item.id for item in list_traces(store, TraceFilter(text=text)).items]


def test_the_list_filter_uses_the_index_with_prefixes(corpus: Store) -> None:
    assert listed(corpus, "gate") == ["trc_refund"]  # a step's error, as a prefix
    assert listed(corpus, "analytics") == ["trc_sql"]  # the agent name
    assert listed(corpus, "travel") == ["trc_travel"]
    assert listed(corpus, "refund") == ["trc_refund", "trc_travel"]  # newest first, as listed
    assert listed(corpus, "refund lisb") == []  # every word, in one place
    assert listed(corpus, "%") == []


def test_the_list_filter_matches_id_prefixes(corpus: Store) -> None:
    assert listed(corpus, "trc_trav") == ["trc_travel"]
    assert listed(corpus, "sq") == ["trc_sql"]  # trc_ is implied, as in resolve_trace_id


# --- snippets ----------------------------------------------------------------------------------


def test_snippets_cut_around_the_first_match_on_one_line() -> None:
    text = "x" * 300 + " the needle\nis here " + "y" * 300
    field, snippet, spans = cut_snippet([("output", text)], parse_search("needle"))
    assert field == "output"
    assert snippet.startswith("…") and snippet.endswith("…")
    assert "\n" not in snippet and len(snippet) <= 122
    (span,) = spans
    assert snippet[span[0] : span[1]] == "needle"


def test_snippets_prefer_the_field_with_more_words() -> None:
    terms = parse_search("alpha beta")
    fields = [("name", "alpha"), ("output", "alpha and beta"), ("error", None)]
    assert cut_snippet(fields, terms)[:2] == ("output", "alpha and beta")


@pytest.mark.sqlite_only
def test_the_sqlite_queue_folds_every_change_into_the_index(store: Store) -> None:
    """Writers only queue rows; a search folds the queue in. Rows inserted, updated several
    times, deleted, and a rowid reused, all between two searches, leave an index that agrees
    with the rows (FTS5's integrity check) and finds exactly what is stored."""
    rec = TraceRecorder(store)
    trace = rec.start_trace("bot", input="alpha")
    first = rec.step(trace, {"step_type": "thought", "output": "bravo"})
    assert ids(search(store, "bravo")) == [trace]  # caught up: queue empty
    assert execute(store, "SELECT COUNT(*) FROM search_queue").fetchone()[0] == 0
    second = rec.start_step(trace, "tool_call", "charlie", call_id="c")
    rec.end_step(trace, call_id="c", output="delta")
    with store.write():
        for word in ("echo", "foxtrot"):
            execute(
                store,
                "UPDATE steps SET output = ? WHERE trace_id = ? AND step_number = ?",
                [f'"{word}"', trace, first],
            )
    rec.end_trace(trace, output="golf")
    queued = execute(store, "SELECT kind, old_body IS NOT NULL FROM search_queue ORDER BY 1")
    assert sorted(tuple(r) for r in queued.fetchall()) == [("s", 0), ("s", 1), ("t", 1)]
    assert search(store, "bravo") == [] and search(store, "echo") == []
    assert [h.step_number for h in search(store, "foxtrot")[0].hits] == [first]
    assert [h.step_number for h in search(store, "charlie delta")[0].hits] == [second]
    assert [h.step_number for h in search(store, "golf alpha")[0].hits] == [None]
    with store.write():  # the last step goes, and a new one may take its rowid
        execute(store, "DELETE FROM steps WHERE trace_id = ? AND step_number = ?", [trace, second])
    rec.step(trace, {"step_type": "output", "output": "hotel"})
    assert search(store, "charlie") == [] and ids(search(store, "hotel")) == [trace]
    store.db.execute_sql("INSERT INTO steps_fts (steps_fts, rank) VALUES ('integrity-check', 0)")
    store.db.execute_sql("INSERT INTO traces_fts (traces_fts, rank) VALUES ('integrity-check', 0)")


@pytest.mark.sqlite_only
def test_a_bounded_catch_up_folds_part_of_the_queue_and_the_rest_later(store: Store) -> None:
    """``catch_up_search_index(limit=N)`` indexes N queued rows and leaves the others queued;
    the index stays consistent (FTS5's integrity check) and a search then finds them all."""
    from agent_replay.store.migrations import catch_up_search_index

    rec = TraceRecorder(store)
    trace = rec.start_trace("bot", input="alpha")
    for word in ("bravo", "charlie", "delta", "echo"):
        rec.step(trace, {"step_type": "thought", "output": word})
    with store.write():  # an update queues the old text with the row
        execute(store, "UPDATE steps SET output = ? WHERE trace_id = ?", ['"zulu"', trace])

    def queued() -> int:
        return int(execute(store, "SELECT COUNT(*) FROM search_queue").fetchone()[0])

    before = queued()
    with store.write():
        assert catch_up_search_index(store.db, limit=2) == 2
    assert queued() == before - 2
    store.db.execute_sql("INSERT INTO steps_fts (steps_fts, rank) VALUES ('integrity-check', 0)")
    assert [h.step_number for h in search(store, "zulu")[0].hits] == [1, 2, 3]
    assert queued() == 0 and search(store, "bravo") == []


@pytest.mark.sqlite_only
def test_ingest_leaves_the_index_current(store: Store) -> None:
    """A bulk ingest indexes what it wrote in its own batches: nothing is left queued for the
    first search to index (an older backlog drains a bounded step per batch)."""
    from agent_replay.services.ingest import ingest_many

    items = [
        (
            f"line {i}",
            {
                "agent_name": "bot",
                "steps": [{"step_number": 1, "step_type": "thought", "output": f"w{i}"}],
            },
        )
        for i in range(30)
    ]
    report = ingest_many(store, items, batch_size=7)
    assert len(report.ingested) == 30
    assert execute(store, "SELECT COUNT(*) FROM search_queue").fetchone()[0] == 0
    store.db.execute_sql("INSERT INTO steps_fts (steps_fts, rank) VALUES ('integrity-check', 0)")
    assert len(search(store, "w17")) == 1


# --- the ranking walk: a head of the best hits, or every hit ---------------------------------

_REFERENCE = """
SELECT h.trace_id, MAX(h.score), COUNT(*) FROM (
  SELECT s.trace_id AS trace_id, -bm25(steps_fts, 4.0, 1.0) AS score
  FROM steps_fts JOIN steps s ON s.rowid = steps_fts.rowid WHERE steps_fts MATCH ?
  UNION ALL SELECT t.id, -bm25(traces_fts, 4.0, 1.0)
  FROM traces_fts JOIN traces t ON t.rowid = traces_fts.rowid WHERE traces_fts MATCH ?
) h JOIN traces t ON t.id = h.trace_id WHERE {where}
GROUP BY h.trace_id ORDER BY MAX(h.score) DESC, COUNT(*) DESC, h.trace_id LIMIT ?
"""


def reference_ranking(store: Store, text: str, agent: str | None, limit: int) -> list[Any]:
    """What the search must rank: every hit joined to its trace, grouped, in one query."""
    query = fts5_query(parse_search(text))
    where, params = ("t.agent_name = ?", [agent]) if agent else ("1 = 1", [])
    rows = execute(store, _REFERENCE.format(where=where), [query, query, *params, limit])
    return [(str(r[0]), pytest.approx(float(r[1])), int(r[2])) for r in rows.fetchall()]


@pytest.fixture
def crowd(store: Store) -> Store:
    """320 traces whose steps say "refund" among other words (many hits, many ties: identical
    step texts score alike), agents in two kinds, one trace of 600 matching steps."""
    rng = random.Random(7)
    words = ["refund", "order", "late", "card", "gateway", "retry"]

    def text() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))

    for n in range(320):
        steps = [
            {"step_number": k, "step_type": "thought", "output": text()}
            for k in range(1, rng.randint(2, 6))
        ]
        agent = "rare-bot" if n % 40 == 0 else "support-bot"
        ingest_trace(
            store, {"id": f"trc_c{n:03d}", "agent_name": agent, "input": text(), "steps": steps}
        )
    long_steps = [
        {"step_number": k, "step_type": "thought", "output": "refund"} for k in range(1, 601)
    ]
    ingest_trace(store, {"id": "trc_long", "agent_name": "support-bot", "steps": long_steps})
    return store


@pytest.mark.parametrize(
    ("text", "agent", "limit"),
    [
        ("refund", None, 20),  # the head of the best hits settles it
        ("refund", None, 1),
        ("refund order", None, 5),
        ("refund", "rare-bot", 3),  # a filter: every hit is ranked
        ("gateway", None, 400),  # more traces than hits: nothing is left out
        ("late", None, 250),  # the head runs out mid-walk
    ],
)
@pytest.mark.sqlite_only  # (the grouped query is FTS5's)
def test_the_ranking_is_the_grouped_query_s(
    crowd: Store, text: str, agent: str | None, limit: int
) -> None:
    results = search(crowd, text, TraceFilter(agent=agent), limit=limit)
    got = [(r.trace.id, r.score, r.matches) for r in results]
    assert got == reference_ranking(crowd, text, agent, limit)
    assert got, "the corpus matches"


@pytest.mark.sqlite_only
def test_tied_traces_rank_by_matches_then_id(store: Store) -> None:
    # 260 traces with the same step text tie on their best score, over more hits than the
    # head holds: the matches count and then the id order them, as in the grouped query
    for n in range(260):
        steps = [
            {"step_number": k, "step_type": "thought", "output": "refund now"}
            for k in range(1, 2 + n % 3)
        ]
        ingest_trace(store, {"id": f"trc_t{n:03d}", "agent_name": "a", "steps": steps})
    results = search(store, "refund", limit=10)
    assert [(r.trace.id, r.score, r.matches) for r in results] == reference_ranking(
        store, "refund", None, 10
    )
    assert {r.matches for r in results} == {3}


@pytest.mark.sqlite_only
def test_hits_past_the_head_still_rank_their_traces(store: Store) -> None:
    # trc_a's 450 short steps are the best hits and fill the head; trc_c*'s steps score
    # below them but above trc_b*'s own (long) inputs: ranking only what the head saw would
    # put trc_b* second
    filler = [
        {"step_number": k, "step_type": "thought", "output": "nothing here"} for k in range(1, 3001)
    ]
    ingest_trace(store, {"id": "trc_f", "agent_name": "a", "steps": filler})
    best = [{"step_number": k, "step_type": "thought", "output": "refund"} for k in range(1, 451)]
    ingest_trace(store, {"id": "trc_a", "agent_name": "a", "steps": best})
    for n in range(5):
        ingest_trace(
            store,
            {"id": f"trc_b{n}", "agent_name": "a", "input": "refund " + "lorem ipsum dolor " * 8},
        )
        ingest_trace(
            store,
            {
                "id": f"trc_c{n}",
                "agent_name": "a",
                "steps": [
                    {"step_number": 1, "step_type": "thought", "output": "refund later please"}
                ],
            },
        )
    for n in range(40):
        ingest_trace(store, {"id": f"trc_z{n:02d}", "agent_name": "a", "input": "other words"})
    results = search(store, "refund", limit=4)
    expected = reference_ranking(store, "refund", None, 4)
    assert [(r.trace.id, r.score, r.matches) for r in results] == expected
    assert [e[0] for e in expected] == ["trc_a", "trc_c0", "trc_c1", "trc_c2"]


_WORDS = ["refund", "order", "late", "card"]
_TEXTS = st.lists(st.sampled_from(_WORDS), min_size=0, max_size=4).map(" ".join)


@settings(
    max_examples=150,
    deadline=None,
    # the store is emptied by the test itself, each example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    corpus=st.lists(
        st.tuples(st.sampled_from(["a", "b"]), _TEXTS, st.lists(_TEXTS, max_size=4)),
        min_size=1,
        max_size=25,
    ),
    words=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=2, unique=True),
    agent=st.sampled_from([None, "a"]),
    limit=st.integers(1, 6),
    head=st.integers(1, 8),
)
@pytest.mark.sqlite_only
def test_any_head_ranks_as_the_grouped_query(
    store: Store,
    corpus: list[tuple[str, str, list[str]]],
    words: list[str],
    agent: str | None,
    limit: int,
    head: int,
) -> None:
    # a tiny vocabulary makes many hits and many ties; a head of 1-8 hits cuts through them
    with store.write():
        store.db.execute_sql("DELETE FROM traces")
    for n, (name, text, steps) in enumerate(corpus):
        ingest_trace(
            store,
            {
                "id": f"trc_p{n:02d}",
                "agent_name": name,
                "input": text or None,
                "steps": [
                    {"step_number": k, "step_type": "thought", "output": out or None}
                    for k, out in enumerate(steps, 1)
                ],
            },
        )
    text = " ".join(words)
    query = fts5_query(parse_search(text))
    catch_up(store)
    where, params = where_sql(store, TraceFilter(agent=agent))
    ranked, rows = rank_sqlite(store, query, where, params, limit, head=head)
    assert [(t, s, c) for t, s, c in ranked] == reference_ranking(store, text, agent, limit)
    for trace_id, best, count in ranked:  # every hit of a ranked trace, each once
        mine = [(number, score) for tid, number, score in rows if tid == trace_id]
        assert len(mine) == len(set(mine)) == count
        assert max(score for _, score in mine) == best


@pytest.mark.sqlite_only
def test_a_head_cut_inside_a_tie_ranks_every_tied_trace(store: Store) -> None:
    # six traces tie on their best score; the head (2 hits) holds some of the tied hits only:
    # trc_t9, with two matches, written last, must still rank first
    for n in range(5):
        ingest_trace(
            store,
            {
                "id": f"trc_t{n}",
                "agent_name": "a",
                "steps": [{"step_number": 1, "step_type": "thought", "output": "refund"}],
            },
        )
    ingest_trace(
        store,
        {
            "id": "trc_t9",
            "agent_name": "a",
            "steps": [
                {"step_number": k, "step_type": "thought", "output": "refund"} for k in (1, 2)
            ],
        },
    )
    query = fts5_query(parse_search("refund"))
    catch_up(store)
    ranked, _ = rank_sqlite(store, query, "1 = 1", [], 1, head=2)
    assert [(t, s, c) for t, s, c in ranked] == reference_ranking(store, "refund", None, 1)
    assert ranked[0][0] == "trc_t9"
