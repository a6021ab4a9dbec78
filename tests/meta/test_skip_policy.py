"""The one skip policy (tests/conftest.py), checked on a real pytest run of a scratch suite
that uses the project's conftest: a skip for anything but PostgreSQL fails, and under
``CI=true`` even that does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SUITE = """
import pytest

def test_skips_for_a_missing_file():
    pytest.skip("fixture file not found")

def test_uses_postgres(store):
    assert store is not None

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_to_fail():
    raise AssertionError
"""


def run_suite(tmp_path: Path, **env: str) -> str:
    folder = tmp_path / "tests"  # BOTH_DIRS: store tests under tests/unit run on both backends
    (folder / "unit").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "conftest.py", folder / "conftest.py")
    (folder / "unit" / "test_scratch.py").write_text(SUITE)
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "AGENT_REPLAY_TEST_PG")}
    environ.update(env)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rA",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "no:randomly",
            str(folder),
        ],
        capture_output=True,
        text=True,
        env=environ,
        cwd=folder,
        timeout=120,
    )
    return result.stdout


def test_a_skip_for_a_missing_file_fails(tmp_path: Path) -> None:
    out = run_suite(tmp_path)
    assert "FAILED unit/test_scratch.py::test_skips_for_a_missing_file" in out
    assert "tests skip only for PostgreSQL" in out
    # Without a server the PostgreSQL variant skips, with the reason; SQLite runs.
    assert "PASSED unit/test_scratch.py::test_uses_postgres[sqlite]" in out
    assert "SKIPPED" in out and "no server given" in out
    assert "XFAIL" in out


@pytest.mark.parametrize("server", ["", "postgresql://nobody@127.0.0.1:9/none"])
def test_under_ci_nothing_skips(tmp_path: Path, server: str) -> None:
    env = {"CI": "true"}
    if server:
        env["AGENT_REPLAY_TEST_PG"] = server
    out = run_suite(tmp_path, **env)
    assert "SKIPPED" not in out
    # The store fixture fails in set-up: reported as an error, never a skip.
    assert "ERROR unit/test_scratch.py::test_uses_postgres[postgresql]" in out
    assert "required under CI=true" in out
    assert "FAILED unit/test_scratch.py::test_skips_for_a_missing_file" in out
