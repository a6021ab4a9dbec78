"""``agent-replay hook`` as a harness runs it: a real process, a payload on stdin, exit 0 and
nothing on stdout whatever happens, no heavy imports on the fast path, and many hooks at once
into one store with the real detached drainer."""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS as FIXTURES
from probe import HOOK_HEAVY, probe

from agent_replay.services.hook.drain import drain_with_lock, pending_count
from agent_replay.services.hook.inbox import queue
from agent_replay.store.core import execute
from agent_replay.store.db import Store, open_store
from agent_replay.store.schema import EARLY_INBOX
from agent_replay.store.trace_detail import trace_json

PROMPT_EVENT = {
    "session_id": "sess-cli-1",
    "transcript_path": "/home/u/.claude/projects/p/sess-cli-1.jsonl",
    "cwd": "/home/u/p",
    "hook_event_name": "UserPromptSubmit",
    "prompt": "What is in notes.txt?",
}


def run_hook(
    store_dir: Path,
    *args: str,
    stdin: bytes | str = b"",
    spawn: bool = False,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``python -m agent_replay hook ARGS`` with ``stdin``; no drainer unless ``spawn``."""
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir), **(extra_env or {})}
    env.pop("AGENT_REPLAY_HOOK_NO_SPAWN", None)
    if not spawn:
        env["AGENT_REPLAY_HOOK_NO_SPAWN"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "agent_replay", "hook", *args],
        input=stdin.encode("utf-8") if isinstance(stdin, str) else stdin,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


def traces(store: Store) -> list[dict[str, Any]]:
    rows = execute(store, "SELECT id FROM traces ORDER BY started_at_ms").fetchall()
    return [trace_json(store, row[0]) for row in rows]


# --- capture mode never fails the harness ------------------------------------------------


@pytest.mark.parametrize(
    "stdin",
    [b"", b"   \n", b"not json", b"\x00\xff\xfe garbage", b"[1, 2, 3]", b'{"no": "session"}'],
    ids=["empty", "blank", "text", "binary", "array", "no-session"],
)
def test_bad_input_exits_0_and_prints_nothing(store: Store, store_dir: Path, stdin: bytes) -> None:
    done = run_hook(store_dir, stdin=stdin)
    assert (done.returncode, done.stdout) == (0, b"")
    drain_with_lock(store_dir)
    assert traces(store) == []
    assert pending_count(store) == 0


def test_a_mistyped_flag_exits_0_with_the_error_on_stderr(store_dir: Path) -> None:
    """Claude Code reads exit code 2 as "block this tool call": a typo must never do that."""
    done = run_hook(store_dir, "--bogus", stdin=json.dumps(PROMPT_EVENT))
    assert (done.returncode, done.stdout) == (0, b"")
    assert b"--bogus" in done.stderr


@pytest.mark.parametrize("problem", ["dir-is-a-file", "db-is-a-dir", "db-is-garbage"])
def test_an_unusable_store_exits_0_and_prints_nothing(tmp_path: Path, problem: str) -> None:
    folder = tmp_path / "store"
    if problem == "dir-is-a-file":
        folder.write_text("a file where the store should be")
        folder = folder / "inner"
    elif problem == "db-is-a-dir":
        (folder / "traces.db").mkdir(parents=True)
    else:
        folder.mkdir()
        (folder / "traces.db").write_bytes(b"this is not a database" * 100)
    done = run_hook(folder, stdin=json.dumps(PROMPT_EVENT))
    assert (done.returncode, done.stdout) == (0, b"")


def test_help_exits_0_and_shows_the_registration(store_dir: Path) -> None:
    done = run_hook(store_dir, "--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    assert "Usage:" in text and "Claude Code" in text and "--no-input" in text


# --- recording ----------------------------------------------------------------------------


def test_the_first_payload_creates_a_private_store_and_the_drainer_records_it(
    store_dir: Path,
) -> None:
    """The first hook creates the store without migrating it (the payload waits in the early
    inbox); the drainer it starts migrates the store, and the payload is recorded."""
    assert not store_dir.exists()
    done = run_hook(store_dir, stdin=json.dumps(PROMPT_EVENT), spawn=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert stat.S_IMODE(store_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((store_dir / "traces.db").stat().st_mode) == 0o600
    drain_with_lock(store_dir)  # stops the drainer (it may have recorded it already)
    with open_store(store_dir, create=False) as store:
        (trace,) = traces(store)
        assert pending_count(store) == 0
    assert trace["input"] == PROMPT_EVENT["prompt"]
    assert trace["session_id"] == "sess-cli-1"


def test_sync_records_before_returning(store: Store, store_dir: Path) -> None:
    done = run_hook(store_dir, "--sync", stdin=json.dumps(PROMPT_EVENT))
    assert (done.returncode, done.stdout) == (0, b"")
    assert pending_count(store) == 0
    (trace,) = traces(store)
    assert [s["name"] for s in trace["steps"]] == ["user_prompt"]


def test_no_input_keeps_the_prompt_out_of_the_store(store: Store, store_dir: Path) -> None:
    done = run_hook(store_dir, "--no-input", stdin=json.dumps(PROMPT_EVENT))
    assert (done.returncode, done.stdout) == (0, b"")
    drain_with_lock(store_dir)
    (trace,) = traces(store)
    assert trace["input"] is None and trace["steps"][0]["input"] is None
    assert "notes.txt" not in json.dumps(trace)


def test_secrets_are_redacted_by_default(store: Store, store_dir: Path) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    event = {**PROMPT_EVENT, "prompt": f"push with token {token}"}
    assert run_hook(store_dir, stdin=json.dumps(event)).returncode == 0
    drain_with_lock(store_dir)
    (trace,) = traces(store)
    assert token not in json.dumps(trace)
    assert "REDACTED" in trace["input"]


def test_the_dialect_flag_wins_over_detection(store: Store, store_dir: Path) -> None:
    start = {**PROMPT_EVENT, "hook_event_name": "SessionStart", "source": "startup"}
    assert run_hook(store_dir, "--dialect", "gemini", stdin=json.dumps(start)).returncode == 0
    drain_with_lock(store_dir)
    (trace,) = traces(store)
    assert trace["agent_name"] == "gemini-cli"


# --- the fast path stays light -------------------------------------------------------------


def test_the_fast_path_imports_nothing_heavy(store: Store, store_dir: Path) -> None:
    """A real hook run (payload queued, detached drainer started) into a current store."""
    line = (FIXTURES / "claude-code" / "plain" / "hooks" / "PreToolUse.jsonl").read_text()
    payload = json.loads(line.splitlines()[0])["payload"]
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir)}
    env.pop("AGENT_REPLAY_HOOK_NO_SPAWN", None)
    run = probe(argv=["hook"], banned=HOOK_HEAVY, env=env, stdin=json.dumps(payload))
    assert (run.code, run.loaded, run.stdout, run.stderr) == (0, [], "", "")
    drain_with_lock(store_dir)  # waits for the detached drainer
    (trace,) = traces(store)
    assert [s["name"] for s in trace["steps"]] == ["Bash"]


def test_the_drainer_and_guard_list_load_no_postgresql_driver(
    store: Store, store_dir: Path
) -> None:
    """The detached drainer's imports (``drain.main``: the module, then ``_warm``) and ``guard
    list`` on a local store load no PostgreSQL driver (psycopg2 brings ssl: tens of ms of every
    drainer start), though their modules import peewee before any ``agent_replay.store`` one."""
    banned = ("psycopg2", "ssl")
    drainer = probe("from agent_replay.services.hook import drain\ndrain._warm()", banned=banned)
    assert (drainer.code, drainer.loaded) == (None, []), drainer.stderr
    guard = probe(argv=["guard", "list"], banned=banned, store_dir=store_dir)
    assert (guard.code, guard.loaded) == (0, []), guard.stderr


# --- the session's drainer ---------------------------------------------------------------


def _recorded(store_dir: Path, call_id: str, closed: bool) -> None:
    """Wait (bounded) until the drainer has recorded ``call_id`` (closed, if ``closed``)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open_store(store_dir) as store:
            row = execute(
                store, "SELECT is_open FROM steps WHERE call_id = ?", [call_id]
            ).fetchone()
        if row is not None and (not closed or row[0] == 0):
            return
        time.sleep(0.02)
    raise AssertionError(f"{call_id} was not recorded")


def _drainer_pid(store_dir: Path) -> int:
    return int((store_dir / "hook-drain.lock").read_text().split()[0])


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.01)
    return False


