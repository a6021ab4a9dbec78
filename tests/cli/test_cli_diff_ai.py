"""``diff A B --ai``: an AI account of the divergence, through a real SDK to a local fake API."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from aifake import KEY, FakeAI, isolate_env  # noqa: E402

Run = Callable[..., Any]


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def fake() -> Iterator[FakeAI]:
    with FakeAI() as server:
        yield server


@pytest.fixture
def demo(cli: Run) -> None:
    assert cli("demo").code == 0


def test_diff_ai_adds_the_models_account(cli: Run, demo: None, fake: FakeAI, monkeypatch) -> None:
    """With a key, --ai asks the provider once and adds its account to the JSON report."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
    result = cli("diff", "trc_demo4goodrun", "trc_demo5regressed", "--ai", "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["ai"]
    assert [r.provider for r in fake.requests] == ["openai"]


def test_diff_ai_without_a_key_names_the_variables(cli: Run, demo: None) -> None:
    """No key: exit 1 before any work, naming the environment variables."""
    result = cli("diff", "trc_demo4goodrun", "trc_demo5regressed", "--ai")
    assert result.code == 1
    assert "ANTHROPIC_API_KEY" in result.err and "OPENAI_API_KEY" in result.err


def test_diff_ai_respects_the_cost_cap(cli: Run, demo: None, fake: FakeAI, monkeypatch) -> None:
    """A cap too small for the call stops it: the diff still prints, exit 1, nothing sent."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
    result = cli("diff", "trc_demo4goodrun", "trc_demo5regressed", "--ai", "--max-cost", "0")
    assert result.code == 1
    assert "inserted" in result.out
    assert fake.requests == []


def test_fork_rerun_records_the_models_new_reply(
    cli: Run, demo: None, fake: FakeAI, monkeypatch
) -> None:
    """fork --rerun re-sends the recorded llm_call (gpt-4o, step 5 of the ungrounded demo) with
    the edit and the fork's step 5 holds the new reply."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
    result = cli("fork", "trc_demo1ungrounded", "--from-step", "5", "--rerun", "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert [r.provider for r in fake.requests] == ["openai"]
    shown = json.loads(cli("show", report["trace_id"], "--json").out)
    step = next(s for s in shown["steps"] if s["step_number"] == 5)
    assert step["output"] == "A rerun answer: refunds take 5-7 business days."
    assert shown["parent_trace_id"] == "trc_demo1ungrounded"


def test_fork_rerun_refuses_step_one(cli: Run, demo: None) -> None:
    """--rerun at step 1 (the trace input) is a usage error."""
    assert cli("fork", "trc_demo1ungrounded", "--from-step", "1", "--rerun").code == 2


def test_diff_ai_with_a_200_html_reply_keeps_the_diff(
    cli: Run, demo: None, fake: FakeAI, monkeypatch
) -> None:
    """A proxy's HTML page instead of the API's JSON: the diff prints, the AI part fails with a
    message naming the problem, exit 1, never "unexpected"."""
    from aifake import Reply

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
    fake.queue(Reply(raw=b"<html><h1>502 Bad Gateway</h1></html>", content_type="text/html"))
    result = cli("diff", "trc_demo4goodrun", "trc_demo5regressed", "--ai")
    assert result.code == 1
    assert "inserted" in result.out  # the deterministic diff was printed
    assert "answered 200 with a body that is not JSON" in result.err
    assert "502 Bad Gateway" in result.err and "unexpected" not in result.err
