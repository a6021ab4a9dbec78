"""Live recording throughput: `agent-replay record` reading native events from a pipe, against a
stdlib-only baseline reading the same pipe, side by side.

Budget (DESIGN.md, "Performance budgets"): `record` sustains at least 20,000 events/s from a
pipe.

What runs:
1. A seeded, deterministic JSONL file of native protocol v1 events (default 200,000): 16
   traces interleaved, each a trace_start, then tool and LLM calls as step_start/step_end pairs
   (paired by call_id) and complete steps (thoughts, retrievals, an output), then a trace_end.
   Payloads are small JSON objects of roughly 100-250 bytes.
2. Alternating, ``--runs`` times (medians reported):
   - ours: ``cat FILE | agent-replay record --dir <fresh dir>``: the real CLI, whole process,
     stdin a pipe, redaction on (the default), group commit as shipped;
   - baseline: ``cat FILE | python -c BASELINE``: a stdlib-only process reading the same pipe
     line by line, parsing with ``json``, pairing step_start/step_end by call_id into the same
     step rows (ids, numbers, times, durations, JSON payloads), and inserting the traces, tags
     and steps with one ``executemany`` per table in one transaction, into a store made
     beforehand (untimed) by ``agent-replay init`` so the schema, indexes and pragmas are the
     real ones. It does less than ``record`` (no validation, no redaction, no commits while
     reading), so it is the ceiling, not a competitor.
3. After every run each store is checked for the expected trace and step counts.

Run by hand: ``.venv/bin/python bench/record.py [--runs 5] [--events 200000]``. Stdlib and the
project only. Exits 1 when ours misses 20,000 events/s.

``--redaction`` compares ``record`` (redacting, the default) with ``record --no-redact`` on the
same stream instead (exits 1 when redaction costs more than 15% CPU); ``--text`` makes every
tool output ~1.5 KB of log text that mentions keys, tokens and passwords (so the rules, not just
their pre-check, run), with a real-looking token in about one in twenty.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL_EVENTS_PER_S = 20_000
# DESIGN.md: record >= 1/2 of the stdlib writer, in both event styles (issue 17).
GOAL_RATIO = 0.5
SEED = 20260601
TRACES = 16

PYCACHE = Path("/tmp/agent-replay-bench/pycache")

WORDS = (
    "agent tool search query result context document answer refund order customer policy "
    "invoice account latency retry cache vector index embedding summary ticket escalate "
    "shipping address payment card declined approve review draft email calendar meeting "
    "schedule weather forecast report metric dashboard error timeout fallback model prompt"
).split()
TOOLS = ["search_web", "read_file", "run_sql", "http_get", "lookup_order", "send_email"]
MODELS = ["claude-sonnet-4", "gpt-4o-mini", "gemini-2.0-flash"]


def bench_env(cold: bool) -> dict[str, str]:
    """The environment of every measured process (see bench/README.md, "Bytecode")."""
    env = dict(os.environ)
    if not cold:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


# --- the data -------------------------------------------------------------------------------


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _ts(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def _rich(rng: random.Random) -> str:
    """``--text``: a tool output as redaction meets it: ~1.5 KB of log lines mentioning keys,
    tokens and passwords, a URL, JSON held in a string, and now and then a real-looking
    secret (the rules run on every line, not just their cheap pre-check)."""
    lines = [_text(rng, 8, 16) for _ in range(8)]
    lines.append(f"GET https://api.example.com/v1/items?page={rng.randint(1, 9)} token refreshed")
    lines.append(json.dumps({"password_policy": "strong", "api_key_name": "prod", "n": 3}))
    lines.append(f"export CACHE_KEY_PREFIX=bench{rng.randint(100, 999)}")
    if rng.random() < 0.05:
        lines.append(
            "export GITHUB_TOKEN=ghp_" + "".join(rng.choice("abcXYZ0189") for _ in range(36))
        )
    return "\n".join(lines)


STYLES = ("step", "pairs", "mixed")


def generate(
    n_events: int, seed: int, text: bool = False, style: str = "mixed"
) -> tuple[list[bytes], int]:
    """The event lines, and how many steps they make (``text``: tool outputs are ``_rich``).

    ``style``: ``step``, every step one complete ``step`` event (tool and LLM calls with their
    output and times); ``pairs``, every step a ``step_start`` then a ``step_end`` (thoughts and
    retrievals too); ``mixed``, tool and LLM calls as pairs and the rest as ``step`` events.
    """
    rng = random.Random(seed)
    per_trace = (n_events - 2 * TRACES) // TRACES
    streams: list[list[dict[str, Any]]] = []
    steps = 0
    base_ms = 1_780_000_000_000
    for t in range(TRACES):
        tid = f"bench-{t}"
        clock = base_ms + t * 60_000
        events: list[dict[str, Any]] = [
            {
                "v": 1,
                "type": "trace_start",
                "trace_id": tid,
                "agent_name": f"agent-{t % 4}",
                "input": {"query": _text(rng, 6, 14), "user": f"u{rng.randint(1, 999)}"},
                "tags": ["bench"],
                "started_at": _ts(clock),
            }
        ]
        budget = per_trace
        call = 0
        while budget > 0:
            clock += rng.randint(5, 400)
            paired = style == "pairs" or (style == "mixed" and budget >= 2)
            if rng.random() < 0.6:
                call += 1
                llm = rng.random() < 0.4
                cid = f"{tid}-call-{call}"
                start: dict[str, Any] = {
                    "step_type": "llm_call" if llm else "tool_call",
                    "name": rng.choice(MODELS) if llm else rng.choice(TOOLS),
                    "input": {"args": _text(rng, 4, 12), "limit": rng.randint(1, 20)},
                    "started_at": _ts(clock),
                }
                clock += rng.randint(20, 900)
                end: dict[str, Any] = {
                    "output": {"result": _rich(rng) if text else _text(rng, 6, 20), "ok": True},
                    "ended_at": _ts(clock),
                }
                if llm:
                    end["tokens_used"] = rng.randint(100, 3000)
            else:
                cid = None
                start = {
                    "step_type": rng.choice(["thought", "thought", "retrieval"]),
                    "name": "plan",
                    "started_at": _ts(clock),
                }
                end = {"output": _text(rng, 8, 24), "ended_at": _ts(clock + rng.randint(1, 80))}
            if paired and (cid is not None or style == "pairs"):
                cid = cid or f"{tid}-step-{steps}"
                head = {"v": 1, "type": "step_start", "trace_id": tid}
                events.append({**head, **start, "call_id": cid})
                events.append({"v": 1, "type": "step_end", "trace_id": tid, "call_id": cid, **end})
                budget -= 2
            else:
                events.append({"v": 1, "type": "step", "trace_id": tid, **start, **end})
                budget -= 1
            steps += 1
        events.append(
            {
                "v": 1,
                "type": "trace_end",
                "trace_id": tid,
                "output": {"answer": _text(rng, 5, 15)},
                "ended_at": _ts(clock + 10),
            }
        )
        streams.append(events)
    # Interleave the traces in runs of a few events, as concurrent agents would write them
    # (a pair is never split across traces' runs out of order: each stream keeps its order).
    lines: list[bytes] = []
    cursors = [0] * TRACES
    while any(c < len(s) for c, s in zip(cursors, streams, strict=True)):
        for t in range(TRACES):
            take = rng.randint(1, 6)
            chunk = streams[t][cursors[t] : cursors[t] + take]
            cursors[t] += len(chunk)
            lines.extend((json.dumps(e) + "\n").encode() for e in chunk)
    return lines, steps


# --- the baseline: stdlib only, run as `cat FILE | python -c BASELINE DB` ---------------------

BASELINE = r"""
import base64, datetime as dt, hashlib, json, os, sqlite3, sys, time

