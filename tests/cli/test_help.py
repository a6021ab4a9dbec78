"""Every command has help with examples, the root help documents the exit codes, and the README
mentions every command (as sqlite-utils tests its docs)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_replay.cli import COMMANDS

Run = Callable[..., Any]

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_command_help_exits_0_with_examples(cli: Run, name: str) -> None:
    """``agent-replay <command> --help`` exits 0 and has an Examples section."""
    result = cli(name, "--help")
    assert result.code == 0, result.err
    assert result.out.startswith(f"Usage: agent-replay {name}")
    assert "Examples:" in result.out
    assert f"agent-replay {name}" in result.out.split("Examples:", 1)[1]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_command_short_help_flag_works(cli: Run, name: str) -> None:
    """``-h`` is the same as ``--help``."""
    assert cli(name, "-h").out == cli(name, "--help").out


def test_root_help_lists_every_command(cli: Run) -> None:
    """``agent-replay --help`` lists each command with its one-line help."""
    result = cli("--help")
    assert result.code == 0
    for name, (_, help_text) in COMMANDS.items():
        assert re.search(rf"^\s+{name}\s+{re.escape(help_text)}", result.out, re.M), name


def test_root_help_documents_the_exit_codes(cli: Run) -> None:
    """The root help states what exit codes 0, 1, 2 and 130 mean."""
    out = " ".join(cli("--help").out.split())
    assert "0 success" in out
    assert "1 runtime failure" in out
    assert "2 usage error" in out
    assert "130 interrupted" in out


@pytest.mark.parametrize("name", list(COMMANDS))
def test_readme_mentions_every_command(name: str) -> None:
    """README.md shows each command as ``agent-replay <name>``."""
    assert re.search(rf"agent-replay {name}\b", README.read_text(encoding="utf-8"))
