"""The hook as the real Claude Code times it: ``agent-replay hook`` against a bare Python hook.

Budget (DESIGN.md, "Performance budgets"; issue 17): as Claude Code itself times its hooks
(``hook_execution_complete.total_duration_ms`` in its OpenTelemetry logs), ``agent-replay
hook`` takes at most 1.5x a bare stdlib Python hook that reads the payload
(``python -c 'import sys, json; json.load(sys.stdin)'``, the same interpreter).

Each run is one real, unmodified Claude Code session (npm ``@anthropic-ai/claude-code``) in
print mode against a scripted Anthropic model (``bench/claude_model.py``, beside this script,
loopback only): ``ls -la``, read ``notes.txt``, write ``summary.txt``, a failing ``cat``, an answer.
Every hook event the README lists is registered with one command: ``agent-replay hook`` (the
console script beside this interpreter) or the bare hook; the two sides alternate, the order
flipping every run. Each session has a fresh HOME, workspace (a git repository) and store
(made by ``agent-replay init``, untimed), so every ``agent-replay`` session starts its own
drainer; the drainer is stopped, untimed, before the next run. Claude Code's OTLP/HTTP JSON
logs go to a receiver in this process, which keeps each ``hook_execution_complete`` by session
id. An ``agent-replay`` run counts only if its store then holds the session's tool calls.

Printed: the median hook duration per side over all hooks of all its sessions, per event
too, the session wall time, and the ratio ours/bare.

Run by hand (Linux, x64):
``nice .venv/bin/python bench/hook_claude.py [--runs 5]``. Claude Code is found as
``--claude``, else ``$CLAUDE_BIN``, else under ``$E2E_ROOT/agents/claude`` (npm's
``node_modules`` there).
Exits 1 when the ratio misses its goal.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent_replay.services.hook.drain import drain_with_lock

GOAL = 1.5
PYCACHE = Path("/tmp/agent-replay-bench/pycache")
MODEL = Path(__file__).with_name("claude_model.py")
PROMPT = (
    "List the files in this directory, read notes.txt, write a short summary.txt, "
    "then check whether does_not_exist.txt exists."
)
NOTES = "TODO:\n- buy milk\n- fix bug #42\n- write tests\n"
EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"]
EVENTS += ["PostToolUseFailure", "Stop", "SessionEnd"]
TOOL_EVENTS = {"PreToolUse", "PostToolUse", "PostToolUseFailure"}
BARE = "import sys, json; json.load(sys.stdin)"


class Timings:
    """``hook_execution_complete`` records received, by Claude Code session id."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_session: dict[str, list[tuple[str, int]]] = {}

    def add(self, body: dict[str, Any]) -> None:
        for resource_logs in body.get("resourceLogs", []):
            for scope_logs in resource_logs.get("scopeLogs", []):
                for record in scope_logs.get("logRecords", []):
                    attrs = {
                        a["key"]: next(iter(a["value"].values()), None) if a.get("value") else None
                        for a in record.get("attributes", [])
                    }
                    if attrs.get("event.name") != "hook_execution_complete":
                        continue
                    row = (str(attrs.get("hook_name")), int(attrs.get("total_duration_ms") or 0))
                    with self.lock:
                        self.by_session.setdefault(str(attrs.get("session.id")), []).append(row)


