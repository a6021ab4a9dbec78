"""``agent-replay init``: creates a private store directory, database and config; idempotent."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_creates_a_private_directory(cli: Run, store_dir: Path) -> None:
    """The store directory is created with mode 0700."""
    result = cli("init")
    assert result.code == 0, result.err
    assert store_dir.is_dir()
    assert _mode(store_dir) == 0o700


def test_init_creates_database_and_config_readable_only_by_the_owner(
    cli: Run, store_dir: Path
) -> None:
    """traces.db and config.json are created with mode 0600."""
    assert cli("init").code == 0
    assert _mode(store_dir / "traces.db") == 0o600
    assert _mode(store_dir / "config.json") == 0o600


def test_init_reports_the_created_store(cli: Run, store_dir: Path) -> None:
    """The first run says it created the store and where."""
    result = cli("init")
    assert result.out.strip() == f"created store at {store_dir.resolve()}"


def test_init_twice_succeeds_and_says_the_store_exists(cli: Run, store_dir: Path) -> None:
    """A second run exits 0 and reports the existing store."""
    assert cli("init").code == 0
    again = cli("init")
    assert again.code == 0
    assert again.out.strip() == f"store already exists at {store_dir.resolve()}"


def test_init_again_keeps_existing_traces_and_config(
    cli: Run, seeded: Path, db: Run, data: Path
) -> None:
    """Re-running init on a store with data leaves the traces and the config file alone."""
    config = seeded / "config.json"
    config.write_text('{"version": 1, "redact": false}\n')
    assert cli("init").code == 0
    assert db("SELECT COUNT(*) FROM traces")[0][0] == 4
    assert json.loads(config.read_text()) == {"version": 1, "redact": False}


def test_init_json_reports_created_then_existing(cli: Run, store_dir: Path) -> None:
    """``--json`` prints {ok, dir, created, config}; created turns false on the second run."""
    first = cli("init", "--json")
    assert first.code == 0
    assert first.json() == {
        "ok": True,
        "dir": str(store_dir.resolve()),
        "created": True,
        "config": str(store_dir / "config.json"),
    }
    assert cli("init", "--json").json()["created"] is False


def test_init_dir_option_creates_the_store_there(cli: Run, tmp_path: Path, store_dir: Path) -> None:
    """``init --dir PATH`` creates the store in PATH, not in $AGENT_REPLAY_DIR."""
    target = tmp_path / "elsewhere" / "store"
    assert cli("init", "--dir", target).code == 0
    assert (target / "traces.db").is_file()
    assert (target / "config.json").is_file()
    assert not store_dir.exists()


def test_root_dir_option_applies_to_init(cli: Run, tmp_path: Path, store_dir: Path) -> None:
    """``agent-replay --dir PATH init`` creates the store in PATH, like every other command."""
    target = tmp_path / "root-dir"
    assert cli("--dir", target, "init").code == 0
    assert (target / "traces.db").is_file()
    assert not store_dir.exists()


def test_init_without_dir_or_env_creates_dot_agent_replay_in_cwd(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no --dir and no AGENT_REPLAY_DIR, init creates ./.agent-replay."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.delenv("AGENT_REPLAY_DIR")
    monkeypatch.chdir(project)
    assert cli("init").code == 0
    assert (project / ".agent-replay" / "traces.db").is_file()
