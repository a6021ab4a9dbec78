"""Ingest throughput: `agent-replay ingest FILE` against a stdlib-only baseline, side by side.

Budget (DESIGN.md, "Performance budgets"): ingest of a large JSONL file reaches at least 1/3 of
the rate of a stdlib process that parses the same file and inserts the same rows with
``executemany`` in one transaction.

What runs:
1. A seeded, deterministic JSONL file of 2,000 traces x 20 steps in the trace format.
2. Alternating, ``--runs`` times:
   - ours: ``agent-replay ingest FILE --dir <fresh dir>`` (the real CLI, whole process);
   - baseline: a ``python -c`` process (stdlib only) that parses the file with ``json``, derives
     the same columns, and inserts the same traces/tags/steps/decisions rows with one
     ``executemany`` per table in one transaction, into an empty store made beforehand (untimed)
     by ``agent-replay init`` so the schema, indexes and pragmas are the real ones.
3. After every run the store is checked: 2,000 traces and 40,000 steps.
One untimed warm-up of both sides (20 traces) comes first; bytecode is cached outside the tree
(see ``bench_env``).

Run by hand: ``.venv/bin/python bench/ingest.py [--runs 5]``. Stdlib and the project only.
Exits 1 when the ratio misses its goal.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL_RATIO = 1 / 3
SEED = 20260101

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


# --- the data -------------------------------------------------------------------------------

WORDS = (
    "agent tool search query result context document answer refund order customer policy "
    "invoice account latency retry cache vector index embedding summary ticket escalate "
    "shipping address payment card declined approve review draft email calendar meeting "
    "schedule weather forecast report metric dashboard error timeout fallback model prompt "
    "token budget plan step verify check guard source citation snippet ranking score"
).split()
AGENTS = [
    "support-bot",
    "research-agent",
    "code-reviewer",
    "billing-assistant",
    "travel-planner",
    "sql-analyst",
    "email-triage",
    "onboarding-guide",
]
MODELS = ["claude-sonnet-4", "gpt-4o", "gpt-4o-mini", "gemini-2.0-flash", "claude-haiku-3.5"]
TOOLS = ["search_web", "read_file", "run_sql", "http_get", "lookup_order", "send_email", "calc"]
TAGS = ["prod", "staging", "nightly", "eval", "canary", "eu", "us", "vip", "regression", "beta"]
STEP_TYPES = ["thought", "tool_call", "llm_call", "retrieval", "output", "guard_check", "error"]
STEP_WEIGHTS = [20, 30, 30, 10, 4, 4, 2]
EPOCH = dt.datetime(2026, 1, 5, 8, 0, tzinfo=dt.UTC)


def iso(moment: dt.datetime) -> str:
    """Canonical UTC with milliseconds and Z (what producers that follow the format emit)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def payload(rng: random.Random, kind: str) -> dict[str, Any]:
    """A JSON object of a few hundred bytes."""
    if kind == "tool_in":
        return {
            "args": {"query": text(rng, 6, 14), "limit": rng.randint(1, 20)},
            "context": {"user_id": f"u{rng.randint(1, 5000)}", "locale": "en-US"},
            "note": text(rng, 10, 25),
        }
    if kind == "tool_out":
        return {
            "results": [
                {"title": text(rng, 3, 6), "score": round(rng.random(), 3)}
                for _ in range(rng.randint(2, 4))
            ],
            "elapsed_ms": rng.randint(5, 900),
        }
    if kind == "llm_in":
        return {
            "messages": [
                {"role": "system", "content": text(rng, 8, 16)},
                {"role": "user", "content": text(rng, 15, 35)},
            ],
            "temperature": round(rng.random(), 2),
        }
    if kind == "llm_out":
        return {"content": text(rng, 25, 60), "stop_reason": "end_turn"}
    return {"text": text(rng, 20, 50)}