def test_one_drainer_serves_a_session_and_a_killed_one_is_replaced(
    store: Store, store_dir: Path
) -> None:
    """The first hook starts a detached drainer that holds none of the harness's pipes; the
    next hook wakes the same drainer; SIGKILLed, it is replaced by the next hook's, and
    ``drain_with_lock`` stops a running one."""
    call = {**PROMPT_EVENT, "tool_name": "Bash", "tool_input": {"command": "ls"}}
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir)}
    env.pop("AGENT_REPLAY_HOOK_NO_SPAWN", None)
    read_end, write_end = os.pipe()  # a harness's extra pipe, inherited by its hook
    os.set_inheritable(write_end, True)
    event = {**call, "hook_event_name": "PreToolUse", "tool_use_id": "toolu_a"}
    first = subprocess.run(
        [sys.executable, "-m", "agent_replay", "hook"],
        input=json.dumps(event).encode(),
        capture_output=True,
        env=env,
        pass_fds=(write_end,),
        timeout=60,
    )
    os.close(write_end)
    assert (first.returncode, first.stdout, first.stderr) == (0, b"", b"")
    ready, _, _ = select.select([read_end], [], [], 30)
    assert ready and os.read(read_end, 1) == b""  # end of file: no drainer holds it
    os.close(read_end)
    _recorded(store_dir, "toolu_a", closed=False)
    pid = _drainer_pid(store_dir)
    post = {**event, "hook_event_name": "PostToolUse", "tool_response": "a"}
    assert run_hook(store_dir, stdin=json.dumps(post), spawn=True).returncode == 0
    _recorded(store_dir, "toolu_a", closed=True)
    assert _drainer_pid(store_dir) == pid  # woken, not started again
    os.kill(pid, signal.SIGKILL)
    assert _gone(pid)
    event = {**event, "tool_use_id": "toolu_b"}
    assert run_hook(store_dir, stdin=json.dumps(event), spawn=True).returncode == 0
    _recorded(store_dir, "toolu_b", closed=False)
    replaced = _drainer_pid(store_dir)
    assert replaced != pid
    drain_with_lock(store_dir)
    assert _gone(replaced)
    assert [s["name"] for s in traces(store)[0]["steps"]] == ["Bash", "Bash"]


