"""The team store from the command line: ``--db-url``/``AGENT_REPLAY_DB_URL`` on every command,
``push`` from local stores, ``search``, ``delete``/``prune``, clear connection failures, hooks
that spool while the server is down, and many machines hooking into one PostgreSQL store.

Tests marked ``both_backends`` run against SQLite and PostgreSQL (see tests/conftest.py); the
ones parametrized with ``backend=postgresql`` need the server (skipped without one, required
under CI=true).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from agent_replay.store.core import execute
from agent_replay.store.db import Store, open_store
from agent_replay.store.trace_detail import trace_json
from agent_replay.store.transfer import trace_ids

Cli = Any  # tests/cli/conftest.py's ``cli`` fixture: cli(*args) -> Result(code, out, err)
PG_ONLY = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
DEAD_URL = "postgresql://agent:s3cret@127.0.0.1:1/team"


def demo_into(cli: Cli, folder: Path) -> list[str]:
    """Load the demo into a local store (``--db-url ''``: local even when the env names a
    server) and return its trace ids."""
    result = cli("--db-url", "", "--dir", folder, "demo")
    assert result.code == 0, result.err
    listed = cli("--db-url", "", "list", "--dir", folder, "--json")
    return sorted(item["id"] for item in listed.json())


# --- connection failures ------------------------------------------------------------------


def test_an_unreachable_server_is_a_clear_error_with_hints(cli: Cli) -> None:
    result = cli("--db-url", DEAD_URL, "list")
    assert result.code == 1 and result.out == ""
    assert "cannot connect to the PostgreSQL store postgresql://agent:***@127.0.0.1:1/team" in (
        result.err
    )
    assert "s3cret" not in result.err
    assert "hint: is the server running and reachable? check: pg_isready" in result.err
    assert "AGENT_REPLAY_DB_URL" in result.err


def test_the_environment_url_applies_to_every_command(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_REPLAY_DB_URL", DEAD_URL)
    for args in (["list"], ["show", "trc_x"], ["search", "x"], ["prune", "--older-than", "1d"]):
        result = cli(*args, "--json")
        assert result.code == 1, args
        assert result.json()["ok"] is False and "cannot connect" in result.json()["error"]
    assert cli("--db-url", "", "list").code == 1  # '' = the local store, which doesn't exist
    assert "no agent-replay store" in cli("--db-url", "", "list").err


def test_a_command_level_url_wins_over_the_root_and_env(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENT_REPLAY_DB_URL", "postgresql://env@127.0.0.1:1/x")
    result = cli("--db-url", "postgresql://root@127.0.0.1:1/x", "list", "--db-url", DEAD_URL)
    assert "agent:***@127.0.0.1:1/team" in result.err


def test_push_needs_a_team_store(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_REPLAY_DB_URL", raising=False)
    demo_into(cli, tmp_path / "laptop")
    result = cli("push", "--dir", tmp_path / "laptop")
    assert result.code == 2 and "push needs a team store" in result.err


# --- push, search, delete, prune through the CLI --------------------------------------------


@pytest.mark.both_backends
def test_push_twice_from_two_laptops(
    cli: Cli, store: Store, store_dir: Path, tmp_path: Path, data: Path
) -> None:
    """Two local stores push into one team store; again changes nothing; the team store
    lists both, with identical content."""
    laptops = [tmp_path / "alice" / ".agent-replay", tmp_path / "bob" / ".agent-replay"]
    mine = demo_into(cli, laptops[0])
    cli("--db-url", "", "--dir", laptops[1], "ingest", data / "traces.jsonl")
    theirs = sorted(
        i["id"] for i in cli("--db-url", "", "list", "--dir", laptops[1], "--json").json()
    )
    for laptop in laptops:
        result = cli("push", "--dir", laptop, "--to", store.target, "--json")
        assert result.code == 0, result.err
    again = [
        cli("push", "--dir", laptop, "--to", store.target, "--json").json() for laptop in laptops
    ]
    assert [(r["new"], r["updated"]) for r in again] == [([], []), ([], [])]
    assert [r["unchanged"] for r in again] == [len(mine), len(theirs)]
    # The team store, as a teammate lists it (its URL, or the SQLite stand-in's directory).
    where = ["--db-url", store.url] if store.url else ["--db-url", "", "--dir", store_dir]
    listed = cli(*where, "list", "--limit", "100", "--json")
    assert listed.code == 0, listed.err
    assert sorted(item["id"] for item in listed.json()) == sorted(mine + theirs)
    with open_store(laptops[0]) as alice:
        for trace_id in mine:
            assert trace_json(store, trace_id) == trace_json(alice, trace_id)


@pytest.mark.both_backends
def test_annotations_survive_push_and_show_on_the_team_store(
    cli: Cli, store: Store, store_dir: Path, tmp_path: Path
) -> None:
    """annotate on a laptop, push: the team store's show --json, show and list --label have
    them."""
    laptop = tmp_path / "alice" / ".agent-replay"
    demo_into(cli, laptop)
    local = ["--db-url", "", "--dir", laptop]
    assert cli(*local, "annotate", "demo4", "--label", "good", "--note", "reference").code == 0
    step = cli(*local, "annotate", "demo2", "--step", "3", "--label", "wrong-tool", "--json")
    assert step.code == 0, step.err
    assert cli("push", "--dir", laptop, "--to", store.target).code == 0
    team = ["--db-url", store.url] if store.url else ["--db-url", "", "--dir", store_dir]
    shown = cli(*team, "show", "demo2", "--json").json()
    (annotation,) = shown["annotations"]
    assert annotation == {k: v for k, v in step.json().items() if k != "trace_id"}
    assert "✎ wrong-tool" in cli(*team, "show", "demo2").out
    labelled = cli(*team, "list", "--label", "good", "--json").json()
    assert [t["id"] for t in labelled] == ["trc_demo4goodrun"]
    listed = cli(*team, "annotations", "demo4", "--json").json()
    assert [a["note"] for a in listed["annotations"]] == ["reference"]


@pytest.mark.both_backends
def test_search_prints_the_matching_step_and_a_snippet(cli: Cli, store: Store) -> None:
    assert cli("demo").code == 0
    result = cli("search", "refund", "--limit", "1")
    assert result.code == 0, result.err
    first, *hits = result.out.splitlines()
    assert first.startswith("trc_demo1ungrounded  support-rag-agent")
    assert hits and all(line.startswith("  ") for line in hits)
    assert any("refund" in line.lower() and ": " in line for line in hits)
    data = cli("search", "refund", "--json").json()
    assert data[0]["id"] == "trc_demo1ungrounded"
    hit = data[0]["search"]["hits"][0]
    assert set(hit) >= {"step_number", "field", "snippet", "highlights", "score"}
    none = cli("search", "nosuchwordanywhere")
    assert (none.code, none.out) == (0, "") and "no traces match" in none.err
    assert cli("search", "%%").code == 2


@pytest.mark.both_backends
def test_prune_dry_run_then_prune(cli: Cli, store: Store, tmp_path: Path) -> None:
    old = {
        "agent_name": "old-bot",
        "started_at": "2020-01-01T00:00:00Z",
        "tags": ["x"],
        "steps": [
            {
                "step_number": 1,
                "step_type": "decision",
                "decision": {"chosen": "a"},
                "snapshot": {"context_window": []},
            },
        ],
        "evals": [{"evaluator": "e", "score": 1, "passed": True}],
        "annotations": [{"label": "good", "step_number": 1}],
    }
    traces = [
        {**old, "id": "trc_old1"},
        {**old, "id": "trc_old2", "tags": ["golden"]},
        {**old, "id": "trc_old3", "status": "running"},
        {**old, "id": "trc_new", "started_at": "2099-01-01T00:00:00Z"},
    ]
    file = tmp_path / "old.jsonl"
    file.write_text("\n".join(json.dumps(t) for t in traces))
    assert cli("ingest", file).code == 0
    dry = cli("prune", "--older-than", "30d", "--keep-tagged", "golden", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert dry.json()["ids"] == ["trc_old1"] and dry.json()["dry_run"] is True
    assert dry.json()["counts"] == {
        "traces": 1,
        "steps": 1,
        "decisions": 1,
        "snapshots": 1,
        "evals": 1,
        "tags": 1,
        "annotations": 1,
    }
    assert sorted(trace_ids(store)) == ["trc_new", "trc_old1", "trc_old2", "trc_old3"]
    human = cli("prune", "--older-than", "30d", "--keep-tagged", "golden", "--dry-run")
    assert (
        "would delete 1 trace(s): 1 steps, 1 decisions, 1 snapshots, 1 evals, 1 tags, "
        "1 annotations" in human.out
    )
    done = cli("prune", "--older-than", "30d", "--keep-tagged", "golden")
    assert done.code == 0 and "deleted 1 trace(s)" in done.out
    assert sorted(trace_ids(store)) == ["trc_new", "trc_old2", "trc_old3"]
    for table in ("steps", "decisions", "snapshots", "evals", "tags", "annotations"):
        rows = execute(store, f"SELECT COUNT(*) FROM {table} WHERE trace_id = ?", ["trc_old1"])
        assert rows.fetchone()[0] == 0
    assert cli("prune", "--older-than", "30d", "--status", "running").code == 0
    assert sorted(trace_ids(store)) == ["trc_new", "trc_old2"]
    assert cli("prune", "--older-than", "soon").code == 2


@pytest.mark.both_backends
def test_delete_resolves_every_id_before_deleting(cli: Cli, store: Store) -> None:
    assert cli("demo").code == 0
    before = sorted(trace_ids(store))
    result = cli("delete", "trc_demo1ungrounded", "trc_nope")
    assert result.code == 1 and "no trace matches 'trc_nope'" in result.err
    assert sorted(trace_ids(store)) == before
    dry = cli("delete", "demo1", "--dry-run")
    assert dry.code == 0 and "would delete 1 trace(s)" in dry.out
    done = cli("delete", "demo1", "trc_demo2toolchain", "--json")
    assert done.code == 0 and done.json()["counts"]["traces"] == 2
    assert sorted(trace_ids(store)) == [t for t in before if "demo1" not in t and "demo2" not in t]


# --- hooks spool while the server is down --------------------------------------------------


class Proxy:
    """A TCP forwarder to the PostgreSQL server that can be taken down and brought back on the
    same port: "the server is down" without touching the real one."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for conn in self.conns:
            try:
                conn.close()
            except OSError:
                pass
        self.conns.clear()


