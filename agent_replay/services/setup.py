"""``agent-replay setup``: write a harness's hook configuration, merged into its settings.

What each harness needs (the events the hook mappings use, ``hook/dialects/*``):

- Claude Code: ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR``), or the project's
  ``.claude/settings.json``; ``CLAUDE_EVENTS``.
- Codex CLI: ``~/.codex/hooks.json`` (``$CODEX_HOME``), or the project's
  ``.codex/hooks.json``; ``CODEX_EVENTS``.
- Gemini CLI: ``~/.gemini/settings.json``, or the project's ``.gemini/settings.json``
  (with ``hooksConfig.enabled``); ``GEMINI_EVENTS``.

Each event gets one handler running ``agent-replay hook`` (``--enforce`` on the pre-tool event
when asked). The merge touches only agent-replay's own handlers (a command that runs
``agent-replay hook``): other hooks, other settings and their order stay as they are. A second
run changes nothing; a changed option (``--enforce``) updates the handler in place;
``remove`` takes agent-replay's handlers out (and the empty groups and events they leave).
Before a file is changed, a copy is kept beside it (``<name>.agent-replay-<UTC time>.bak``).

The files are read and written as JSON (2-space indentation); a file that is not a JSON object
is refused, never overwritten. A service module: no click, no terminal output.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_replay.errors import UsageError

CLAUDE_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionDenied",
    "SubagentStart",
    "SubagentStop",
    "Stop",
    "StopFailure",
    "SessionEnd",
)
CODEX_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "SubagentStart",
    "SubagentStop",
    "Stop",
    "SessionEnd",
)
GEMINI_EVENTS = (
    "SessionStart",
    "BeforeAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeTool",
    "AfterTool",
    "AfterAgent",
    "SessionEnd",
)

CODEX_TRUST = (
    "Codex CLI runs a hook only once you have trusted it; until then it skips the hook "
    "without a word and agent-replay records nothing. Start `codex` in a terminal: at "
    '"Hooks need review" choose "Trust all and continue" (or review them one by one '
    "with /hooks). `codex exec` never asks: trust the hooks once in the interactive CLI, or "
    "run `codex exec --dangerously-bypass-hook-trust` (every enabled hook then runs "
    "unreviewed). Codex asks again whenever a hook changes (running setup with or without "
    "--enforce changes the PreToolUse hook). `agent-replay doctor` says whether they are "
    "trusted."
)


@dataclass(frozen=True)
class Harness:
    """How one harness registers command hooks."""

    key: str
    label: str
    binary: str
    events: tuple[str, ...]
    pre_tool: str
    tool_events: frozenset[str]
    """Events whose groups take a tool ``matcher``."""
    timeout: int
    """The handler's timeout, in the harness's unit (seconds; Gemini CLI: milliseconds)."""
    file_name: str
    folder: str

    def user_dir(self, env: Mapping[str, str], home: Path) -> Path:
        """The harness's own folder under the user's home (or its override variable)."""
        override = {"claude": "CLAUDE_CONFIG_DIR", "codex": "CODEX_HOME"}.get(self.key)
        if override and env.get(override):
            return Path(env[override]).expanduser()
        return home / self.folder

    def path(self, scope: str, env: Mapping[str, str], home: Path, cwd: Path) -> Path:
        """The settings file of a scope (``user`` or ``project``)."""
        base = self.user_dir(env, home) if scope == "user" else cwd / self.folder
        return base / self.file_name

    def handler(self, event: str, command: str) -> dict[str, Any]:
        """agent-replay's handler for one event."""
        timeout = self.timeout
        if self.key == "codex" and event == "SessionEnd":
            timeout = 3  # Codex clamps (and warns about) longer SessionEnd timeouts
        entry: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout}
        if self.key == "gemini":
            entry = {"name": f"agent-replay-{event}", **entry}
        return entry


HARNESSES: dict[str, Harness] = {
    "claude": Harness(
        "claude",
        "Claude Code",
        "claude",
        CLAUDE_EVENTS,
        "PreToolUse",
        frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied"}),
        30,
        "settings.json",
        ".claude",
    ),
    "codex": Harness(
        "codex",
        "Codex CLI",
        "codex",
        CODEX_EVENTS,
        "PreToolUse",
        frozenset(),
        30,
        "hooks.json",
        ".codex",
    ),
    "gemini": Harness(
        "gemini",
        "Gemini CLI",
        "gemini",
        GEMINI_EVENTS,
        "BeforeTool",
        frozenset({"BeforeTool", "AfterTool"}),
        30_000,
        "settings.json",
        ".gemini",
    ),
}


