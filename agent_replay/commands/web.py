"""``agent-replay web``: the app in a browser, served by textual-serve.

textual-serve (the Textual project's own server) answers HTTP with a page that runs a terminal
in the browser, and starts ``agent-replay tui`` for each browser session, talking to it over
pipes with Textual's web driver. So what the browser shows is the same app, on the same store.

This command stays headless: it checks the store (no store, no server) and the address, then
hands its process over to the front-end module that runs the server (``web_server``, which
alone imports textual-serve, with aiohttp and Rich): ``exec`` where the system has it, so the
server is this process (its pid, its signals, its exit code); a child process elsewhere.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import sys
from pathlib import Path

import click

from agent_replay.commands._common import dir_option

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command(name="web")
@click.option("--port", type=click.IntRange(min=1, max=65535), default=8000, show_default=True)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but loopback lets others on the network in.",
)
@dir_option
def command(port: int, host: str, store_dir: Path | None) -> int:
    """Serve the app in a browser: open http://127.0.0.1:PORT (Ctrl+C stops the server).

    Each browser tab gets its own app on the same store, as `agent-replay tui` would show it.
    The server listens on loopback only unless --host says otherwise; there is no login, so
    binding to another address lets anyone who can reach it browse and change the store (a
    warning says so on stderr).

    \b
    Examples:
      agent-replay web
      agent-replay web --port 8080 --dir ~/project/.agent-replay
      agent-replay web --host 0.0.0.0   # the whole network: read the warning
    """
    from agent_replay.commands._common import open_or_create, resolve_db_url, store_label

    store = open_or_create(store_dir)  # fail now (no store, no server), not in the browser
    store.close()
    url = resolve_db_url()
    argv = [sys.executable, "-m", "agent_replay", "tui"]
    if url is not None:
        os.environ["AGENT_REPLAY_DB_URL"] = url  # the environment, not argv: it may hold a password
    else:
        from agent_replay.commands._common import resolve_store_dir

        argv[3:3] = ["--dir", str(resolve_store_dir(store_dir).resolve())]
    if not is_loopback(host):
        click.echo(
            f"warning: serving on {host}:{port}, not loopback: anyone who can reach this "
            "address can browse the store and change it (fork, evaluate, delete); there is "
            "no login. Use --host 127.0.0.1 to keep it on this machine.",
            err=True,
        )
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    click.echo(f"serving {store_label(store_dir)} on http://{shown}:{port}", err=True)
    server = [sys.executable, "-m", "agent_replay.web_server", host, str(port), shlex.join(argv)]
    return run_server(server)


def run_server(argv: list[str]) -> int:
    """Run the server's command line: in this process (``exec``) on POSIX, else as a child
    (Ctrl+C reaches it too, and it stops by itself; its exit code is returned)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execv(argv[0], argv)
    import subprocess

    with subprocess.Popen(argv) as child:
        try:
            return child.wait()
        except KeyboardInterrupt:
            return child.wait()
