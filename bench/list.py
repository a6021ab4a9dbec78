"""Read latency on a large store: `list` and `show` against stdlib baselines, side by side.

Budgets (DESIGN.md, "Performance budgets"): on a store of 100,000 traces / 1,000,000 steps,
``list`` is at most 3x a stdlib process running the same first-page query (and ``list --limit
50`` is under 100 ms); ``show`` of a 10,000-step trace (human output) is under 1 s.

Setup (not measured): a store of 100,000 traces x 10 steps plus one trace of 10,000 steps, built
with the library (``ensure_database`` + ``ingest_many``) from seeded generated traces, cached in
``/tmp/agent-replay-bench/list-100k`` and reused while its counts are right (``--rebuild``
forces a new one).

Measured (wall time of whole subprocesses, median of ``--runs`` after one warm-up, run in
rotation so machine noise hits every command alike):
- ours: the real CLI (``agent-replay list ...`` / ``show ...``), stdout to a pipe;
- beside each: a stdlib-only ``python -c`` process running the same SQL (the same first page,
  filter and order, plus the page's tags; for ``show``, the trace, its steps, decisions, tags and
  evals, rendered one line a step or dumped as JSON), and a bare ``python -c "import sqlite3,
  json"`` start.

Run by hand: ``.venv/bin/python bench/list.py [--runs 7]``. Stdlib and the project only.
Exits 1 when a figure misses its goal.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CACHE = Path("/tmp/agent-replay-bench/list-100k")
LAYOUT_VERSION = 1  # bump when the generated data changes, so cached stores are rebuilt
N_TRACES = 100_000
STEPS_PER_TRACE = 10
BIG_STEPS = 10_000
BIG_ID = "trc_big10000steps"
LONG_STEPS = 50_000
LONG_ID = "trc_long50000steps"  # alone in its own store (LONG_CACHE): show's memory at 50k
LONG_CACHE = CACHE.with_name("show-50k")
SEED = 424242
DAYS = 90

AGENTS = [
    "support-bot",
    "research-agent",
    "code-reviewer",
    "billing-assistant",
    "travel-planner",
    "sql-analyst",
    "email-triage",
    "onboarding-guide",
    "doc-writer",
    "incident-responder",
    "sales-qualifier",
    "data-cleaner",
    "test-generator",
    "translation-agent",
    "meeting-notes",
    "security-scanner",
    "hr-assistant",
    "pricing-agent",
    "legal-reviewer",
    "recruiting-screener",
]
AGENT_WEIGHTS = [30, 12, 10, 9, 8, 7, 6, 5, 4, 4, 3, 3, 3, 2, 2, 2, 2, 2, 1, 1]
FILTER_AGENT = AGENTS[1]  # ~7% of traces; about a third of those in the last 30 days
STATUSES = ["completed", "failed", "timeout", "running", "forked"]
STATUS_WEIGHTS = [74, 14, 4, 5, 3]
MODELS = ["claude-sonnet-4", "gpt-4o", "gpt-4o-mini", "gemini-2.0-flash", "claude-haiku-3.5"]
TOOLS = ["search_web", "read_file", "run_sql", "http_get", "lookup_order", "send_email", "calc"]
TAGS = [
    "prod",
    "staging",
    "nightly",
    "eval",
    "canary",
    "eu",
    "us",
    "vip",
    "regression",
    "beta",
    "smoke",
    "batch",
    "interactive",
    "experiment-a",
    "experiment-b",
]
WORDS = (
    "agent tool search query result context document answer refund order customer policy "
    "invoice account latency retry cache vector index embedding summary ticket escalate "
    "shipping address payment card declined approve review draft email calendar meeting "
    "schedule weather forecast report metric dashboard error timeout fallback model prompt"
).split()
STEP_TYPES = ["thought", "tool_call", "llm_call", "retrieval", "guard_check"]
STEP_WEIGHTS = [25, 30, 30, 10, 5]


PYCACHE = Path("/tmp/agent-replay-bench/pycache")


def bench_env(cold: bool) -> dict[str, str]:
    """The environment of every measured process (ours and baselines alike).

    Bytecode is cached under ``PYCACHE`` (outside the source tree) even when the caller set
    ``PYTHONDONTWRITEBYTECODE``: an installed package runs from cached bytecode, and compiling
    every project module on every start would be measured instead. ``--cold-bytecode`` keeps
    the inherited environment.
    """
    env = dict(os.environ)
    if not cold:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


# --- generating the store -------------------------------------------------------------------


def iso_ms(epoch_ms: int) -> str:
    """Canonical UTC with milliseconds and Z."""
    moment = dt.datetime.fromtimestamp(epoch_ms / 1000, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


class Generator:
    """Seeded traces; ``anchor_ms`` is "now" at build time (traces span the 90 days before)."""

    def __init__(self, seed: int, anchor_ms: int) -> None:
        self.rng = random.Random(seed)
        self.anchor_ms = anchor_ms
        rng = self.rng
        self.phrases = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(4000)
        ]

    def phrase(self) -> str:
        return self.phrases[self.rng.randrange(len(self.phrases))]

    def trace_id(self) -> str:
        alphabet = "abcdefghijklmnopqrstuvwxyz234567"
        bits = self.rng.getrandbits(80)
        return "trc_" + "".join(alphabet[(bits >> (5 * i)) & 31] for i in range(16))

    def steps(self, start_ms: int, count: int, *, big: bool = False) -> tuple[list[Any], int]:
        rng = self.rng
        steps: list[dict[str, Any]] = []
        clock = start_ms
        for number in range(1, count + 1):
            if number == count:
                step_type = "output"
            elif (big and number % 50 == 25) or (not big and number == 5):
                step_type = "decision"
            else:
                step_type = rng.choices(STEP_TYPES, STEP_WEIGHTS)[0]
            clock += rng.randint(1, 30)
            began = clock
            clock += rng.randint(10, 1500 if step_type == "llm_call" else 300)
            step: dict[str, Any] = {
                "step_number": number,
                "step_type": step_type,
                "name": rng.choice(TOOLS) if step_type == "tool_call" else step_type,
                "input": {"q": self.phrase(), "n": rng.randint(1, 9)},
                "output": {"text": self.phrase()},
                "started_at": iso_ms(began),
                "ended_at": iso_ms(clock),
            }
            if step_type == "llm_call":
                step["model"] = rng.choice(MODELS)
                step["tokens_used"] = rng.randint(100, 3000)
            if number > 1 and rng.random() < 0.3:
                step["parent_step"] = rng.randint(max(1, number - 20), number - 1)
            if number > 1 and rng.random() < 0.3:
                step["caused_by_step"] = rng.randint(max(1, number - 5), number - 1)
            if step_type == "decision":
                options = [{"option": t, "score": round(rng.random(), 2)} for t in TOOLS[:3]]
                step["decision"] = {
                    "options": options,
                    "chosen": options[rng.randrange(3)]["option"],
                    "rationale": self.phrase(),
                    "confidence": round(rng.uniform(0.3, 0.99), 2),
                }
            steps.append(step)
        return steps, clock

    def trace(self, trace_id: str, n_steps: int, recent: list[str], big: bool = False) -> Any:
        rng = self.rng
        start_ms = self.anchor_ms - rng.randint(60_000, DAYS * 86_400_000)
        status = rng.choices(STATUSES, STATUS_WEIGHTS)[0] if not big else "completed"
        steps, end_ms = self.steps(start_ms, n_steps, big=big)
        trace: dict[str, Any] = {
            "id": trace_id,
            "agent_name": rng.choices(AGENTS, AGENT_WEIGHTS)[0] if not big else AGENTS[0],
            "agent_version": f"2.{rng.randint(0, 5)}",
            "trigger": rng.choice(["api", "cron", "chat"]),
            "status": status,
            "input": {"query": self.phrase(), "user": f"u{rng.randint(1, 20000)}"},
            "output": {"answer": self.phrase()} if status == "completed" else None,
            "started_at": iso_ms(start_ms),
            "ended_at": None if status == "running" else iso_ms(end_ms + rng.randint(1, 50)),
            "total_cost_usd": round(rng.uniform(0.0005, 0.5), 5),
            "error": f"ToolError: {self.phrase()}" if status == "failed" else None,
            "tags": rng.sample(TAGS, rng.choices([0, 1, 2, 3], [20, 40, 30, 10])[0]),
            "session_id": f"ses_{rng.randint(1, 20000):05d}",
            "steps": steps,
        }
        if status == "forked" and recent:
            trace["parent_trace_id"] = rng.choice(recent)
            trace["forked_from_step"] = rng.randint(1, STEPS_PER_TRACE)
        return trace

    def items(self, n_traces: int) -> Iterator[tuple[str, Any]]:
        recent: list[str] = []
        for index in range(n_traces):
            trace_id = self.trace_id()
            yield f"trace {index}", self.trace(trace_id, STEPS_PER_TRACE, recent)
            recent = [*recent[-99:], trace_id]
        yield "big trace", self.trace(BIG_ID, BIG_STEPS, recent, big=True)


def expected_counts() -> tuple[int, int]:
    return N_TRACES + 1, N_TRACES * STEPS_PER_TRACE + BIG_STEPS


def store_counts(db_file: Path) -> tuple[int, int]:
    with sqlite3.connect(db_file) as con:
        return (
            con.execute("SELECT COUNT(*) FROM traces").fetchone()[0],
            con.execute("SELECT COUNT(*) FROM steps").fetchone()[0],
        )


def cached_store(directory: Path) -> dict[str, Any] | None:
    """The cached store's metadata when it exists and is complete, else ``None``."""
    meta_file = directory / "bench-meta.json"
    if not meta_file.is_file() or not (directory / "traces.db").is_file():
        return None
    meta = json.loads(meta_file.read_text())
    if meta.get("layout") != LAYOUT_VERSION:
        return None
    if tuple(store_counts(directory / "traces.db")) != expected_counts():
        return None
    return meta  # type: ignore[no-any-return]