def harness(key: str) -> Harness:
    """The harness named ``claude``, ``codex`` or ``gemini``."""
    try:
        return HARNESSES[key]
    except KeyError:
        raise UsageError(
            f"unknown harness {key!r}; expected one of {', '.join(HARNESSES)}"
        ) from None


def agent_replay_command() -> str:
    """How a harness should run this agent-replay: the console script that is running, by its
    absolute path (a harness's PATH may not have the virtualenv), else ``python -m``."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name == "agent-replay" and script.is_file():
        return shlex.quote(str(script.resolve()))
    found = shutil.which("agent-replay")
    if found:
        return shlex.quote(str(Path(found).resolve()))
    return f"{shlex.quote(sys.executable)} -m agent_replay"


def is_ours(command: Any) -> bool:
    """Whether a hook command runs ``agent-replay hook`` (any path, any options)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for index, word in enumerate(words[:-1]):
        name = word.rsplit("/", 1)[-1]
        if name in ("agent-replay", "agent_replay") and words[index + 1] == "hook":
            return True
    return False


def is_enforcing(command: Any) -> bool:
    """Whether one of agent-replay's hook commands decides calls (``--enforce``)."""
    return is_ours(command) and "--enforce" in str(command).split()


def load(path: Path) -> dict[str, Any] | None:
    """A settings file as a JSON object (``None`` when it does not exist).

    Raises:
        UsageError: the file is not a JSON object (it is never overwritten then).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(
            f"{path} is not valid JSON ({exc}); agent-replay will not rewrite it",
            hints=["fix the file, or add the hooks by hand (see `agent-replay hook --help`)"],
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object; agent-replay will not rewrite it")
    return data


def merged(
    settings: dict[str, Any], spec: Harness, command: str, *, enforce: bool, remove: bool
) -> dict[str, Any]:
    """``settings`` with agent-replay's handlers registered (or removed); a new object."""
    data: dict[str, Any] = json.loads(json.dumps(settings))  # a deep copy, JSON values only
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise UsageError(
            'the settings\' "hooks" is not an object; agent-replay will not rewrite them'
        )
    hooks = dict(hooks or {})
    if remove:
        for event in list(hooks):
            groups = _without_ours(hooks[event])
            if groups:
                hooks[event] = groups
            else:
                del hooks[event]
    else:
        for event in spec.events:
            enforcing = enforce and event == spec.pre_tool
            wanted = f"{command} hook" + (" --enforce" if enforcing else "")
            hooks[event] = _with_ours(
                hooks.get(event), spec.handler(event, wanted), event in spec.tool_events
            )
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    if spec.key == "gemini":
        _gemini_switch(data, remove=remove)
    return data


