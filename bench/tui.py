"""TUI benchmark: first paint of the trace list on a 100,000-trace store, opening a
10,000-step trace, and peak memory — beside a baseline Textual app doing the least it can.

Each measurement runs in a fresh subprocess (so imports and memory are counted honestly),
several times, and the medians are printed side by side with the baseline:

- baseline: a bare Textual app doing the same paints with the least code: a DataTable of the
  first 200 traces read with ``sqlite3``, then a screen with a Line-API view of the big trace's
  10,000 steps read the same way (Textual's own cost, plus the reads), with the cyclic
  collector set as the app sets it (``calm_collector``: frozen, young generation every 10,000
  allocations), so neither side's figure holds a collection the other is spared;
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

FRAMES = r"""
import re, time
from textual.drivers.headless_driver import HeadlessDriver

PAINT = re.compile("\x1b\\[[0-9]+;[0-9]+H")  # a cursor move to a cell: a frame being drawn

class FrameDriver(HeadlessDriver):
    # Headless input and size, but the app renders each frame to terminal bytes as it does for
    # a real terminal (Textual skips that for a headless driver); the bytes are dropped. At
    # each write that paints (a frame; not the pointer-shape sequence Textual writes when a
    # screen is pushed, before that screen's first frame), every pending probe is asked
    # whether the screen now shows what it waits for: the time of the first such write for
    # which it does is when that paint reached the terminal.
    probes = {}
    marks = {}
    @property
    def is_headless(self):
        return False
    def write(self, data):
        if not PAINT.search(data):
            return
        for name, probe in list(FrameDriver.probes.items()):
            if probe():
                FrameDriver.marks[name] = time.perf_counter()
                del FrameDriver.probes[name]
    def flush(self):
        pass

async def painted(pilot, name, probe, limit=30.0):
    FrameDriver.probes[name] = probe
    start = time.perf_counter()
    while name not in FrameDriver.marks:
        if time.perf_counter() - start > limit:
            raise SystemExit(f"timed out waiting for {name}")
        await pilot.pause(0.005)
    return FrameDriver.marks[name]
"""

BASELINE = (
    r"""
import json, resource, sqlite3, sys, time
t0 = time.perf_counter()
from textual.app import App
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.geometry import Size
from textual.strip import Strip
from textual.widgets import DataTable
from rich.segment import Segment
import gc
gc.freeze()  # the collector as the app sets it (agent_replay.app.calm_collector): without
gc.set_threshold(10_000, 10, 10)  # it, the 10,000 rows below set off a ~35 ms collection
"""
    + FRAMES
    + r"""
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
    app.driver_class = FrameDriver
    async with app.run_test(size=(120, 36), headless=False) as pilot:
        table = lambda: app.screen.query(DataTable)
        first = await painted(pilot, "first", lambda: table() and table().first().row_count) - t0
        await pilot.pause()
        t1 = time.perf_counter()
        screen = Steps()
        app.push_screen(screen)
        opened = await painted(pilot, "open", lambda: app.screen is screen and screen.query(Lines))
        open_big = opened - t1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"first_paint": first, "open_10k": open_big, "all_10k": open_big,
                      "peak_mb": rss}))

import asyncio
asyncio.run(main())
"""
)

OURS = (
    r"""
import json, resource, sys, time
t0 = time.perf_counter()
from agent_replay.app import make_app
from agent_replay.store.db import open_store
from textual.widgets import DataTable
"""
    + FRAMES
    + r"""
store = open_store(sys.argv[1], create=False)

async def main():
    app = make_app(store, store_label="bench")
    app.driver_class = FrameDriver
    async with app.run_test(size=(120, 36), headless=False) as pilot:
        def listed():
            tables = app.screen.query("#trace-table")
            return bool(tables) and tables.first(DataTable).row_count > 0
        first = await painted(pilot, "first", listed) - t0
        await pilot.pause()
        t1 = time.perf_counter()
        app.open_trace(sys.argv[2])
        def timeline():
            found = app.screen.query("#step-timeline")
            return found.first() if found else None
        def steps_shown():  # the first screenful of steps, the loading indicator gone
            view = timeline()
            return view is not None and len(view.rows) >= 30 and not app.screen.query(
                "LoadingIndicator")
        def all_steps():
            view = timeline()
            return view is not None and len(view.rows) >= 10000
        open_big = await painted(pilot, "open", steps_shown) - t1
        all_big = await painted(pilot, "all", all_steps) - t1
        await pilot.pause()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"first_paint": first, "open_10k": open_big, "all_10k": all_big,
                      "peak_mb": rss}))

import asyncio
asyncio.run(main())
"""
)


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
        ("open the 10,000-step trace (first screen)", "open_10k"),
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
    o_all, b_all = med(ours, "all_10k"), med(base, "all_10k")
    label = "  all 10,000 steps in the timeline"
    ratio = o_all / b_all
    print(f"{label:<44}{o_all * 1000:>8.0f}ms{b_all * 1000:>8.0f}ms{ratio:>7.2f}x  -")
    b_mem, o_mem = med(base, "peak_mb"), med(ours, "peak_mb")
    print(f"{'peak memory (RSS)':<44}{o_mem:>8.0f}MB{b_mem:>8.0f}MB{o_mem / b_mem:>7.2f}x")
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
