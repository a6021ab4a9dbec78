"""Hook latency: one `agent-replay hook` invocation against a bare interpreter start.

Budget (DESIGN.md, "Performance budgets"): a ``hook`` invocation's wall time is at most 3x a
bare ``python -c "import sqlite3, json"`` start in the same interpreter.

Setup (not measured): a project folder with a current store in ``.agent-replay/`` (made by
``agent-replay init``), and a real payload from the shared fixtures (Claude Code's PreToolUse
and PostToolUse of ``ls -la``, ``shared/fixtures/harness/claude-code/plain``), given a fresh
``tool_use_id`` for every call.

Measured (wall time of whole subprocesses; median of ``--runs``, at least 30, after one
untimed warm-up of each; the order alternates every run):
- ours: the console script, ``agent-replay hook``, run as a harness runs it: the payload on
  stdin, the working directory the project (the store is found by walking up to
  ``.agent-replay/``), runs alternating PreToolUse and PostToolUse of one call. It queues the
  payload and starts the real detached drainer when none runs;
- the same with ``AGENT_REPLAY_HOOK_NO_SPAWN=1`` (queue only; shows what starting the drainer
  costs the hook);
- the bare start, ``python -c "import sqlite3, json"``.

Also reported, no budget: the drain latency, the time from the hook's exit until its step is
visible in the store (PreToolUse: the open step; PostToolUse: the step closed), polled every
2 ms with a read-only stdlib connection. The next run starts once the drainer has exited.

Run by hand: ``.venv/bin/python bench/hook.py [--runs 30]``. Stdlib and the project only.
Exits 1 when the ratio misses its goal.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "harness" / "claude-code" / "plain" / "hooks"
PYCACHE = Path("/tmp/agent-replay-bench/pycache")
START = "import sqlite3, json"
GOAL = 3.0


def bench_env(cold: bool) -> dict[str, str]:
    """The environment of every measured process (ours and the baseline alike).

    Bytecode is cached under ``PYCACHE`` (outside the source tree) even when the caller set
    ``PYTHONDONTWRITEBYTECODE``: an installed package runs from cached bytecode, and compiling
    every project module on every start would be measured instead. ``--cold-bytecode`` keeps
    the inherited environment. The store is found from the working directory, as a harness
    would have it, so ``AGENT_REPLAY_DIR`` is removed.
    """
    env = dict(os.environ)
    env.pop("AGENT_REPLAY_DIR", None)
    env.pop("AGENT_REPLAY_HOOK_NO_SPAWN", None)
    if not cold:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def find_cli() -> str:
    beside = Path(sys.executable).with_name("agent-replay")
    if beside.exists():
        return str(beside)
    found = shutil.which("agent-replay")
    if not found:
        sys.exit("agent-replay is not installed (expected next to this interpreter)")
    return found


def fixture_payload(event: str) -> dict[str, Any]:
    path = FIXTURE / f"{event}.jsonl"
    if not path.exists():
        sys.exit(f"missing fixture {path}")
    return dict(json.loads(path.read_text(encoding="utf-8").splitlines()[0])["payload"])


def timed(cmd: list[str], env: dict[str, str], cwd: Path, stdin: bytes = b"") -> float:
    """Wall seconds of one subprocess (which must exit 0 and print nothing on stdout)."""
    began = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, env=env, cwd=cwd)
    elapsed = time.perf_counter() - began
    if done.returncode != 0 or done.stdout:
        sys.exit(f"command failed ({done.returncode}): {cmd}\n{done.stderr.decode()}")
    return elapsed


def wait_visible(db_file: Path, call_id: str, closed: bool, timeout: float = 10.0) -> float:
    """Seconds until the step of ``call_id`` is in the store (and closed, if ``closed``)."""
    began = time.perf_counter()
    conn = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True, timeout=10)
    try:
        while time.perf_counter() - began < timeout:
            row = conn.execute("SELECT is_open FROM steps WHERE call_id = ?", [call_id]).fetchone()
            if row is not None and (not closed or row[0] == 0):
                return time.perf_counter() - began
            time.sleep(0.002)
    finally:
        conn.close()
    sys.exit(f"the step of {call_id} did not appear in {timeout:.0f} s (is the drainer running?)")


def wait_drainer_gone(store_dir: Path) -> None:
    """Block until no drainer holds the lock (so it does not eat the next run's CPU)."""
    fd = os.open(store_dir / "hook-drain.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)
    time.sleep(0.01)  # the drainer process exits right after it releases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs of each (default 30)")
    parser.add_argument(
        "--cold-bytecode",
        action="store_true",
        help="keep the inherited environment (e.g. PYTHONDONTWRITEBYTECODE=1)",
    )
    args = parser.parse_args()
    if args.runs < 30:
        parser.error("--runs must be at least 30")

    cli, py = find_cli(), sys.executable
    env = bench_env(args.cold_bytecode)
    quiet = {**env, "AGENT_REPLAY_HOOK_NO_SPAWN": "1"}
    pre, post = fixture_payload("PreToolUse"), fixture_payload("PostToolUse")
    work = Path(tempfile.mkdtemp(prefix="agent-replay-bench-hook-"))
    project = work / "project"
    store_dir = project / ".agent-replay"
    project.mkdir()
    try:
        subprocess.run([cli, "init"], cwd=project, env=env, check=True, capture_output=True)
        db_file = store_dir / "traces.db"
        counter = iter(range(10**9))

        def hook(environment: dict[str, str], *, visible: list[float] | None = None) -> float:
            n = next(counter)
            call_id = f"toolu_bench{n // 2}"
            payload = {**(pre if n % 2 == 0 else post), "tool_use_id": call_id}
            elapsed = timed([cli, "hook"], environment, project, json.dumps(payload).encode())
            if visible is not None:
                visible.append(wait_visible(db_file, call_id, closed=n % 2 == 1))
                wait_drainer_gone(store_dir)
            return elapsed

        def drain_quiet() -> None:
            # Queued-only payloads are drained between runs, untimed, by a synchronous hook.
            wait_drainer_gone(store_dir)
            subprocess.run(
                [
                    py,
                    "-c",
                    "import sys; from agent_replay.services.capture.hook_drain import "
                    "drain_with_lock; from pathlib import Path; drain_with_lock(Path(sys.argv[1]))",
                    str(store_dir),
                ],
                env=env,
                check=True,
            )

        # Warm-up, untimed: page cache and bytecode.
        timed([py, "-c", START], env, project)
        hook(env, visible=[])
        hook(quiet)
        drain_quiet()

        samples: dict[str, list[float]] = {"hook": [], "hook (no drainer spawn)": [], "start": []}
        latency: list[float] = []
        print(f"timing hook / hook without spawn / bare start x {args.runs} runs (alternating)…")
        for run in range(args.runs):
            steps = [
                lambda: samples["hook"].append(hook(env, visible=latency)),
                lambda: samples["hook (no drainer spawn)"].append(hook(quiet)),
                lambda: samples["start"].append(timed([py, "-c", START], env, project)),
            ]
            for step in steps if run % 2 == 0 else reversed(steps):
                step()
            drain_quiet()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = {key: statistics.median(values) * 1000 for key, values in samples.items()}
    start_ms = med["start"]
    ratio = med["hook"] / start_ms
    print()
    print(f"python: {py} ({sys.version.split()[0]}); medians of {args.runs} runs, wall ms")
    if args.cold_bytecode:
        print("bytecode: inherited environment (--cold-bytecode)")
    else:
        print(f"bytecode: cached in {PYCACHE} (PYTHONPYCACHEPREFIX)")
    print()
    width = 48
    print(f"{'wall ms':<{width}}{'median':>8}{'min':>8}{'max':>8}")
    for key, label in (
        ("start", f'bare start `python -c "{START}"`'),
        ("hook", "agent-replay hook"),
        ("hook (no drainer spawn)", "agent-replay hook (no drainer spawn)"),
    ):
        values = [v * 1000 for v in samples[key]]
        print(f"{label:<{width}}{med[key]:>8.1f}{min(values):>8.1f}{max(values):>8.1f}")
    lat = [v * 1000 for v in latency]
    print(
        f"{'drain latency (hook exit -> step visible)':<{width}}{statistics.median(lat):>8.1f}"
        f"{min(lat):>8.1f}{max(lat):>8.1f}"
    )
    print()
    verdict = "ok" if ratio <= GOAL else "MISS"
    print(f"ratio hook/start: {ratio:.2f}x (goal <= {GOAL:g}x) {verdict}")
    print(f"ratio hook without spawn/start: {med['hook (no drainer spawn)'] / start_ms:.2f}x")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
