"""``agent-replay doctor``: is capture working on this machine, and if not, what to do.

Per harness found (its binary on ``PATH``, or its folder under the home): its version
(``<binary> --version``), where agent-replay's hooks are registered (user and project
settings, ``setup``'s files) and for which events, whether Codex CLI trusts them (its
``config.toml`` keeps a ``[hooks.state."<hooks.json>:<event>:<group>:<handler>"]``
``trusted_hash`` per reviewed hook; an untrusted hook is skipped silently), whether Gemini CLI
has hooks switched on, and the last payload the store received from it. For the store: hook
payloads still waiting for the drainer, the last error in its log, and the records the
importers skipped as unknown (format drift: a newer harness writes kinds this build does not
know), each with the fix.

A service module: it reads files, runs ``--version`` and queries the store; it prints nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peewee import Case, fn

from agent_replay.services import setup
from agent_replay.store.db import Store
from agent_replay.store.mapping import dec_meta
from agent_replay.store.models import HookInboxRow, StepRow, TraceRow

HOOK_FORMATS = {"claude": "claude-code-hook", "codex": "codex-hook", "gemini": "gemini-cli-hook"}
IMPORT_FORMATS = ("claude-transcript", "codex-rollout", "gemini-chat")
VERSION_TIMEOUT_S = 20
DRIFT_SCAN = 500
"""Imported traces (newest first) scanned for skipped records."""
_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


@dataclass
class Problem:
    """Something that keeps capture from working, and how to fix it."""

    problem: str
    fix: str

    def to_json(self) -> dict[str, str]:
        return {"problem": self.problem, "fix": self.fix}


@dataclass
class Registration:
    """agent-replay's hooks in one settings file."""

    scope: str
    path: Path
    exists: bool
    events: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Events the mapping uses that have no agent-replay hook here."""
    enforce: bool = False
    trusted: int | None = None
    """Codex CLI: how many of the handlers it has trusted (``None`` for other harnesses)."""
    handlers: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "file": str(self.path),
            "exists": self.exists,
            "events": self.events,
            "missing_events": self.missing,
            "enforce": self.enforce,
            "handlers": self.handlers,
            "trusted": self.trusted,
            "error": self.error,
        }


@dataclass
class HarnessReport:
    """One harness on this machine."""

    key: str
    label: str
    binary: str | None
    version: str | None
    registrations: list[Registration] = field(default_factory=list)
    last_payload: dict[str, Any] | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def registered(self) -> bool:
        return any(r.events for r in self.registrations)

    def to_json(self) -> dict[str, Any]:
        return {
            "harness": self.key,
            "label": self.label,
            "binary": self.binary,
            "version": self.version,
            "registered": self.registered,
            "registrations": [r.to_json() for r in self.registrations],
            "last_payload": self.last_payload,
            "problems": [p.to_json() for p in self.problems],
        }


@dataclass
class Drift:
    """Records one importer skipped as unknown, over the imported sessions."""

    format: str
    sessions: int
    records: int
    kinds: dict[str, int]
    versions: list[str]
    """The harness versions that wrote them."""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "sessions": self.sessions,
            "records": self.records,
            "kinds": self.kinds,
            "harness_versions": self.versions,
        }


@dataclass
class Report:
    """Everything ``doctor`` found."""

    harnesses: list[HarnessReport] = field(default_factory=list)
    store: str | None = None
    pending_payloads: int | None = None
    last_log_error: str | None = None
    drift: list[Drift] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    """Store-level problems (each harness lists its own)."""

    @property
    def ok(self) -> bool:
        return not self.problems and not any(h.problems for h in self.harnesses)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "harnesses": [h.to_json() for h in self.harnesses],
            "store": self.store,
            "pending_payloads": self.pending_payloads,
            "last_log_error": self.last_log_error,
            "import_drift": [d.to_json() for d in self.drift],
            "problems": [p.to_json() for p in self.problems],
        }


def diagnose(
    store: Store | None,
    store_dir: Path | None,
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
) -> Report:
    """Check every harness found and the store (``None``: there is none yet)."""
    environ = os.environ if env is None else env
    home = home or Path.home()
    cwd = cwd or Path.cwd()
    report = Report(store=str(store_dir) if store_dir else None)
    for spec in setup.HARNESSES.values():
        found = _harness(spec, environ, home, cwd)
        if found is not None:
            report.harnesses.append(found)
    if store is not None:
        for harness in report.harnesses:
            harness.last_payload = last_payload(store, harness.key)
            _pre_tool_ran(harness)
        report.pending_payloads = pending_payloads(store)
        report.drift = drift(store)
        for item in report.drift:
            kinds = ", ".join(f"{k} ({n})" for k, n in list(item.kinds.items())[:5])
            report.problems.append(
                Problem(
                    f"{item.records} record(s) in {item.sessions} imported {item.format} "
                    f"session(s) were skipped as unknown: {kinds}",
                    "the harness writes record kinds this agent-replay does not know (format "
                    "drift): upgrade agent-replay (pip install -U agent-replay), delete those "
                    "traces and import the sessions again; if it is the newest, report the "
                    "kinds",
                )
            )
    if store_dir is not None:
        report.last_log_error = _last_log_line(store_dir / "logs" / "agent-replay.log")
    if not report.harnesses:
        report.problems.append(
            Problem(
                "no Claude Code, Codex CLI or Gemini CLI found (not on PATH, no settings folder)",
                "install one, or put it on PATH; then `agent-replay setup claude|codex|gemini`",
            )
        )
    return report


def _harness(
    spec: setup.Harness, env: Mapping[str, str], home: Path, cwd: Path
) -> HarnessReport | None:
    binary = shutil.which(spec.binary, path=env.get("PATH"))
    if binary is None and not spec.user_dir(env, home).is_dir():
        return None
    found = HarnessReport(spec.key, spec.label, binary, version(binary, env) if binary else None)
    for scope in ("user", "project"):
        path = spec.path(scope, env, home, cwd)
        if scope == "project" and path == spec.path("user", env, home, cwd):
            continue
        found.registrations.append(_registration(spec, scope, path, env, home))
    if not found.registered:
        found.problems.append(
            Problem(
                f"agent-replay's hooks are not registered for {spec.label}",
                f"agent-replay setup {spec.key} (add --project for this project only)",
            )
        )
    for reg in found.registrations:
        where = f"{reg.scope} settings ({reg.path})"
        if reg.error:
            found.problems.append(Problem(f"{where}: {reg.error}", "fix the file"))
        elif reg.events and reg.missing:
            found.problems.append(
                Problem(
                    f"{where}: no agent-replay hook for {', '.join(reg.missing)}",
                    f"agent-replay setup {spec.key}"
                    + (" --project" if reg.scope == "project" else ""),
                )
            )
        if reg.trusted is not None and reg.handlers and reg.trusted < reg.handlers:
            found.problems.append(
                Problem(
                    f"Codex CLI has not trusted {reg.handlers - reg.trusted} of "
                    f"agent-replay's {reg.handlers} hooks in {reg.path}: it skips them "
                    "silently",
                    setup.CODEX_TRUST,
                )
            )
    if spec.key == "gemini":
        _gemini_switch(found, spec, env, home, cwd)
    if spec.key == "claude":
        _claude_switch(found)
    return found


def version(binary: str, env: Mapping[str, str]) -> str | None:
    """The first line ``<binary> --version`` prints (``None`` if it fails)."""
    try:
        done = subprocess.run(
            [binary, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    return lines[0] if lines and done.returncode == 0 else None


def _registration(
    spec: setup.Harness, scope: str, path: Path, env: Mapping[str, str], home: Path
) -> Registration:
    reg = Registration(scope, path, path.exists())
    try:
        settings = setup.load(path)
    except Exception as exc:  # noqa: BLE001 - a broken file is reported, not fatal
        reg.error = str(exc)
        return reg
    ours = setup.registered(settings)
    reg.events = [e for e in spec.events if e in ours]
    reg.missing = [e for e in spec.events if e not in ours] if reg.events else []
    reg.enforce = any(setup.is_enforcing(c) for _, _, c in ours.get(spec.pre_tool, []))
    reg.handlers = sum(len(v) for v in ours.values())
    if spec.key == "codex" and reg.handlers:
        trusted = codex_trusted(spec.user_dir(env, home) / "config.toml")
        resolved = str(path.resolve())
        reg.trusted = sum(
            1
            for event, places in ours.items()
            for g, h, _ in places
            if f"{resolved}:{_snake(event)}:{g}:{h}" in trusted
        )
    return reg


def codex_trusted(config: Path) -> set[str]:
    """The hook keys Codex CLI's ``config.toml`` records a ``trusted_hash`` for."""
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    state = data.get("hooks", {}).get("state", {}) if isinstance(data.get("hooks"), dict) else {}
    if not isinstance(state, dict):
        return set()
    return {k for k, v in state.items() if isinstance(v, dict) and v.get("trusted_hash")}


