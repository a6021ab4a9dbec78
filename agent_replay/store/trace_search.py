"""``search``: the traces a full-text query finds, ranked, with their best matches.

It joins the index's own pieces (``store.search``: parsing, the FTS5 / tsvector queries,
snippets) to the trace list's filters and summaries (``store.queries``), in a module of its
own so that neither of those imports the other back (``queries`` reads the index for a
filter's free text; the index never reads trace summaries).
"""

from __future__ import annotations

from agent_replay.store.core import Store, execute
from agent_replay.store.queries import TraceFilter, summaries, where_sql
from agent_replay.store.search import (
    SearchResult,
    catch_up,
    fts5_query,
    hits_params,
    hits_sql,
    parse_search,
    rank_sqlite,
    trace_matches,
    tsquery,
)


def search(
    store: Store,
    text: str,
    filters: TraceFilter | None = None,
    *,
    limit: int = 20,
    per_trace: int = 3,
) -> list[SearchResult]:
    """The traces matching ``text``, best first, each with its best ``per_trace`` matches.

    Args:
        text: the query (see the module docstring); no words means no results.
        filters: a ``queries.TraceFilter`` the traces must also pass (its ``text`` unused).
        limit: how many traces at most.
        per_trace: how many matches to show per trace.
    """
    terms = parse_search(text)
    if not terms:
        return []
    catch_up(store)
    query = fts5_query(terms) if store.is_sqlite else tsquery(terms)
    filters = filters or TraceFilter()
    if filters.text:
        filters = filters.replace(text=None)
    where, params = where_sql(store, filters)
    if store.is_sqlite:
        ranked, rows = rank_sqlite(store, query, where, params, limit)
    else:
        ranked = execute(
            store,
            f"SELECT h.trace_id, MAX(h.score), COUNT(*) FROM ({hits_sql(store)}) h "
            f"JOIN traces t ON t.id = h.trace_id WHERE {where} "
            "GROUP BY h.trace_id ORDER BY MAX(h.score) DESC, COUNT(*) DESC, h.trace_id LIMIT ?",
            [*hits_params(store, query), *params, limit],
        ).fetchall()
        rows = []
        if ranked:
            chosen = [str(r[0]) for r in ranked]
            sql, hit_params = hits_sql(store, len(chosen)), hits_params(store, query, chosen)
            rows = execute(store, sql, hit_params).fetchall()
    if not ranked:
        return []
    ids = [str(r[0]) for r in ranked]
    by_id = {s.id: s for s in summaries(store, ids)}
    hits: dict[str, list[tuple[int | None, float]]] = {tid: [] for tid in ids}
    for trace_id, number, score in rows:
        if trace_id in hits:
            hits[trace_id].append((None if number is None else int(number), float(score)))
    results = []
    for trace_id, best, count in ranked:
        top = sorted(hits[trace_id], key=lambda h: (-h[1], h[0] or 0))[:per_trace]
        results.append(
            SearchResult(
                trace=by_id[trace_id],
                score=float(best),
                matches=int(count),
                hits=trace_matches(store, trace_id, top, terms),
            )
        )
    return results
