"""The browser front end behind ``agent-replay web``: textual-serve's server, in its own process.

textual-serve (the Textual project's own server) answers HTTP with a page that runs a terminal
in the browser, and starts the app's command (``agent-replay tui``) for each browser session,
talking to it over pipes with Textual's web driver. So what the browser shows is the same app,
on the same store.

A front end, like ``app``: textual-serve brings aiohttp and Rich, so no headless module may
import it (the import contracts, pyproject.toml). The headless ``agent-replay web`` command
(``commands/web``) checks the store and the address, then hands its process over to this
module (``python -m agent_replay.web_server HOST PORT COMMAND``) rather than importing it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from agent_replay.errors import EXIT_FAILURE, EXIT_USAGE

TITLE = "agent-replay"
"""The browser tab's title."""


def serve(command: str, *, host: str, port: int) -> None:
    """Serve ``command`` (a shell command line starting the app) on ``host:port`` until
    Ctrl+C or SIGTERM (textual-serve stops on both).

    Raises:
        OSError: the address can't be listened on.
    """
    from textual_serve.server import Server  # deferred: aiohttp and Rich, only when serving

    Server(command, host=host, port=port, title=TITLE).serve()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agent_replay.web_server HOST PORT COMMAND``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or not args[1].isdigit():
        print("usage: python -m agent_replay.web_server HOST PORT COMMAND", file=sys.stderr)
        return EXIT_USAGE
    host, port, command = args[0], int(args[1]), args[2]
    try:
        serve(command, host=host, port=port)
    except OSError as exc:
        print(f"error: cannot serve on {host}:{port}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