def _snake(event: str) -> str:
    return _SNAKE.sub("_", event).lower()


def _gemini_switch(
    found: HarnessReport, spec: setup.Harness, env: Mapping[str, str], home: Path, cwd: Path
) -> None:
    for reg in found.registrations:
        if not reg.events:
            continue
        try:
            settings = setup.load(reg.path) or {}
        except Exception:  # noqa: BLE001 - reported by the registration already
            continue
        config = settings.get("hooksConfig")
        if not (isinstance(config, dict) and config.get("enabled") is True):
            found.problems.append(
                Problem(
                    f"Gemini CLI hooks are switched off in {reg.path} (hooksConfig.enabled)",
                    "agent-replay setup gemini" + (" --project" if reg.scope == "project" else ""),
                )
            )
        if reg.scope == "project" and not _gemini_trusts(home, cwd):
            found.problems.append(
                Problem(
                    f"Gemini CLI ignores {reg.path}: {cwd} is not a trusted folder",
                    "start `gemini` in this folder and trust it (or use setup gemini --user)",
                )
            )


def _gemini_trusts(home: Path, cwd: Path) -> bool:
    try:
        trusted = json.loads((home / ".gemini" / "trustedFolders.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(trusted, dict):
        return False
    here = cwd.resolve()
    for folder, level in trusted.items():
        target = Path(folder)
        if level == "TRUST_FOLDER" and (here == target or target in here.parents):
            return True
        if level == "TRUST_PARENT" and (here == target or target.parent in (here, *here.parents)):
            return True
    return False


def _claude_switch(found: HarnessReport) -> None:
    for reg in found.registrations:
        try:
            settings = setup.load(reg.path) or {}
        except Exception:  # noqa: BLE001 - reported by the registration already
            continue
        if settings.get("disableAllHooks") is True:
            found.problems.append(
                Problem(
                    f"{reg.path} sets disableAllHooks: Claude Code runs no hooks at all",
                    "remove disableAllHooks from that file",
                )
            )


def last_payload(store: Store, key: str) -> dict[str, Any] | None:
    """The newest hook trace of a harness and when its last step arrived."""
    row = (
        TraceRow.select(TraceRow.id, TraceRow.session_id, TraceRow.started_at, TraceRow.status)
        .where(TraceRow.source_format == HOOK_FORMATS[key])
        .order_by(TraceRow.started_at_ms.desc(), TraceRow.created_at_ms.desc())
        .limit(1)
        .tuples()
        .first(store.db)
    )
    if row is None:
        return None
    latest = (
        StepRow.select(StepRow.started_at, StepRow.name, StepRow.step_type)
        .where(StepRow.trace_id == row[0])
        .order_by(StepRow.step_number.desc())
        .limit(1)
        .tuples()
        .first(store.db)
    )
    unpaired = Case(None, [(StepRow.call_id.is_null(), 1)], 0)
    calls = (
        StepRow.select(fn.COUNT(StepRow.id), fn.SUM(unpaired))
        .where((StepRow.trace_id == row[0]) & (StepRow.step_type == "tool_call"))
        .tuples()
        .first(store.db)  # an aggregate: always one row
    )
    return {
        "trace_id": row[0],
        "session_id": row[1],
        "trace_status": row[3],
        "at": (latest[0] if latest and latest[0] else row[2]),
        "last_step": f"{latest[2]} {latest[1] or ''}".strip() if latest else None,
        "tool_calls": int(calls[0] or 0),
        "tool_calls_without_pre_tool": int(calls[1] or 0),
    }


def _pre_tool_ran(harness: HarnessReport) -> None:
    """Tool calls recorded only from their result: the pre-tool hook did not run (Codex CLI
    skips a hook that changed since it was trusted), so ``--enforce`` decided nothing."""
    last = harness.last_payload
    if not last or not last["tool_calls_without_pre_tool"]:
        return
    spec = setup.HARNESSES[harness.key]
    fix = f"register it: agent-replay setup {harness.key}"
    if harness.key == "codex":
        fix = (
            "Codex CLI skips a hook that changed since you trusted it: review the hooks again "
            '(start `codex`, "Hooks need review" or /hooks)'
        )
    harness.problems.append(
        Problem(
            f"in the last session ({last['session_id']}), {last['tool_calls_without_pre_tool']} "
            f"of {last['tool_calls']} tool calls arrived without their {spec.pre_tool} event: "
            "that hook did not run, so nothing decided those calls",
            fix,
        )
    )


def pending_payloads(store: Store) -> int | None:
    try:
        return int(HookInboxRow.select().count(store.db))
    except Exception:  # noqa: BLE001 - an old or foreign store: nothing to say
        return None


def drift(store: Store) -> list[Drift]:
    """Records the importers skipped as unknown, per format, over the newest imports."""
    rows = (
        TraceRow.select(TraceRow.source_format, TraceRow.metadata)
        .where(
            TraceRow.source_format.in_(IMPORT_FORMATS)
            # Only narrows (ILIKE on PostgreSQL): the decoded metadata decides.
            & TraceRow.metadata.contains('"skipped_records"')
        )
        .order_by(TraceRow.started_at_ms.desc())
        .limit(DRIFT_SCAN)
        .tuples()
        .execute(store.db)
    )
    sessions: Counter[str] = Counter()
    records: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    versions: dict[str, set[str]] = {}
    for fmt, raw in rows:
        source = dec_meta(raw).get("source")
        if not isinstance(source, dict):
            continue
        skipped = source.get("skipped_kinds")
        if not isinstance(skipped, dict) or not skipped:
            continue
        sessions[fmt] += 1
        for kind, count in skipped.items():
            if isinstance(count, int):
                kinds.setdefault(fmt, Counter())[str(kind)] += count
                records[fmt] += count
        if isinstance(source.get("version"), str):
            versions.setdefault(fmt, set()).add(source["version"])
    return [
        Drift(
            fmt,
            sessions[fmt],
            records[fmt],
            dict(kinds[fmt].most_common()),
            sorted(versions.get(fmt, set())),
        )
        for fmt in IMPORT_FORMATS
        if sessions[fmt]
    ]


def _last_log_line(path: Path) -> str | None:
    try:
        with path.open("rb") as stream:
            stream.seek(0, 2)
            stream.seek(max(0, stream.tell() - 8192))
            tail = stream.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = [line for line in tail.splitlines() if line.strip()]
    return lines[-1][:300] if lines else None