def test_a_store_replaced_under_a_running_drainer_gets_its_payloads(store_dir: Path) -> None:
    """The database file deleted and made afresh (``rm``, ``init``) while the session's
    drainer holds the old one open: the next payload lands in the new file."""
    event = {**PROMPT_EVENT, "hook_event_name": "PreToolUse", "tool_name": "Bash"}
    event = {**event, "tool_input": {"command": "ls"}, "tool_use_id": "toolu_old"}
    assert run_hook(store_dir, stdin=json.dumps(event), spawn=True).returncode == 0
    _recorded(store_dir, "toolu_old", closed=False)
    old = _drainer_pid(store_dir)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store_dir / 'traces.db'}{suffix}").unlink()
    open_store(store_dir).close()
    event = {**event, "tool_use_id": "toolu_new"}
    assert run_hook(store_dir, stdin=json.dumps(event), spawn=True).returncode == 0
    _recorded(store_dir, "toolu_new", closed=False)
    assert _gone(old)
    drain_with_lock(store_dir)


def test_payloads_queued_into_a_new_store_keep_their_order_through_its_migration(
    tmp_path: Path,
) -> None:
    """The fast path queues into a new store without migrating it; the first open migrates
    it and moves those payloads, in order, ahead of any queued afterwards (migration 0013)."""
    folder = tmp_path / "new"
    for n in range(3):
        assert queue(folder, json.dumps({**PROMPT_EVENT, "prompt": f"p{n}"}), {"redact": True})
    with open_store(folder) as store:
        assert queue(folder, json.dumps({**PROMPT_EVENT, "prompt": "p3"}), {"redact": True})
        rows = execute(store, "SELECT payload FROM hook_inbox ORDER BY id").fetchall()
        assert [json.loads(r[0])["prompt"] for r in rows] == ["p0", "p1", "p2", "p3"]
        assert not store.db.table_exists(EARLY_INBOX)
    drain_with_lock(folder)
    with open_store(folder) as store:
        (trace,) = traces(store)
        assert [s["input"] for s in trace["steps"]] == ["p0", "p1", "p2", "p3"]


