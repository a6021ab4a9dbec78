"""The built wheel installs screens/ and widgets/ under agent_replay, never top-level."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    # Build from a copy: parallel workers never share a build/ folder, and the tree stays clean.
    source = tmp_path_factory.mktemp("src") / "agent-replay"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".agent-replay"
        ),
    )
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


@pytest.mark.slow
def test_wheel_has_no_top_level_screens_or_widgets(wheel_names: list[str]) -> None:
    """No generic top-level `screens` or `widgets` package lands in site-packages."""
    tops = {name.split("/")[0] for name in wheel_names}
    assert "screens" not in tops and "widgets" not in tops
    assert "agent_replay/screens/__init__.py" in wheel_names
    assert "agent_replay/widgets/__init__.py" in wheel_names


@pytest.mark.slow
def test_wheel_ships_every_tcss(wheel_names: list[str]) -> None:
    """Every .tcss in the source tree is in the wheel at its installed path."""
    expected = set()
    for folder, installed in (
        ("agent_replay", "agent_replay"),
        ("screens", "agent_replay/screens"),
        ("widgets", "agent_replay/widgets"),
    ):
        for tcss in (ROOT / folder).rglob("*.tcss"):
            expected.add(f"{installed}/{tcss.relative_to(ROOT / folder).as_posix()}")
    assert expected <= set(wheel_names)


@pytest.mark.slow
def test_wheel_ships_py_typed_and_the_entry_point(wheel_names: list[str]) -> None:
    """The wheel is typed and declares the agent-replay console script."""
    assert "agent_replay/py.typed" in wheel_names
    assert any(name.endswith("entry_points.txt") for name in wheel_names)


@pytest.mark.slow
def test_wheel_ships_the_demo_data(wheel_names: list[str]) -> None:
    """`agent-replay demo` reads its traces and policies from package data."""
    for name in ("traces.jsonl", "policies.jsonl"):
        assert f"agent_replay/data/demo/{name}" in wheel_names
