"""``agent-replay setup`` and ``doctor`` on real settings files: the ones the captures in
tests/fixtures ran with (every event already holding another hook), merged without touching
what is there, idempotent, backed up, undone by ``--remove``; ``doctor`` reading them back,
Codex CLI's trust records, the last payload and the importers' skipped records."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS

from agent_replay.services import setup

Cli = Any

SETTINGS = {
    "claude": ("claude-code/plain/config/settings.json", ".claude/settings.json"),
    "codex": ("codex/plain/config/hooks.json", ".codex/hooks.json"),
    "gemini": ("gemini-cli/plain/config/settings.json", ".gemini/settings.json"),
}
COMMAND = "/opt/venv/bin/agent-replay"


def run_setup(cli: Cli, *args: str) -> Any:
    """``setup`` with the hook command pinned (``--command``), so the files are predictable."""
    return cli("setup", *args, "--command", COMMAND)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME (and cwd) for the harnesses' settings."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return folder


def place(home: Path, harness: str) -> Path:
    """The capture's real settings file, at the harness's user location."""
    source, relative = SETTINGS[harness]
    target = home / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HARNESS / source, target)
    return target


def handlers(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [h for group in settings["hooks"].get(event, []) for h in group["hooks"]]


def ours(settings: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for h in handlers(settings, event) if setup.is_ours(h["command"])]


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_setup_merges_into_the_real_settings_and_keeps_every_other_hook(
    cli: Cli, home: Path, harness: str
) -> None:
    """Every event the mapping uses gets one agent-replay handler after the hooks already
    there; the rest of the file is untouched; the old file is kept as a backup; the diff is
    printed; a second run changes nothing."""
    path = place(home, harness)
    original = path.read_bytes()
    before = json.loads(original)
    result = run_setup(cli, harness, "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["changed"] and report["written"] and report["file"] == str(path)
    after = json.loads(path.read_text())
    spec = setup.HARNESSES[harness]
    assert report["events"] == list(spec.events)
    for event in spec.events:
        assert ours(after, event) == [f"{COMMAND} hook"], event
        kept = [h for h in handlers(after, event) if not setup.is_ours(h["command"])]
        assert kept == (handlers(before, event) if event in before["hooks"] else [])
    for key in set(before) - {"hooks", "hooksConfig"}:
        assert after[key] == before[key]
    for event, groups in before["hooks"].items():
        assert after["hooks"][event][: len(groups)] == groups  # the existing groups first
    assert Path(report["backup"]).read_bytes() == original
    assert f"+++ {path}" in report["diff"] and "agent-replay hook" in report["diff"]

    again = run_setup(cli, harness, "--json").json()
    assert not again["changed"] and not again["written"] and again["backup"] is None
    assert json.loads(path.read_text()) == after
    assert len(list(path.parent.glob(f"{path.name}.agent-replay-*.bak"))) == 1


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_remove_restores_the_settings_as_they_were(cli: Cli, home: Path, harness: str) -> None:
    path = place(home, harness)
    before = json.loads(path.read_text())
    assert run_setup(cli, harness, "--enforce").code == 0
    removed = run_setup(cli, harness, "--remove", "--json").json()
    assert removed["changed"] and removed["events"] == []
    assert json.loads(path.read_text()) == before
    assert not run_setup(cli, harness, "--remove", "--json").json()["changed"]


def test_enforce_switches_only_the_pre_tool_handler_in_place(cli: Cli, home: Path) -> None:
    """``--enforce`` (and back) rewrites agent-replay's PreToolUse handler where it is; a
    duplicate registration left by hand is dropped (it would record every event twice)."""
    path = place(home, "claude")
    run_setup(cli, "claude")
    settings = json.loads(path.read_text())
    extra = {"type": "command", "command": "agent-replay hook"}
    settings["hooks"]["Stop"][0]["hooks"].append(extra)
    path.write_text(json.dumps(settings))
    text = run_setup(cli, "claude", "--enforce")
    assert text.code == 0 and "(PreToolUse with --enforce)" in text.out
    assert '+            "command": "/opt/venv/bin/agent-replay hook --enforce"' in text.out
    after = json.loads(path.read_text())
    assert ours(after, "PreToolUse") == [f"{COMMAND} hook --enforce"]
    assert ours(after, "Stop") == [f"{COMMAND} hook"]
    assert [g.get("matcher") for g in after["hooks"]["PreToolUse"]] == ["*", "*"]
    back = run_setup(cli, "claude", "--json").json()
    assert back["changed"] and not back["enforce"]
    assert ours(json.loads(path.read_text()), "PreToolUse") == [f"{COMMAND} hook"]


def test_an_earlier_registration_is_updated_not_duplicated(cli: Cli, home: Path) -> None:
    """The enforce capture's settings already run ``agent-replay hook`` (plain PATH lookup,
    30 s timeouts): setup updates those handlers, adds none."""
    target = home / ".claude" / "settings.json"
    target.parent.mkdir(parents=True)
    shutil.copyfile(HARNESS / "claude-code/enforce/config/settings.json", target)
    before = json.loads(target.read_text())
    assert run_setup(cli, "claude", "--enforce").code == 0
    after = json.loads(target.read_text())
    for event in setup.CLAUDE_EVENTS:
        assert len(ours(after, event)) == 1
    assert ours(after, "PreToolUse") == [f"{COMMAND} hook --enforce"]
    assert set(after["hooks"]) == set(before["hooks"]) | set(setup.CLAUDE_EVENTS)


def test_dry_run_prints_the_change_and_writes_nothing(cli: Cli, home: Path) -> None:
    path = place(home, "gemini")
    original = path.read_bytes()
    result = run_setup(cli, "gemini", "--dry-run", "--enforce")
    assert result.code == 0 and "would update" in result.out
    assert f"{COMMAND} hook --enforce" in result.out
    assert path.read_bytes() == original
    assert not list(path.parent.glob("*.bak"))


def test_a_new_file_is_created_private_and_project_scope_writes_here(cli: Cli, home: Path) -> None:
    result = run_setup(cli, "codex", "--project", "--json").json()
    path = Path.cwd() / ".codex" / "hooks.json"
    assert result["file"] == str(path) and result["backup"] is None and not result["existed"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    hooks = json.loads(path.read_text())["hooks"]
    assert set(hooks) == set(setup.CODEX_EVENTS)
    assert hooks["SessionEnd"][0]["hooks"][0]["timeout"] == 3  # Codex's own cap
    assert "matcher" not in hooks["PreToolUse"][0]
    assert any("--dangerously-bypass-hook-trust" in note for note in result["notes"])
    assert any("/hooks" in note for note in result["notes"])


def test_gemini_hooks_are_switched_on_and_off_again(cli: Cli, home: Path) -> None:
    """Gemini CLI runs hooks only with ``hooksConfig.enabled``: setup turns it on, and
    ``--remove`` takes out the switch it added (not one the user had)."""
    run_setup(cli, "gemini")
    path = home / ".gemini" / "settings.json"
    settings = json.loads(path.read_text())
    assert settings["hooksConfig"] == {"enabled": True}
    entry = settings["hooks"]["BeforeTool"][0]
    assert entry["matcher"] == "*" and entry["hooks"][0]["timeout"] == 30_000
    assert entry["hooks"][0]["name"] == "agent-replay-BeforeTool"
    run_setup(cli, "gemini", "--remove")
    assert json.loads(path.read_text()) == {}


def test_a_settings_file_that_is_not_json_is_never_rewritten(cli: Cli, home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"hooks": {  // a comment\n}')
    result = run_setup(cli, "claude", "--json")
    assert result.code == 2 and result.json()["ok"] is False
    assert "not valid JSON" in result.json()["error"]
    assert path.read_text() == '{"hooks": {  // a comment\n}'


# --- doctor ------------------------------------------------------------------------------------


def fake_harness(folder: Path, name: str, version: str) -> None:
    """A stand-in for a harness binary on PATH (the outside world): prints its version."""
    folder.mkdir(exist_ok=True)
    binary = folder / name
    binary.write_text(f"#!/bin/sh\necho '{version}'\n")
    binary.chmod(0o755)


@pytest.fixture
def machine(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Claude Code and Codex CLI installed (on PATH), Gemini CLI not."""
    bin_dir = tmp_path / "bin"
    fake_harness(bin_dir, "claude", "2.1.332 (Claude Code)")
    fake_harness(bin_dir, "codex", "codex-cli 0.171.0")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return bin_dir


