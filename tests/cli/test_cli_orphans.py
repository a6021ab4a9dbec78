"""No orphans: a ``running`` trace whose writer died is finalized as ``timeout`` by the next
reader, with an error saying its recorder exited without ending it; an import killed half-way
is resumed by the next import. One sharp subprocess scenario: SIGKILL ``record`` and ``run``
mid-stream, then ``list --json``."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from captures import HARNESS

from agent_replay.services.capture.importer import import_file
from agent_replay.services.capture.session_writer import SessionWriter
from agent_replay.store.core import execute
from agent_replay.store.db import open_store

Cli = Any


def _wait_for_line(stream: Any) -> None:
    assert stream.readline(), "the child ended before it wrote its events"


def _until(store_dir: Path, sql: str, wanted: int) -> None:
    """Poll the store file (read-only) until ``sql`` counts ``wanted`` (at most 20 s)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            connection = sqlite3.connect(f"file:{store_dir / 'traces.db'}?mode=ro", uri=True)
            try:
                if connection.execute(sql).fetchone()[0] == wanted:
                    return
            finally:
                connection.close()
        except sqlite3.OperationalError:
            pass  # not created yet
        time.sleep(0.02)
    raise AssertionError(f"never got {wanted} from {sql}")


def test_killed_record_and_run_leave_no_running_traces(cli: Cli, store_dir: Path) -> None:
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir)}
    record = subprocess.Popen(
        [sys.executable, "-m", "agent_replay", "record"], stdin=subprocess.PIPE, env=env
    )
    # The child writes one event, says so on stdout, then waits to be orphaned.
    child = (
        'echo \'{"v": 1, "type": "step", "step_type": "thought", "name": "t"}\' '
        '>> "$AGENT_REPLAY_EVENTS"; echo written; exec sleep 60'
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "agent_replay", "run", "--", "sh", "-c", child],
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,  # its own group: the kill takes the child along
    )
    try:
        assert record.stdin is not None and run.stdout is not None
        record.stdin.write(
            b'{"v": 1, "type": "trace_start", "trace_id": "k", "agent_name": "recorded"}\n'
            b'{"v": 1, "type": "step", "trace_id": "k", "step_type": "thought"}\n'
        )
        record.stdin.flush()
        _wait_for_line(run.stdout)
        # Both are recording: their step is committed within a group-commit window.
        _until(
            store_dir, "SELECT COUNT(*) FROM traces WHERE step_count = 1 AND status = 'running'", 2
        )
        record.kill()
        os.killpg(run.pid, signal.SIGKILL)
        record.wait()
        run.wait()
    finally:
        for process in (record, run):
            if process.poll() is None:
                process.kill()
        if run.stdout is not None:
            run.stdout.close()
    listed = cli("list", "--json").json()
    got = {t["agent_name"]: (t["status"], t["error"]) for t in listed}
    assert got == {
        "recorded": (
            "timeout",
            f"the record process (pid {record.pid}) exited without ending the trace",
        ),
        "sh": ("timeout", f"the run process (pid {run.pid}) exited without ending the trace"),
    }


def test_an_import_that_died_is_resumed_by_the_next(store_dir: Path) -> None:
    path = sorted((HARNESS / "codex").glob("plain/rollout/sessions/*/*/*/rollout-*.jsonl"))[0]
    with open_store(store_dir / "traces.db", create=True) as store:
        first = import_file(store, path)
        assert first.status == "imported" and first.trace_id
        with store.write():
            execute(store, "DELETE FROM traces WHERE id = ?", [first.trace_id])
        # An import killed half-way: its trace started, one step in, its process gone.
        writer = SessionWriter(
            store,
            path=path,
            source_format=first.format or "",
            agent_name="codex",
            session_id=first.session_id,
            tags=[],
            redact=True,
            clock=None,
        )
        writer.add_step("thought", "half")
        writer._commit()
        with store.write():  # the import's process is gone
            execute(
                store,
                "UPDATE writers SET pid = ?, token = '' WHERE trace_id = ?",
                [_dead_pid(), writer.trace_id],
            )
        again = import_file(store, path)
        assert again.status == "imported", again
        assert again.steps == first.steps
        rows = execute(store, "SELECT status FROM traces").fetchall()
        assert [r[0] for r in rows] == [first.trace_status]


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid
