"""One huge payload stalls no hook: while three hooks carry 30 MB tool outputs, six small
hooks each return in under a second, and every payload lands (the huge outputs capped, with
their size and digest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from agent_replay.services.hook.drain import drain_with_lock, pending_count
from agent_replay.services.limits import MARKER
from agent_replay.store.core import execute
from agent_replay.store.db import Store, open_store


def _payload(n: int, output: str) -> bytes:
    return json.dumps(
        {
            "session_id": f"sess-big-{n % 3}",
            "transcript_path": f"/nonexistent/sess-big-{n % 3}.jsonl",
            "cwd": "/home/u/p",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"toolu_{n}",
            "tool_input": {"command": f"cat file{n}"},
            "tool_response": output,
        }
    ).encode()


def test_small_hooks_stay_fast_while_huge_payloads_are_recorded(
    store: Store, store_dir: Path
) -> None:
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir)}
    env.pop("AGENT_REPLAY_HOOK_NO_SPAWN", None)
    command = [sys.executable, "-m", "agent_replay", "hook"]
    big = "x" * (30 * 1024 * 1024)

    def run(n: int, output: str, took: dict[int, float]) -> None:
        began = time.monotonic()
        done = subprocess.run(command, input=_payload(n, output), env=env, capture_output=True)
        took[n] = time.monotonic() - began
        assert (done.returncode, done.stdout) == (0, b""), done.stderr

    # What six small hooks at once cost here alone (interpreter starts on a shared machine).
    alone: dict[int, float] = {}
    warm = [threading.Thread(target=run, args=(n, f"warm {n}", alone)) for n in range(9, 15)]
    for thread in warm:
        thread.start()
    for thread in warm:
        thread.join()
    big_took: dict[int, float] = {}
    bigs = [threading.Thread(target=run, args=(n, big, big_took)) for n in range(3)]
    for thread in bigs:
        thread.start()
    # (the small hooks start at once: the big ones are still being read, capped and queued)
    small_took: dict[int, float] = {}
    smalls = [threading.Thread(target=run, args=(n, f"out {n}", small_took)) for n in range(3, 9)]
    for thread in smalls:
        thread.start()
    for thread in smalls + bigs:
        thread.join()
    # Nothing waits on a huge payload's write: each small hook returns within a few seconds
    # of what it takes with no huge payload around (under 1 s outright on an idle machine;
    # the three big hooks share the two cores, so the slack is CPU, not waiting). Waiting on
    # the big writes took 9-15 s. The figure is bench territory; this guards the behaviour.
    assert max(small_took.values()) < 3.0 + max(alone.values()), (small_took, alone)
    drain_with_lock(store_dir)  # waits for the running drainer, then drains what is left
    with open_store(store_dir) as inbox:
        assert pending_count(inbox) == 0
    outputs = [json.loads(r[0]) for r in execute(store, "SELECT output FROM steps").fetchall()]
    small = sorted(o for o in outputs if len(o) < 100)
    assert small == sorted([f"out {n}" for n in range(3, 9)] + [f"warm {n}" for n in range(9, 15)])
    capped = [o for o in outputs if len(o) >= 100]
    assert len(capped) == 3
    for kept in capped:
        assert len(kept.encode()) <= 1 << 20 and f"{MARKER} {len(big)} bytes, sha256:" in kept