def test_doctor_reports_each_harness_and_how_to_fix_it(cli: Cli, machine: Path, home: Path) -> None:
    """Before setup: both found, with their versions, hooks missing (exit 1, the fix named);
    after setup claude: Claude Code fine, Codex CLI still to do."""
    first = cli("doctor", "--json")
    assert first.code == 1
    report = first.json()
    found = {h["harness"]: h for h in report["harnesses"]}
    assert set(found) == {"claude", "codex"}
    assert found["claude"]["version"] == "2.1.332 (Claude Code)"
    assert found["codex"]["version"] == "codex-cli 0.171.0"
    assert found["claude"]["problems"][0]["fix"].startswith("agent-replay setup claude")
    run_setup(cli, "claude")
    second = {h["harness"]: h for h in cli("doctor", "--json").json()["harnesses"]}
    assert second["claude"]["registered"] and second["claude"]["problems"] == []
    assert second["claude"]["registrations"][0]["events"] == list(setup.CLAUDE_EVENTS)
    text = cli("doctor")
    assert "Claude Code: 2.1.332 (Claude Code)" in text.out and "hooks for 11 events" in text.out
    assert "fix: agent-replay setup codex" in text.out


def codex_trust(home: Path, keys: list[str]) -> None:
    """What Codex CLI 0.171 writes to config.toml when hooks are trusted (seen from the real
    CLI's "Trust all and continue")."""
    lines = ['model = "gpt-5.5"', "", "[hooks.state]", ""]
    for key in keys:
        lines += [f'[hooks.state."{key}"]', 'trusted_hash = "sha256:' + "ab" * 32 + '"', ""]
    (home / ".codex" / "config.toml").write_text("\n".join(lines))


