"""`export --format jsonl` of a 1,000,000-step store against a stdlib exporter, side by side.

Budget (DESIGN.md, "Performance budgets"): ``export --format jsonl`` of 1,000,000 steps takes
at most 2x the limit (a stdlib process doing the same reads and writing the same lines), with
flat memory, under 200 MB.

What runs, on the store of ``bench/list.py`` (100,001 traces, 1,010,000 steps; built and cached
by that script's code in ``/tmp/agent-replay-bench/list-100k``, reused while its counts hold):
- ours: the real CLI, ``agent-replay export --dir STORE --output FILE`` (every trace, newest
  first, one JSON object a line);
- baseline: ``python -c`` with only the stdlib: the same newest-first pages of 200 trace rows
  (keyset on ``started_at_ms, id``), each page's tags in one query, then per trace its steps,
  their decisions and snapshots, its evals and annotations; the JSON columns decoded, one
  object a trace encoded with ``json.dumps`` (compact) and written as a line;
- memory: ours again with ``--limit 10000`` (the newest tenth of the store): flat memory means
  about the same peak RSS at a tenth of the traces as at all of them. A line is one whole trace,
  so the largest trace is held at once: the 10,000-step one (a 4.8 MB line) takes ~24 MB of
  Python heap, the difference between the two (the 10,000 newest leave it out).
Each side runs ``--runs`` times in alternating order; the outputs are checked for one line per
trace. Wall time, CPU (user + system) and peak RSS (``wait4``, from a spawner process of its own:
see ``bench/list.py``) are medians.

Run by hand: ``.venv/bin/python bench/export.py [--runs 3]`` (~6 min, more when the store must
be built first). Exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import list as list_bench  # noqa: E402  (bench/list.py: its store, spawner and environment)

GOAL_RATIO = 2.0
GOAL_RSS_MB = 200.0
SMALL_LIMIT = 10_000

BASELINE = r"""
import json, sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
out = open(sys.argv[2], "w")
def columns(table):
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
tc, sc, dc, nc, ec, ac = map(
    columns, ("traces", "steps", "decisions", "snapshots", "evals", "annotations")
)
def obj(names, row, coded):
    pairs = zip(names, row)
    return {k: json.loads(v) if k in coded and isinstance(v, str) else v for k, v in pairs}
select = lambda names, table: f"SELECT {', '.join(names)} FROM {table}"
started = tc.index("started_at_ms")
after = None
while True:
    where = " WHERE (started_at_ms, id) < (?, ?)" if after else ""
    page = db.execute(
        select(tc, "traces") + where + " ORDER BY started_at_ms DESC, id DESC LIMIT 200",
        after or (),
    ).fetchall()
    if not page:
        break
    ids = [row[0] for row in page]
    tags = {}
    for trace_id, tag in db.execute(
        f"SELECT trace_id, tag FROM tags WHERE trace_id IN ({','.join('?' * len(ids))}) "
        "ORDER BY trace_id, position",
        ids,
    ):
        tags.setdefault(trace_id, []).append(tag)
    for row in page:
        trace = obj(tc, row, {"input", "output", "metadata"})
        trace["tags"] = tags.get(row[0], [])
        steps = db.execute(
            select(sc, "steps") + " WHERE trace_id = ? ORDER BY step_number", (row[0],)
        ).fetchall()
        step_ids = [s[0] for s in steps]
        marks = ",".join("?" * len(step_ids))
        decisions = {
            r[0]: obj(dc, r, {"options"})
            for r in db.execute(select(dc, "decisions") + f" WHERE step_id IN ({marks})", step_ids)
        }
        snapshots = {
            r[0]: obj(nc, r, {"context_window", "environment", "tool_state"})
            for r in db.execute(select(nc, "snapshots") + f" WHERE step_id IN ({marks})", step_ids)
        }
        trace["steps"] = []
        for s in steps:
            step = obj(sc, s, {"input", "output", "metadata"})
            if s[0] in decisions:
                step["decision"] = decisions[s[0]]
            if s[0] in snapshots:
                step["snapshot"] = snapshots[s[0]]
            trace["steps"].append(step)
        trace["evals"] = [
            obj(ec, r, {"details"})
            for r in db.execute(select(ec, "evals") + " WHERE trace_id = ?", (row[0],))
        ]
        trace["annotations"] = [
            obj(ac, r, set())
            for r in db.execute(select(ac, "annotations") + " WHERE trace_id = ?", (row[0],))
        ]
        out.write(json.dumps(trace, separators=(",", ":")) + "\n")
    after = (page[-1][started], page[-1][0])