def build_store(directory: Path, seed: int) -> dict[str, Any]:
    from agent_replay.services.ingest import ingest_many
    from agent_replay.store.db import ensure_database

    building = directory.with_name(directory.name + "-building")  # no dot: a suffix means a file
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(directory, ignore_errors=True)
    anchor_ms = int(time.time() * 1000)
    generator = Generator(seed, anchor_ms)
    began = time.perf_counter()
    last = [began]

    def progress(traces: int, steps: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= 10:
            last[0] = now
            print(f"  … {traces:,} traces, {steps:,} steps ({now - began:.0f} s)", flush=True)

    store = ensure_database(building)
    try:
        report = ingest_many(store, generator.items(N_TRACES), progress=progress)
    finally:
        store.close()
    if report.rejected:
        first = report.rejected[0]
        sys.exit(f"{len(report.rejected)} generated traces rejected; first: {first}")
    meta = {
        "layout": LAYOUT_VERSION,
        "seed": seed,
        "anchor": iso_ms(anchor_ms),
        "built_in_s": round(time.perf_counter() - began, 1),
        "big_trace_id": BIG_ID,
        "filter_agent": FILTER_AGENT,
    }
    (building / "bench-meta.json").write_text(json.dumps(meta, indent=2))
    building.rename(directory)
    return meta


def long_store(directory: Path, seed: int) -> Path:
    """The store holding only ``LONG_ID`` (50,000 steps), cached like the big one."""
    db_file = directory / "traces.db"
    meta_file = directory / "bench-meta.json"
    if meta_file.is_file() and db_file.is_file():
        meta = json.loads(meta_file.read_text())
        if meta.get("layout") == LAYOUT_VERSION and store_counts(db_file) == (1, LONG_STEPS):
            return db_file
    from agent_replay.services.ingest import ingest_many
    from agent_replay.store.db import ensure_database

    print(f"building {directory}: one trace of {LONG_STEPS:,} steps (setup, not measured)")
    building = directory.with_name(directory.name + "-building")
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(directory, ignore_errors=True)
    generator = Generator(seed, int(time.time() * 1000))
    store = ensure_database(building)
    try:
        trace = generator.trace(LONG_ID, LONG_STEPS, [], big=True)
        report = ingest_many(store, iter([("long trace", trace)]))
    finally:
        store.close()
    if report.rejected:
        sys.exit(f"the long trace was rejected: {report.rejected[0]}")
    (building / "bench-meta.json").write_text(json.dumps({"layout": LAYOUT_VERSION}))
    building.rename(directory)
    return db_file


# --- the baselines: stdlib only ---------------------------------------------------------------

TRACE_COLUMNS = (
    "id agent_name agent_version trigger status input output input_hash started_at "
    "started_at_ms ended_at total_duration_ms total_tokens total_cost_usd error session_id "
    "metadata parent_trace_id forked_from_step otel_trace_id source_format step_count "
    "created_at_ms"
).split()
TRACE_SELECT = ", ".join(f't."{c}"' for c in TRACE_COLUMNS)

START = "import sqlite3, json"

# argv: DB SQL PARAMS_JSON. Runs the page query, then the page's tags, and prints the rows.
LIST_QUERY = r"""
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
rows = con.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall()
ids = [r[0] for r in rows]
tags = {i: [] for i in ids}
marks = ", ".join("?" * len(ids))
for tid, tag in con.execute(
    f"SELECT trace_id, tag FROM tags WHERE trace_id IN ({marks}) ORDER BY trace_id, position", ids
):
    tags[tid].append(tag)
out = ["\t".join(str(v) for v in r) + "\t" + ",".join(tags[r[0]]) for r in rows]
sys.stdout.write("\n".join(out) + "\n")
"""

# argv: DB ID MODE (text|json). The trace row, tags, steps, decisions, snapshots, evals.
SHOW_QUERY = r"""
import json, sqlite3, sys
db, tid, mode = sys.argv[1:4]
con = sqlite3.connect(db)
con.row_factory = sqlite3.Row
trace = dict(con.execute("SELECT * FROM traces WHERE id = ?", [tid]).fetchone())
tags = [r[0] for r in con.execute(
    "SELECT tag FROM tags WHERE trace_id = ? ORDER BY position", [tid])]
steps = [dict(r) for r in con.execute(
    "SELECT * FROM steps WHERE trace_id = ? ORDER BY step_number", [tid])]
decisions = {r["step_id"]: dict(r) for r in con.execute(
    "SELECT * FROM decisions WHERE trace_id = ?", [tid])}
snapshots = {r["step_id"]: dict(r) for r in con.execute(
    "SELECT * FROM snapshots WHERE trace_id = ?", [tid])}
evals = [dict(r) for r in con.execute("SELECT * FROM evals WHERE trace_id = ?", [tid])]
for s in steps:
    for key in ("input", "output", "metadata"):
        s[key] = None if s[key] is None else json.loads(s[key])
    d = decisions.get(s["id"])
    if d is not None:
        d["options"] = json.loads(d["options"])
    s["decision"] = d
    s["snapshot"] = snapshots.get(s["id"])
if mode == "json":
    for key in ("input", "output", "metadata"):
        trace[key] = None if trace[key] is None else json.loads(trace[key])
    trace.update(tags=tags, steps=steps, evals=evals)
    sys.stdout.write(json.dumps(trace, indent=2) + "\n")
else:
    lines = [f"Trace    {trace['id']}", f"Agent    {trace['agent_name']}",
             f"Status   {trace['status']}", f"Tags     {', '.join(tags)}", ""]
    for s in steps:
        meta = []
        if s["duration_ms"] is not None:
            meta.append(f"{s['duration_ms']:.0f}ms")
        if s["tokens_used"] is not None:
            meta.append(f"{s['tokens_used']:,} tok")
        if s["model"]:
            meta.append(s["model"])
        if s["caused_by_step"] is not None:
            meta.append(f"<- caused by #{s['caused_by_step']}")
        line = f"{s['step_number']:>5}  {s['step_type']:<11} {(s['name'] or '')[:40]}"
        line += "  " + "  ".join(meta)
        if s["decision"]:
            line += f"\n       -> chose {s['decision']['chosen'][:60]}"
        elif s["output"] is not None:
            line += "\n       -> " + json.dumps(s["output"])[:90]
        lines.append(line)
    sys.stdout.write("\n".join(lines) + "\n")
"""


# --- measuring ------------------------------------------------------------------------------


def find_cli() -> str:
    beside = Path(sys.executable).with_name("agent-replay")
    if beside.exists():
        return str(beside)
    found = shutil.which("agent-replay")
    if not found:
        sys.exit("agent-replay is not installed (expected next to this interpreter)")
    return found


SPAWNER = r"""
import json, os, subprocess, sys, threading, time
for line in sys.stdin:
    cmd, env = json.loads(line)
    began = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    size, err = [0], [b""]
    def out():
        while chunk := child.stdout.read(1 << 16):
            size[0] += len(chunk)
    def errs():
        err[0] = child.stderr.read()
    readers = [threading.Thread(target=out), threading.Thread(target=errs)]
    for r in readers:
        r.start()
    for r in readers:
        r.join()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    print(json.dumps([wall, size[0], usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status),
                      err[0].decode(errors="replace")[-2000:],
                      usage.ru_utime + usage.ru_stime]), flush=True)
"""


class Spawner:
    """Runs the measured commands from a small process of its own, started before this one
    grows: a child's ``ru_maxrss`` keeps the high-water mark of the process it was forked
    from, so forking them from here (which may just have built a store in memory) would
    report this process's memory, not theirs."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SPAWNER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, cmd: list[str], env: dict[str, str]) -> tuple[float, int, float]:
        """Wall seconds, stdout bytes and peak RSS (MB) of one run of ``cmd`` (its CPU
        seconds, user + system, go to ``LAST_CPU``)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([cmd, env]) + "\n")
        self.proc.stdin.flush()
        wall, size, rss, code, err, cpu = json.loads(self.proc.stdout.readline())
        if code != 0:
            sys.exit(f"command failed ({code}): {cmd}\n{err}")
        LAST_CPU[0] = float(cpu)
        return float(wall), int(size), float(rss)


