"""Headless paths never import Textual or Rich (checked in a fresh interpreter, after really
running the command, as harlequin does; the import-linter contracts check the same statically)."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe import TUI, probe

WALK = """
import importlib, pkgutil
import agent_replay
# Every module of the package but the TUI's own (and the one command that opens it).
TUI_SIDE = (
    "agent_replay.app", "agent_replay.messages", "agent_replay.screens", "agent_replay.widgets"
)
names = []
for module in pkgutil.walk_packages(agent_replay.__path__, "agent_replay."):
    if module.name.startswith(TUI_SIDE) or module.name == "agent_replay.commands.tui":
        continue
    if module.name == "agent_replay.__main__":  # runs the CLI when imported
        continue
    importlib.import_module(module.name)
    names.append(module.name)
print(len(names), " ".join(names))
"""


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
        ["annotations", "trc_sample1"],
        ["list", "--label", "good"],
        ["export", "trc_sample1", "--format", "html"],
        ["init"],
        ["--help"],
    ],
    ids=" ".join,
)
def test_command_runs_without_importing_textual_or_rich(seeded: Path, argv: list[str]) -> None:
    """Running the command leaves textual and rich out of sys.modules."""
    result = probe(argv=argv, store_dir=seeded)
    assert (result.code, result.loaded) == (0, []), result.stderr


def test_ingest_runs_without_importing_textual_or_rich(data: Path, store_dir: Path) -> None:
    """Ingesting a file leaves textual and rich out of sys.modules."""
    result = probe(argv=["ingest", str(data / "traces.jsonl")], store_dir=store_dir)
    assert (result.code, result.loaded) == (0, []), result.stderr
    assert "ingested 4 trace(s)" in result.stdout


def test_demo_runs_without_importing_textual_or_rich(store_dir: Path) -> None:
    """Loading the demo data leaves textual and rich out of sys.modules."""
    result = probe(argv=["demo"], store_dir=store_dir)
    assert (result.code, result.loaded) == (0, []), result.stderr


def test_every_headless_module_imports_without_textual_or_rich(store_dir: Path) -> None:
    """Every module of the package, walked recursively (services.capture.*, services.otel.*,
    commands.*, store.*, trace.*), imports without the TUI's libraries."""
    result = probe(WALK, store_dir=store_dir)
    assert (result.code, result.loaded) == (None, []), result.stderr
    count, names = result.stdout.split(" ", 1)
    # Recursion reached the nested packages, not just the top level.
    for nested in (
        "agent_replay.services.hook.inbox",
        "agent_replay.services.otel.server",
        "agent_replay.services.hook.enforce",
        "agent_replay.services.evals.presets",
        "agent_replay.commands.list_",
        "agent_replay.store.db",
    ):
        assert nested in names.split(), nested
    assert int(count) > 100


def test_the_mcp_server_loads_no_tui(store_dir: Path) -> None:
    """``agent-replay mcp`` builds its server from the SDK's low-level parts: no Rich (the
    SDK's high-level server installs a Rich log handler)."""
    body = (
        "from mcp.server.lowlevel import Server\n"
        "from mcp.server.stdio import stdio_server\n"
        "import agent_replay.commands.mcp, agent_replay.services.agent_tools\n"
        "Server('probe')"
    )
    result = probe(body, store_dir=store_dir)
    assert (result.code, result.loaded) == (None, []), result.stderr


def test_the_probe_detects_a_rich_import(store_dir: Path) -> None:
    """The probe reports rich when it is imported (so the checks above can fail)."""
    result = probe("import rich.text", banned=TUI, store_dir=store_dir)
    assert result.loaded == ["rich", "rich.text"] or result.loaded[:1] == ["rich"]
