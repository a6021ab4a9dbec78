"""Replay benchmark: the app's replay screen on a 5,000-step trace, beside a bare Textual app.

Issue 17: a step (one key, the screen repainted) takes at most 50 ms anywhere in the trace, at
step 1 as at step 5,000, and a jump (``g``, a step number, Enter) at most 100 ms.

Each measurement runs in a fresh subprocess driven by Textual's pilot, headless at 120x36:

- ours: ``make_app`` on a store holding one 5,000-step trace, its replay screen open; the
  median wall time of ``--keys`` presses of ``right`` from step 1, of ``left``/``right`` at
  the end (steps 4,999-5,000), and of ``--jumps`` jumps to steps spread over the trace, each
  until the screen has painted (``pilot.pause()``);
- baseline: a bare Textual app whose key handler updates one Static (a counter), timed the same
  way: what a key and a repaint cost Textual itself on this machine now.

Printed: the medians (wall, and the process's CPU time, which a loaded machine disturbs
less), the ratio to the baseline, and the goal. The store is built once (with
the library, from the same generator as ``bench/list.py``) and cached.

    .venv/bin/python bench/replay.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from list import LAYOUT_VERSION, PYCACHE, SEED, Generator, store_counts  # noqa: E402

STEPS = 5_000
TRACE_ID = "trc_replay5000steps"
CACHE = Path("/tmp/agent-replay-bench/replay-5k")

BASELINE = r"""
import json, statistics, sys, time
from textual.app import App
from textual.widgets import Static

KEYS, JUMPS = int(sys.argv[1]), int(sys.argv[2])

class Bare(App):
    count = 0
    def compose(self):
        yield Static("0", id="n")
    def on_key(self, event):
        self.count += 1
        self.query_one("#n", Static).update(f"step {self.count}")

async def main():
    app = Bare()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        times, cpu = [], []
        for _ in range(KEYS):
            t, c = time.perf_counter(), time.process_time()
            await pilot.press("right")
            await pilot.pause()
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        jumps, jump_cpu = [], []
        for _ in range(JUMPS):
            t, c = time.perf_counter(), time.process_time()
            await pilot.press("g", "2", "5", "0", "0", "enter")
            await pilot.pause()
            jumps.append(time.perf_counter() - t)
            jump_cpu.append(time.process_time() - c)
    print(json.dumps({
        "step": statistics.median(times), "jump": statistics.median(jumps),
        "step_cpu": statistics.median(cpu), "jump_cpu": statistics.median(jump_cpu),
    }))

import asyncio
asyncio.run(main())
"""

OURS = r"""
import json, statistics, sys, time
from agent_replay.app import make_app
from agent_replay.screens.replay import ReplayScreen
from agent_replay.store.db import open_store

db, trace_id, KEYS, JUMPS, STEPS = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
store = open_store(db, create=False)

async def main():
    app = make_app(store, store_label="bench", refresh_interval=None)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        screen = ReplayScreen(trace_id)
        app.push_screen(screen)
        deadline = time.perf_counter() + 60
        while screen.replay.total < STEPS:
            if time.perf_counter() > deadline:
                raise SystemExit("the trace did not load")
            await pilot.pause(0.01)
        await pilot.pause()

        cpu = []

        async def press(*keys):
            t, c = time.perf_counter(), time.process_time()
            await pilot.press(*keys)
            await pilot.pause()
            cpu.append((len(keys), time.process_time() - c))
            return time.perf_counter() - t

        first = [await press("right") for _ in range(KEYS)]
        assert screen.position == KEYS, screen.position
        await press("end")
        last = []
        for i in range(KEYS):
            last.append(await press("left" if i % 2 == 0 else "right"))
        assert screen.position >= STEPS - 1, screen.position
        jumps = []
        for i in range(JUMPS):
            target = 1 + (i * 997) % STEPS
            jumps.append(await press("g", *str(target), "enter"))
            assert screen.position == target, (screen.position, target)
    print(json.dumps({
        "step_first": statistics.median(first), "step_last": statistics.median(last),
        "step_max": max(first + last), "jump": statistics.median(jumps),
        "jump_max": max(jumps),
        "step_cpu": statistics.median(c for n, c in cpu if n == 1),
        "jump_cpu": statistics.median(c for n, c in cpu if n > 1),
    }))

import asyncio
asyncio.run(main())
"""


def build(directory: Path) -> Path:
    db_file = directory / "traces.db"
    meta = directory / "bench-meta.json"
    if meta.is_file() and db_file.is_file():
        if json.loads(meta.read_text()).get("layout") == LAYOUT_VERSION:
            if store_counts(db_file) == (1, STEPS):
                print(f"reused the cached store at {directory}")
                return db_file
    from agent_replay.services.ingest import ingest_many
    from agent_replay.store.db import ensure_database

    print(f"building {directory}: one trace of {STEPS:,} steps (setup, not measured)")
    building = directory.with_name(directory.name + "-building")
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(directory, ignore_errors=True)
    generator = Generator(SEED, int(time.time() * 1000))
    store = ensure_database(building)
    try:
        report = ingest_many(store, iter([("trace", generator.trace(TRACE_ID, STEPS, [], True))]))
    finally:
        store.close()
    if report.rejected:
        sys.exit(f"rejected: {report.rejected[0]}")
    (building / "bench-meta.json").write_text(json.dumps({"layout": LAYOUT_VERSION}))
    building.rename(directory)
    return db_file


def run(code: str, *args: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        sys.exit(f"a measured process failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes of each side")
    parser.add_argument("--keys", type=int, default=20, help="key presses timed per position")
    parser.add_argument("--jumps", type=int, default=8, help="jumps timed per run")
    args = parser.parse_args()
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    db_file = build(CACHE)
    counts = [str(args.keys), str(args.jumps)]
    ours_args = [str(db_file), TRACE_ID, *counts, str(STEPS)]
    base, ours = [], []
    for _ in range(args.runs):  # alternating, so the load hits both sides alike
        base.append(run(BASELINE, *counts))
        ours.append(run(OURS, *ours_args))

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows) * 1000

    b_step, b_jump = med(base, "step"), med(base, "jump")
    rows = [
        ("step at step 1 (right)", med(ours, "step_first"), b_step, 50.0),
        (f"step at step {STEPS:,} (left/right)", med(ours, "step_last"), b_step, 50.0),
        ("slowest step of any run", max(r["step_max"] for r in ours) * 1000, b_step, None),
        ("jump (g, number, Enter)", med(ours, "jump"), b_jump, 100.0),
        ("slowest jump of any run", max(r["jump_max"] for r in ours) * 1000, b_jump, None),
        ("CPU of a step (process time)", med(ours, "step_cpu"), med(base, "step_cpu"), None),
        ("CPU of a jump (process time)", med(ours, "jump_cpu"), med(base, "jump_cpu"), None),
    ]
    print(f"\nmedians of {args.runs} runs x {args.keys} keys / {args.jumps} jumps, 120x36 headless")
    print(f"{'figure':<36}{'ours':>9}{'bare app':>10}{'ratio':>8}  goal")
    missed = False
    for label, ours_ms, base_ms, goal in rows:
        verdict = "-"
        if goal is not None:
            ok = ours_ms <= goal
            missed |= not ok
            verdict = f"<= {goal:g} ms {'ok' if ok else 'MISS'}"
        print(f"{label:<36}{ours_ms:>7.1f}ms{base_ms:>8.1f}ms{ours_ms / base_ms:>7.2f}x  {verdict}")
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
