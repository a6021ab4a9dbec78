"""Hook cost: `agent-replay hook` against a bare interpreter start, wall time and CPU.

Budgets (DESIGN.md, "Performance budgets"; issue 17): a ``hook`` invocation's wall time is at
most 1.5x a bare ``python -c "import sqlite3, json"`` start in the same interpreter; its CPU
per event, **including every process it starts** (the detached drainer, amortised over a
session), at most 2x that start's CPU; the first ``hook`` into a new store at most 2x a
normal call. (As Claude Code itself times its hooks: ``bench/hook_claude.py``.)

Setup (not measured): a project folder with a current store in ``.agent-replay/`` (made by
``agent-replay init``), and real payloads from the real captures (Claude Code's PreToolUse and
PostToolUse of ``ls -la``, ``tests/fixtures/harness/claude-code/plain``), given a fresh
``tool_use_id`` for every call. This process makes itself the child subreaper
(``PR_SET_CHILD_SUBREAPER``): the drainer a hook detaches is re-parented here when the hook
exits, so this process reaps it and ``RUSAGE_CHILDREN`` counts its CPU too.

Measured, the order alternating every run (medians of ``--runs``, at least 30, after an untimed
warm-up of each):

- **wall**: the console script, ``agent-replay hook``, run as a harness runs it: the payload
  on stdin, the working directory the project (the store is found by walking up to
  ``.agent-replay/``), alternating PreToolUse and PostToolUse of one call, with the session's
  drainer running (started by the first hook, woken by the others), against the bare start;
- **first hook**: the same into a new project (no store yet: the hook creates it and starts
  the drainer), against the normal call above; the drainer is stopped, untimed, after each;
- **enforce**: ``agent-replay hook --enforce`` against a second store holding 20 enabled
  policies (``ENFORCE_POLICIES``: 6 with a ``name_regex``, so RE2 is loaded; deny,
  require_review, warn and allow), fed the fixture's PreToolUse. One ``warn`` policy matches
  ``ls -la``: every run decides, prints the harness's JSON answer (a ``systemMessage``) and
  queues the payload with the decision for the drainer, which records the call and its
  ``guard_check`` step (waited for, untimed). Goal: at most 3x the bare start;
- **CPU per event**: ``--sessions`` sessions of ``--events`` hook runs each (PreToolUse and
  PostToolUse pairs, each waited for until its step is in the store, as a harness's tool call
  takes time), from no drainer running to the drainer stopped and reaped; user+system CPU of
  every process (hooks and drainer), divided by the events; against the same number of bare
  starts, CPU the same way.

Also reported, no budget: the drain latency (hook exit until its step is visible, polled
every 2 ms with a read-only stdlib connection) and the drainer's own CPU per session.

Run by hand: ``nice .venv/bin/python bench/hook.py [--runs 30]``, Linux only (the subreaper).
Stdlib and the project only. Exits 1 when a ratio misses its goal.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_replay.services.hook.inbox import signal_drainer

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "harness" / "claude-code" / "plain" / "hooks"
PYCACHE = Path("/tmp/agent-replay-bench/pycache")
START = "import sqlite3, json"
WALL_GOAL = 1.5
CPU_GOAL = 2.0
FIRST_GOAL = 2.0
ENFORCE_GOAL = 3.0
PR_SET_CHILD_SUBREAPER = 36

# 20 policies of the shapes users write (``guard add`` arguments: name, action, pattern,
# priority). Only "warn-listing" matches the fixture's ``ls -la``.
ENFORCE_POLICIES: list[tuple[str, str, dict[str, str], int]] = [
    (
        "no-delete-tools",
        "deny",
        {"step_type": "tool_call", "name_regex": r"(?i)^(delete|drop|truncate)_"},
        100,
    ),
    ("no-rm-rf-root", "deny", {"input_contains": "rm -rf /"}, 100),
    ("no-mkfs", "deny", {"input_contains": "mkfs"}, 100),
    ("no-dd-zero", "deny", {"input_contains": "dd if=/dev/zero"}, 100),
    ("no-drop-table-tools", "deny", {"name_regex": r"(?i)(drop|truncate)_table"}, 90),
    ("no-ssh-keys", "deny", {"input_contains": "~/.ssh"}, 90),
    ("no-shadow", "deny", {"input_contains": "/etc/shadow"}, 90),
    ("review-production", "require_review", {"input_contains": "production"}, 50),
    ("review-force-push", "require_review", {"input_contains": "git push --force"}, 50),
    (
        "review-mcp-sends",
        "require_review",
        {"name_regex": r"(?i)^mcp__.*__(send|post|publish)"},
        50,
    ),
    ("review-drop-database", "require_review", {"input_contains": "DROP DATABASE"}, 50),
    ("review-deploys", "require_review", {"name_regex": r"(?i)deploy|release"}, 40),
    ("warn-password-output", "warn", {"output_contains": "password"}, 10),
    ("warn-curl", "warn", {"input_contains": "curl "}, 10),
    ("warn-sudo", "warn", {"input_contains": "sudo "}, 10),
    ("warn-web-fetch", "warn", {"name_contains": "webfetch"}, 10),
    ("warn-dotenv", "warn", {"input_contains": ".env"}, 10),
    ("warn-listing", "warn", {"step_type": "tool_call", "input_contains": "ls -la"}, 5),
    ("allow-scratch", "allow", {"input_contains": "/tmp/scratch/"}, 500),
    ("allow-reads", "allow", {"name_regex": "^Read$"}, 300),
]


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


def timed(
    cmd: list[str], env: dict[str, str], cwd: Path, stdin: bytes = b"", expect: bytes = b""
) -> float:
    """Wall seconds of one subprocess (which must exit 0 and print ``expect`` on stdout)."""
    began = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, env=env, cwd=cwd)
    elapsed = time.perf_counter() - began
    if done.returncode != 0 or done.stdout != expect:
        sys.exit(
            f"command failed ({done.returncode}): {cmd}\n{done.stdout.decode()}"
            f"{done.stderr.decode()}"
        )
    return elapsed


def wait_visible(db_file: Path, call_id: str, closed: bool, timeout: float = 10.0) -> float:
    """Seconds until the step of ``call_id`` is in the store (and closed, if ``closed``)."""
    began = time.perf_counter()
    conn = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True, timeout=10)
    try:
        while time.perf_counter() - began < timeout:
            try:
                row = conn.execute(
                    "SELECT is_open FROM steps WHERE call_id = ?", [call_id]
                ).fetchone()
            except sqlite3.OperationalError:  # a new store the drainer has not migrated yet
                row = None
            if row is not None and (not closed or row[0] == 0):
                return time.perf_counter() - began
            time.sleep(0.002)
    finally:
        conn.close()
    sys.exit(f"the step of {call_id} did not appear in {timeout:.0f} s (is the drainer running?)")


def wait_guard_step(db_file: Path, call_id: str, timeout: float = 10.0) -> None:
    """Block until the guard_check step of ``call_id`` is in the store."""
    began = time.perf_counter()
    conn = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True, timeout=10)
    try:
        while time.perf_counter() - began < timeout:
            row = conn.execute(
                "SELECT 1 FROM steps WHERE step_type = 'guard_check' "
                "AND json_extract(metadata, '$.call_id') = ?",
                [call_id],
            ).fetchone()
            if row is not None:
                return
            time.sleep(0.002)
    finally:
        conn.close()
    sys.exit(f"the guard_check step of {call_id} did not appear in {timeout:.0f} s")


def become_subreaper() -> None:
    """Orphaned descendants (the detached drainer) are re-parented to this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}")


