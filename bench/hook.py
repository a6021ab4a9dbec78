"""Hook latency: one `agent-replay hook` invocation against a bare interpreter start.

Budget (DESIGN.md, "Performance budgets"): a ``hook`` invocation's wall time is at most 3x a
bare ``python -c "import sqlite3, json"`` start in the same interpreter.

Setup (not measured): a project folder with a current store in ``.agent-replay/`` (made by
``agent-replay init``), and a real payload from the real captures (Claude Code's PreToolUse
and PostToolUse of ``ls -la``, ``tests/fixtures/harness/claude-code/plain``), given a fresh
``tool_use_id`` for every call.

Measured (wall time of whole subprocesses; median of ``--runs``, at least 30, after one
untimed warm-up of each; the order alternates every run):
- ours: the console script, ``agent-replay hook``, run as a harness runs it: the payload on
  stdin, the working directory the project (the store is found by walking up to
  ``.agent-replay/``), runs alternating PreToolUse and PostToolUse of one call. It queues the
  payload and starts the real detached drainer when none runs;
- the same with ``AGENT_REPLAY_HOOK_NO_SPAWN=1`` (queue only; shows what starting the drainer
  costs the hook);
- the bare start, ``python -c "import sqlite3, json"``;
- ``agent-replay hook --enforce`` (the guardrail path) against a second store holding 20
  enabled policies (``ENFORCE_POLICIES``: 6 with a ``name_regex``, so RE2 is loaded, and a
  mix of deny, require_review, warn and allow), fed the fixture's PreToolUse with a fresh
  ``tool_use_id`` (``--enforce`` is registered for the pre-tool event only). One ``warn``
  policy matches ``ls -la``: every run decides, prints the harness's JSON answer (a
  ``systemMessage``), queues the payload with the decision and starts the drainer, which
  records the call and its ``guard_check`` step (waited for, untimed, before the next run).
  Same budget: at most 3x the bare start.

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
FIXTURE = ROOT / "tests" / "fixtures" / "harness" / "claude-code" / "plain" / "hooks"
PYCACHE = Path("/tmp/agent-replay-bench/pycache")
START = "import sqlite3, json"
GOAL = 3.0

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
            row = conn.execute("SELECT is_open FROM steps WHERE call_id = ?", [call_id]).fetchone()
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
    guarded = work / "guarded"
    guarded_dir = guarded / ".agent-replay"
    guarded.mkdir()
    try:
        subprocess.run([cli, "init"], cwd=project, env=env, check=True, capture_output=True)
        db_file = store_dir / "traces.db"
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

        def enforce() -> float:
            call_id = f"toolu_guard{next(enforce_counter)}"
            payload = json.dumps({**pre, "tool_use_id": call_id}).encode()
            elapsed = timed([cli, "hook", "--enforce"], env, guarded, payload, expect=warned)
            wait_guard_step(guarded_dir / "traces.db", call_id)
            wait_drainer_gone(guarded_dir)
            return elapsed

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
        enforce()

        samples: dict[str, list[float]] = {
            "hook": [],
            "hook (no drainer spawn)": [],
            "start": [],
            "enforce": [],
        }
        latency: list[float] = []
        print(
            f"timing hook / hook without spawn / bare start / hook --enforce x {args.runs} "
            "runs (alternating)…"
        )
        for run in range(args.runs):
            steps = [
                lambda: samples["hook"].append(hook(env, visible=latency)),
                lambda: samples["hook (no drainer spawn)"].append(hook(quiet)),
                lambda: samples["start"].append(timed([py, "-c", START], env, project)),
                lambda: samples["enforce"].append(enforce()),
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
    verdict = "ok" if ratio <= GOAL else "MISS"
    print(f"ratio hook/start: {ratio:.2f}x (goal <= {GOAL:g}x) {verdict}")
    print(f"ratio hook without spawn/start: {med['hook (no drainer spawn)'] / start_ms:.2f}x")
    enforce_ratio = med["enforce"] / start_ms
    verdict = "ok" if enforce_ratio <= GOAL else "MISS"
    print(
        f"ratio hook --enforce ({len(ENFORCE_POLICIES)} policies)/start: {enforce_ratio:.2f}x "
        f"(goal <= {GOAL:g}x) {verdict}"
    )
    return 0 if ratio <= GOAL and enforce_ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