SPAWN: Spawner | None = None
LAST_CPU = [0.0]
"""The CPU seconds of the last command ``timed`` ran."""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int, float]:
    """Wall seconds of one subprocess, the bytes it wrote to stdout (a pipe) and its peak RSS
    in MB (``wait4``: that process alone), run by the ``Spawner``."""
    global SPAWN
    if SPAWN is None:
        SPAWN = Spawner()
    return SPAWN.run(cmd, env)


def page_sql(where: str, column: str) -> str:
    return (
        f"SELECT {TRACE_SELECT} FROM traces t WHERE {where} "
        f"ORDER BY t.{column} DESC, t.id DESC LIMIT ?"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each (default 7)")
    parser.add_argument("--dir", type=Path, default=CACHE, help=f"store cache (default {CACHE})")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached store")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--cold-bytecode",
        action="store_true",
        help="keep the inherited environment (e.g. PYTHONDONTWRITEBYTECODE=1)",
    )
    args = parser.parse_args()
    timed([sys.executable, "-c", "pass"], bench_env(args.cold_bytecode))  # the spawner, now
    if args.runs < 5:
        parser.error("--runs must be at least 5")

    print(
        f"load average (1/5/15 min) at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    store_dir: Path = args.dir
    meta = None if args.rebuild else cached_store(store_dir)
    if meta is not None:
        print(f"reused the cached store at {store_dir} (built {meta['anchor']})")
    else:
        traces, steps = expected_counts()
        print(f"building {store_dir}: {traces:,} traces, {steps:,} steps (setup, not measured)")
        store_dir.parent.mkdir(parents=True, exist_ok=True)
        meta = build_store(store_dir, args.seed)
        print(f"built in {meta['built_in_s']} s")
    db_file = store_dir / "traces.db"
    counts = store_counts(db_file)
    assert counts == expected_counts(), f"store holds {counts}, expected {expected_counts()}"
    size_mb = sum(p.stat().st_size for p in store_dir.iterdir() if p.is_file()) / 1e6
    print(f"store: {counts[0]:,} traces, {counts[1]:,} steps, {size_mb:,.0f} MB")

    long_db = long_store(LONG_CACHE, args.seed)

    cli = find_cli()
    env = bench_env(args.cold_bytecode)
    py = sys.executable
    agent = meta["filter_agent"]
    since_ms = int((time.time() - 30 * 86_400) * 1000)
    d = ["--dir", str(store_dir)]

    def base_list(where: str, params: list[Any], column: str = "started_at_ms") -> list[str]:
        sql = page_sql(where, column)
        return [py, "-c", LIST_QUERY, str(db_file), sql, json.dumps([*params, 50])]

    # (label, ours command, stdlib command, goal)
    # goal: ("query", 3.0) = at most 3x the stdlib same-query process; ("abs", ms) = under ms;
    # ("rss", MB) = the CLI's peak RSS at most MB. Issue 17: list --limit 50 <= 2x, show of
    # 10k steps <= 1.5x, show's peak RSS flat (<= 100 MB at 50k steps).
    cases: list[tuple[str, list[str], list[str], list[tuple[str, float]]]] = [
        (
            "list --limit 50",
            [cli, "list", "--limit", "50", *d],
            base_list("1 = 1", []),
            [("query", 2.0), ("abs", 100.0)],
        ),
        (
            "list --limit 50 --status failed",
            [cli, "list", "--limit", "50", "--status", "failed", *d],
            base_list("t.status = ?", ["failed"]),
            [("query", 3.0)],
        ),
        (
            f"list --limit 50 --agent {agent} --since 30d",
            [cli, "list", "--limit", "50", "--agent", agent, "--since", "30d", *d],
            base_list("t.agent_name = ? AND t.started_at_ms >= ?", [agent, since_ms]),
            [("query", 3.0)],
        ),
        (
            "list --limit 50 --sort tokens",
            [cli, "list", "--limit", "50", "--sort", "tokens", *d],
            base_list("1 = 1", [], "total_tokens"),
            [("query", 3.0)],
        ),
        (
            f"show {BIG_ID} (10k steps)",
            [cli, "show", BIG_ID, *d],
            [py, "-c", SHOW_QUERY, str(db_file), BIG_ID, "text"],
            [("query", 1.5), ("abs", 1000.0), ("rss", 100.0)],
        ),
        (
            f"show {LONG_ID} (50k steps)",
            [cli, "show", LONG_ID, "--dir", str(LONG_CACHE)],
            [py, "-c", SHOW_QUERY, str(long_db), LONG_ID, "text"],
            [("rss", 100.0)],
        ),
        (
            f"show {BIG_ID} --json",
            [cli, "show", BIG_ID, "--json", *d],
            [py, "-c", SHOW_QUERY, str(db_file), BIG_ID, "json"],
            [],
        ),
        (
            f"show {LONG_ID} --json",
            [cli, "show", LONG_ID, "--json", "--dir", str(LONG_CACHE)],
            [py, "-c", SHOW_QUERY, str(long_db), LONG_ID, "json"],
            [("rss", 100.0)],
        ),
    ]
    start_cmd = [py, "-c", START]

    # Every command, once untimed (page cache, .pyc files), then --runs rotations.
    commands: dict[str, list[str]] = {"start": start_cmd}
    for label, ours, base, _ in cases:
        commands[f"ours {label}"] = ours
        commands[f"base {label}"] = base
    out_bytes = {key: timed(cmd, env)[1] for key, cmd in commands.items()}
    samples: dict[str, list[float]] = {key: [] for key in commands}
    rss: dict[str, list[float]] = {key: [] for key in commands}
    cpu: dict[str, list[float]] = {key: [] for key in commands}
    keys = list(commands)
    print(f"timing {len(keys)} commands x {args.runs} runs (rotating order)…", flush=True)
    for run in range(args.runs):
        shift = run % len(keys)
        for key in keys[shift:] + keys[:shift]:
            wall, _, peak = timed(commands[key], env)
            samples[key].append(wall * 1000)
            rss[key].append(peak)
            cpu[key].append(LAST_CPU[0] * 1000)

    med = {key: statistics.median(values) for key, values in samples.items()}
    start_ms = med["start"]
    print()
    print(f"python: {py} ({sys.version.split()[0]}); medians of {args.runs} runs, wall ms")
    print(f"load average (1/5/15 min) at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f'bare start `python -c "{START}"`: {start_ms:.1f} ms')
    if args.cold_bytecode:
        print("bytecode: inherited environment (--cold-bytecode)")
    else:
        print(f"bytecode: cached in {PYCACHE} (PYTHONPYCACHEPREFIX)")
    print()
    width = max(len(label) for label, *_ in cases) + 2
    header = (
        f"{'command':<{width}}{'ours':>8}{'stdlib':>8}{'ratio':>7}{'/start':>8}  "
        f"{'ours min-max':>13}  {'out KB':>7}  {'RSS MB':>6} {'stdlib':>6}  {'CPU ratio':>9}  goal"
    )
    print(header)
    print("-" * (len(header) + 24))
    missed = []
    for label, _, _, goals in cases:
        ours_ms, base_ms = med[f"ours {label}"], med[f"base {label}"]
        ratio = ours_ms / base_ms
        spread = samples[f"ours {label}"]
        verdicts = []
        for kind, limit in goals:
            if kind == "query":
                ok = ratio <= limit
                verdicts.append(f"<= {limit:g}x stdlib {'ok' if ok else 'MISS'}")
            elif kind == "rss":
                ok = statistics.median(rss[f"ours {label}"]) <= limit
                verdicts.append(f"RSS <= {limit:g} MB {'ok' if ok else 'MISS'}")
            else:
                ok = ours_ms < limit
                verdicts.append(f"< {limit:g} ms {'ok' if ok else 'MISS'}")
            if not ok:
                missed.append(label)
        per_start = ours_ms / start_ms
        cpu_ratio = statistics.median(cpu[f"ours {label}"]) / statistics.median(
            cpu[f"base {label}"]
        )
        out_kb = out_bytes[f"ours {label}"] / 1e3
        print(
            f"{label:<{width}}{ours_ms:>8.1f}{base_ms:>8.1f}{ratio:>6.2f}x{per_start:>7.2f}x"
            f"  {min(spread):>6.0f}-{max(spread):<6.0f}  {out_kb:>7.1f}"
            f"  {statistics.median(rss[f'ours {label}']):>6.0f}"
            f" {statistics.median(rss[f'base {label}']):>6.0f}"
            f"  {cpu_ratio:>8.2f}x"
            f"  {'; '.join(verdicts) or '-'}"
        )
    print()
    print(
        "ours = agent-replay CLI process; stdlib = python -c doing the same SQL and printing "
        "the rows;\nratio = ours/stdlib; /start = ours/bare interpreter start; RSS = median "
        "peak resident memory of each process (wait4);\nCPU ratio = median user+system CPU "
        "of ours / of stdlib (less disturbed by a loaded machine than wall time; the goals "
        "are on wall time)."
    )
    if missed:
        print(f"MISSED: {', '.join(dict.fromkeys(missed))}")
        return 1
    print("all goals met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
