"""`check` of 10,000 candidate runs against a 1,000-entry golden set: time and peak memory,
beside a stdlib process iterating the same runs' rows.

Setup (not measured): a store of 10,000 runs of 10 steps (100,000 steps): 1,000 distinct
(agent, input) pairs over 10 agents, each run 10 times a day apart; one run of each pair is
tagged ``golden``; about 3 % of the others regress (an extra tool call, a changed tool input,
a failed status). Built with the library (``ensure_database`` + ``ingest_many``) from seeded
data, cached in ``/tmp/agent-replay-bench/check-10k`` while its counts are right. The golden
file comes from the real ``agent-replay export --format golden --tag golden``.

Measured (whole subprocesses, each started by a small wrapper that reports the child's wall time
and peak RSS from ``resource.getrusage(RUSAGE_CHILDREN)``; median of ``--runs``, rotating order):
- ours: ``agent-replay check --golden golden.json`` over all 10,000 runs (exit 1: the
  regressions are real), and over the newest 2,000 (``--since``), to show memory stays flat;
- baseline: a stdlib-only ``python -c`` process doing the same reading: load the golden file
  with ``json`` into a dict, page through the traces 500 at a time (keyset, oldest first), hash
  each input (sha256 of sorted-key compact JSON), and for each matched run read its steps' type,
  name, input and model and decode the inputs — no comparison, no report;
- the bare interpreter start, ``python -c "import sqlite3, json"``.

Also measured once, untimed: check's peak Python heap (``tracemalloc``, the CLI run in-process)
over 2,000 and 10,000 runs. Peak RSS also holds SQLite's page cache, which the store's pragmas
allow to grow to 64 MB (the whole 35 MB database here), so RSS grows with the pages read until
that cap; the Python heap is what would grow with the number of runs if anything were kept.

Goal: flat memory — check's peak Python heap over 10,000 runs within 5 MB of its peak over
2,000 (only failing results are kept, ~1 KB each). The time ratio against the baseline is
reported (DESIGN.md sets no budget for it).

Run by hand: ``.venv/bin/python bench/check.py [--runs 3]``. Stdlib and the project only.
Exits 1 when the memory goal is missed or a command misbehaves.
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

CACHE = Path("/tmp/agent-replay-bench/check-10k")
PYCACHE = Path("/tmp/agent-replay-bench/pycache")
LAYOUT_VERSION = 1
N_INPUTS = 1_000
RUNS_PER_INPUT = 10
STEPS = 10
SEED = 20260601
AGENTS = [f"agent-{name}" for name in "abcdefghij"]
TOOLS = ["search_web", "read_file", "run_sql", "http_get", "lookup_order"]
MODELS = ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4"]
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
MAX_HEAP_GROWTH = 5 * 1024 * 1024

# Runs a command and prints "<wall seconds> <child peak RSS KB> <exit code>".
WRAPPER = r"""
import resource, subprocess, sys, time
t = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - t
print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)
"""

# argv: agent-replay arguments. Runs the CLI in-process under tracemalloc and prints
# "<peak Python heap bytes> <exit code>" on stderr (the CLI's own output goes to /dev/null).
HEAP = r"""
import contextlib, os, sys, tracemalloc
tracemalloc.start()
from agent_replay.cli import main
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
    code = main(sys.argv[1:])
print(tracemalloc.get_traced_memory()[1], code, file=sys.stderr)
"""

# argv: DB GOLDEN. The reading `check` does, with the stdlib only.
BASELINE = r"""
import hashlib, json, sqlite3, sys
db, golden_path = sys.argv[1:3]
with open(golden_path, "rb") as f:
    golden = {}
    for run in json.load(f)["runs"]:
        golden.setdefault((run["agent_name"], run["input_hash"]), []).append(run)
con = sqlite3.connect(db)
after = ("", "")
matched = steps_read = 0
while True:
    rows = con.execute(
        "SELECT id, agent_name, input, status, started_at_ms, parent_trace_id FROM traces "
        "WHERE started_at_ms > ? OR (started_at_ms = ? AND id > ?) "
        "ORDER BY started_at_ms, id LIMIT 500",
        [after[0] or -1, after[0] or -1, after[1]],
    ).fetchall()
    if not rows:
        break
    for tid, agent, raw, status, ms, parent in rows:
        if parent is not None:
            continue
        value = json.loads(raw) if raw is not None else None
        digest = hashlib.sha256(
            json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        ).hexdigest()
        if (agent, digest) in golden:
            matched += 1
            for step_type, name, inp, model in con.execute(
                "SELECT step_type, name, input, model FROM steps WHERE trace_id = ? "
                "ORDER BY step_number", [tid]
            ):
                json.loads(inp) if inp is not None else None
                steps_read += 1
    after = (rows[-1][4], rows[-1][0])