db_file = sys.argv[1]

def ms(ts):
    return None if ts is None else int(dt.datetime.fromisoformat(ts).timestamp() * 1000)

def span(a, b):
    if a is None or b is None:
        return None
    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds() * 1000

def enc(value):
    return None if value is None else json.dumps(value)

def new_id(prefix):
    return prefix + "_" + base64.b32encode(os.urandom(10)).decode().lower()

created = int(time.time() * 1000)
traces, tags, steps = {}, [], []
ours, numbers, calls, counts, tokens = {}, {}, {}, {}, {}
for line in sys.stdin.buffer:
    e = json.loads(line)
    kind, pid = e["type"], e.get("trace_id")
    if kind == "trace_start":
        tid = new_id("trc")
        ours[pid] = tid
        numbers[tid] = 0
        counts[tid] = 0
        tokens[tid] = []
        inp = e.get("input")
        traces[tid] = [
            tid, e["agent_name"], None, None, "running", enc(inp), None,
            hashlib.sha256(json.dumps(inp, sort_keys=True, separators=(",", ":")).encode())
            .hexdigest(),
            e.get("started_at"), ms(e.get("started_at")) or created, None, None, None, None,
            None, None, enc({"producer_trace_id": pid}), None, None, None, "native", 0, created,
        ]
        tags.extend((tid, tag, pos) for pos, tag in enumerate(e.get("tags", [])))
        continue
    tid = ours[pid]
    if kind == "step_start" or kind == "step":
        numbers[tid] += 1
        counts[tid] += 1
        row = [
            new_id("stp"), tid, numbers[tid], e["step_type"], e.get("name"),
            enc(e.get("input")), enc(e.get("output")), e.get("error"), e.get("started_at"),
            ms(e.get("started_at")), e.get("ended_at"),
            span(e.get("started_at"), e.get("ended_at")), e.get("tokens_used"), None, None,
            None, None, e.get("call_id"), 1 if kind == "step_start" else 0,
        ]
        steps.append(row)
        if kind == "step_start":
            calls[(tid, e["call_id"])] = row
        elif row[12] is not None:
            tokens[tid].append(row[12])
    elif kind == "step_end":
        row = calls.pop((tid, e["call_id"]))
        row[6] = enc(e.get("output"))
        row[10] = e.get("ended_at")
        row[11] = span(row[8], row[10])
        row[12] = e.get("tokens_used")
        row[18] = 0
        if row[12] is not None:
            tokens[tid].append(row[12])
    elif kind == "trace_end":
        row = traces[tid]
        row[4] = e.get("status", "completed")
        row[6] = enc(e.get("output"))
        row[10] = e.get("ended_at")
        row[11] = span(row[8], row[10])
        row[12] = sum(tokens[tid]) if tokens[tid] else None
        row[21] = counts[tid]

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
                  "otel_trace_id source_format step_count created_at_ms").split(),
       list(traces.values()))