def via(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    netloc_text = f"{netloc[0]}@{host}" if len(netloc) == 2 else host
    return urlunsplit((parts.scheme, netloc_text, parts.path, parts.query, parts.fragment))


def hook(folder: Path, url: str, event: dict[str, Any], *, spawn: bool = True) -> Any:
    env = {**os.environ, "AGENT_REPLAY_DIR": str(folder), "AGENT_REPLAY_DB_URL": url}
    env.pop("AGENT_REPLAY_HOOK_NO_SPAWN", None)
    if not spawn:
        env["AGENT_REPLAY_HOOK_NO_SPAWN"] = "1"
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agent_replay", "hook"],
        input=json.dumps(event).encode(),
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    return done, time.monotonic() - began


PROMPT = {
    "session_id": "sess-team",
    "transcript_path": "/home/u/.claude/projects/p/sess-team.jsonl",
    "cwd": "/home/u/p",
    "hook_event_name": "UserPromptSubmit",
    "prompt": "deploy it",
}
CALL = {**PROMPT, "tool_name": "Bash", "tool_use_id": "toolu_1", "tool_input": {"command": "ls"}}


@PG_ONLY
def test_hooks_spool_while_the_server_is_down_and_deliver_after(
    store: Store, store_dir: Path
) -> None:
    """With the server down a hook still exits 0 at once, printing nothing; its payload waits
    in the local inbox; the next invocation after the server is back delivers everything, in
    order, exactly once."""
    from agent_replay.services.hook.drain import drain_with_lock, pending_count

    assert store.url is not None
    target = urlsplit(store.url)
    proxy = Proxy(target.hostname or "127.0.0.1", target.port or 5432)
    url = via(store.url, proxy.port)
    try:
        # First use creates the local spool (the full path) and must not wait for the server.
        for event in (PROMPT, {**CALL, "hook_event_name": "PreToolUse"}):
            done, took = hook(store_dir, url, event)
            assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
            assert took < 10
        drain_with_lock(store_dir)
        with open_store(store_dir) as inbox:
            assert pending_count(inbox) == 2
        assert trace_ids(store) == []
        log = (store_dir / "logs" / "agent-replay.log").read_text()
        assert "payloads stay spooled" in log and "Connection refused" in log
        proxy.start()
        done, _ = hook(
            store_dir, url, {**CALL, "hook_event_name": "PostToolUse", "tool_response": "a b"}
        )
        assert done.returncode == 0
        drain_with_lock(store_dir)  # waits for the detached drainer
        with open_store(store_dir) as inbox:
            assert pending_count(inbox) == 0
        (trace_id,) = trace_ids(store)
        trace = trace_json(store, trace_id)
        assert trace["session_id"] == "sess-team" and trace["input"] == "deploy it"
        steps = [(s["name"], s["output"], s["step_number"]) for s in trace["steps"]]
        assert [s[0] for s in steps] == ["user_prompt", "Bash"]  # in the order they were hooked
        assert steps[1][1] == "a b"  # the result paired with its call
        receipts = execute(store, "SELECT COUNT(*) FROM hook_receipts").fetchone()[0]
        assert receipts == 3
    finally:
        proxy.stop()


def test_the_hook_takes_db_url_on_its_fast_path(tmp_path: Path) -> None:
    """``hook --db-url URL`` spools without touching the server (the fast path needs a current
    local store; the first payload goes the full path and creates it)."""
    folder = tmp_path / "spool"
    env = {**os.environ, "AGENT_REPLAY_DIR": str(folder), "AGENT_REPLAY_HOOK_NO_SPAWN": "1"}
    env.pop("AGENT_REPLAY_DB_URL", None)
    for event in (PROMPT, {**CALL, "hook_event_name": "PreToolUse"}):
        done = subprocess.run(
            [sys.executable, "-m", "agent_replay", "hook", "--db-url", DEAD_URL],
            input=json.dumps(event).encode(),
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    with open_store(folder) as inbox:
        rows = execute(inbox, "SELECT options FROM hook_inbox ORDER BY id").fetchall()
        assert execute(inbox, "SELECT COUNT(*) FROM traces").fetchone()[0] == 0
    options = [json.loads(r[0]) for r in rows]
    assert [o["db_url"] for o in options] == [DEAD_URL, DEAD_URL]
    assert len({o["spool_key"] for o in options}) == 2


@PG_ONLY
def test_push_delivers_what_the_hooks_spooled(cli: Cli, store: Store, tmp_path: Path) -> None:
    from agent_replay.services.hook.drain import pending_count

    assert store.url is not None
    target = urlsplit(store.url)
    proxy = Proxy(target.hostname or "127.0.0.1", target.port or 5432)
    url = via(store.url, proxy.port)
    folder = tmp_path / "laptop"
    try:
        done, _ = hook(folder, url, PROMPT, spawn=False)
        assert done.returncode == 0
        proxy.start()
        result = cli("push", "--dir", folder, "--to", url, "--json")
        assert result.code == 0, result.err
        assert result.json()["spooled"] == {"delivered": 1, "left": 0}
        with open_store(folder) as inbox:
            assert pending_count(inbox) == 0
        assert len(trace_ids(store)) == 1
    finally:
        proxy.stop()


# --- many machines, one team store -----------------------------------------------------------

MACHINES = 8
PAIRS = 5  # 8 machines x 5 calls x 2 runs = 80 hook processes (8 at a time collide)
SESSIONS = 4


def _machine(root: Path, url: str, machine: int) -> list[tuple[int, bytes, bytes]]:
    """One machine (its own local store/spool) running one harness: PAIRS tool calls, each a
    PreToolUse and a PostToolUse hook process, in a session shared with another machine."""
    session = f"sess-team-{machine % SESSIONS}"
    folder = root / f"machine{machine}" / ".agent-replay"
    out = []
    for n in range(PAIRS):
        call = {
            "session_id": session,
            "transcript_path": f"/home/u/.claude/projects/p/{session}.jsonl",
            "cwd": "/home/u/p",
            "tool_name": "Bash",
            "tool_use_id": f"toolu_{machine}_{n}",
            "tool_input": {"command": f"echo {machine} {n}"},
        }
        for event in (
            {**call, "hook_event_name": "PreToolUse"},
            {**call, "hook_event_name": "PostToolUse", "tool_response": f"out {machine} {n}"},
        ):
            done, _ = hook(folder, url, event)
            out.append((done.returncode, done.stdout, done.stderr))
    return out


@PG_ONLY
@pytest.mark.slow
def test_eight_machines_hooking_into_one_team_store_lose_nothing(
    store: Store, tmp_path: Path
) -> None:
    """8 machines x 10 hook runs into one PostgreSQL store, each machine with its own drainer,
    2 machines per session: the drainers race on the same traces (finding the session's
    trace, the next step number, pairing results with calls) and nothing is lost or doubled."""
    from agent_replay.services.hook.drain import drain_with_lock, pending_count

    assert store.url is not None
    with ThreadPoolExecutor(MACHINES) as pool:
        runs = [
            r
            for rs in pool.map(lambda m: _machine(tmp_path, store.url or "", m), range(MACHINES))
            for r in rs
        ]
    assert {(code, out, err) for code, out, err in runs} == {(0, b"", b"")}
    for machine in range(MACHINES):
        folder = tmp_path / f"machine{machine}" / ".agent-replay"
        drain_with_lock(folder)
        with open_store(folder) as inbox:
            assert pending_count(inbox) == 0
    found = [trace_json(store, t) for t in trace_ids(store)]
    assert sorted(t["session_id"] for t in found) == [f"sess-team-{s}" for s in range(SESSIONS)]
    rows = execute(store, "SELECT call_id, is_open, output, trace_id FROM steps").fetchall()
    assert len(rows) == MACHINES * PAIRS == len({r[0] for r in rows})
    by_trace = {t["id"]: t for t in found}
    for call_id, is_open, output, trace_id in rows:
        machine, n = call_id.removeprefix("toolu_").split("_")
        assert is_open == 0 and json.loads(output) == f"out {machine} {n}"
        assert by_trace[trace_id]["session_id"] == f"sess-team-{int(machine) % SESSIONS}"
    for trace in found:
        assert [s["step_number"] for s in trace["steps"]] == list(range(1, 2 * PAIRS + 1))
