"""The static checks, as tests: ruff (lint and format), mypy (strict on trace, store and
services) and the import-linter contracts in ``pyproject.toml``.

mypy and import-linter read the package as it is installed: ``screens/`` and ``widgets/`` live
inside ``agent_replay`` there, while the editable install maps them from the top-level folders
through an import hook neither tool runs (STYLE.md §4). So both run against a copy of the
sources laid out like the wheel, built once per worker in a temporary folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A checker's executable from this interpreter's environment."""
    path = BIN / name
    assert path.exists(), f"{name} is not installed: pip install -e '.[test]'"
    return str(path)


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as the wheel lays it out: agent_replay/ with screens/ and widgets/ inside."""
    top = tmp_path_factory.mktemp("layout")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "agent_replay", top / "agent_replay", ignore=ignore)
    for folder in ("screens", "widgets"):
        shutil.copytree(ROOT / folder, top / "agent_replay" / folder, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", top / "pyproject.toml")
    return top


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(cwd), **env},
    )


def lint_imports(top: Path) -> subprocess.CompletedProcess[str]:
    return run([tool("lint-imports"), "--no-cache", "--config", "pyproject.toml"], top)


def test_ruff_check_is_clean() -> None:
    result = run([tool("ruff"), "check", "--no-cache", "."], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = run([tool("ruff"), "format", "--check", "--no-cache", "."], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean(layout: Path, tmp_path: Path) -> None:
    """``[tool.mypy]``: strict everywhere but the front ends' relaxed flags."""
    result = run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "agent_replay"],
        layout,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_the_import_contracts_are_kept(layout: Path) -> None:
    result = lint_imports(layout)
    assert result.returncode == 0, result.stdout + result.stderr
    with (ROOT / "pyproject.toml").open("rb") as config:
        contracts = tomllib.load(config)["tool"]["importlinter"]["contracts"]
    assert f"{len(contracts)} kept, 0 broken" in result.stdout


def test_no_import_is_ignored_but_the_tui_command_reaching_the_app() -> None:
    """Issue 19: the contracts hold with one exception only, ``agent-replay`` (no command)
    opening the app; any other ignored import is a layering hole to close, not to list."""
    with (ROOT / "pyproject.toml").open("rb") as config:
        contracts = tomllib.load(config)["tool"]["importlinter"]["contracts"]
    ignored = sorted({line for c in contracts for line in c.get("ignore_imports", [])})
    assert ignored == ["agent_replay.commands.tui -> agent_replay.app"]


def break_a_contract(top: Path, module: str, line: str) -> Path:
    """A copy of ``top`` where ``module`` gains an import: the contracts must catch it."""
    broken = top.parent / f"broken-{module.replace('.', '-')}"
    shutil.copytree(top, broken)
    path = broken / Path(*module.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + f"\n{line}\n")
    return broken


@pytest.mark.parametrize(
    ("module", "line", "contract", "shown"),
    [
        (
            "agent_replay.services.diff",
            "import textual",
            "Headless code never imports the TUI",
            "agent_replay.services.diff -> textual",
        ),
        (
            "agent_replay.services.hook.inbox",
            "import click",
            "The hook's fast path is stdlib only",
            "agent_replay.services.hook.inbox -> click",
        ),
        (
            "agent_replay.store.queries",
            "from agent_replay.services import diff",
            "Layers: front ends -> services -> store -> trace",
            "agent_replay.store.queries -> agent_replay.services.diff",
        ),
        (
            "agent_replay.store.migrations",
            "from agent_replay.store import db",
            "No cycle between opening a store and migrating it",
            "agent_replay.store.migrations -> agent_replay.store.db",
        ),
    ],
    ids=["textual-in-a-service", "click-in-the-hook", "store-imports-a-service", "store-cycle"],
)
def test_breaking_a_contract_fails_with_import_linters_message(
    layout: Path, module: str, line: str, contract: str, shown: str
) -> None:
    result = lint_imports(break_a_contract(layout, module, line))
    assert result.returncode == 1, result.stdout
    assert f"{contract}" in result.stdout and "BROKEN" in result.stdout
    assert shown in result.stdout
