"""``agent-replay web``: the app served over HTTP by textual-serve, on loopback by default;
fetched as a browser would, and shown in headless Chromium when there is one."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Browser, chromium

from agent_replay.clock import FixedClock
from agent_replay.commands.web import is_loopback
from agent_replay.services.demo import load_demo
from agent_replay.store.db import ensure_database


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(store_dir: Path, clock: FixedClock) -> Iterator[str]:
    """``agent-replay web`` on the demo store, on a free loopback port; its base URL."""
    store = ensure_database(store_dir)
    load_demo(store, clock)
    store.close()
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_replay", "web", "--port", str(port)],
        env={**os.environ, "AGENT_REPLAY_DIR": str(store_dir)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its app processes too are stopped by the group's id
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/", timeout=2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"agent-replay web did not answer: {process.stderr.read()!r}"
                    ) from None
                time.sleep(0.1)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        assert process.stderr is not None
        process.stderr.close()


async def test_web_serves_the_app_and_a_browser_shows_the_trace_list_and_steps(server: str) -> None:
    """The page and its script come over HTTP on 127.0.0.1; in Chromium, the app's trace
    list arrives over the page's WebSocket and is on screen, and Enter opens a trace's
    timeline with its steps."""
    with urllib.request.urlopen(server + "/", timeout=10) as answer:
        assert answer.status == 200
        page = answer.read().decode()
    assert "textual.js" in page and f'data-session-websocket-url="ws://{server[7:]}/ws"' in page
    with urllib.request.urlopen(server + "/static/js/textual.js", timeout=10) as script:
        assert script.status == 200 and len(script.read()) > 10_000
    binary = chromium()
    if binary is None:
        return
    async with Browser(binary, (1280, 800)) as browser:
        await browser.goto(server + "/")
        for trace_id in ("trc_demo5regressed", "trc_demo2toolchain", "trc_demo1ungrounded"):
            await browser.wait_for_received(trace_id, timeout=60)
        await browser.wait_for("document.body.classList.contains('-first-byte')")
        await asyncio.sleep(0.5)  # the terminal paints what arrived
        shot = await browser.screenshot("agent-replay-web.png")
        assert shot.stat().st_size > 20_000  # a painted terminal, not the blank start page
        # Enter on the first row (the newest trace) opens its timeline: its steps arrive.
        await browser.evaluate(
            "document.querySelector('textarea, .xterm-helper-textarea')?.focus()"
        )
        await browser.press("Enter", 13)
        for step in ("get_schema", "plan"):
            await browser.wait_for_received(step, timeout=60)
        await asyncio.sleep(0.5)
        shot = await browser.screenshot("agent-replay-web-timeline.png")
        assert shot.stat().st_size > 20_000


def test_the_server_module_takes_host_port_and_command() -> None:
    """``python -m agent_replay.web_server`` is an internal entry point: anything but its three
    arguments is a usage error."""
    done = subprocess.run(
        [sys.executable, "-m", "agent_replay.web_server", "127.0.0.1", "not-a-port", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "usage:" in done.stderr


def test_binding_beyond_loopback_warns(store_dir: Path, clock: FixedClock) -> None:
    """A non-loopback --host is announced on stderr before the server starts (here it can't
    bind: a documentation address, so nothing listens and nothing is sent)."""
    ensure_database(store_dir).close()
    done = subprocess.run(
        [sys.executable, "-m", "agent_replay", "web", "--host", "192.0.2.1", "--port", "9"],
        env={**os.environ, "AGENT_REPLAY_DIR": str(store_dir)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "warning: serving on 192.0.2.1:9, not loopback" in done.stderr
    assert "no login" in done.stderr and done.returncode == 1
    # The server (the front-end module the command hands its process to) says why, in a line.
    assert "error: cannot serve on 192.0.2.1:9:" in done.stderr
    assert "Traceback" not in done.stderr


def test_loopback_addresses() -> None:
    """Loopback is 127.0.0.0/8, ::1 and localhost; anything else warns."""
    assert all(map(is_loopback, ["127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "192.168.1.5", "example.com"]))
