"""Headless paths never import Textual or Rich (checked in a fresh interpreter, after really
running the command, as harlequin does)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]

CHECK = """
import sys
{body}
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "rich"))
assert not heavy, f"imported {{heavy[:5]}}"
"""

RUN_MAIN = """
from agent_replay.cli import main
code = main({argv!r})
assert code == 0, f"exit code {{code}}"
"""


def _python(body: str, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHECK.format(body=body)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "AGENT_REPLAY_DIR": str(store)},
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--json"],
        ["show", "trc_sample1", "--tree", "--evals", "--snapshots"],
        ["show", "trc_sample1", "--json"],
        ["export"],
        ["export", "--format", "json"],
        ["why", "trc_sample1", "--step", "5"],
        ["decisions", "trc_sample1"],
        ["init"],
        ["--help"],
    ],
    ids=" ".join,
)
def test_command_runs_without_importing_textual_or_rich(seeded: Path, argv: list[str]) -> None:
    """Running the command leaves textual and rich out of sys.modules."""
    result = _python(RUN_MAIN.format(argv=argv), seeded)
    assert result.returncode == 0, result.stderr


def test_ingest_runs_without_importing_textual_or_rich(data: Path, store_dir: Path) -> None:
    """Ingesting a file leaves textual and rich out of sys.modules."""
    argv = ["ingest", str(data / "traces.jsonl")]
    result = _python(RUN_MAIN.format(argv=argv), store_dir)
    assert result.returncode == 0, result.stderr
    assert "ingested 4 trace(s)" in result.stdout


def test_demo_runs_without_importing_textual_or_rich(store_dir: Path) -> None:
    """Loading the demo data leaves textual and rich out of sys.modules."""
    result = _python(RUN_MAIN.format(argv=["demo"]), store_dir)
    assert result.returncode == 0, result.stderr


def test_importing_the_services_does_not_import_textual_or_rich(store_dir: Path) -> None:
    """``import agent_replay.services`` (and every module in it) stays headless."""
    body = """
import importlib, pkgutil
import agent_replay.services as services
for module in pkgutil.iter_modules(services.__path__):
    importlib.import_module(f"agent_replay.services.{module.name}")
"""
    result = _python(body, store_dir)
    assert result.returncode == 0, result.stderr


def test_importing_every_command_module_does_not_import_textual_or_rich(store_dir: Path) -> None:
    """Every module of ``agent_replay.commands`` and the CLI imports without textual or rich."""
    body = """
import importlib
from agent_replay.cli import COMMANDS
for module, _ in COMMANDS.values():
    importlib.import_module(module)
"""
    result = _python(body, store_dir)
    assert result.returncode == 0, result.stderr


def test_the_check_itself_detects_a_rich_import(store_dir: Path) -> None:
    """The sys.modules check fails when rich is imported (so the checks above can fail)."""
    result = _python("import rich.text", store_dir)
    assert result.returncode != 0
    assert "imported ['rich'" in result.stderr