# --- many hooks at once --------------------------------------------------------------------

WORKERS = 8
PAIRS = 5  # 8 harnesses x 5 calls x 2 runs = 80 hook processes (8 at a time collide)
SESSIONS = 4


def _worker(store_dir: Path, worker: int) -> list[tuple[int, bytes, bytes]]:
    """One harness: PAIRS tool calls in a row, each a PreToolUse and a PostToolUse process."""
    session = f"sess-load-{worker % SESSIONS}"
    results = []
    for n in range(PAIRS):
        call = {
            "session_id": session,
            "transcript_path": f"/home/u/.claude/projects/p/{session}.jsonl",
            "cwd": "/home/u/p",
            "tool_name": "Bash",
            "tool_use_id": f"toolu_{worker}_{n}",
            "tool_input": {"command": f"echo {worker} {n}"},
        }
        for event in (
            {**call, "hook_event_name": "PreToolUse"},
            {**call, "hook_event_name": "PostToolUse", "tool_response": f"out {worker} {n}"},
        ):
            done = run_hook(store_dir, stdin=json.dumps(event), spawn=True)
            results.append((done.returncode, done.stdout, done.stderr))
    return results


@pytest.mark.slow
@pytest.mark.both_backends
def test_eight_harnesses_hooking_into_one_store_lose_nothing(store: Store, store_dir: Path) -> None:
    """8 harnesses x 10 hook runs (5 tool calls, each a PreToolUse and a PostToolUse run),
    4 sessions shared by 2 harnesses each, with the real detached drainer: every call is one
    closed step with its output, in its session's trace, and nothing waited on a lock.

    On PostgreSQL (AGENT_REPLAY_DB_URL set) the hooks spool into the local inbox and the
    drainer delivers to the server."""
    with ThreadPoolExecutor(WORKERS) as pool:
        runs = [r for rs in pool.map(lambda w: _worker(store_dir, w), range(WORKERS)) for r in rs]
    assert len(runs) == WORKERS * PAIRS * 2
    assert {(code, out, err) for code, out, err in runs} == {(0, b"", b"")}
    drain_with_lock(store_dir)  # waits for the running drainer, then drains what is left
    with open_store(store_dir) as inbox:  # the local store (the spool, on PostgreSQL)
        assert pending_count(inbox) == 0
    found = traces(store)
    assert sorted(t["session_id"] for t in found) == [f"sess-load-{s}" for s in range(SESSIONS)]
    rows = execute(
        store, "SELECT call_id, is_open, input, output, step_type, trace_id FROM steps"
    ).fetchall()
    assert len(rows) == WORKERS * PAIRS
    assert len({r[0] for r in rows}) == WORKERS * PAIRS
    for call_id, is_open, raw_input, raw_output, step_type, _ in rows:
        worker, n = call_id.removeprefix("toolu_").split("_")
        assert (is_open, step_type) == (0, "tool_call")
        assert json.loads(raw_input) == {"command": f"echo {worker} {n}"}
        assert json.loads(raw_output) == f"out {worker} {n}"
    by_trace = {t["id"]: t for t in found}
    for call_id, *_, trace_id in rows:
        worker = int(call_id.removeprefix("toolu_").split("_")[0])
        assert by_trace[trace_id]["session_id"] == f"sess-load-{worker % SESSIONS}"
    assert all(t["steps"][-1]["step_number"] == 2 * PAIRS for t in found)  # no gaps
    log = store_dir / "logs" / "agent-replay.log"
    text = log.read_text() if log.exists() else ""
    assert "locked" not in text and "dropped" not in text and "stopped" not in text
