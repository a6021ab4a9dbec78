"""``agent-replay proxy`` as a real process: it prints where it listens, records what an agent
(the real anthropic SDK) sends through it, ends its traces on SIGTERM/SIGINT and exits 0,
stays headless; ``--replay`` serves the recording with the upstream stopped, answers 409 past
``--until-step`` under ``--then fail``, and ``show`` marks the served steps of the fork."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from aifake import isolate_env  # noqa: E402
from proxykit import ANTHROPIC_MODEL, TOOL_TURNS, ScriptedModel  # noqa: E402

LISTENING = re.compile(r"listening on (http://\S+)")

HEADLESS = """
import sys
from agent_replay.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "rich"))
assert not heavy, f"imported {heavy[:5]}"
sys.exit(code)
"""


class Proxy:
    """A running ``agent-replay proxy`` process (in an interpreter that checks, at exit, that
    Textual and Rich were never imported)."""

    def __init__(self, store_dir: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HEADLESS, "proxy", "--port", "0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "AGENT_REPLAY_DIR": str(store_dir)},
        )
        assert self.process.stderr is not None
        self.lines: list[str] = []
        while True:
            line = self.process.stderr.readline()
            if not line:
                raise AssertionError(f"the proxy exited: {''.join(self.lines)}")
            self.lines.append(line)
            match = LISTENING.search(line)
            if match:
                self.url = match.group(1)
                break

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.process.send_signal(sig)
        self.process.wait(60)
        assert self.process.stderr is not None
        # read() through the same text wrapper: lines it buffered past "listening" stay
        err = self.process.stderr.read()
        return self.process.returncode, "".join(self.lines) + err

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def upstream() -> Iterator[ScriptedModel]:
    model = ScriptedModel()
    yield model
    model.stop()


def agent(url: str) -> list[dict[str, Any]]:
    """A streamed, tool-using anthropic SDK agent (what it saw, turn by turn)."""
    import anthropic

    client = anthropic.Anthropic(api_key="sk-ant-api03-" + "x" * 40, base_url=url, max_retries=0)
    tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather?"}]
    seen = []
    for _ in range(TOOL_TURNS + 1):
        with client.messages.stream(
            model=ANTHROPIC_MODEL,
            max_tokens=100,
            messages=messages,
            tools=tools,  # type: ignore[arg-type]
        ) as events:
            message = events.get_final_message()
        seen.append(message.model_dump())
        uses = [b for b in message.content if b.type == "tool_use"]
        if not uses:
            break
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in message.content],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u.id, "content": "sun"} for u in uses
                ],
            }
        )
    return seen


def ar(store_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_replay", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "AGENT_REPLAY_DIR": str(store_dir)},
        timeout=60,
    )


def test_record_then_replay_with_the_upstream_stopped(
    store_dir: Path, upstream: ScriptedModel
) -> None:
    """Recorded, stopped with SIGTERM; replayed, stopped with SIGINT (Ctrl-C): both exit 0
    after writing everything."""
    proxy = Proxy(store_dir, "--upstream", f"anthropic={upstream.url}")
    try:
        recorded = agent(proxy.url)
        code, err = proxy.stop(signal.SIGTERM)
    finally:
        proxy.kill()
    assert code == 0, err
    assert f"stopped: {TOOL_TURNS + 1} request(s), {TOOL_TURNS + 1} recorded" in err
    (trace,) = json.loads(ar(store_dir, "list", "--json").stdout)
    assert trace["status"] == "completed" and trace["step_count"] == TOOL_TURNS + 1
    assert f"trace {trace['id']} ended" in err

    dead = upstream.url
    upstream.stop()
    replay = Proxy(
        store_dir,
        "--upstream",
        f"anthropic={dead}",
        "--replay",
        trace["id"][:10],
        "--until-step",
        "2",
        "--then",
        "fail",
    )
    try:
        import anthropic

        with pytest.raises(anthropic.APIStatusError) as caught:
            agent(replay.url)
        code, err = replay.stop(signal.SIGINT)
    finally:
        replay.kill()
    assert code == 0, err
    assert caught.value.status_code == 409 and "ended after step 2" in str(caught.value)
    assert f"replaying {trace['id']}: 2 recorded model call(s) (steps up to 2), then fail" in err
    assert "3 request(s), 3 recorded, 0 passed through, 2 served" in err and "1 refused" in err
    fork_id = re.search(r"re-run recorded as fork (trc_\S+)", err).group(1)  # type: ignore[union-attr]

    shown = ar(store_dir, "show", fork_id)
    assert shown.returncode == 0
    assert f"Fork of  {trace['id']} at step 3" in shown.stdout
    assert shown.stdout.count(f"↺ replayed from {trace['id']}") == 2
    fork = json.loads(ar(store_dir, "show", fork_id, "--json").stdout)
    assert [s["output"] for s in fork["steps"][:2]] == [
        {
            "text": m["content"][0]["text"],
            "tool_calls": [
                {
                    "id": m["content"][1]["id"],
                    "name": "get_weather",
                    "input": m["content"][1]["input"],
                }
            ],
            "stop_reason": "tool_use",
        }
        for m in recorded[:2]
    ]
    diff = ar(store_dir, "diff", trace["id"], fork_id)
    assert "Steps: 2 matched, 1 changed" in diff.stdout


def test_usage_errors_exit_2(cli: Any) -> None:
    for args, message in [
        (["--trace-per", "user"], "--trace-per must be session, process or fixed:ID"),
        (["--upstream", "mistral=http://x"], "expected anthropic=URL"),
        (["--until-step", "3"], "need --replay TRACE"),
    ]:
        result = cli("proxy", "--port", "0", *args)
        assert result.code == 2, (args, result.err)
        assert message in result.err
    missing = cli("proxy", "--port", "0", "--replay", "trc_missing")
    assert missing.code == 1  # as `show` of a missing trace
    assert "no trace matches 'trc_missing'" in missing.err


def test_a_busy_port_is_a_usage_error(store_dir: Path, upstream: ScriptedModel) -> None:
    port = upstream.url.rsplit(":", 1)[1]
    result = ar(store_dir, "proxy", "--port", port)
    assert result.returncode == 2
    assert "cannot listen" in result.stderr and "--port" in result.stderr
