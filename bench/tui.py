"""TUI benchmark: first paint of the trace list on a 100,000-trace store, opening a
10,000-step trace, and peak memory — beside a baseline Textual app doing the least it can.

Each measurement runs in a fresh subprocess (so imports and memory are counted honestly),
several times, and the medians are printed side by side with the baseline:

- baseline: a bare Textual app doing the same paints with the least code: a DataTable of the
  first 200 traces read with ``sqlite3``, then a screen with a Line-API view of the big trace's
  10,000 steps read the same way (Textual's own cost, plus the reads);
- first paint: ``make_app`` on the store until the first page of traces is in the table;
- open 10k: the same, then the timeline of the 10,000-step trace until its steps are shown.

Goals: under 1 s each (issue 3), and at most 1.3x the bare app (issue 17). The store is the
one ``bench/list.py`` builds and caches.

    .venv/bin/python bench/tui.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from list import BIG_ID, CACHE, build_store, cached_store  # noqa: E402

SIZE = (120, 36)

BASELINE = r"""
import json, resource, sqlite3, sys, time
t0 = time.perf_counter()
from textual.app import App
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.geometry import Size
from textual.strip import Strip
from textual.widgets import DataTable
from rich.segment import Segment

db, trace_id = sys.argv[1], sys.argv[2]

class Lines(ScrollView):
    # The least a Line-API view of N rows does: one Strip per visible line.
    def __init__(self, rows):
        super().__init__()
        self.rows = rows
        self.virtual_size = Size(80, len(rows))
    def render_line(self, y):
        index = self.scroll_offset.y + y
        text = self.rows[index] if index < len(self.rows) else ""
        return Strip([Segment(text[: self.size.width])])

class Steps(Screen):
    def compose(self):
        con = sqlite3.connect(db)
        rows = [f"{n:>6}  {t:<12} {name or ''}" for n, t, name in con.execute(
            "SELECT step_number, step_type, name FROM steps WHERE trace_id = ? "
            "ORDER BY step_number", [trace_id])]
        yield Lines(rows)

class Bare(App):
    def compose(self):
        yield DataTable()
    def on_mount(self):
        table = self.query_one(DataTable)
        table.add_columns(*"ABCDEFG")
        con = sqlite3.connect(db)
        table.add_rows([[str(v) for v in r] for r in con.execute(
            "SELECT id, agent_name, status, step_count, total_tokens, total_duration_ms, "
            "started_at FROM traces ORDER BY started_at_ms DESC, id DESC LIMIT 200")])

async def main():
    app = Bare()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        screen = Steps()
        app.push_screen(screen)
        await pilot.pause()
        while not screen.query(Lines):
            await pilot.pause(0.005)
        await pilot.pause()
        open_big = time.perf_counter() - t1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"first_paint": first, "open_10k": open_big, "peak_mb": rss}))

import asyncio
asyncio.run(main())
"""

OURS = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from agent_replay.app import make_app
from agent_replay.store.db import open_store
from textual.widgets import DataTable

store = open_store(sys.argv[1], create=False)

async def wait_for(pilot, check, limit=30.0):
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > limit:
            raise SystemExit("timed out")
        await pilot.pause(0.005)

async def main():
    app = make_app(store, store_label="bench")
    async with app.run_test(size=(120, 36)) as pilot:
        table = lambda: app.screen.query_one("#trace-table", DataTable)
        await wait_for(pilot, lambda: app.screen.query("#trace-table") and table().row_count > 0)
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        app.open_trace(sys.argv[2])
        def opened():
            screen = app.screen
            timeline = screen.query("#step-timeline")
            return bool(timeline) and len(getattr(timeline.first(), "_rows", ())) >= 10000
        await wait_for(pilot, opened)
        await pilot.pause()
        open_big = time.perf_counter() - t1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"first_paint": first, "open_10k": open_big, "peak_mb": rss}))

import asyncio
asyncio.run(main())
"""


def run(code: str, *args: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = "/tmp/agent-replay-bench/pycache"
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if cached_store(CACHE) is None:
        print(f"building the 100,000-trace store in {CACHE} (once, ~2 min)…", flush=True)
        build_store(CACHE, seed=7)
    db_file = str(CACHE / "traces.db")

    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    run(BASELINE, db_file, BIG_ID)  # warm the bytecode caches, untimed
    run(OURS, db_file, BIG_ID)
    base, ours = [], []
    for _ in range(args.runs):
        base.append(run(BASELINE, db_file, BIG_ID))
        ours.append(run(OURS, db_file, BIG_ID))

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    rows = [
        ("first paint of the trace list (100k traces)", "first_paint"),
        ("open the 10,000-step trace", "open_10k"),
    ]
    print(f"\nmedians of {args.runs} runs, each in a fresh process, {SIZE[0]}x{SIZE[1]} headless")
    print(f"{'figure':<44}{'ours':>10}{'bare app':>10}{'ratio':>8}  goal")
    missed = False
    for label, key in rows:
        o, b = med(ours, key), med(base, key)
        ok_abs, ok_ratio = o < 1.0, o / b <= 1.3
        missed |= not (ok_abs and ok_ratio)
        print(
            f"{label:<44}{o * 1000:>8.0f}ms{b * 1000:>8.0f}ms{o / b:>7.2f}x  "
            f"< 1 s {'ok' if ok_abs else 'MISS'}; <= 1.3x {'ok' if ok_ratio else 'MISS'}"
        )
    b_mem, o_mem = med(base, "peak_mb"), med(ours, "peak_mb")
    print(f"{'peak memory (RSS)':<44}{o_mem:>8.0f}MB{b_mem:>8.0f}MB{o_mem / b_mem:>7.2f}x")
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
