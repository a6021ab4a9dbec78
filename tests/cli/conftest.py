"""CLI fixtures: run ``agent-replay`` in-process (``main(argv)`` with captured output) or as a real
process, the hand-written sample traces in ``tests/data/cli/``, and a store seeded with them
through ``agent-replay ingest`` itself.

The store directory comes from the root conftest's autouse ``store_dir`` fixture
(``AGENT_REPLAY_DIR`` = ``tmp_path/.agent-replay``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_replay.cli import main

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "cli"


@dataclass
class Result:
    """What one in-process run of the CLI returned and printed."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Cli = Callable[..., Result]
Proc = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """``cli("list", "--json")``: run ``main`` in-process and capture its exit code and output."""

    def run(*args: str | Path) -> Result:
        capsys.readouterr()
        code = main([str(arg) for arg in args])
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


@pytest.fixture
def proc(store_dir: Path) -> Proc:
    """``proc("ingest", "-", input=text)``: run ``python -m agent_replay`` as a real process.

    The child gets ``AGENT_REPLAY_DIR`` (unless ``env`` is given) and, without ``input``, an
    empty non-TTY stdin.
    """

    def run(
        *args: str | Path,
        input: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        environment = env if env is not None else {**os.environ, "AGENT_REPLAY_DIR": str(store_dir)}
        return subprocess.run(
            [sys.executable, "-m", "agent_replay", *(str(arg) for arg in args)],
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
            capture_output=True,
            text=True,
            env=environment,
            cwd=cwd,
            timeout=60,
            check=False,
        )

    return run


@pytest.fixture
def data() -> Path:
    """``tests/data/cli/``: the CLI's sample traces. They stay out of ``tests/data/*.jsonl``,
    which seeds the other suites' stores, because some of them are invalid on purpose."""
    return DATA_DIR


@pytest.fixture
def seeded(cli: Cli, data: Path, store_dir: Path) -> Path:
    """The store with the four traces of ``traces.jsonl`` (one of them a fork), via ``ingest``.

    Newest first they are trc_sample4_fork, trc_sample2, trc_sample1, trc_sample3.
    """
    result = cli("ingest", data / "traces.jsonl")
    assert result.code == 0, result.err
    return store_dir


Query = Callable[..., list[tuple[Any, ...]]]


@pytest.fixture
def db(store_dir: Path) -> Query:
    """``db("SELECT ...", params, store=path)``: rows of a read-only query on a store's file."""

    def run(sql: str, params: tuple[Any, ...] = (), store: Path | None = None) -> list[Any]:
        path = (store or store_dir) / "traces.db"
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return connection.execute(sql, params).fetchall()
        finally:
            connection.close()

    return run