def test_doctor_reads_codex_trust_records(cli: Cli, machine: Path, home: Path) -> None:
    """Untrusted hooks are a problem (Codex skips them silently) with the way to trust them;
    once config.toml has a trusted_hash for each handler, they are fine."""
    run_setup(cli, "codex")
    hooks = home / ".codex" / "hooks.json"
    report = {h["harness"]: h for h in cli("doctor", "--json").json()["harnesses"]}
    codex = report["codex"]
    assert codex["registrations"][0]["trusted"] == 0
    assert any("skips them silently" in p["problem"] for p in codex["problems"])
    assert any("Trust all and continue" in p["fix"] for p in codex["problems"])
    events = ["session_start", "user_prompt_submit", "pre_tool_use", "post_tool_use"]
    codex_trust(home, [f"{hooks.resolve()}:{e}:0:0" for e in events])
    partly = {h["harness"]: h for h in cli("doctor", "--json").json()["harnesses"]}["codex"]
    assert partly["registrations"][0]["trusted"] == 4
    every = [*events, "subagent_start", "subagent_stop", "stop", "session_end"]
    codex_trust(home, [f"{hooks.resolve()}:{e}:0:0" for e in every])
    trusted = {h["harness"]: h for h in cli("doctor", "--json").json()["harnesses"]}["codex"]
    assert trusted["registrations"][0]["trusted"] == 8 and trusted["problems"] == []


def test_doctor_shows_the_last_payload_and_import_drift(
    cli: Cli, machine: Path, home: Path, tmp_path: Path
) -> None:
    """A recorded hook session is the harness's last payload; an imported rollout with a
    record kind this build does not know is reported as format drift, with the fix."""
    run_setup(cli, "claude")
    for line in (HARNESS / "claude-code/plain/hooks.jsonl").read_text().splitlines():
        payload = json.dumps(json.loads(line)["payload"])
        run_hook(cli, payload)
    (rollout,) = (HARNESS / "codex/plain/rollout").rglob("*.jsonl")
    drifted = tmp_path / rollout.name
    record = {"timestamp": "2026-11-29T23:52:44.000Z", "type": "hologram", "payload": {}}
    drifted.write_text(rollout.read_text() + json.dumps(record) + "\n")
    assert cli("import", drifted).code == 0
    report = cli("doctor", "--json").json()
    claude = {h["harness"]: h for h in report["harnesses"]}["claude"]
    last = claude["last_payload"]
    assert last["session_id"] == "54bf8201-626e-46cc-b9e5-a41d6f56c56b"
    assert last["last_step"] == "output final_answer"
    assert last["tool_calls"] == 4 and last["tool_calls_without_pre_tool"] == 0
    (drift,) = report["import_drift"]
    assert drift["format"] == "codex-rollout" and drift["kinds"] == {"hologram": 1}
    assert drift["harness_versions"] == ["0.171.0"]
    assert any("pip install -U agent-replay" in p["fix"] for p in report["problems"])


def test_doctor_notices_a_pre_tool_hook_that_did_not_run(
    cli: Cli, machine: Path, home: Path
) -> None:
    """Tool calls that arrived only with their result: the pre-tool hook was skipped (what
    Codex does with a hook changed since it was trusted) and nothing decided them."""
    run_setup(cli, "codex")
    for line in (HARNESS / "codex/plain/hooks.jsonl").read_text().splitlines():
        payload = json.loads(line)["payload"]
        if payload["hook_event_name"] != "PreToolUse":
            run_hook(cli, json.dumps(payload))
    codex = {h["harness"]: h for h in cli("doctor", "--json").json()["harnesses"]}["codex"]
    assert codex["last_payload"]["tool_calls_without_pre_tool"] == 4
    assert any("/hooks" in p["fix"] for p in codex["problems"])


def run_hook(cli: Cli, payload: str) -> None:
    import io
    import sys

    stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(payload.encode()), encoding="utf-8")
    try:
        assert cli("hook", "--sync").code == 0
    finally:
        sys.stdin = stdin


def test_the_default_command_is_this_agent_replay(home: Path) -> None:
    """Without --command, the harness runs the agent-replay that ran setup, by absolute path
    (or ``python -m agent_replay`` when no console script is found)."""
    command = setup.agent_replay_command()
    words = command.split()
    assert Path(words[0]).is_absolute()
    assert words[-1] in ("agent-replay", "agent_replay") or words[0].endswith("agent-replay")
    assert setup.is_ours(f"{command} hook")