out.close()
"""


def lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each (default 3)")
    parser.add_argument("--dir", type=Path, default=list_bench.CACHE, help="the store")
    parser.add_argument("--cold-bytecode", action="store_true", help="see bench/README.md")
    args = parser.parse_args()
    env = list_bench.bench_env(args.cold_bytecode)
    list_bench.timed([sys.executable, "-c", "pass"], env)  # the spawner, before this grows
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    store: Path = args.dir
    if list_bench.cached_store(store) is None:
        print(f"building {store} (bench/list.py's store; setup, not measured)", flush=True)
        store.parent.mkdir(parents=True, exist_ok=True)
        list_bench.build_store(store, list_bench.SEED)
    traces, steps = list_bench.store_counts(store / "traces.db")
    print(f"store: {store}: {traces:,} traces, {steps:,} steps")
    cli = list_bench.find_cli()
    out = Path(tempfile.mkdtemp(prefix="agent-replay-export-bench-"))
    ours_file, base_file, small_file = out / "ours.jsonl", out / "base.jsonl", out / "small.jsonl"
    ours_cmd = [cli, "export", "--dir", str(store), "--output", str(ours_file)]
    base_cmd = [sys.executable, "-c", BASELINE, str(store / "traces.db"), str(base_file)]
    small_cmd = [*ours_cmd[:-1], str(small_file), "--limit", str(SMALL_LIMIT)]
    list_bench.timed(small_cmd, env)  # untimed: fills the bytecode cache and the page cache
    figures: dict[str, list[tuple[float, float, float]]] = {"ours": [], "base": [], "small": []}
    print(f"\n{'run':>3}  {'ours s':>8}  {'stdlib s':>8}  {'ours MB':>8}  {'stdlib MB':>9}  load")
    for run in range(args.runs):
        order = [("ours", ours_cmd), ("base", base_cmd)]
        for name, cmd in order if run % 2 == 0 else order[::-1]:
            wall, _, rss = list_bench.timed(cmd, env)
            figures[name].append((wall, list_bench.LAST_CPU[0], rss))
        wall, _, rss = list_bench.timed(small_cmd, env)
        figures["small"].append((wall, list_bench.LAST_CPU[0], rss))
        for path in (ours_file, base_file):
            count = lines(path)
            if count != traces:
                sys.exit(f"{path.name}: {count:,} lines, expected {traces:,}")
        print(
            f"{run + 1:>3}  {figures['ours'][-1][0]:>8.2f}  {figures['base'][-1][0]:>8.2f}"
            f"  {figures['ours'][-1][2]:>8.0f}  {figures['base'][-1][2]:>9.0f}"
            f"  {os.getloadavg()[0]:.2f}"
        )

    def median(name: str, index: int) -> float:
        return statistics.median(figure[index] for figure in figures[name])

    ratio = median("ours", 0) / median("base", 0)
    cpu_ratio = median("ours", 1) / median("base", 1)
    rss, small_rss = median("ours", 2), median("small", 2)
    size_mb = ours_file.stat().st_size / 1e6
    print(f"\nmedians of {args.runs} runs; {traces:,} traces, {steps:,} steps, {size_mb:,.0f} MB")
    print(f"{'':34}{'wall s':>8}  {'CPU s':>7}  {'RSS MB':>7}")
    for label, name in (
        ("agent-replay export", "ours"),
        ("stdlib exporter", "base"),
        (f"agent-replay export --limit {SMALL_LIMIT:,}", "small"),
    ):
        wall, cpu, peak = (median(name, index) for index in range(3))
        print(f"{label:34}{wall:>8.2f}  {cpu:>7.2f}  {peak:>7.0f}")
    verdicts = [
        f"ratio ours/stdlib, wall: {ratio:.2f}x (CPU {cpu_ratio:.2f}x; goal <= {GOAL_RATIO}x) "
        + ("ok" if ratio <= GOAL_RATIO else "MISS"),
        f"peak RSS: {rss:.0f} MB (goal < {GOAL_RSS_MB:.0f} MB) "
        + ("ok" if rss < GOAL_RSS_MB else "MISS"),
        f"memory: {rss:.0f} MB for all {traces:,} traces, {small_rss:.0f} MB for "
        f"{SMALL_LIMIT:,} (which leave out the 10,000-step trace, held whole as its line is made)",
    ]
    print("\n".join(verdicts))
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for path in (ours_file, base_file, small_file):
        path.unlink(missing_ok=True)
    out.rmdir()
    return 0 if ratio <= GOAL_RATIO and rss < GOAL_RSS_MB else 1


if __name__ == "__main__":
    sys.exit(main())
