"""The read fast path (``commands/fast_read``): ``list`` and ``show`` on a local store answer
without click, peewee, psycopg2 or pydantic, and print what the click commands print."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe import probe

from agent_replay.cli import main as cli_main
from agent_replay.commands import fast_read

LEAN = ("click", "peewee", "psycopg2", "pydantic", "textual", "rich", "ssl")


@pytest.mark.parametrize(
    "argv",
    [["list", "--limit", "2"], ["show", "trc_sample1", "--json"]],
    ids=" ".join,
)
def test_list_and_show_load_no_click_peewee_or_driver(seeded: Path, argv: list[str]) -> None:
    """A real run through the console script's entry point leaves them all out."""
    result = probe(argv=argv, banned=LEAN, store_dir=seeded)
    assert (result.code, result.loaded) == (0, []), result.stderr
    assert "trc_sample" in result.stdout


def test_list_loads_no_typing(seeded: Path) -> None:
    """``list`` reaches its output without ``typing`` (the store's shapes are types only, and
    every module on its path imports ``typing`` under ``TYPE_CHECKING``): part of the start-up
    issue 17 bounds to 2x a stdlib reader."""
    result = probe(argv=["list", "--limit", "2"], banned=(*LEAN, "typing"), store_dir=seeded)
    assert (result.code, result.loaded) == (0, []), result.stderr


ARGVS = [
    ["list"],
    ["list", "--json"],
    ["list", "--status", "completed", "--sort", "tokens", "--limit=2"],
    ["list", "--since", "2000-01-01", "--agent", "research-agent"],
    ["list", "--tag", "nope"],
    ["show", "trc_sample1"],
    ["show", "trc_sample1", "--tree", "--evals", "--snapshots"],
    ["show", "trc_sample1", "--json"],
    ["show", "trc_sample1", "--json", "--from-step", "2", "--to-step", "3"],
    ["show", "trc_sample2", "--steps-only", "--from-step", "2"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=" ".join)
def test_the_fast_path_prints_what_the_cli_prints(
    seeded: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli_main(argv) == 0
    expected = capsys.readouterr()
    assert fast_read.run(argv) == 0
    got = capsys.readouterr()
    assert (got.out, got.err) == (expected.out, expected.err)


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "--help"],
        ["list", "--status", "bogus"],
        ["list", "--limit", "0"],
        ["list", "--since", "yesterday"],
        ["list", "--bogus"],
        ["show"],
        ["show", "nope"],
        ["show", "trc_sample1", "--from-step", "99"],
        ["show", "trc_sample1", "--", "x"],
    ],
    ids=" ".join,
)
def test_anything_unusual_goes_to_the_cli(seeded: Path, argv: list[str]) -> None:
    """Help, what the CLI rejects and every error are the CLI's to say (None: not answered)."""
    assert fast_read.run(argv) is None


def test_a_store_to_migrate_or_missing_goes_to_the_cli(tmp_path: Path) -> None:
    assert fast_read.run(["list", "--dir", str(tmp_path / "none")]) is None
    old = tmp_path / "old"
    old.mkdir()
    import sqlite3

    with sqlite3.connect(old / "traces.db") as con:
        con.execute("PRAGMA user_version = 3")
        con.execute("CREATE TABLE t (x)")
    assert fast_read.run(["list", "--dir", str(old)]) is None


def test_a_server_store_goes_to_the_cli(seeded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_REPLAY_DB_URL", "postgresql://nobody@127.0.0.1:1/none")
    assert fast_read.run(["list"]) is None


def test_a_local_store_opened_in_full_loads_no_driver(seeded: Path) -> None:
    """peewee's start-up imports no driver (psycopg2 brings ssl): the full CLI on a local store
    (here ``export``, no fast path) leaves them out; a PostgreSQL store loads psycopg2 when
    it is opened (the PG variants of the store tests)."""
    result = probe(
        argv=["export", "--format", "json"], banned=("psycopg2", "ssl"), store_dir=seeded
    )
    assert (result.code, result.loaded) == (0, []), result.stderr
