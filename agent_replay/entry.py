"""The console-script entry point: ``hook`` takes a stdlib-only fast path, everything else
goes to the click CLI.

``hook`` runs before and after every tool call of the user's agent; importing click, peewee
and pydantic would triple its start-up. So ``hook`` (in capture mode) is answered here with
``services/hook/fast`` before any of them is imported (``hook --enforce`` too, through
``services/hook/enforce``); ``hook --help`` and anything unusual fall through to the full CLI.
``list`` and ``show`` on a local store are answered by ``commands/fast_read`` the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run agent-replay and return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        from agent_replay.services.hook import fast

        code = fast.run(args[1:], exiting=argv is None)
        if code is not None:
            if argv is None:  # the process itself: skip the interpreter's teardown
                _exit_now(code)
            return code
    elif args[:1] in (["list"], ["show"]):
        from agent_replay.commands import fast_read

        code = fast_read.run(args)
        if code is not None:
            return code
    from agent_replay.cli import main as cli_main

    code = cli_main(args)
    if args[:1] == ["hook"] and code not in (0, None) and not _wants_help(args):
        # A harness treats some exit codes as "block the tool call" (Claude Code: 2): capture
        # must never do that, even for a mistyped flag. The error was printed on stderr.
        # Under --enforce blocking is the point, and a broken registration fails closed.
        if "--enforce" not in args:
            return 0
    return code


def _wants_help(args: list[str]) -> bool:
    return "--help" in args or "-h" in args


def _exit_now(code: int) -> None:
    """End the hook process at once: what it printed flushed, no interpreter teardown (a few
    ms of the hook's budget) and no closing of the store's connection (``hook.inbox.queue``)."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
