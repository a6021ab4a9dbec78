"""Which trace an exchange belongs to: the agent's session, its process, or a fixed trace.

``--trace-per session`` (the default) groups by, in order:

1. ``X-Agent-Replay-Session: NAME`` (any agent can send it; stripped before forwarding),
   with ``X-Agent-Replay-Agent: NAME`` naming the agent;
2. the harness's own session id: Claude Code's ``X-Claude-Code-Session-Id`` header (or the
   ``session_id`` inside its ``metadata.user_id``), Codex's ``session_id`` header. These
   traces carry the harness's agent name and session id, so the hook of the same session
   (``agent-replay hook``) records into the same trace: a session captured by hook and proxy
   is one trace;
3. the client process (Linux: the process owning the client's end of the TCP connection,
   found in ``/proc``); elsewhere, or when it can't be found, one trace per proxy run.

``--trace-per process`` skips 1 and 2; ``--trace-per fixed:ID`` records everything into trace
ID (created when the store doesn't have it).

Stdlib only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SESSION_HEADER = "x-agent-replay-session"
AGENT_HEADER = "x-agent-replay-agent"
OWN_HEADERS = (SESSION_HEADER, AGENT_HEADER)
"""Headers meant for the proxy: read, never forwarded."""

_UUID_IN_USER_ID = re.compile(r"_session_([0-9a-fA-F-]{36})$")


@dataclass(frozen=True)
class SessionKey:
    """Which trace an exchange goes to."""

    key: str
    """The grouping key (one trace per key and proxy run)."""
    agent_name: str
    session_id: str | None = None
    """The trace's session id (the harness's own, for harness sessions)."""
    dialect: str | None = None
    """The hook dialect whose trace of the same session this one joins (``claude``,
    ``codex``), if any."""
    fixed_trace: str | None = None
    """``--trace-per fixed:ID``: the trace to record into."""


@dataclass(frozen=True)
class ClientProcess:
    """The process at the other end of a connection."""

    pid: int
    started: str
    """Its start time in clock ticks since boot (pid + start identify it across pid reuse)."""
    name: str


@dataclass(frozen=True)
class Grouping:
    """``--trace-per``."""

    mode: str
    """``session``, ``process`` or ``fixed``."""
    fixed_trace: str | None = None

    @classmethod
    def parse(cls, text: str) -> Grouping:
        """Read ``--trace-per``.

        Raises:
            ValueError: not ``session``, ``process`` or ``fixed:ID``.
        """
        if text in ("session", "process"):
            return cls(text)
        if text.startswith("fixed:") and text[6:].strip():
            return cls("fixed", text[6:].strip())
        raise ValueError(f"--trace-per must be session, process or fixed:ID (got {text!r})")


def session_key(
    grouping: Grouping,
    headers: Mapping[str, str],
    body: dict[str, Any] | None,
    process: ClientProcess | None,
) -> SessionKey:
    """The trace an exchange belongs to (see the module doc).

    Args:
        grouping: ``--trace-per``.
        headers: the request headers (a case-insensitive mapping).
        body: the request body, when it is a JSON object.
        process: the client process, when known.
    """
    agent = headers.get(AGENT_HEADER) or None
    if grouping.mode == "fixed":
        assert grouping.fixed_trace is not None
        return SessionKey(
            f"fixed:{grouping.fixed_trace}", agent or "proxy", fixed_trace=grouping.fixed_trace
        )
    if grouping.mode == "session":
        explicit = headers.get(SESSION_HEADER)
        if explicit:
            return SessionKey(f"header:{explicit}", agent or "proxy", session_id=explicit)
        harness = harness_session(headers, body)
        if harness is not None:
            dialect, session = harness
            name = {"claude": "claude-code", "codex": "codex"}[dialect]
            return SessionKey(
                f"{dialect}:{session}", agent or name, session_id=session, dialect=dialect
            )
    if process is not None:
        return SessionKey(
            f"process:{process.pid}:{process.started}", agent or process.name or "proxy"
        )
    return SessionKey("process:unknown", agent or "proxy")


def harness_session(
    headers: Mapping[str, str], body: dict[str, Any] | None
) -> tuple[str, str] | None:
    """``(dialect, session id)`` when a coding-agent harness names its session."""
    claude = headers.get("x-claude-code-session-id")
    if claude:
        return "claude", claude
    user_agent = headers.get("user-agent", "")
    if isinstance(body, dict) and user_agent.startswith("claude-cli/"):
        found = _claude_user_id_session(body)
        if found:
            return "claude", found
    originator = headers.get("originator", "")
    if "codex" in originator or user_agent.startswith("codex"):
        session = headers.get("session_id") or headers.get("conversation_id")
        if session:
            return "codex", session
    return None


def _claude_user_id_session(body: dict[str, Any]) -> str | None:
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str):
        return None
    if user_id.startswith("{"):
        try:
            data = json.loads(user_id)
        except ValueError:
            return None
        session = data.get("session_id") if isinstance(data, dict) else None
        return session if isinstance(session, str) and session else None
    found = _UUID_IN_USER_ID.search(user_id)
    return found.group(1) if found else None


# --- the client process (Linux) ----------------------------------------------------------------


class ProcessFinder:
    """Finds the process at the other end of a local connection (Linux ``/proc``).

    ``find`` looks at the processes that were clients before first (a few descriptors), then
    at every process: a full scan costs ~10 ms, so call it once per connection, off the event
    loop. A client that closes its connection before the scan is not found.
    """

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.proc = proc
        self.known: dict[int, None] = {}

    def find(self, peer_port: int, local_port: int) -> ClientProcess | None:
        """The process owning the client end (``peer_port``) of a connection to
        ``local_port``; ``None`` when not found (not Linux, another host, not permitted)."""
        inode = _socket_inode(peer_port, local_port, self.proc)
        if inode is None:
            return None
        target = f"socket:[{inode}]"
        pid = _owner(target, list(self.known), self.proc)
        if pid is None:
            try:
                pids = [int(p) for p in os.listdir(self.proc) if p.isdigit()]
            except OSError:
                return None
            pid = _owner(target, [p for p in pids if p not in self.known], self.proc)
        if pid is None:
            return None
        self.known[pid] = None
        if len(self.known) > 64:
            self.known.pop(next(iter(self.known)))
        return _describe(pid, self.proc)


def client_process(
    peer_port: int, local_port: int, proc: Path = Path("/proc")
) -> ClientProcess | None:
    """The process owning the client end (``peer_port``) of a connection to ``local_port``
    on this host (see ``ProcessFinder``)."""
    return ProcessFinder(proc).find(peer_port, local_port)


def _owner(target: str, pids: list[int], proc: Path) -> int | None:
    for pid in pids:
        fd_dir = proc / str(pid) / "fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd_dir / fd) == target:
                    return pid
            except OSError:
                continue
    return None


def _socket_inode(peer_port: int, local_port: int, proc: Path) -> str | None:
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            local, remote = fields[1], fields[2]
            try:
                if (
                    int(local.rsplit(":", 1)[1], 16) == peer_port
                    and int(remote.rsplit(":", 1)[1], 16) == local_port
                ):
                    return fields[9]
            except (ValueError, IndexError):
                continue
    return None


def _describe(pid: int, proc: Path) -> ClientProcess | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
        name = (proc / str(pid) / "comm").read_text().strip()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    rest = stat.rsplit(")", 1)[-1].split()
    started = rest[19] if len(rest) > 19 else "0"
    return ClientProcess(pid, started, name)