def receiver(timings: Timings) -> ThreadingHTTPServer:
    """An OTLP/HTTP JSON receiver on 127.0.0.1 (any free port) that keeps the hook timings."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
                body = b""
                while size := int(self.rfile.readline().strip().split(b";")[0], 16):
                    body += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            if self.path.rstrip("/").endswith("/v1/logs"):
                try:
                    timings.add(json.loads(body))
                except ValueError:
                    pass
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"the scripted model did not open port {port}")


def find_claude(given: str | None) -> Path:
    if given or os.environ.get("CLAUDE_BIN"):
        return Path(given or os.environ["CLAUDE_BIN"])
    root = Path(os.environ.get("E2E_ROOT") or Path(tempfile.gettempdir()) / "agent-replay-e2e")
    return root / "agents/claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude"


def session(
    side: str, claude: Path, otlp_port: int, base: Path, enforce: bool
) -> tuple[str, float]:
    """One Claude Code session with ``side``'s hook; returns its session id and wall seconds."""
    if base.exists():
        shutil.rmtree(base)
    home, work, store = base / "home", base / "work", base / "store"
    for folder in (home / ".claude", work):
        folder.mkdir(parents=True)
    (work / "notes.txt").write_text(NOTES)
    (work / "CLAUDE.md").write_text("# Project notes\nA scratch project for a benchmark.\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-C"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    subprocess.run([*git, str(work), "add", "-A"], check=True)
    subprocess.run([*git, str(work), "commit", "-q", "-m", "initial"], check=True)
    cli = str(Path(sys.executable).with_name("agent-replay"))
    env_py = {"PYTHONPYCACHEPREFIX": str(PYCACHE)}
    subprocess.run([cli, "init", "--dir", str(store)], check=True, capture_output=True)
    hooks: dict[str, Any] = {}
    for event in EVENTS:
        if side == "bare":
            command = f"{sys.executable} -c '{BARE}'"
        else:
            command = f"{cli} hook" + (" --enforce" if enforce and event == "PreToolUse" else "")
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": 30}]}
        hooks[event] = [{"matcher": "*", **entry} if event in TOOL_EVENTS else entry]
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    model_port = free_port()
    model = subprocess.Popen(
        [sys.executable, str(MODEL), "--port", str(model_port),
         "--workdir", str(work), "--log", str(base / "wire.jsonl")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    env = {
        "PATH": os.pathsep.join(dict.fromkeys(["/usr/local/bin", "/usr/bin", "/bin"])),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "SHELL": "/bin/bash",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "AGENT_REPLAY_DIR": str(store),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{model_port}",
        "ANTHROPIC_API_KEY": "dummy",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp_port}",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_LOGS_EXPORT_INTERVAL": "1000",
        **env_py,
    }
    argv = [str(claude), "-p", PROMPT, "--output-format", "stream-json", "--verbose"]
    argv += ["--allowedTools", "Bash Read Write"]
    try:
        wait_port(model_port)
        began = time.perf_counter()
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, timeout=300)
        wall = time.perf_counter() - began
    finally:
        os.kill(model.pid, signal.SIGTERM)
        model.wait(30)
    if done.returncode != 0:
        sys.exit(f"claude exited {done.returncode}:\n{done.stderr.decode()[-2000:]}")
    first = json.loads(done.stdout.splitlines()[0])
    if side == "ours":
        check_recorded(store)
    return str(first.get("session_id")), wall


def check_recorded(store: Path) -> None:
    """Stop the session's drainer (so it eats no later run's CPU), record what it left, and
    check the session's tool calls are in the store: we time a hook that works."""
    drain_with_lock(store)
    with sqlite3.connect(f"file:{store / 'traces.db'}?mode=ro", uri=True) as conn:
        found = conn.execute("SELECT COUNT(*) FROM steps WHERE step_type = 'tool_call'").fetchone()
    if found[0] < 4:
        sys.exit(f"the agent-replay store at {store} lacks the session's tool calls")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--claude", help="the Claude Code binary (else $CLAUDE_BIN, $E2E_ROOT)")
    parser.add_argument("--runs", type=int, default=5, help="sessions per side (default 5)")
    parser.add_argument(
        "--enforce", action="store_true", help="register `hook --enforce` for PreToolUse"
    )
    args = parser.parse_args()
    claude = find_claude(args.claude)
    if not claude.exists():
        sys.exit(f"no Claude Code binary at {claude} (pass --claude or set $CLAUDE_BIN)")
    version = subprocess.run([str(claude), "--version"], capture_output=True, text=True)
    timings = Timings()
    server = receiver(timings)
    port = int(server.server_address[1])
    work = Path(tempfile.mkdtemp(prefix="agent-replay-bench-claude-"))
    sessions: dict[str, list[str]] = {"ours": [], "bare": []}
    walls: dict[str, list[float]] = {"ours": [], "bare": []}
    loads: list[float] = []
    try:
        print(f"{version.stdout.strip()}: {args.runs} sessions with each hook, alternating…")
        for run in range(args.runs):
            for side in ("ours", "bare") if run % 2 == 0 else ("bare", "ours"):
                loads.append(os.getloadavg()[0])
                sid, wall = session(side, claude, port, work / side, args.enforce)
                sessions[side].append(sid)
                walls[side].append(wall)
        time.sleep(2.5)  # the last batches of logs (exported every second)
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)

    print(f"load (1 min) during the runs: {min(loads):.2f}-{max(loads):.2f}")
    print()
    med: dict[str, float] = {}
    per_event: dict[str, dict[str, list[int]]] = {}
    for side in ("bare", "ours"):
        rows = [row for sid in sessions[side] for row in timings.by_session.get(sid, [])]
        if not rows:
            sys.exit(f"no hook_execution_complete records for the {side} sessions")
        med[side] = statistics.median(ms for _, ms in rows)
        for name, ms in rows:
            per_event.setdefault(name.split(":")[0], {}).setdefault(side, []).append(ms)
        label = "agent-replay hook" if side == "ours" else "bare Python hook"
        print(
            f"{label:<20} {len(rows):>4} hooks  median {med[side]:>6.0f} ms  "
            f"session wall median {statistics.median(walls[side]):>6.1f} s"
        )
    print()
    print(f"{'median ms by event':<22}{'bare':>8}{'ours':>8}")
    for name, by_side in per_event.items():
        cells = [
            f"{statistics.median(by_side[s]):>8.0f}" if s in by_side else f"{'-':>8}"
            for s in ("bare", "ours")
        ]
        print(f"{name:<22}{''.join(cells)}")
    ratio = med["ours"] / med["bare"]
    print()
    verdict = "ok" if ratio <= GOAL else "MISS"
    print(f"ratio agent-replay hook/bare Python hook: {ratio:.2f}x (goal <= {GOAL:g}x) {verdict}")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