def _groups(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _without_ours(value: Any) -> list[Any]:
    kept = []
    for group in _groups(value):
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            handlers = [
                h for h in group["hooks"] if not (isinstance(h, dict) and is_ours(h.get("command")))
            ]
            if not handlers and len(handlers) != len(group["hooks"]):
                continue  # the group held only agent-replay's handler
            group = {**group, "hooks": handlers}
        kept.append(group)
    return kept


def _with_ours(value: Any, handler: dict[str, Any], tool_event: bool) -> list[Any]:
    """The event's groups with exactly one agent-replay handler: an existing one updated in
    place (its other keys kept), else a new group appended."""
    groups = _groups(value)
    placed = False
    out = []
    for group in groups:
        if not (isinstance(group, dict) and isinstance(group.get("hooks"), list)):
            out.append(group)
            continue
        handlers = []
        for entry in group["hooks"]:
            if isinstance(entry, dict) and is_ours(entry.get("command")):
                if placed:
                    continue  # a duplicate registration: it would record every event twice
                entry = {**entry, **handler}
                placed = True
            handlers.append(entry)
        if handlers or not group["hooks"]:
            out.append({**group, "hooks": handlers})
    if not placed:
        group_entry: dict[str, Any] = {"hooks": [handler]}
        if tool_event:
            group_entry = {"matcher": "*", **group_entry}
        out.append(group_entry)
    return out


def _gemini_switch(data: dict[str, Any], *, remove: bool) -> None:
    """Gemini CLI runs hooks only with ``hooksConfig.enabled``; a switch agent-replay turned
    on is taken back out with the last hook."""
    config = data.get("hooksConfig")
    if remove:
        if not data.get("hooks") and config == {"enabled": True}:
            del data["hooksConfig"]
        return
    if not isinstance(config, dict):
        config = {}
    data["hooksConfig"] = {**config, "enabled": True}


def dump(data: Mapping[str, Any]) -> str:
    """A settings object as the file's text."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


@dataclass
class Change:
    """What ``setup`` did (or would do) to one settings file."""

    harness: Harness
    path: Path
    scope: str
    existed: bool
    changed: bool
    diff: str
    backup: Path | None = None
    written: bool = False
    events: list[str] = field(default_factory=list)
    """The events agent-replay's hook is registered for, after the change."""
    enforce: bool = False
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``setup --json``."""
        return {
            "ok": True,
            "harness": self.harness.key,
            "file": str(self.path),
            "scope": self.scope,
            "existed": self.existed,
            "changed": self.changed,
            "written": self.written,
            "backup": str(self.backup) if self.backup else None,
            "events": self.events,
            "enforce": self.enforce,
            "diff": self.diff,
            "notes": self.notes,
        }


def registered(settings: Mapping[str, Any] | None) -> dict[str, list[tuple[int, int, str]]]:
    """agent-replay's handlers in a settings object: per event, ``(group, handler, command)``
    positions (Codex CLI keys its trust by them)."""
    found: dict[str, list[tuple[int, int, str]]] = {}
    hooks = settings.get("hooks") if settings else None
    if not isinstance(hooks, Mapping):
        return found
    for event, groups in hooks.items():
        for g, group in enumerate(_groups(groups)):
            handlers = group.get("hooks") if isinstance(group, Mapping) else None
            for h, entry in enumerate(handlers if isinstance(handlers, list) else []):
                if isinstance(entry, Mapping) and is_ours(entry.get("command")):
                    found.setdefault(str(event), []).append((g, h, str(entry["command"])))
    return found


def plan(
    key: str,
    *,
    scope: str = "user",
    enforce: bool = False,
    remove: bool = False,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    command: str | None = None,
) -> tuple[Change, dict[str, Any]]:
    """What ``setup`` would change, and the settings it would write.

    Raises:
        UsageError: an unknown harness or scope, or a settings file that is not JSON.
    """
    spec = harness(key)
    if scope not in ("user", "project"):
        raise UsageError(f"unknown scope {scope!r}; expected user or project")
    environ = os.environ if env is None else env
    path = spec.path(scope, environ, home or Path.home(), cwd or Path.cwd())
    current = load(path)
    before = current if current is not None else {}
    after = merged(before, spec, command or agent_replay_command(), enforce=enforce, remove=remove)
    changed = after != before or (current is None and not remove and bool(after))
    diff = ""
    if changed:
        old = dump(before) if current is not None else ""
        diff = "".join(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                dump(after).splitlines(keepends=True),
                fromfile=f"{path}" if current is not None else "/dev/null",
                tofile=str(path),
            )
        )
    ours = registered(after)
    change = Change(
        harness=spec,
        path=path,
        scope=scope,
        existed=current is not None,
        changed=changed,
        diff=diff,
        events=[e for e in spec.events if e in ours],
        enforce=any(is_enforcing(c) for _, _, c in ours.get(spec.pre_tool, [])),
    )
    change.notes = notes(spec, scope, remove=remove)
    return change, after


def notes(spec: Harness, scope: str, *, remove: bool) -> list[str]:
    """What the user must still do for the hooks to run."""
    if remove:
        return []
    if spec.key == "codex":
        return [CODEX_TRUST]
    if spec.key == "gemini" and scope == "project":
        return [
            "Gemini CLI reads a project's .gemini/settings.json only in a folder you trust "
            "(it asks when you start it there; ~/.gemini/trustedFolders.json records it)."
        ]
    return []


def apply(change: Change, settings: dict[str, Any], *, clock: dt.datetime | None = None) -> None:
    """Write the planned settings: a backup of the old file first, then an atomic replace
    (the old file's permissions kept; a new file is private, 0600)."""
    if not change.changed:
        return
    path = change.path
    mode = 0o600
    if change.existed:
        mode = path.stat().st_mode & 0o777
        stamp = (clock or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
        backup = path.with_name(f"{path.name}.agent-replay-{stamp}.bak")
        shutil.copy2(path, backup)
        change.backup = backup
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(dump(settings))
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    change.written = True
