"""Headless Chromium for the tests that show a page as a person sees it (imported as
``browser``): Debian's ``chromium`` driven over the DevTools protocol, so a test can wait for
what a page shows (a web app that connects after load), read it, list every request it made,
and take a screenshot.

Whether Chromium must be there: ``AGENT_REPLAY_TEST_CHROMIUM=1`` demands it (a test fails with
a clear message when it is missing); otherwise a test without it checks what it can without a
browser (the page's structure, the HTTP answer) and says so in its output. Nothing skips.

Only loopback and ``file://`` are ever loaded; Chromium runs with networking features off and
a fresh profile per launch, stopped by its pid.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ENV = "AGENT_REPLAY_TEST_CHROMIUM"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
]
SCREENSHOTS = Path(os.environ.get("AGENT_REPLAY_SCREENSHOTS", tempfile.gettempdir()))
"""Where screenshots are kept for a person to look at (``AGENT_REPLAY_SCREENSHOTS``)."""


def chromium() -> str | None:
    """The Chromium binary, or ``None``; fails the test when ``AGENT_REPLAY_TEST_CHROMIUM=1``
    and there is none."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.environ.get(ENV) == "1":
        import pytest

        pytest.fail(
            f"{ENV}=1 but no chromium on PATH: install Debian's package "
            "(apt-get install chromium) or unset the variable",
            pytrace=False,
        )
    if found is None:
        print(f"chromium not found: checked without a browser (set {ENV}=1 to require it)")
    return found


class Browser:
    """One headless Chromium with one page: ``async with Browser(binary, (w, h)) as page``."""

    def __init__(self, binary: str, size: tuple[int, int] = (1280, 900)) -> None:
        self.binary = binary
        self.size = size
        self.requests: list[str] = []
        """Every URL the page requested."""
        self.received = bytearray()
        """Everything the page received over WebSockets (a web app's terminal output)."""
        self._profile = Path(tempfile.mkdtemp(prefix="agent-replay-chromium-"))
        self._process: subprocess.Popen[bytes] | None = None
        self._http: aiohttp.ClientSession | None = None
        self._ws: Any = None
        self._next_id = 0
        self._console: list[str] = []

    async def __aenter__(self) -> Browser:
        self._process = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self._process.poll() is not None:
                raise RuntimeError("chromium did not start (no DevToolsActivePort)")
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        self._http = aiohttp.ClientSession()
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            async with self._http.get(f"{base}/json/list") as answer:
                pages = [t for t in await answer.json() if t.get("type") == "page"]
            if pages:
                break
            await asyncio.sleep(0.05)
        self._ws = await self._http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        width, height = self.size
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        await self.send("Network.enable")
        await self.send("Page.enable")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._http is not None:
            await self._http.close()
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    async def send(self, method: str, **params: Any) -> Any:
        """One DevTools command; returns its result (events seen meanwhile are noted)."""
        self._next_id += 1
        ident = self._next_id
        await self._ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads((await self._ws.receive(timeout=60)).data)
            if message.get("method") == "Network.requestWillBeSent":
                self.requests.append(message["params"]["request"]["url"])
            elif message.get("method") == "Network.webSocketFrameReceived":
                frame = message["params"]["response"]
                data = frame["payloadData"]
                self.received += base64.b64decode(data) if frame["opcode"] == 2 else data.encode()
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll ``expression`` until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never showed: {expression}")
            await asyncio.sleep(0.2)

    async def wait_for_received(self, text: str, timeout: float = 30.0) -> None:
        """Wait until ``text`` has arrived over the page's WebSockets."""
        deadline = time.monotonic() + timeout
        while text.encode() not in self.received:
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never received {text!r}")
            await self.evaluate("0")  # a round trip: frames that arrived meanwhile are read
            await asyncio.sleep(0.2)

    async def press(self, key: str, code: int) -> None:
        """Type one key into the focused element (``press("Enter", 13)``)."""
        text = {"Enter": "\r"}.get(key, key if len(key) == 1 else "")
        base = {"key": key, "code": key, "windowsVirtualKeyCode": code}
        await self.send("Input.dispatchKeyEvent", type="keyDown", text=text, **base)
        await self.send("Input.dispatchKeyEvent", type="keyUp", **base)

    async def screenshot(self, name: str) -> Path:
        """A PNG of the page as shown (kept under ``SCREENSHOTS``); returns its path."""
        result = await self.send("Page.captureScreenshot", format="png")
        path = SCREENSHOTS / name
        path.write_bytes(base64.b64decode(result["data"]))
        print(f"screenshot: {path}")
        return path
