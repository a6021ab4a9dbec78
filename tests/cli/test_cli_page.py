"""``export ID --format html``: one self-contained page, producer text escaped, read in a real
browser (headless Chromium) when there is one, and by an HTML parser always."""

from __future__ import annotations

import stat
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from browser import Browser, chromium

from agent_replay.clock import FixedClock
from agent_replay.services.demo import load_demo
from agent_replay.services.ingest import ingest_trace
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import ensure_database

Run = Callable[..., Any]
HOSTILE = '<img src=x onerror="window.__xss=1"></pre><script>window.__xss=2</script>'


class Page(HTMLParser):
    """What a browser would build: tags with their attributes, and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str, **wanted: str) -> list[dict[str, str | None]]:
        return [
            attrs
            for name, attrs in self.tags
            if name == tag and all(wanted[k] in (attrs.get(k) or "").split() for k in wanted)
        ]


def seed(store_dir: Path, clock: FixedClock) -> None:
    store = ensure_database(store_dir)
    load_demo(store, clock)
    ingest_trace(
        store,
        {
            "id": "trc_hostile",
            "agent_name": f"agent {HOSTILE}",
            "steps": [
                {"step_number": 1, "step_type": "tool_call", "name": HOSTILE, "output": HOSTILE},
                {"step_number": 2, "step_type": "output", "name": "answer", "output": "done"},
            ],
        },
    )
    recorder = TraceRecorder(store, clock=clock)
    recorder.annotate("trc_demo2toolchain", label="wrong-tool", step_number=3, note="bad date")
    recorder.annotate("trc_demo2toolchain", label="needs-review", note=HOSTILE)
    store.close()


async def test_the_page_holds_the_whole_trace_and_fetches_nothing(
    cli: Run, store_dir: Path, clock: FixedClock, tmp_path: Path
) -> None:
    """Timeline, step details, tree and decisions in one file, readable offline."""
    seed(store_dir, clock)
    page_file = tmp_path / "run.html"
    result = cli("export", "demo2", "--format", "html", "--output", page_file)
    assert result.code == 0, result.err
    assert stat.S_IMODE(page_file.stat().st_mode) == 0o600
    html = page_file.read_text(encoding="utf-8")
    page = Page()
    page.feed(html)
    steps = page.all("details", **{"class": "step"})
    assert [s["id"] for s in steps] == [f"step-{n}" for n in range(1, 9)]
    for section in ("timeline", "tree", "decisions"):
        assert page.all("section", id=section), section
    text = " ".join(page.text)
    for name in ("plan", "select_tool", "search_flights", "retry_strategy", "max_tool_attempts"):
        assert name in text
    assert "retry_with_converted_date" in text and "wrong-tool" in text and "bad date" in text
    # Self-contained: no file or address outside the page, one inline script, a CSP.
    assert not page.all("link") and not page.all("img") and not page.all("iframe")
    assert [attrs for tag, attrs in page.tags if tag == "script"] == [{}]
    assert all(
        not (value or "").startswith(("http:", "https:", "//"))
        for _, attrs in page.tags
        for value in attrs.values()
    )
    (csp,) = page.all("meta", **{"http-equiv": "Content-Security-Policy"})
    assert "default-src 'none'" in (csp["content"] or "")

    binary = chromium()
    if binary is None:
        return
    async with Browser(binary, (1280, 1400)) as browser:
        await browser.goto(page_file.as_uri())
        count = await browser.wait_for("document.querySelectorAll('details.step').length")
        assert count == 8
        shown = await browser.evaluate("document.body.innerText")
        assert "search_flights" in shown and "travel-booking-agent" in shown
        await browser.evaluate("document.getElementById('step-3').open = true")
        assert "bad date" in await browser.evaluate("document.getElementById('step-3').innerText")
        await browser.screenshot("agent-replay-page.png")
        assert all(url.startswith(("file:", "data:")) for url in browser.requests)


async def test_producer_text_is_escaped_never_markup(
    cli: Run, store_dir: Path, clock: FixedClock, tmp_path: Path
) -> None:
    """A step name and output made of HTML stay text: no tag, no script runs."""
    seed(store_dir, clock)
    page_file = tmp_path / "hostile.html"
    assert cli("export", "trc_hostile", "--format", "html", "-o", page_file).code == 0
    page = Page()
    page.feed(page_file.read_text(encoding="utf-8"))
    assert not page.all("img") and len([t for t, _ in page.tags if t == "script"]) == 1
    assert HOSTILE in "".join(page.text)
    binary = chromium()
    if binary is None:
        return
    async with Browser(binary) as browser:
        await browser.goto(page_file.as_uri())
        await browser.wait_for("document.querySelectorAll('details.step').length === 2")
        await browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert await browser.evaluate("window.__xss === undefined") is True
        assert HOSTILE in await browser.evaluate("document.body.innerText")


def test_html_takes_exactly_one_trace(cli: Run, store_dir: Path, clock: FixedClock) -> None:
    """Two ids (or none) is a usage error, before anything is written."""
    seed(store_dir, clock)
    assert cli("export", "demo1", "demo2", "--format", "html").code == 2
    assert cli("export", "--format", "html").code == 2
