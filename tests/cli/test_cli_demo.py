"""``agent-replay demo``: loads 5 sample traces and 3 guard policies; idempotent; works in an
empty directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Run = Callable[..., Any]


def test_demo_loads_five_traces_and_three_policies(cli: Run, db: Run) -> None:
    """The first run adds 5 traces and 3 policies and says so."""
    result = cli("demo")
    assert result.code == 0, result.err
    assert "loaded 5 demo trace(s) and 3 policy(ies)" in result.out
    assert db("SELECT COUNT(*) FROM traces")[0][0] == 5
    assert db("SELECT COUNT(*) FROM policies")[0][0] == 3


def test_demo_json_reports_traces_and_policies_added(cli: Run) -> None:
    """``--json`` reports the trace ids and policy names added."""
    payload = cli("demo", "--json").json()
    assert payload["ok"] is True
    assert len(payload["traces_added"]) == 5
    assert all(tid.startswith("trc_") for tid in payload["traces_added"])
    assert payload["traces_present"] == []
    assert len(payload["policies_added"]) == 3


def test_demo_twice_adds_nothing_the_second_time(cli: Run, db: Run) -> None:
    """A second run exits 0, says the data is already there, and duplicates nothing."""
    assert cli("demo").code == 0
    again = cli("demo")
    assert again.code == 0
    assert "demo data already loaded" in again.out
    assert db("SELECT COUNT(*) FROM traces")[0][0] == 5
    assert db("SELECT COUNT(*) FROM policies")[0][0] == 3


def test_demo_json_twice_reports_everything_present(cli: Run) -> None:
    """The second ``--json`` run adds nothing and lists the 5 traces as present."""
    first = cli("demo", "--json").json()
    second = cli("demo", "--json").json()
    assert second["traces_added"] == []
    assert second["policies_added"] == []
    assert second["traces_present"] == first["traces_added"]


def test_demo_traces_are_listed(cli: Run) -> None:
    """After demo, ``list --json`` shows its five traces."""
    added = cli("demo", "--json").json()["traces_added"]
    listed = [t["id"] for t in cli("list", "--json").json()]
    assert sorted(listed) == sorted(added)


def test_demo_suggested_show_command_works(cli: Run) -> None:
    """The ``agent-replay show ...`` the demo suggests resolves to a trace."""
    out = cli("demo").out
    suggested = out.split("agent-replay show ", 1)[1].split()[0]
    shown = cli("show", suggested)
    assert shown.code == 0, shown.err
    assert "Trace " in shown.out


def test_demo_creates_the_config_file(cli: Run, store_dir: Path) -> None:
    """demo writes config.json beside the database, like init."""
    assert cli("demo").code == 0
    assert (store_dir / "config.json").is_file()


def test_demo_in_an_empty_directory_creates_dot_agent_replay(proc: Run, tmp_path: Path) -> None:
    """Run with no AGENT_REPLAY_DIR in an empty directory, demo creates ./.agent-replay."""
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "AGENT_REPLAY_DIR"}
    result = proc("demo", env=env, cwd=empty)
    assert result.returncode == 0, result.stderr
    assert (empty / ".agent-replay" / "traces.db").is_file()
    listed = proc("list", env=env, cwd=empty)
    assert listed.returncode == 0
    assert len(listed.stdout.splitlines()) == 6  # header + 5 traces