def children_cpu() -> float:
    """User+system seconds of every reaped descendant so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stop_drainer(store_dir: Path) -> float:
    """Ask the store's drainer to stop and reap it; returns its CPU seconds (0: none ran).
    The drainer writes its pid into the lock file."""
    try:
        pid = int((store_dir / "hook-drain.lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    before = children_cpu()
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return children_cpu() - before  # reaped already (or never ours)
        if done:
            return children_cpu() - before
        signal_drainer(store_dir, b"q")
        time.sleep(0.002)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs of each (default 30)")
    parser.add_argument("--sessions", type=int, default=5, help="CPU sessions (default 5)")
    parser.add_argument("--events", type=int, default=40, help="hooks a session (default 40)")
    parser.add_argument(
        "--cold-bytecode",
        action="store_true",
        help="keep the inherited environment (e.g. PYTHONDONTWRITEBYTECODE=1)",
    )
    args = parser.parse_args()
    if args.runs < 30:
        parser.error("--runs must be at least 30")
    become_subreaper()

    cli, py = find_cli(), sys.executable
    env = bench_env(args.cold_bytecode)
    pre, post = fixture_payload("PreToolUse"), fixture_payload("PostToolUse")
    work = Path(tempfile.mkdtemp(prefix="agent-replay-bench-hook-"))
    project = work / "project"
    store_dir = project / ".agent-replay"
    project.mkdir()
    guarded = work / "guarded"
    guarded_dir = guarded / ".agent-replay"
    guarded.mkdir()
    try:
        subprocess.run([cli, "init"], cwd=project, env=env, check=True, capture_output=True)
        counter = iter(range(10**9))
        subprocess.run([cli, "init"], cwd=guarded, env=env, check=True, capture_output=True)
        for name, action, pattern, priority in ENFORCE_POLICIES:
            subprocess.run(
                [cli, "guard", "add", "--name", name, "--action", action,
                 "--pattern", json.dumps(pattern), "--priority", str(priority)],
                cwd=guarded, env=env, check=True, capture_output=True,
            )  # fmt: skip
        warned = (
            json.dumps(
                {
                    "systemMessage": 'agent-replay guard warning: policy "warn-listing" (warn) '
                    'matched {"step_type": "tool_call", "input_contains": "ls -la"}'
                }
            ).encode()
            + b"\n"
        )
        enforce_counter = iter(range(10**9))
        first_counter = iter(range(10**9))

        def enforce() -> float:
            call_id = f"toolu_guard{next(enforce_counter)}"
            payload = json.dumps({**pre, "tool_use_id": call_id}).encode()
            elapsed = timed([cli, "hook", "--enforce"], env, guarded, payload, expect=warned)
            wait_guard_step(guarded_dir / "traces.db", call_id)
            return elapsed

        def hook(where: Path = project, latency: list[float] | None = None) -> float:
            n = next(counter)
            call_id = f"toolu_bench{n // 2}"
            payload = {**(pre if n % 2 == 0 else post), "tool_use_id": call_id}
            elapsed = timed([cli, "hook"], env, where, json.dumps(payload).encode())
            seen = wait_visible(where / ".agent-replay" / "traces.db", call_id, n % 2 == 1)
            if latency is not None:
                latency.append(seen)
            return elapsed

        def first() -> float:
            where = work / f"first-{next(first_counter)}"
            where.mkdir()
            payload = {**pre, "tool_use_id": "toolu_first"}
            elapsed = timed([cli, "hook"], env, where, json.dumps(payload).encode())
            wait_visible(where / ".agent-replay" / "traces.db", "toolu_first", False)
            stop_drainer(where / ".agent-replay")
            shutil.rmtree(where)
            return elapsed

        def start() -> float:
            return timed([py, "-c", START], env, project)

        # Warm-up, untimed: page cache and bytecode.
        start()
        hook()
        hook()
        first()
        enforce()

        samples: dict[str, list[float]] = {"hook": [], "start": [], "first": [], "enforce": []}
        latency: list[float] = []
        print(f"timing hook / bare start / first hook / hook --enforce x {args.runs} runs…")
        for run in range(args.runs):
            steps: list[Callable[[], None]] = [
                lambda: samples["hook"].append(hook(latency=latency)),
                lambda: samples["start"].append(start()),
                lambda: samples["first"].append(first()),
                lambda: samples["enforce"].append(enforce()),
            ]
            for step in steps if run % 2 == 0 else reversed(steps):
                step()
        stop_drainer(store_dir)
        stop_drainer(guarded_dir)

        print(f"CPU: {args.sessions} sessions of {args.events} hooks, and as many bare starts…")
        cpu_hook: list[float] = []
        cpu_start: list[float] = []
        drainer_cpu: list[float] = []
        for session in range(args.sessions):

            def one_session() -> None:
                before = children_cpu()
                for _ in range(args.events):
                    hook()
                drainer_cpu.append(stop_drainer(store_dir))
                cpu_hook.append((children_cpu() - before) / args.events)

            def bare() -> None:
                before = children_cpu()
                for _ in range(args.events):
                    start()
                cpu_start.append((children_cpu() - before) / args.events)

            for step in (one_session, bare) if session % 2 == 0 else (bare, one_session):
                step()
    finally:
        for folder in (store_dir, guarded_dir):
            if folder.exists():
                stop_drainer(folder)
        shutil.rmtree(work, ignore_errors=True)

    med = {key: statistics.median(values) * 1000 for key, values in samples.items()}
    print()
    print(f"python: {py} ({sys.version.split()[0]}); load {os.getloadavg()[0]:.2f}")
    if args.cold_bytecode:
        print("bytecode: inherited environment (--cold-bytecode)")
    else:
        print(f"bytecode: cached in {PYCACHE} (PYTHONPYCACHEPREFIX)")
    print()
    width = 50
    print(f"{'wall ms, medians of ' + str(args.runs):<{width}}{'median':>8}{'min':>8}{'max':>8}")
    for key, label in (
        ("start", f'bare start `python -c "{START}"`'),
        ("hook", "agent-replay hook (session drainer running)"),
        ("first", "agent-replay hook, first into a new store"),
        ("enforce", f"agent-replay hook --enforce ({len(ENFORCE_POLICIES)} policies)"),
    ):
        values = [v * 1000 for v in samples[key]]
        print(f"{label:<{width}}{med[key]:>8.1f}{min(values):>8.1f}{max(values):>8.1f}")
    lat = [v * 1000 for v in latency]
    print(
        f"{'drain latency (hook exit -> step visible)':<{width}}{statistics.median(lat):>8.1f}"
        f"{min(lat):>8.1f}{max(lat):>8.1f}"
    )
    print()
    cpu = {
        "start": statistics.median(cpu_start) * 1000,
        "hook": statistics.median(cpu_hook) * 1000,
    }
    print(f"{'CPU ms per event, medians of ' + str(args.sessions):<{width}}{'median':>8}")
    print(f"{f'bare start (x {args.events})':<{width}}{cpu['start']:>8.1f}")
    print(f"{f'hook + its drainer (session of {args.events})':<{width}}{cpu['hook']:>8.1f}")
    drained = statistics.median(drainer_cpu) * 1000
    print(f"{'  of which the drainer, per session':<{width}}{drained:>8.1f}")
    own = cpu["hook"] - drained / args.events
    spare = CPU_GOAL * cpu["start"] - own
    if spare > 0:
        print(f"the CPU goal holds for sessions of {drained / spare:.0f} events or more")
    else:
        print("the hook alone misses the CPU goal")
    print()
    ok = True

    def verdict(label: str, ratio: float, goal: float) -> None:
        nonlocal ok
        ok = ok and ratio <= goal
        print(
            f"ratio {label}: {ratio:.2f}x (goal <= {goal:g}x) {'ok' if ratio <= goal else 'MISS'}"
        )

    verdict("hook/start, wall", med["hook"] / med["start"], WALL_GOAL)
    verdict("hook/start, CPU per event incl. drainer", cpu["hook"] / cpu["start"], CPU_GOAL)
    verdict("first hook/hook, wall", med["first"] / med["hook"], FIRST_GOAL)
    verdict(
        f"hook --enforce ({len(ENFORCE_POLICIES)} policies)/start, wall",
        med["enforce"] / med["start"],
        ENFORCE_GOAL,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