print(matched, steps_read)
"""


def bench_env(cold: bool) -> dict[str, str]:
    """Every measured process runs from cached bytecode (see bench/README.md)."""
    env = dict(os.environ)
    if not cold:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


# --- the store --------------------------------------------------------------------------------


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def generate(seed: int) -> Iterator[tuple[str, Any]]:
    """10,000 runs: run r of input i starts r days + i seconds after BASE."""
    rng = random.Random(seed)
    shapes = []
    for i in range(N_INPUTS):
        kinds = ["thought"] + [rng.choice(["tool_call", "llm_call", "retrieval"]) for _ in range(8)]
        shapes.append(
            {
                "agent": AGENTS[i % len(AGENTS)],
                "input": {"task": f"task {i}", "user": f"u{rng.randrange(500)}", "n": i},
                "steps": [
                    (
                        kind,
                        rng.choice(TOOLS) if kind == "tool_call" else f"{kind}-{k}",
                        {"q": f"{rng.randrange(10**6)}", "k": rng.randrange(9)},
                        rng.choice(MODELS) if kind == "llm_call" else None,
                    )
                    for k, kind in enumerate(kinds)
                ]
                + [("output", "reply", None, None)],
            }
        )
    for run in range(RUNS_PER_INPUT):
        for i, shape in enumerate(shapes):
            start = BASE + dt.timedelta(days=run, seconds=i)
            steps = []
            plan = list(shape["steps"])
            status = "completed"
            regress = run > 0 and rng.random() < 0.03
            if regress:
                what = rng.randrange(3)
                if what == 0:
                    plan.insert(3, ("tool_call", "retry_tool", {"q": "again"}, None))
                elif what == 1:
                    tools = [k for k, s in enumerate(plan) if s[0] == "tool_call"]
                    if tools:
                        k = tools[0]
                        plan[k] = (plan[k][0], plan[k][1], {"q": "changed"}, plan[k][3])
                else:
                    status = "failed"
            for number, (kind, name, tool_input, model) in enumerate(plan, 1):
                at = start + dt.timedelta(milliseconds=300 * number)
                step: dict[str, Any] = {
                    "step_number": number,
                    "step_type": kind,
                    "name": name,
                    "input": tool_input,
                    "output": {"text": f"output {rng.randrange(10**9)} of run {run}"},
                    "started_at": iso(at),
                    "ended_at": iso(at + dt.timedelta(milliseconds=200)),
                }
                if model:
                    step["model"] = model
                    step["tokens_used"] = rng.randint(100, 2000)
                steps.append(step)
            yield (
                f"run {run} input {i}",
                {
                    "agent_name": shape["agent"],
                    "status": status,
                    "input": shape["input"],
                    "output": f"answer {rng.randrange(10**9)}",
                    "started_at": iso(start),
                    "ended_at": iso(start + dt.timedelta(seconds=5)),
                    "tags": ["golden"] if run == 0 else ["nightly"],
                    "steps": steps,
                },
            )


def counts(db_file: Path) -> tuple[int, int]:
    with sqlite3.connect(db_file) as con:
        return (
            con.execute("SELECT COUNT(*) FROM traces").fetchone()[0],
            con.execute("SELECT COUNT(*) FROM steps").fetchone()[0],
        )


def ensure_store(directory: Path, seed: int, rebuild: bool) -> None:
    meta = directory / "bench-meta.json"
    if not rebuild and meta.is_file() and (directory / "traces.db").is_file():
        if json.loads(meta.read_text()).get("layout") == LAYOUT_VERSION:
            n_traces, _ = counts(directory / "traces.db")
            if n_traces == N_INPUTS * RUNS_PER_INPUT:
                print(f"reused the cached store {directory}")
                return
    from agent_replay.services.ingest import ingest_many
    from agent_replay.store.db import ensure_database

    building = directory.with_name(directory.name + "-building")
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(directory, ignore_errors=True)
    began = time.perf_counter()
    store = ensure_database(building)
    try:
        report = ingest_many(store, generate(seed))
    finally:
        store.close()
    if report.rejected:
        sys.exit(f"{len(report.rejected)} generated runs rejected; first: {report.rejected[0]}")
    meta_data = {"layout": LAYOUT_VERSION, "seed": seed}
    (building / "bench-meta.json").write_text(json.dumps(meta_data))
    building.rename(directory)
    print(f"built {directory} in {time.perf_counter() - began:.1f} s")


# --- measuring --------------------------------------------------------------------------------


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in KB, exit code) of ``cmd`` run in a fresh wrapper process."""
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, *cmd],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(out[0]), int(out[1]), int(out[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=CACHE)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--cold-bytecode", action="store_true")
    args = parser.parse_args()

    env = bench_env(args.cold_bytecode)
    ensure_store(args.dir, args.seed, args.rebuild)
    n_traces, n_steps = counts(args.dir / "traces.db")
    golden = args.dir / "golden.json"
    cli = [sys.executable, "-m", "agent_replay", "--dir", str(args.dir)]
    subprocess.run(
        [*cli, "export", "--format", "golden", "--tag", "golden", "--output", str(golden)],
        env=env,
        check=True,
        capture_output=True,
    )
    golden_runs = len(json.loads(golden.read_text())["runs"])
    since = iso(BASE + dt.timedelta(days=RUNS_PER_INPUT - 2))  # the newest 2 of 10 runs each
    commands = {
        "check 10,000 runs": [*cli, "check", "--golden", str(golden)],
        "check 2,000 runs": [*cli, "check", "--golden", str(golden), "--since", since],
        "stdlib baseline": [
            sys.executable,
            "-c",
            BASELINE,
            str(args.dir / "traces.db"),
            str(golden),
        ],
        "bare start": [sys.executable, "-c", "import sqlite3, json"],
    }
    expected_codes = {"check 10,000 runs": 1, "check 2,000 runs": 1}
    print(
        f"store: {n_traces:,} runs, {n_steps:,} steps; golden set: {golden_runs:,} runs; "
        f"{args.runs} rounds"
    )
    for name, cmd in commands.items():  # warm-up, untimed (fills the bytecode cache)
        _, _, code = measure(cmd, env)
        if code != expected_codes.get(name, 0):
            print(f"{name}: unexpected exit code {code}")
            return 1
    samples: dict[str, list[tuple[float, int]]] = {name: [] for name in commands}
    names = list(commands)
    for round_index in range(args.runs):
        order = names[round_index % len(names) :] + names[: round_index % len(names)]
        for name in order:
            wall, rss, _ = measure(commands[name], env)
            samples[name].append((wall, rss))

    def median_wall(name: str) -> float:
        return statistics.median(w for w, _ in samples[name])

    def peak(name: str) -> int:
        return max(r for _, r in samples[name])

    base = median_wall("stdlib baseline")
    print(f"{'':<20}{'median s':>10}{'min-max s':>16}{'peak RSS MB':>13}{'x baseline':>12}")
    for name in names:
        walls = [w for w, _ in samples[name]]
        print(
            f"{name:<20}{median_wall(name):>10.3f}{min(walls):>8.3f}-{max(walls):<7.3f}"
            f"{peak(name) / 1024:>13.1f}{median_wall(name) / base:>12.2f}"
        )
    per_run_ms = median_wall("check 10,000 runs") / n_traces * 1000
    print(f"check: {per_run_ms:.3f} ms per candidate run (10,000 runs)")
    heaps = {}
    for name in ("check 2,000 runs", "check 10,000 runs"):
        argv = commands[name][3:]  # drop "python -m agent_replay"
        done = subprocess.run(
            [sys.executable, "-c", HEAP, *argv], env=env, capture_output=True, text=True
        )
        heap, code = done.stderr.split()[-2:]
        if int(code) != expected_codes[name]:
            print(f"{name} (heap run): unexpected exit code {code}")
            return 1
        heaps[name] = int(heap)
        print(f"{name}: peak Python heap {int(heap) / 2**20:.2f} MB (tracemalloc)")
    growth = heaps["check 10,000 runs"] - heaps["check 2,000 runs"]
    rss_growth = peak("check 10,000 runs") - peak("check 2,000 runs")
    flat = growth <= MAX_HEAP_GROWTH
    print(
        f"memory: 10,000 runs minus 2,000 runs: Python heap {growth / 2**20:+.2f} MB "
        f"(goal: at most {MAX_HEAP_GROWTH // 2**20} MB) {'ok' if flat else 'MISS'}; "
        f"RSS {rss_growth / 1024:+.1f} MB (SQLite page cache, capped at 64 MB)"
    )
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