insert("tags", ("trace_id", "tag", "position"), tags)
insert("steps", ("id trace_id step_number step_type name input output error started_at "
                 "started_at_ms ended_at duration_ms tokens_used model parent_step "
                 "caused_by_step metadata call_id is_open").split(), steps)
con.execute("COMMIT")
con.close()
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def piped(cmd: list[str], source: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds of ``cat source | cmd``, from starting both to the reader's exit, and the
    CPU seconds both used (on a shared, loaded machine the wall time includes waiting for a
    core; the CPU time shows the work itself)."""
    cpu = _children_cpu()
    began = time.perf_counter()
    cat = subprocess.Popen(["cat", str(source)], stdout=subprocess.PIPE)
    done = subprocess.run(cmd, stdin=cat.stdout, capture_output=True, text=True, env=env)
    assert cat.stdout is not None
    cat.stdout.close()
    cat.wait()
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"command failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    return elapsed, _children_cpu() - cpu


def counts(db_file: Path) -> tuple[int, int, int]:
    with sqlite3.connect(db_file) as con:
        traces = con.execute("SELECT COUNT(*) FROM traces").fetchone()[0]
        steps = con.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
        still_open = con.execute("SELECT COUNT(*) FROM steps WHERE is_open = 1").fetchone()[0]
    return traces, steps, still_open


def run_ours(cli: str, events: Path, store: Path, env: dict[str, str]) -> tuple[float, float]:
    return piped([cli, "record", "--dir", str(store)], events, env)


def run_no_redact(cli: str, events: Path, store: Path, env: dict[str, str]) -> tuple[float, float]:
    return piped([cli, "record", "--no-redact", "--dir", str(store)], events, env)


def run_baseline(cli: str, events: Path, store: Path, env: dict[str, str]) -> tuple[float, float]:
    subprocess.run([cli, "init", "--dir", str(store)], check=True, capture_output=True, env=env)
    return piped([sys.executable, "-c", BASELINE, str(store / "traces.db")], events, env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each (default 5, min 3)")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--style",
        choices=(*STYLES, "both"),
        default="both",
        help="how steps arrive (see generate): both = step, then pairs (the default)",
    )
    parser.add_argument(
        "--redaction",
        action="store_true",
        help="compare record (redacting, the default) with record --no-redact instead of the "
        "baseline; the goal: at most 15%% slower",
    )
    parser.add_argument("--text", action="store_true", help="text-heavy tool outputs (_rich)")
    parser.add_argument(
        "--cold-bytecode",
        action="store_true",
        help="keep the inherited environment (e.g. PYTHONDONTWRITEBYTECODE=1)",
    )
    args = parser.parse_args()
    runs = max(3, args.runs)
    styles = ("step", "pairs") if args.style == "both" else (args.style,)

    cli = find_cli()
    env = bench_env(args.cold_bytecode)
    other = run_no_redact if args.redaction else run_baseline
    other_label = "no-redact" if args.redaction else "baseline"
    print(f"cli: {cli}\npython: {sys.executable} ({sys.version.split()[0]})")
    print(
        "bytecode: inherited environment (--cold-bytecode)"
        if args.cold_bytecode
        else f"bytecode: cached in {PYCACHE} (PYTHONPYCACHEPREFIX)"
    )
    print(f"load at start: {os.getloadavg()[0]:.2f}")
    summary: list[tuple[str, float, float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="agent-replay-bench-record-") as tmp:
        work = Path(tmp)
        # Warm-up, untimed: bytecode caches and the page cache, on a small stream.
        warm_lines, _ = generate(2_000, args.seed + 1)
        warm = work / "warm.jsonl"
        warm.write_bytes(b"".join(warm_lines))
        for fn in (run_ours, other):
            fn(cli, warm, work / f"warm-{fn.__name__}", env)
        for style in styles:
            summary.append(_measure(cli, env, work, args, style, runs, other, other_label))

    print()
    print(
        f"{'style':<6}  {'ours ev/s':>10}  {other_label + ' ev/s':>14}  {'ratio':>6}  "
        f"{'cpu ratio':>9}"
    )
    ok = True
    for style, ours_rate, base_rate, ours_cpu, base_cpu in summary:
        ratio = ours_rate / base_rate
        print(
            f"{style:<6}  {ours_rate:>10,.0f}  {base_rate:>14,.0f}  {ratio:>6.2f}  "
            f"{base_cpu / ours_cpu:>9.2f}"
        )
        if args.redaction:
            cpu = ours_cpu / base_cpu - 1
            within = cpu <= 0.15
            print(
                f"  redaction costs {base_rate / ours_rate - 1:+.1%} wall, {cpu:+.1%} CPU "
                f"(medians; goal <= +15% CPU: {'PASS' if within else 'MISS'})"
            )
            ok = ok and within
        else:
            good = ours_rate >= GOAL_EVENTS_PER_S and ratio >= GOAL_RATIO
            print(
                f"  record ({style}): {ours_rate:,.0f} events/s (goals >= {GOAL_EVENTS_PER_S:,} "
                f"and >= {GOAL_RATIO} of the baseline: {'PASS' if good else 'MISS'})"
            )
            ok = ok and good
    print(f"load at end: {os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


def _measure(
    cli: str,
    env: dict[str, str],
    work: Path,
    args: argparse.Namespace,
    style: str,
    runs: int,
    other: Any,
    other_label: str,
) -> tuple[str, float, float, float, float]:
    """Alternating runs of ours and the other side on one stream: (style, ours events/s, the
    other's events/s, ours CPU s, the other's CPU s), medians."""
    events = work / f"events-{style}.jsonl"
    began = time.perf_counter()
    lines, n_steps = generate(args.events, args.seed, args.text, style)
    events.write_bytes(b"".join(lines))
    digest = hashlib.sha256(events.read_bytes()).hexdigest()
    n_events = len(lines)
    expected = (TRACES, n_steps, 0)
    print()
    print(
        f"style {style}: {n_events:,} events, {TRACES} traces, {n_steps:,} steps, "
        f"{events.stat().st_size / 1e6:.1f} MB, seed {args.seed}, sha256 {digest[:12]} "
        f"({time.perf_counter() - began:.1f} s)"
    )
    print(f"{runs} runs each, alternating order; every store checked for {expected[:2]}")
    print(
        f"{'run':>4}  {'ours s':>8}  {other_label + ' s':>10}  {'ours ev/s':>10}  "
        f"{'other ev/s':>10}  {'ours cpu s':>10}  {'other cpu s':>10}  {'load':>5}"
    )
    ours: list[float] = []
    base: list[float] = []
    ours_cpu: list[float] = []
    base_cpu: list[float] = []
    for run in range(runs):
        order = (run_ours, other) if run % 2 == 0 else (other, run_ours)
        results = {}
        for fn in order:
            store = work / f"{fn.__name__}-{style}-{run}"
            measured = fn(cli, events, store, env)
            got = counts(store / "traces.db")
            assert got == expected, f"{fn.__name__}: store holds {got}, expected {expected}"
            shutil.rmtree(store)
            results[fn] = measured
        ours.append(results[run_ours][0])
        base.append(results[other][0])
        ours_cpu.append(results[run_ours][1])
        base_cpu.append(results[other][1])
        print(
            f"{run + 1:>4}  {ours[-1]:>8.3f}  {base[-1]:>10.3f}  "
            f"{n_events / ours[-1]:>10,.0f}  {n_events / base[-1]:>10,.0f}  "
            f"{ours_cpu[-1]:>10.3f}  {base_cpu[-1]:>10.3f}  {os.getloadavg()[0]:>5.2f}",
            flush=True,
        )
    events.unlink()
    return (
        style,
        n_events / statistics.median(ours),
        n_events / statistics.median(base),
        statistics.median(ours_cpu),
        statistics.median(base_cpu),
    )


if __name__ == "__main__":
    raise SystemExit(main())
