"""Search benchmark: the first ``search`` on a 100,000-trace store as ingest left it, beside a
stdlib process running the same ranked FTS5 query.

Issue 17: the first search on a 100k-trace store takes under 1 s (it took 7 s when ingest left
1.1M rows queued for indexing), while ingest keeps at least 1/3 of its stdlib writer's rate
(``bench/ingest.py`` measures that; it is not repeated here).

Setup, not measured: a store of 100,000 traces x 10 steps plus one of 10,000 steps, the data of
``bench/list.py``, built with the current code (``ingest_many``) and cached in
``/tmp/agent-replay-bench/search-100k``; ``--store DIR`` measures another one (e.g. the list
bench's store, built by an older ingest). Every run copies the store to a scratch directory,
so each search is the first on the store exactly as ingest left it (whatever it left queued).

Measured, wall time of whole processes, median of ``--runs``, in alternating order:
- ours: ``agent-replay search QUERY --dir COPY`` (the real CLI, stdout to a pipe);
- stdlib: ``python -c`` on the same copy (after ours indexed what was queued) running the
  search's ranking query: matching steps and traces by ``bm25``, grouped per trace, filtered,
  the first 20 trace rows printed.

    .venv/bin/python bench/search.py [--runs 3] [--store DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from list import (  # noqa: E402
    PYCACHE,
    SEED,
    bench_env,
    build_store,
    cached_store,
    find_cli,
    timed,
)

CACHE = Path("/tmp/agent-replay-bench/search-100k")
QUERIES = ["escalate", '"invoice declined"', "refund* timeout"]

RANKED = r"""
import sqlite3, sys
db, query = sys.argv[1:3]
con = sqlite3.connect(db)
rows = con.execute(
    "SELECT h.trace_id, MAX(h.score), COUNT(*) FROM ("
    " SELECT s.trace_id AS trace_id, -bm25(steps_fts, 4.0, 1.0) AS score"
    " FROM steps_fts JOIN steps s ON s.rowid = steps_fts.rowid WHERE steps_fts MATCH ?"
    " UNION ALL SELECT t.id, -bm25(traces_fts, 4.0, 1.0)"
    " FROM traces_fts JOIN traces t ON t.rowid = traces_fts.rowid WHERE traces_fts MATCH ?"
    ") h JOIN traces t ON t.id = h.trace_id GROUP BY h.trace_id"
    " ORDER BY MAX(h.score) DESC, COUNT(*) DESC, h.trace_id LIMIT 20",
    [query, query],
).fetchall()
ids = [r[0] for r in rows]
marks = ", ".join("?" * len(ids))
for row in con.execute(f"SELECT * FROM traces WHERE id IN ({marks})", ids):
    print("\t".join(str(v) for v in row))
"""


def fts_query(text: str) -> str:
    """The MATCH expression the search builds (``store/search``)."""
    from agent_replay.store.search import fts5_query, parse_search

    return fts5_query(parse_search(text))


def queued(db_file: Path) -> int:
    with sqlite3.connect(db_file) as con:
        return int(con.execute("SELECT COUNT(*) FROM search_queue").fetchone()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--store", type=Path, default=None, help="measure this store instead")
    args = parser.parse_args()
    env = bench_env(False)
    timed([sys.executable, "-c", "pass"], env)  # start the spawner while this process is small
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    store: Path = args.store or CACHE
    if args.store is None and cached_store(CACHE) is None:
        print(f"building {CACHE} with the current ingest (setup, not measured; minutes)…")
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        build_store(CACHE, SEED)
    left = queued(store / "traces.db")
    print(f"store: {store}; rows left queued for the search index by its ingest: {left:,}")
    cli, py = find_cli(), sys.executable
    samples: dict[str, list[float]] = {}
    scratch_root = Path(tempfile.mkdtemp(prefix="agent-replay-search-", dir=CACHE.parent))
    try:
        for run in range(args.runs):
            copy = scratch_root / f"run{run}"
            shutil.copytree(store, copy)
            db_file = copy / "traces.db"
            for index, query in enumerate(QUERIES):
                ours = [cli, "search", query, "--dir", str(copy)]
                base = [py, "-c", RANKED, str(db_file), fts_query(query)]
                if index == 0:  # the first search on this copy: whatever ingest left queued
                    samples.setdefault("first", []).append(timed(ours, env)[0] * 1000)
                    timed(base, env)  # warm, untimed: the first baseline would read cold pages
                    continue
                pair = [("ours " + query, ours), ("base " + query, base)]
                for key, cmd in pair if run % 2 == 0 else pair[::-1]:
                    samples.setdefault(key, []).append(timed(cmd, env)[0] * 1000)
            first_base = [py, "-c", RANKED, str(db_file), fts_query(QUERIES[0])]
            samples.setdefault("first base", []).append(timed(first_base, env)[0] * 1000)
            shutil.rmtree(copy)
    finally:
        shutil.rmtree(scratch_root, ignore_errors=True)

    med = {key: statistics.median(values) for key, values in samples.items()}
    print(f"\nmedians of {args.runs} runs, wall ms (bytecode cached in {PYCACHE})")
    print(f"{'search':<40}{'ours':>9}{'stdlib':>9}{'ratio':>8}  goal")
    first, base = med["first"], med["first base"]
    ok = first < 1000
    label = f"first: {QUERIES[0]} ({left:,} queued)"
    print(
        f"{label:<40}{first:>9.0f}{base:>9.0f}{first / base:>7.2f}x  < 1 s {'ok' if ok else 'MISS'}"
    )
    for query in QUERIES[1:]:
        ours_ms, base_ms = med["ours " + query], med["base " + query]
        print(f"{'then: ' + query:<40}{ours_ms:>9.0f}{base_ms:>9.0f}{ours_ms / base_ms:>7.2f}x  -")
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
