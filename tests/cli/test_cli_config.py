"""``agent-replay config``: list, get, set, unset and test-ai; keys masked in all output; the
environment over the file; a private config file."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from aifake import KEY, FakeAI, isolate_env, point_sdks_at  # noqa: E402

Run = Callable[..., Any]
SECRET = "sk-ant-api03-SECRETSECRETSECRET-7777"


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def fake() -> Iterator[FakeAI]:
    with FakeAI() as server:
        yield server


def settings(cli: Run) -> dict[str, dict[str, Any]]:
    return {s["key"]: s for s in cli("config", "list", "--json").json()["settings"]}


def test_list_shows_defaults_and_no_provider(cli: Run, store_dir: Path) -> None:
    result = cli("config", "list")
    assert result.code == 0
    assert "ai.provider             (auto)" in result.out
    assert "ai.max_tokens           1024                  default" in result.out
    assert "AI: no AI provider key configured" in result.out
    assert f"file: {store_dir / 'config.json'}" in result.out


def test_config_without_a_subcommand_lists(cli: Run) -> None:
    assert cli("config").out == cli("config", "list").out


def test_set_get_unset_round_trip(cli: Run, store_dir: Path) -> None:
    assert cli("config", "set", "ai.provider", "google").code == 0
    assert cli("config", "set", "ai.max_tokens", "2048").out == "set ai.max_tokens = 2048\n"
    assert cli("config", "get", "ai.provider").out == "google\n"
    assert settings(cli)["ai.max_tokens"] == {
        "key": "ai.max_tokens",
        "value": 2048,
        "source": "file",
        "secret": False,
    }
    assert cli("config", "unset", "ai.provider").out == "unset ai.provider\n"
    assert cli("config", "get", "ai.provider").out == ""
    data = json.loads((store_dir / "config.json").read_text())
    assert data == {"version": 1, "redact": True, "ai": {"max_tokens": 2048}}


def test_the_config_file_is_private(cli: Run, store_dir: Path) -> None:
    cli("config", "set", "ai.api_keys.anthropic", SECRET)
    assert stat.S_IMODE(os.stat(store_dir / "config.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store_dir).st_mode) == 0o700


def test_keys_are_masked_in_every_output(cli: Run, store_dir: Path) -> None:
    """set, get, list, and their --json forms never print a stored key."""
    outputs = [
        cli("config", "set", "ai.api_keys.anthropic", SECRET),
        cli("config", "set", "ai.api_keys.anthropic", SECRET, "--json"),
        cli("config", "get", "ai.api_keys.anthropic"),
        cli("config", "get", "ai.api_keys.anthropic", "--json"),
        cli("config", "list"),
        cli("config", "list", "--json"),
    ]
    for result in outputs:
        assert result.code == 0
        assert SECRET not in result.out + result.err
    assert outputs[0].out == "set ai.api_keys.anthropic = sk-a…7777\n"
    assert outputs[2].out == "sk-a…7777\n"
    assert settings(cli)["ai.api_keys.anthropic"]["value"] == "sk-a…7777"
    assert "AI: Anthropic claude-haiku-4-5-20251001 (key from file)" in outputs[4].out
    assert json.loads((store_dir / "config.json").read_text())["ai"]["api_keys"] == {
        "anthropic": SECRET
    }


def test_a_key_can_come_from_stdin(
    cli: Run, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    result = cli("config", "set", "ai.api_keys.openai", "-")
    assert result.code == 0 and SECRET not in result.out
    stored = json.loads((store_dir / "config.json").read_text())
    assert stored["ai"]["api_keys"]["openai"] == SECRET


def test_environment_keys_take_priority_and_list_says_so(
    cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli("config", "set", "ai.api_keys.google", "file-key-000000000000")
    monkeypatch.setenv("GEMINI_API_KEY", "env-gemini-key-11111111")
    google = settings(cli)["ai.api_keys.google"]
    assert (google["value"], google["source"]) == ("env-…1111", "$GEMINI_API_KEY")
    result = cli("config", "set", "ai.api_keys.google", "another-file-key-2222")
    assert "note: $GEMINI_API_KEY is set and takes priority over config.json" in result.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("set", "ai.provider", "mistral"), "Input should be 'anthropic', 'google' or 'openai'"),
        (("set", "ai.max_tokens", "8"), "greater than or equal to 16"),
        (("get", "ai.temperature"), "unknown config key 'ai.temperature'"),
        (("unset", "nope"), "unknown config key 'nope'"),
    ],
)
def test_bad_keys_and_values_are_usage_errors(cli: Run, args: tuple[str, ...], message: str):
    result = cli("config", *args)
    assert result.code == 2
    assert message in result.err


def test_a_corrupt_config_file_is_reported(cli: Run, store_dir: Path) -> None:
    store_dir.mkdir(parents=True)
    (store_dir / "config.json").write_text("{oops")
    result = cli("config", "list")
    assert result.code == 1 and "is not valid JSON" in result.err


def test_test_ai_reports_provider_model_and_latency(
    cli: Run, fake: FakeAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_sdks_at(monkeypatch, fake, "google")
    result = cli("config", "test-ai")
    assert result.code == 0, result.err
    assert result.out.startswith("ok: Google gemini-2.5-flash-lite answered in ")
    assert "key from $GOOGLE_API_KEY" in result.out
    (request,) = fake.requests
    assert request.task == "test-ai"
    assert request.body["generationConfig"]["maxOutputTokens"] == 64
    data = cli("config", "test-ai", "--provider", "google", "--json").json()
    assert data["ok"] and data["provider"] == "google" and data["latency_ms"] >= 0
    assert data["cost_usd"] > 0 and data["reply"] == '{"ok": true}'


def test_test_ai_uses_the_configured_base_url(cli: Run, fake: FakeAI) -> None:
    cli("config", "set", "ai.api_keys.openai", KEY)
    cli("config", "set", "ai.base_urls.openai", f"{fake.url}/v1")
    result = cli("config", "test-ai", "--json")
    assert result.code == 0, result.err
    assert result.json()["model"] == "gpt-5.4-nano"
    assert fake.requests[0].provider == "openai"


def test_test_ai_with_a_rejected_key_exits_1(
    cli: Run, fake: FakeAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_sdks_at(monkeypatch, fake)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong-000000000000")
    result = cli("config", "test-ai", "--json")
    assert result.code == 1
    error = result.json()
    assert error["ok"] is False
    assert error["error"] == "Anthropic rejected the API key (401: invalid x-api-key)"
    assert "the key comes from $ANTHROPIC_API_KEY" in error["hints"]
    assert "sk-ant-wrong-000000000000" not in result.out + result.err


def test_test_ai_without_a_key_names_the_variables(cli: Run) -> None:
    result = cli("config", "test-ai")
    assert result.code == 1
    assert "ANTHROPIC_API_KEY, GOOGLE_API_KEY (or GEMINI_API_KEY), OPENAI_API_KEY" in result.err


@pytest.mark.parametrize("sub", ["list", "get", "set", "unset", "test-ai"])
def test_every_subcommand_has_help_with_examples(cli: Run, sub: str) -> None:
    result = cli("config", sub, "--help")
    assert result.code == 0
    assert f"agent-replay config {sub}" in result.out.split("Examples:", 1)[1]


@pytest.mark.parametrize("content_type", ["text/html", "application/json"])
def test_test_ai_with_a_200_html_reply_exits_1_naming_it(
    cli: Run, fake: FakeAI, monkeypatch: pytest.MonkeyPatch, content_type: str
) -> None:
    from aifake import Reply

    point_sdks_at(monkeypatch, fake, "anthropic")
    fake.queue(Reply(raw=b"<html>captive portal</html>", content_type=content_type))
    result = cli("config", "test-ai", "--json")
    assert result.code == 1
    error = result.json()
    assert error["ok"] is False
    assert "answered 200 with a body that is not JSON" in error["error"]
    assert "unexpected" not in result.err
