"""The ``agent-replay`` entry point itself: no arguments without a terminal, ``--version``,
unknown commands, and how interrupts, unexpected errors and closed pipes become exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from agent_replay import __version__

Run = Callable[..., Any]


def test_no_arguments_without_a_tty_prints_help_and_exits_2(proc: Run) -> None:
    """With stdin not a terminal, bare ``agent-replay`` prints the help and exits 2."""
    result = proc()
    assert result.returncode == 2
    assert result.stdout.startswith("Usage: agent-replay")
    assert "Commands:" in result.stdout
    assert "Traceback" not in result.stderr


def test_no_arguments_with_stdout_piped_prints_help_and_exits_2(
    store_dir: Path, tmp_path: Path
) -> None:
    """A terminal on stdin is not enough: with stdout piped, the app is not started."""
    import pty

    parent, child = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "agent_replay"],
            stdin=child,
            capture_output=True,
            text=True,
            env={**os.environ, "AGENT_REPLAY_DIR": str(store_dir)},
            timeout=60,
            check=False,
        )
    finally:
        os.close(child)
        os.close(parent)
    assert result.returncode == 2
    assert result.stdout.startswith("Usage: agent-replay")
    assert not store_dir.exists()


@pytest.mark.parametrize("argv", [["tui"], ["tui", "trc_sample1"], ["dashboard"]])
def test_app_commands_without_a_terminal_print_help_and_exit_2(
    cli: Run, store_dir: Path, argv: list[str]
) -> None:
    """``tui``/``dashboard`` with no terminal print help, say why, exit 2 and create nothing."""
    result = cli(*argv)
    assert result.code == 2
    assert result.out.startswith("Usage: agent-replay")
    assert "needs a terminal" in result.err
    assert not store_dir.exists()


def test_dashboard_refresh_below_the_minimum_is_a_usage_error(cli: Run) -> None:
    """``dashboard --refresh 0.1`` is refused with exit 2."""
    result = cli("dashboard", "--refresh", "0.1")
    assert result.code == 2
    assert "--refresh" in result.err


def test_version_prints_the_package_version(cli: Run) -> None:
    """``--version`` prints the version and exits 0."""
    result = cli("--version")
    assert result.code == 0
    assert result.out.strip() == f"agent-replay, version {__version__}"


def test_console_script_runs(tmp_path: Path) -> None:
    """The installed ``agent-replay`` script is the same entry point."""
    script = Path(sys.executable).parent / "agent-replay"
    result = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0
    assert __version__ in result.stdout


def test_unknown_command_exits_2(cli: Run) -> None:
    """An unknown command is a usage error naming it, with a pointer to --help."""
    result = cli("frobnicate")
    assert result.code == 2
    assert "No such command 'frobnicate'" in result.err
    assert "agent-replay --help" in result.err


def test_unknown_option_exits_2(cli: Run) -> None:
    """An unknown option of a command is a usage error."""
    result = cli("list", "--colour")
    assert result.code == 2
    assert "--colour" in result.err


def test_usage_error_under_json_prints_the_error_object(cli: Run) -> None:
    """A click usage error under ``--json`` also prints {ok: false, error, hints} on stdout."""
    result = cli("list", "--json", "--sort", "size")
    assert result.code == 2
    payload = result.json()
    assert payload["ok"] is False
    assert "--sort" in payload["error"]
    assert payload["hints"] == ["see `agent-replay list --help`"]


def test_keyboard_interrupt_exits_130(
    cli: Run, seeded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during a command exits 130 and says "interrupted"."""
    import agent_replay.store.queries as queries

    def interrupted(*args: Any, **kwargs: Any) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.setattr(queries, "list_traces", interrupted)
    result = cli("list")
    assert result.code == 130
    assert "interrupted" in result.err


def test_unexpected_error_is_one_line_with_the_traceback_in_the_log(
    cli: Run, seeded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug exits 1 with one line on stderr; the traceback goes to <dir>/logs."""
    import agent_replay.store.queries as queries

    def broken(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError("boom")

    monkeypatch.setattr(queries, "list_traces", broken)
    result = cli("list")
    assert result.code == 1
    assert "error: unexpected RuntimeError: boom" in result.err
    assert "Traceback" not in result.err
    log = seeded / "logs" / "agent-replay.log"
    assert f"details in {log}" in result.err
    assert "RuntimeError: boom" in log.read_text()
    assert "Traceback" in log.read_text()


def _run_into_closed_pipe(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout a pipe whose reader is already gone (``... | head -c0``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "agent_replay", *args],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "AGENT_REPLAY_DIR": str(store)},
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("command", ["list", "export"])
def test_closed_stdout_pipe_prints_no_traceback(seeded: Path, command: str) -> None:
    """A reader that leaves early (``| head``) gets no traceback or error on stderr."""
    result = _run_into_closed_pipe(seeded, command)
    assert "Traceback" not in result.stderr
    assert "BrokenPipe" not in result.stderr


@pytest.mark.parametrize("command", ["list", "export"])
def test_closed_stdout_pipe_exits_0(seeded: Path, command: str) -> None:
    """A reader that leaves early is not a failure: the exit code stays 0."""
    assert _run_into_closed_pipe(seeded, command).returncode == 0
