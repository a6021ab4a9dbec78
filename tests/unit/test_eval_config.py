"""The config model and file, and how the AI provider, model and key are chosen."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from agent_replay.config import (
    KEYS,
    Config,
    ConfigError,
    InvalidValueError,
    effective,
    ensure_config,
    load_config,
    mask,
    save_config,
    set_value,
)
from agent_replay.errors import UsageError
from agent_replay.services.evals.errors import NoAIKeyError
from agent_replay.services.evals.providers import provider_for_model, resolve_ai


def test_every_documented_key_is_settable() -> None:
    """The issue's keys, plus the base URLs and the existing redact flag."""
    assert {
        "ai.provider",
        "ai.model",
        "ai.api_keys.anthropic",
        "ai.api_keys.google",
        "ai.api_keys.openai",
        "ai.max_tokens",
    } <= set(KEYS)
    assert all(info.description for info in KEYS.values())
    assert [k for k, info in KEYS.items() if info.secret] == [
        "ai.api_keys.anthropic",
        "ai.api_keys.google",
        "ai.api_keys.openai",
    ]


def test_the_model_fields_carry_their_attribute_docstrings() -> None:
    field = Config.model_fields["ai"].annotation.model_fields["max_tokens"]  # type: ignore[union-attr]
    assert (
        field.description
        == "Most tokens one reply may use (also what a call's cost estimate assumes)."
    )


def test_saved_config_is_private_and_round_trips(tmp_path: Path) -> None:
    """Written 0600, atomically; only what was set is written; unknown keys survive."""
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"version": 1, "future": {"x": 1}}))
    config = set_value(load_config(folder), "ai.max_tokens", "2048")
    path = save_config(folder, config)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data == {"version": 1, "redact": True, "future": {"x": 1}, "ai": {"max_tokens": 2048}}
    assert load_config(folder).ai.max_tokens == 2048


def test_ensure_config_still_writes_the_default_file(tmp_path: Path) -> None:
    path = ensure_config(tmp_path / "new")
    assert json.loads(path.read_text()) == {"version": 1, "redact": True}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_missing_file_means_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path)
    assert (config.ai.provider, config.ai.model, config.ai.max_tokens) == (None, None, 1024)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{nope", "is not valid JSON"),
        ("[1]", "must hold a JSON object"),
        ('{"ai": {"max_tokens": 3}}', "ai.max_tokens: Input should be greater than or equal to 16"),
    ],
)
def test_a_broken_file_is_reported(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("ai.provider", "mistral", "Input should be 'anthropic', 'google' or 'openai'"),
        ("ai.max_tokens", "lots", "valid integer"),
        ("redact", "perhaps", "valid boolean"),
    ],
)
def test_invalid_values_are_refused(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidValueError) as caught:
        set_value(Config(), key, value)
    assert message in caught.value.message


def test_unknown_keys_are_a_usage_error_listing_the_keys() -> None:
    with pytest.raises(UsageError) as caught:
        set_value(Config(), "ai.modle", "x")
    assert "ai.model" in caught.value.hints[0]


def test_mask_shows_only_the_ends() -> None:
    assert mask("sk-ant-api03-abcdefghijklmnop") == "sk-a…mnop"
    assert mask("short") == "****"


def test_environment_keys_win_over_the_file() -> None:
    config = set_value(Config(), "ai.api_keys.google", "from-the-file-0000")
    env = {"GEMINI_API_KEY": "from-gemini-env-1111"}
    assert config.ai.api_key("google", env) == ("from-gemini-env-1111", "$GEMINI_API_KEY")
    env["GOOGLE_API_KEY"] = "from-google-env-2222"
    assert config.ai.api_key("google", env) == ("from-google-env-2222", "$GOOGLE_API_KEY")
    assert config.ai.api_key("google", {}) == ("from-the-file-0000", "file")
    shown = effective(config, "ai.api_keys.google", env)
    assert (shown.shown(), shown.source) == ("from…2222", "$GOOGLE_API_KEY")
    assert "from-google-env-2222" not in json.dumps(shown.to_json())


# --- choosing the provider --------------------------------------------------------------------

ALL = {"ANTHROPIC_API_KEY": "a" * 20, "GOOGLE_API_KEY": "g" * 20, "OPENAI_API_KEY": "o" * 20}


@pytest.mark.parametrize(
    ("env", "provider", "model"),
    [
        (ALL, "anthropic", "claude-haiku-4-5-20251001"),
        (
            {k: v for k, v in ALL.items() if k != "ANTHROPIC_API_KEY"},
            "google",
            "gemini-2.5-flash-lite",
        ),
        ({"OPENAI_API_KEY": "o" * 20}, "openai", "gpt-5.4-nano"),
        ({"GEMINI_API_KEY": "g" * 20}, "google", "gemini-2.5-flash-lite"),
    ],
)
def test_auto_detection_order_and_cheapest_defaults(env: dict, provider: str, model: str) -> None:
    """Anthropic, then Google, then OpenAI: the first with a key, with its cheapest model."""
    settings = resolve_ai(Config(), env=env)
    assert (settings.provider, settings.model) == (provider, model)


def test_no_key_names_every_environment_variable() -> None:
    with pytest.raises(NoAIKeyError) as caught:
        resolve_ai(Config(), env={})
    message = caught.value.message
    for name in ("ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"):
        assert name in message
    assert caught.value.exit_code == 1


def test_a_configured_provider_needs_its_own_key() -> None:
    config = set_value(Config(), "ai.provider", "openai")
    with pytest.raises(NoAIKeyError, match="OpenAI") as caught:
        resolve_ai(config, env={"ANTHROPIC_API_KEY": "a" * 20})
    assert "OPENAI_API_KEY" in caught.value.message


def test_a_model_implies_its_provider() -> None:
    config = set_value(Config(), "ai.model", "gpt-4o-mini")
    settings = resolve_ai(config, env=ALL)
    assert (settings.provider, settings.model) == ("openai", "gpt-4o-mini")


def test_flags_override_the_config() -> None:
    config = set_value(set_value(Config(), "ai.provider", "anthropic"), "ai.model", "claude-x")
    settings = resolve_ai(config, provider="google", env=ALL)
    assert (settings.provider, settings.model) == ("google", "gemini-2.5-flash-lite")
    settings = resolve_ai(config, model="gpt-5.4-mini", env=ALL)
    assert (settings.provider, settings.model) == ("openai", "gpt-5.4-mini")


def test_a_model_of_another_provider_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="not a Google model"):
        resolve_ai(Config(), provider="google", model="claude-haiku-4-5", env=ALL)


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("claude-3-5-sonnet-20241022", "anthropic"),
        ("gemini-2.5-pro", "google"),
        ("models/gemini-2.0-flash", "google"),
        ("gpt-4o", "openai"),
        ("o3-mini", "openai"),
        ("openai/gpt-5.4", "openai"),
        ("llama-3.1-70b", None),
        ("o3x", None),
    ],
)
def test_provider_for_model(model: str, provider: str | None) -> None:
    assert provider_for_model(model) == provider