def make_trace(rng: random.Random, index: int, n_steps: int) -> dict[str, Any]:
    start = EPOCH + dt.timedelta(seconds=index * 37, milliseconds=rng.randint(0, 999))
    status = rng.choices(["completed", "failed", "timeout"], [85, 12, 3])[0]
    decision_at = max(2, n_steps // 2)
    steps = []
    clock = start
    for number in range(1, n_steps + 1):
        if number == decision_at:
            step_type = "decision"
        elif number == n_steps:
            step_type = "output"
        else:
            step_type = rng.choices(STEP_TYPES, STEP_WEIGHTS)[0]
        clock += dt.timedelta(milliseconds=rng.randint(1, 40))
        began = clock
        clock += dt.timedelta(milliseconds=rng.randint(20, 2500))
        step: dict[str, Any] = {
            "step_number": number,
            "step_type": step_type,
            "name": step_type if step_type != "tool_call" else rng.choice(TOOLS),
            "started_at": iso(began),
            "ended_at": iso(clock),
        }
        if step_type == "llm_call":
            step.update(
                input=payload(rng, "llm_in"),
                output=payload(rng, "llm_out"),
                model=rng.choice(MODELS),
                tokens_used=rng.randint(200, 4000),
            )
        elif step_type in ("tool_call", "retrieval"):
            step.update(input=payload(rng, "tool_in"), output=payload(rng, "tool_out"))
        elif step_type == "error":
            step.update(input=payload(rng, "tool_in"), error=f"ToolError: {text(rng, 4, 9)}")
        else:
            step.update(input=payload(rng, "text"), output=payload(rng, "text"))
        if number > 1 and rng.random() < 0.3:
            step["parent_step"] = rng.randint(1, number - 1)
        if number > 1 and rng.random() < 0.4:
            step["caused_by_step"] = rng.randint(max(1, number - 5), number - 1)
        if step_type == "decision":
            options = [
                {"option": name, "rationale": text(rng, 5, 12), "score": round(rng.random(), 2)}
                for name in rng.sample(TOOLS, 3)
            ]
            step["decision"] = {
                "options": options,
                "chosen": options[0]["option"],
                "rationale": text(rng, 8, 16),
                "confidence": round(rng.uniform(0.4, 0.99), 2),
                "decided_by": "agent",
            }
        steps.append(step)
    trace: dict[str, Any] = {
        "id": f"trc_ingest{index:06d}",
        "agent_name": rng.choice(AGENTS),
        "agent_version": f"1.{rng.randint(0, 9)}.{rng.randint(0, 20)}",
        "trigger": rng.choice(["api", "cron", "chat", "webhook"]),
        "status": status,
        "input": {
            "query": text(rng, 10, 30),
            "user": {"id": f"u{rng.randint(1, 5000)}", "plan": rng.choice(["free", "pro"])},
            "channel": rng.choice(["web", "slack", "email"]),
        },
        "output": {"answer": text(rng, 15, 40)} if status == "completed" else None,
        "started_at": iso(start),
        "ended_at": iso(clock + dt.timedelta(milliseconds=rng.randint(1, 50))),
        "total_cost_usd": round(rng.uniform(0.001, 0.4), 5),
        "error": f"agent failed: {text(rng, 3, 8)}" if status == "failed" else None,
        "tags": rng.sample(TAGS, rng.randint(1, 3)),
        "session_id": f"ses_{rng.randint(1, 400):04d}",
        "metadata": {"env": rng.choice(["prod", "staging"]), "region": rng.choice(["eu", "us"])},
        "steps": steps,
    }
    return trace


def write_jsonl(path: Path, n_traces: int, n_steps: int, seed: int) -> str:
    """Write the file; return its sha256 (the same seed always gives the same bytes)."""
    rng = random.Random(seed)
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for index in range(n_traces):
            line = (json.dumps(make_trace(rng, index, n_steps)) + "\n").encode()
            digest.update(line)
            out.write(line)
    return digest.hexdigest()


# --- the baseline: stdlib only, run as `python -c BASELINE FILE DB` ---------------------------

BASELINE = r"""
import base64, datetime as dt, hashlib, json, os, sqlite3, sys, time

path, db_file = sys.argv[1], sys.argv[2]

def ms(ts):
    return None if ts is None else int(dt.datetime.fromisoformat(ts).timestamp() * 1000)

def span(a, b):
    if a is None or b is None:
        return None
    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds() * 1000

def enc(value):
    return None if value is None else json.dumps(value)

def step_id():
    return "stp_" + base64.b32encode(os.urandom(10)).decode().lower()

created = int(time.time() * 1000)
traces, tags, steps, decisions = [], [], [], []
with open(path, "rb") as source:
    for line in source:
        t = json.loads(line)
        tid = t["id"]
        tokens = [s.get("tokens_used") for s in t["steps"] if s.get("tokens_used") is not None]
        started_ms = ms(t.get("started_at"))
        traces.append((
            tid, t["agent_name"], t.get("agent_version"), t.get("trigger"),
            t.get("status", "completed"), enc(t.get("input")), enc(t.get("output")),
            hashlib.sha256(json.dumps(t.get("input"), sort_keys=True,
                                      separators=(",", ":")).encode()).hexdigest(),
            t.get("started_at"), started_ms if started_ms is not None else created,
            t.get("ended_at"), span(t.get("started_at"), t.get("ended_at")),
            sum(tokens) if tokens else None, t.get("total_cost_usd"), t.get("error"),
            t.get("session_id"), enc(t.get("metadata") or None), None, None, None, None,
            len(t["steps"]), created,
        ))
        tags.extend((tid, tag, pos) for pos, tag in enumerate(t.get("tags", [])))
        for s in t["steps"]:
            sid = step_id()
            steps.append((
                sid, tid, s["step_number"], s["step_type"], s.get("name"),
                enc(s.get("input")), enc(s.get("output")), s.get("error"),
                s.get("started_at"), ms(s.get("started_at")), s.get("ended_at"),
                span(s.get("started_at"), s.get("ended_at")), s.get("tokens_used"),
                s.get("model"), s.get("parent_step"), s.get("caused_by_step"),
                enc(s.get("metadata") or None), None, 0,
            ))
            d = s.get("decision")
            if d is not None:
                decisions.append((sid, tid, json.dumps(d["options"]), d["chosen"],
                                  d.get("rationale"), d.get("confidence"),
                                  d.get("decided_by", "agent")))

con = sqlite3.connect(db_file, isolation_level=None)
for pragma in ("journal_mode = wal", "busy_timeout = 15000", "foreign_keys = 1",
               "synchronous = normal", "cache_size = -64000"):
    con.execute("PRAGMA " + pragma)

def insert(table, columns, rows):
    names = ", ".join('"%s"' % c for c in columns)
    marks = ", ".join("?" * len(columns))
    con.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)

con.execute("BEGIN IMMEDIATE")
insert("traces", ("id agent_name agent_version trigger status input output input_hash "
                  "started_at started_at_ms ended_at total_duration_ms total_tokens "
                  "total_cost_usd error session_id metadata parent_trace_id forked_from_step "
                  "otel_trace_id source_format step_count created_at_ms").split(), traces)
insert("tags", ("trace_id", "tag", "position"), tags)
insert("steps", ("id trace_id step_number step_type name input output error started_at "
                 "started_at_ms ended_at duration_ms tokens_used model parent_step "
                 "caused_by_step metadata call_id is_open").split(), steps)
insert("decisions", ("step_id trace_id options chosen rationale confidence "
                     "decided_by").split(), decisions)
con.execute("COMMIT")
con.close()
print(f"inserted {len(traces)} traces, {len(steps)} steps")
"""


# --- running --------------------------------------------------------------------------------


def find_cli() -> str:
    beside = Path(sys.executable).with_name("agent-replay")
    if beside.exists():
        return str(beside)
    found = shutil.which("agent-replay")
    if not found:
        sys.exit("agent-replay is not installed (expected next to this interpreter)")
    return found


def timed(cmd: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one subprocess; stdout/stderr to pipes; fails loudly on a bad exit."""
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"command failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    return elapsed


def counts(db_file: Path) -> tuple[int, int]:
    with sqlite3.connect(db_file) as con:
        traces = con.execute("SELECT COUNT(*) FROM traces").fetchone()[0]
        steps = con.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    return traces, steps


def run_ours(cli: str, jsonl: Path, store: Path, env: dict[str, str]) -> float:
    return timed([cli, "ingest", str(jsonl), "--dir", str(store)], env)


def run_baseline(cli: str, jsonl: Path, store: Path, env: dict[str, str]) -> float:
    subprocess.run([cli, "init", "--dir", str(store)], check=True, capture_output=True, env=env)
    return timed([sys.executable, "-c", BASELINE, str(jsonl), str(store / "traces.db")], env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each (default 5)")
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=20, help="steps per trace")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--cold-bytecode",
        action="store_true",
        help="keep the inherited environment (e.g. PYTHONDONTWRITEBYTECODE=1)",
    )
    args = parser.parse_args()

    cli = find_cli()
    env = bench_env(args.cold_bytecode)
    expected = (args.traces, args.traces * args.steps)
    with tempfile.TemporaryDirectory(prefix="agent-replay-bench-ingest-") as tmp:
        work = Path(tmp)
        jsonl = work / "traces.jsonl"
        began = time.perf_counter()
        digest = write_jsonl(jsonl, args.traces, args.steps, args.seed)
        size_mb = jsonl.stat().st_size / 1e6
        print(
            f"generated {jsonl.name}: {args.traces:,} traces x {args.steps} steps "
            f"= {expected[1]:,} steps, {size_mb:.1f} MB, seed {args.seed}, "
            f"sha256 {digest[:12]} ({time.perf_counter() - began:.1f} s)"
        )
        print(f"cli: {cli}\npython: {sys.executable} ({sys.version.split()[0]})")
        if args.cold_bytecode:
            print("bytecode: inherited environment (--cold-bytecode)")
        else:
            print(f"bytecode: cached in {PYCACHE} (PYTHONPYCACHEPREFIX)")

        # Warm-up, untimed: bytecode caches and the page cache, on a few traces.
        warm = work / "warm.jsonl"
        with jsonl.open("rb") as source, warm.open("wb") as out:
            out.writelines(line for _, line in zip(range(20), source, strict=False))
        for fn in (run_ours, run_baseline):
            fn(cli, warm, work / f"warm-{fn.__name__}", env)

        print(f"{args.runs} runs each, alternating order; every store checked for {expected}")
        print()
        print(f"{'run':>4}  {'ours s':>8}  {'baseline s':>10}  {'ratio':>6}")
        ours: list[float] = []
        base: list[float] = []
        for run in range(args.runs):
            # Alternate which goes first so drift on a noisy machine hits both sides alike.
            order = (run_ours, run_baseline) if run % 2 == 0 else (run_baseline, run_ours)
            results = {}
            for fn in order:
                store = work / f"{fn.__name__}-{run}"
                elapsed = fn(cli, jsonl, store, env)
                got = counts(store / "traces.db")
                assert got == expected, f"{fn.__name__}: store holds {got}, expected {expected}"
                shutil.rmtree(store)
                results[fn] = elapsed
            ours.append(results[run_ours])
            base.append(results[run_baseline])
            ratio = results[run_baseline] / results[run_ours]
            print(f"{run + 1:>4}  {ours[-1]:>8.3f}  {base[-1]:>10.3f}  {ratio:>6.2f}", flush=True)

    steps = expected[1]
    ours_med, base_med = statistics.median(ours), statistics.median(base)
    ours_rate, base_rate = steps / ours_med, steps / base_med
    ratio = ours_rate / base_rate
    verdict = "PASS" if ratio >= GOAL_RATIO else "MISS"
    print()
    print(f"{'':26}{'median s':>10}{'steps/s':>12}{'traces/s':>11}{'min-max s':>17}")
    for label, samples, rate in (
        ("agent-replay ingest", ours, ours_rate),
        ("stdlib executemany", base, base_rate),
    ):
        spread = f"{min(samples):.3f}-{max(samples):.3f}"
        print(
            f"{label:26}{statistics.median(samples):>10.3f}{rate:>12,.0f}"
            f"{rate / args.steps:>11,.0f}{spread:>17}"
        )
    print(f"{'ratio ours/baseline':26}{ratio:>10.2f}   goal >= {GOAL_RATIO:.2f}   {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
