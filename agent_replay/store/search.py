"""Full-text search over traces and steps, one interface on both backends.

The index (migration 0006) covers a step's name, input, output and error, and a trace's agent
name, session id, input, output and error. SQLite keeps it in contentless FTS5 tables, ranked
with ``bm25``: triggers queue every written row and ``catch_up`` indexes the queue in one pass
before a query reads the index (writers stay as fast as without it). PostgreSQL keeps a
generated ``tsvector`` per row with a GIN index, ranked with ``ts_rank``. Both split words on
anything that is not a letter or a digit, fold case and do no stemming, so a query finds the
same rows on either (SQLite also folds diacritics).

The query language is small: words must all appear (in any field of the same step or trace);
``"two words"`` must appear together; ``word*`` matches words starting with it. Snippets are
cut here, from the matching row itself, so they read the same on both backends.
``store.trace_search.search`` runs a query over the traces (ranked, filtered, with their best
matches); this module never imports ``store.queries``.

A store module: no services, Textual or Rich.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_replay.store.core import Store, execute

_WORD = re.compile(r"[^\W_]+")
_TOKEN = re.compile(r'"([^"]*)"?|(\S+)')

SNIPPET_CHARS = 120
"""The longest snippet (before the ``…`` marks)."""
_SCAN_CHARS = 200_000  # snippets look for matches in the head of a huge payload only
_STEP_WEIGHT, _BODY_WEIGHT = 4.0, 1.0  # bm25 column weights: a name match counts 4x


@dataclass(frozen=True)
class Term:
    """One query term: a word, or words that must appear next to each other."""

    words: tuple[str, ...]
    prefix: bool = False
    """The last word matches any word starting with it."""


def parse_search(text: str, *, prefix: bool = False) -> list[Term]:
    """Split a query into terms.

    ``refund "order 7" canc*`` gives three terms; a token with punctuation inside
    (``api.example.com``, ``support-bot``) is a phrase of its words, as the index split it.
    ``prefix=True`` makes every term a prefix match (the trace list's as-you-type filter).
    """
    terms: list[Term] = []
    for quoted, bare in _TOKEN.findall(text):
        chunk = quoted if quoted else bare
        words = tuple(w.lower() for w in _WORD.findall(chunk))
        if not words:
            continue
        star = bool(bare) and bare.endswith("*")
        terms.append(Term(words, prefix=prefix or star))
    return terms


def fts5_query(terms: Sequence[Term]) -> str:
    """The FTS5 MATCH expression: every term, as a quoted phrase (words are letters/digits)."""
    return " AND ".join(f'"{" ".join(t.words)}"' + ("*" if t.prefix else "") for t in terms)


def tsquery(terms: Sequence[Term]) -> str:
    """The ``to_tsquery('simple', …)`` text: phrases with ``<->``, prefixes with ``:*``."""
    parts = []
    for term in terms:
        lexemes = [f"'{w}'" for w in term.words]
        if term.prefix:
            lexemes[-1] += ":*"
        parts.append("(" + " <-> ".join(lexemes) + ")")
    return " & ".join(parts)


def catch_up(store: Store) -> None:
    """Bring the SQLite index up to date with the rows written since it was last read (the
    triggers only queue them: see migration 0006); a no-op on PostgreSQL, whose index is
    part of each row. Call before a query that reads the index. A read-only store (a bundle,
    indexed when it was written) is read as it is."""
    if not store.is_sqlite or store.read_only:
        return
    if store.db.execute_sql("SELECT 1 FROM search_queue LIMIT 1").fetchone() is None:
        return
    from agent_replay.store.migrations import catch_up_search_index

    with store.write():
        catch_up_search_index(store.db)


def text_filter_sql(store: Store, text: str) -> tuple[str, list[Any]]:
    """The trace list's free-text condition on ``traces t``: a trace matches when its id starts
    with the text (``abc`` or ``trc_abc``), or it or one of its steps has every word (each a
    prefix). Returns SQL with ``?`` placeholders and its parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    stripped = text.strip()
    if stripped and " " not in stripped:
        for prefix in dict.fromkeys([stripped, f"trc_{stripped}"]):
            if store.is_sqlite:
                clauses.append("(t.id >= ? AND t.id < ?)")
                params += [prefix, prefix + "\uffff"]
            else:
                clauses.append("starts_with(t.id, ?)")
                params.append(prefix)
    terms = parse_search(text, prefix=True)
    if terms:
        if store.is_sqlite:
            query = fts5_query(terms)
            clauses.append("t.rowid IN (SELECT rowid FROM traces_fts WHERE traces_fts MATCH ?)")
            clauses.append(
                "t.id IN (SELECT s.trace_id FROM steps s WHERE s.rowid IN "
                "(SELECT rowid FROM steps_fts WHERE steps_fts MATCH ?))"
            )
            params += [query, query]
        else:
            query = tsquery(terms)
            clauses.append("t.search_vec @@ to_tsquery('simple', ?)")
            clauses.append(
                "t.id IN (SELECT s.trace_id FROM steps s "
                "WHERE s.search_vec @@ to_tsquery('simple', ?))"
            )
            params += [query, query]
    if not clauses:
        return "1 = 0", []
    return "(" + " OR ".join(clauses) + ")", params


# --- search ----------------------------------------------------------------------------------


@dataclass
class SearchMatch:
    """Where a query matched: a step (``step_number`` set) or the trace's own fields."""

    step_number: int | None
    step_id: str | None
    step_type: str | None
    name: str | None
    field: str
    """The field the snippet comes from: name, input, output, error (or agent_name,
    session_id for the trace's own fields)."""
    snippet: str
    """A one-line excerpt around the first match (``…`` where it was cut)."""
    highlights: list[tuple[int, int]]
    """``[start, end)`` character ranges of the matched words in ``snippet``."""
    score: float
    """Relevance: higher is better (bm25 on SQLite, ts_rank on PostgreSQL; not comparable
    across backends)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "step_number": self.step_number,
            "step_id": self.step_id,
            "step_type": self.step_type,
            "name": self.name,
            "field": self.field,
            "snippet": self.snippet,
            "highlights": [list(span) for span in self.highlights],
            "score": self.score,
        }


@dataclass
class SearchResult:
    """A trace that matched, ranked by its best match, with its best few matches."""

    trace: Any
    """The trace's summary (``queries.TraceSummary``)."""
    score: float
    matches: int
    """How many of its steps matched (its own fields count as one more)."""
    hits: list[SearchMatch] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The ``list --json`` trace object plus a ``search`` object (score, matches, hits)."""
        return {
            **self.trace.to_json(),
            "search": {
                "score": self.score,
                "matches": self.matches,
                "hits": [hit.to_json() for hit in self.hits],
            },
        }


def hits_sql(store: Store, within: int = 0) -> str:
    """Rows ``(trace_id, step_number, score)`` of every matching step and trace; ``within``
    limits them to that many trace ids (placeholders appended after the query's)."""
    step_in = trace_in = ""
    if within:
        marks = ", ".join(["?"] * within)
        step_in, trace_in = f" AND s.trace_id IN ({marks})", f" AND t.id IN ({marks})"
    if store.is_sqlite:
        steps, traces = "steps_fts JOIN steps s", "traces_fts JOIN traces t"
        return (
            f"SELECT s.trace_id AS trace_id, s.step_number AS step_number, "
            f"-bm25(steps_fts, {_STEP_WEIGHT}, {_BODY_WEIGHT}) AS score "
            f"FROM {steps} ON s.rowid = steps_fts.rowid "
            f"WHERE steps_fts MATCH ?{step_in} "
            f"UNION ALL SELECT t.id, NULL, -bm25(traces_fts, {_STEP_WEIGHT}, {_BODY_WEIGHT}) "
            f"FROM {traces} ON t.rowid = traces_fts.rowid "
            f"WHERE traces_fts MATCH ?{trace_in}"
        )
    return (
        "SELECT s.trace_id AS trace_id, s.step_number AS step_number, "
        "ts_rank(s.search_vec, to_tsquery('simple', ?)) AS score "
        f"FROM steps s WHERE s.search_vec @@ to_tsquery('simple', ?){step_in} "
        "UNION ALL SELECT t.id, NULL, ts_rank(t.search_vec, to_tsquery('simple', ?)) "
        f"FROM traces t WHERE t.search_vec @@ to_tsquery('simple', ?){trace_in}"
    )


def hits_params(store: Store, query: str, ids: Sequence[str] = ()) -> list[Any]:
    if store.is_sqlite:
        return [query, *ids, query, *ids]
    return [query, query, *ids, query, query, *ids]


def rank_sqlite(
    store: Store,
    query: str,
    where: str,
    params: list[Any],
    limit: int,
    *,
    head: int | None = None,
) -> tuple[list[tuple[str, float, int]], list[tuple[str, int | None, float]]]:
    """The best ``limit`` traces passing ``where`` as ``(id, best score, matches)``, ordered
    as the ranking query orders them (best score, then matches, then id), and every hit of
    those traces as ``(trace_id, step_number, score)``.

    Every match's score comes from the FTS5 tables alone (``bm25`` over the index: no row is
    read per match); a trace's best score is its best hit, so walking the hits best first
    meets the best traces first (and every trace tied with the last one taken), reading only
    their rows. Unfiltered, the walk starts on each table's best few hundred hits, sorted by
    SQLite itself (a common word matching 300,000 steps is scored in C and 200 rows reach
    Python); only when those do not settle the ranking (a filter rejected most of them) are
    all hits ranked. The chosen traces' other hits are then scored by one query each table,
    restricted to their rows. ``head``: how many best hits of each table to start on (by
    default ``_head(limit)``)."""
    head = head or _head(limit)
    chosen = None
    if where == "1 = 1":
        hits, horizon = _ranked_hits(store, query, head)
        chosen = _walk(store, hits, horizon, where, params, limit)
    if chosen is None:
        hits, horizon = _ranked_hits(store, query, None)
        chosen = _walk(store, hits, horizon, where, params, limit)
    if not chosen:
        return [], []
    rows = _hits_of(store, query, list(chosen))
    best: dict[str, float] = {}
    count: dict[str, int] = {}
    for trace_id, _, score in rows:
        best[trace_id] = max(best.get(trace_id, score), score)
        count[trace_id] = count.get(trace_id, 0) + 1
    ranked = sorted(best, key=lambda t: (-best[t], -count[t], t))[:limit]
    return [(t, best[t], count[t]) for t in ranked], rows


def _head(limit: int) -> int:
    """How many best hits are read at a time for ``limit`` traces."""
    return max(200, limit * 20)


def _bm25(fts: str) -> str:
    return f"-bm25({fts}, {_STEP_WEIGHT}, {_BODY_WEIGHT})"


def _ranked_hits(
    store: Store, query: str, head: int | None
) -> tuple[list[tuple[float, str, int]], float | None]:
    """Hits ``(score, kind, rowid)`` best first: every hit (``head=None``), or each table's
    best ``head``. With ``head``, the horizon: the highest score a hit left out may have (the
    lowest score taken from a table that had more), or ``None`` when nothing was left out."""
    hits: list[tuple[float, str, int]] = []
    horizon: float | None = None
    for kind, fts in (("s", "steps_fts"), ("t", "traces_fts")):
        cut = "" if head is None else f" LIMIT {int(head)}"
        rows = execute(
            store,
            f"SELECT {_bm25(fts)} AS score, '{kind}', rowid FROM {fts} WHERE {fts} MATCH ? "
            f"ORDER BY score DESC{cut}",
            [query],
        ).fetchall()
        if head is not None and len(rows) >= head:
            last = float(rows[-1][0])
            horizon = last if horizon is None else max(horizon, last)
        hits += rows
    hits.sort(key=lambda hit: hit[0], reverse=True)
    return hits, horizon


def _walk(
    store: Store,
    hits: list[tuple[float, str, int]],
    horizon: float | None,
    where: str,
    params: list[Any],
    limit: int,
) -> dict[str, float] | None:
    """The best ``limit`` traces passing ``where`` among ``hits`` (and every one tied with the
    last taken), each with its best score; ``None`` when the hits down to ``horizon`` do not
    settle them (a hit left out may rank a trace, or tie the last one)."""
    chosen: dict[str, float] = {}
    boundary: float | None = None
    step = _head(limit)
    for start in range(0, len(hits), step):
        chunk = hits[start : start + step]
        owner = _hit_traces(store, [(kind, rowid) for _, kind, rowid in chunk])
        passing = _passing(store, list(dict.fromkeys(owner.values())), where, params)
        for score, kind, rowid in chunk:
            if boundary is not None and score < boundary:
                return chosen
            if horizon is not None and score <= horizon:
                return None
            trace_id = owner.get((kind, rowid))
            if trace_id is None or trace_id not in passing or trace_id in chosen:
                continue
            chosen[trace_id] = score
            if len(chosen) >= limit and boundary is None:
                boundary = score  # keep the traces tied with the last one taken
    return chosen if horizon is None or boundary is not None else None


def _hits_of(store: Store, query: str, trace_ids: list[str]) -> list[tuple[str, int | None, float]]:
    """Every hit of these traces, scored: their steps' and their own rows. The match is
    scanned whole (an index lookup per row id would recount the term's documents for
    ``bm25`` each time: ``+rowid`` keeps the row ids out of the index), ``bm25`` is computed
    only for their rows."""
    rows: list[tuple[str, int | None, float]] = []
    for start in range(0, len(trace_ids), 500):
        chunk = trace_ids[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        owner = {
            int(rowid): (str(trace_id), int(number))
            for rowid, trace_id, number in execute(
                store,
                f"SELECT rowid, trace_id, step_number FROM steps WHERE trace_id IN ({marks})",
                chunk,
            ).fetchall()
        }
        for rowid, score in execute(
            store,
            f"SELECT rowid, {_bm25('steps_fts')} FROM steps_fts WHERE steps_fts MATCH ? "
            f"AND +rowid IN (SELECT rowid FROM steps WHERE trace_id IN ({marks}))",
            [query, *chunk],
        ).fetchall():
            trace_id, number = owner[int(rowid)]
            rows.append((trace_id, number, float(score)))
        for trace_id, score in execute(
            store,
            f"SELECT t.id, {_bm25('traces_fts')} FROM traces_fts CROSS JOIN traces t "
            f"ON t.rowid = traces_fts.rowid WHERE traces_fts MATCH ? "
            f"AND +traces_fts.rowid IN (SELECT rowid FROM traces WHERE id IN ({marks}))",
            [query, *chunk],
        ).fetchall():
            rows.append((str(trace_id), None, float(score)))
    return rows


def _hit_traces(store: Store, hits: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """The trace id of each hit ``(kind, rowid)``: a step's trace, or the trace itself."""
    out: dict[tuple[str, int], str] = {}
    for kind, table, column in (("s", "steps", "trace_id"), ("t", "traces", "id")):
        rowids = [r for k, r in hits if k == kind]
        for start in range(0, len(rowids), 500):
            chunk = rowids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for rowid, trace_id in execute(
                store, f"SELECT rowid, {column} FROM {table} WHERE rowid IN ({marks})", chunk
            ).fetchall():
                out[(kind, int(rowid))] = str(trace_id)
    return out


def _passing(store: Store, trace_ids: list[str], where: str, params: list[Any]) -> set[str]:
    """Which of these traces pass the filter (``where`` on ``traces t``)."""
    if where == "1 = 1":
        return set(trace_ids)
    out: set[str] = set()
    for start in range(0, len(trace_ids), 500):
        chunk = trace_ids[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        out.update(
            str(r[0])
            for r in execute(
                store,
                f"SELECT t.id FROM traces t WHERE t.id IN ({marks}) AND {where}",
                [*chunk, *params],
            ).fetchall()
        )
    return out


def trace_matches(
    store: Store, trace_id: str, top: list[tuple[int | None, float]], terms: list[Term]
) -> list[SearchMatch]:
    from agent_replay.store.mapping import dec

    out = []
    numbers = [n for n, _ in top if n is not None]
    steps: dict[int, tuple[Any, ...]] = {}
    if numbers:
        marks = ", ".join(["?"] * len(numbers))
        for row in execute(
            store,
            "SELECT step_number, id, step_type, name, input, output, error FROM steps "
            f"WHERE trace_id = ? AND step_number IN ({marks})",
            [trace_id, *numbers],
        ).fetchall():
            steps[int(row[0])] = tuple(row)
    for number, score in top:
        if number is None:
            row = execute(
                store,
                "SELECT agent_name, session_id, input, output, error FROM traces WHERE id = ?",
                [trace_id],
            ).fetchone()
            fields = [
                ("agent_name", row[0]),
                ("session_id", row[1]),
                ("input", _text(dec(row[2]))),
                ("output", _text(dec(row[3]))),
                ("error", row[4]),
            ]
            name, snippet, spans = cut_snippet(fields, terms)
            out.append(SearchMatch(None, None, None, None, name, snippet, spans, score))
            continue
        step = steps.get(number)
        if step is None:  # deleted since the ranking read
            continue
        fields = [
            ("name", step[3]),
            ("input", _text(dec(step[4]))),
            ("output", _text(dec(step[5]))),
            ("error", step[6]),
        ]
        name, snippet, spans = cut_snippet(fields, terms)
        out.append(SearchMatch(number, step[1], step[2], step[3], name, snippet, spans, score))
    return out


_JSON_SPACE = re.compile(r"\\[nrt]")


def _text(value: Any) -> str | None:
    """A payload as the text a person would search: a string as is, anything else as compact
    JSON with its whitespace escapes shown as spaces (a snippet is one line anyway)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    from agent_replay.trace.io import dumps

    return _JSON_SPACE.sub(" ", dumps(value)).replace('\\"', '"')


def _fold(word: str) -> str:
    """Lower case without diacritics (as the SQLite index compares words)."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def cut_snippet(
    fields: Sequence[tuple[str, str | None]], terms: Sequence[Term], width: int = SNIPPET_CHARS
) -> tuple[str, str, list[tuple[int, int]]]:
    """The field with the most query words and a one-line excerpt around its first match.

    Returns:
        ``(field, snippet, highlights)``; the first non-empty field when no word is found
        (a match the index made that these simple rules don't see).
    """
    exact = {_fold(w) for t in terms for w in (t.words if not t.prefix else t.words[:-1])}
    prefixes = {_fold(t.words[-1]) for t in terms if t.prefix}
    best: tuple[int, str, str, list[tuple[int, int]]] | None = None
    for name, value in fields:
        if not value:
            continue
        text = value[:_SCAN_CHARS]
        spans = []
        seen = set()
        for match in _WORD.finditer(text):
            word = _fold(match.group())
            if word in exact or any(word.startswith(p) for p in prefixes):
                spans.append((match.start(), match.end()))
                seen.add(word)
        if best is None or len(seen) > best[0]:
            best = (len(seen), name, text, spans)
    if best is None:
        return ("", "", [])
    _, name, text, spans = best
    start = max(0, spans[0][0] - width // 3) if spans else 0
    end = min(len(text), start + width)
    if start > 0 and spans:  # start on a word boundary
        space = text.rfind(" ", start - 15, spans[0][0])
        start = space + 1 if space >= start - 15 and space != -1 else start
    piece = text[start:end]
    lead = "…" if start > 0 else ""
    tail = "…" if end < len(text) else ""
    clean = _one_line(piece)
    shift = len(lead) - start
    highlights = [(a + shift, b + shift) for a, b in spans if a >= start and b <= end]
    return name, lead + clean + tail, highlights


def _one_line(text: str) -> str:
    """Control characters (newlines, tabs) as spaces, keeping every offset where it was."""
    return "".join(" " if unicodedata.category(c)[0] == "C" else c for c in text)
