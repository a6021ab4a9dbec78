"""User configuration: a typed model stored as ``<dir>/config.json`` (mode 0600).

What the settings are (``Config`` and its sections, each field with an attribute docstring),
how the file is read and written, the dotted keys ``agent-replay config`` edits, and where an
AI provider's key comes from. The environment variables ``ANTHROPIC_API_KEY``,
``GOOGLE_API_KEY`` (then ``GEMINI_API_KEY``) and ``OPENAI_API_KEY`` take priority over the file.
Secrets never leave this module unmasked except through ``AIConfig.api_key`` (for the SDKs).

Imports pydantic and the stdlib only: never the store, the services' SDKs, Textual or Rich.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_replay.errors import AgentReplayError, UsageError
from agent_replay.paths import CONFIG_NAME, make_private_dir, write_private

ProviderName = Literal["anthropic", "google", "openai"]
PROVIDERS: tuple[ProviderName, ...] = get_args(ProviderName)
"""Every AI provider, in auto-detection order (the first with a key wins)."""

ENV_KEYS: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
}
"""The environment variables holding each provider's key, in priority order."""

DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "claude-haiku-4-5-20251001",
    "google": "gemini-2.5-flash-lite",
    "openai": "gpt-5.4-nano",
}
"""Each provider's cheapest capable model: the default when ``ai.model`` is not set."""

PROVIDER_LABELS: dict[str, str] = {"anthropic": "Anthropic", "google": "Google", "openai": "OpenAI"}

DEFAULT_CONFIG: dict[str, object] = {"version": 1, "redact": True}
"""What ``init`` writes: every other setting takes its default until it is set."""


class ConfigError(AgentReplayError):
    """The config file can't be read or holds invalid settings."""


class InvalidValueError(UsageError):
    """A value given for a key is not valid for it (a usage error: exit 2)."""


class _Section(BaseModel):
    """Shared model settings: docstrings become field descriptions; unknown keys are kept, so a
    file written by a newer build survives a round trip through this one."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)


class ApiKeys(_Section):
    """API keys, one per provider. An environment variable overrides each."""

    anthropic: str | None = None
    """Anthropic API key (``ANTHROPIC_API_KEY`` takes priority)."""
    google: str | None = None
    """Google Gemini API key (``GOOGLE_API_KEY``, then ``GEMINI_API_KEY``, take priority)."""
    openai: str | None = None
    """OpenAI API key (``OPENAI_API_KEY`` takes priority)."""


class BaseUrls(_Section):
    """API endpoints, for gateways, proxies and compatible servers. Unset: the SDK's default
    (which honours ``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL``, ``OPENAI_BASE_URL``)."""

    anthropic: str | None = None
    """Base URL of the Anthropic Messages API."""
    google: str | None = None
    """Base URL of the Gemini API."""
    openai: str | None = None
    """Base URL of the OpenAI API (include ``/v1``)."""


class AIConfig(_Section):
    """The AI provider used by ``eval --ai``, ``diff --ai`` and ``fork --rerun``."""

    provider: ProviderName | None = None
    """anthropic, google or openai; unset: the first with a key (Anthropic, Google, OpenAI)."""
    model: str | None = None
    """Model name; unset: the provider's cheapest (claude-haiku-4-5-20251001,
    gemini-2.5-flash-lite, gpt-5.4-nano)."""
    api_keys: ApiKeys = Field(default_factory=ApiKeys)
    """API keys per provider."""
    base_urls: BaseUrls = Field(default_factory=BaseUrls)
    """API endpoints per provider."""
    max_tokens: int = Field(default=1024, ge=16, le=65536)
    """Most tokens one reply may use (also what a call's cost estimate assumes)."""

    def api_key(
        self, provider: str, env: Mapping[str, str] | None = None
    ) -> tuple[str | None, str | None]:
        """The key for ``provider`` and where it came from (``$ANTHROPIC_API_KEY``, ``file``).

        The environment wins over the file; ``(None, None)`` when neither has one.
        """
        env = os.environ if env is None else env
        for name in ENV_KEYS[provider]:
            value = (env.get(name) or "").strip()
            if value:
                return value, f"${name}"
        stored = getattr(self.api_keys, provider)
        if stored:
            return str(stored), "file"
        return None, None


class Config(_Section):
    """Everything in ``config.json``."""

    version: int = 1
    """The file's format version."""
    redact: bool = True
    """Redact secrets (API keys, tokens, passwords) before anything is recorded."""
    ai: AIConfig = Field(default_factory=AIConfig)
    """The AI provider, model, keys and reply size."""


# --- the file ------------------------------------------------------------------------------


def config_path(store_dir: Path) -> Path:
    """``<dir>/config.json``."""
    return store_dir / CONFIG_NAME


def ensure_config(store_dir: Path) -> Path:
    """Write the default config file if there is none; return its path."""
    make_private_dir(store_dir)
    path = config_path(store_dir)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(DEFAULT_CONFIG, handle, indent=2)
            handle.write("\n")
    return path


def load_config(store_dir: Path) -> Config:
    """The settings in ``<dir>/config.json`` (defaults when there is no file).

    Raises:
        ConfigError: the file is unreadable, not JSON, or holds an invalid value.
    """
    path = config_path(store_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON: {exc}",
            hints=["fix the file, or remove it to start from the defaults"],
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"{path}: {_problems(exc)}",
            hints=["`agent-replay config set KEY VALUE` writes valid values"],
        ) from None


def save_config(store_dir: Path, config: Config) -> Path:
    """Write the settings atomically (a private temp file renamed over the old one), mode 0600.

    Only values that were set are written, so a default that changes in a later release
    reaches users who never set it.
    """
    path = config_path(store_dir)
    data = {**DEFAULT_CONFIG, **config.model_dump(mode="json", exclude_unset=True)}
    write_private(path, json.dumps(data, indent=2) + "\n")
    return path


# --- dotted keys ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyInfo:
    """One settable key of the config (a leaf field)."""

    key: str
    """The dotted key, e.g. ``ai.api_keys.openai``."""
    description: str
    """The field's attribute docstring."""
    secret: bool
    """Whether the value is masked in all output."""
    kind: Literal["bool", "int", "text"] = "text"
    """How text given on the command line is parsed."""


def _kind(annotation: Any) -> Literal["bool", "int", "text"]:
    args = set(get_args(annotation)) or {annotation}
    if bool in args:
        return "bool"
    if int in args:
        return "int"
    return "text"


def _leaves(model: type[BaseModel], prefix: str = "") -> Iterator[KeyInfo]:
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _leaves(annotation, f"{key}.")
        else:
            description = " ".join((info.description or "").split())
            secret = key.startswith("ai.api_keys.")
            yield KeyInfo(key, description, secret, _kind(annotation))


KEYS: dict[str, KeyInfo] = {info.key: info for info in _leaves(Config) if info.key != "version"}
"""Every key ``agent-replay config`` reads and writes, in the model's order."""


def key_info(key: str) -> KeyInfo:
    """The settable key named ``key``.

    Raises:
        UsageError: no such key (the message lists them).
    """
    info = KEYS.get(key)
    if info is None:
        raise UsageError(f"unknown config key {key!r}", hints=[f"keys: {', '.join(KEYS)}"])
    return info


def get_value(config: Config, key: str) -> Any:
    """The value stored for ``key`` (``None`` when unset), before any environment override."""
    key_info(key)
    node: Any = config
    for part in key.split("."):
        node = getattr(node, part)
    return node


def set_value(config: Config, key: str, raw: str | None) -> Config:
    """A copy of ``config`` with ``key`` set from text (``None`` resets it to its default).

    Text is parsed for the field's type: ``1024`` for a number, ``true``/``false`` for a flag.

    Raises:
        UsageError: unknown key.
        InvalidValueError: the value is not valid for the key (the message says why).
    """
    info = key_info(key)
    data = config.model_dump(mode="json", exclude_unset=True)
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    if raw is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = _parse(raw, info.kind)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        shown = "****" if info.secret else repr(raw)
        raise InvalidValueError(f"invalid value {shown} for {key}: {_problems(exc)}") from None


def _parse(raw: str, kind: str) -> Any:
    """Command-line text as the key's type: ``1024`` for a number, ``true``/``false``/``yes``/
    ``no`` for a flag. Anything unparsable is passed on as text, for pydantic to reject with
    its own message."""
    text = raw.strip()
    lowered = text.lower()
    if kind == "bool" and lowered in ("true", "false", "yes", "no", "on", "off", "1", "0"):
        return lowered in ("true", "yes", "on", "1")
    if kind == "int" and text.lstrip("-").isdigit():
        return int(text)
    return text or None


def _problems(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return "; ".join(parts)


def mask(value: Any) -> str:
    """A secret shown safely: its first and last four characters at most (``sk-a…9xQz``)."""
    if value is None:
        return ""
    text = str(value)
    if len(text) < 12:
        return "****"
    return f"{text[:4]}…{text[-4:]}"


@dataclass(frozen=True)
class Effective:
    """A key's value as the program will use it, and where it came from."""

    key: str
    value: Any
    """The value in effect (``None``: unset; the program picks, see ``default``)."""
    source: str
    """``file``, ``default`` or ``$ENV_VAR``."""
    secret: bool

    def shown(self) -> str:
        """The value for display: masked when secret, ``""`` when unset."""
        if self.value is None:
            return ""
        if self.secret:
            return mask(self.value)
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        return str(self.value)

    def to_json(self) -> dict[str, Any]:
        value = self.shown() if self.secret and self.value is not None else self.value
        return {"key": self.key, "value": value, "source": self.source, "secret": self.secret}


def effective(config: Config, key: str, env: Mapping[str, str] | None = None) -> Effective:
    """The value of ``key`` in effect: an API key from the environment wins over the file."""
    info = key_info(key)
    if info.secret:
        provider = key.rsplit(".", 1)[1]
        value, source = config.ai.api_key(provider, env)
        return Effective(key, value, source or "unset", True)
    value = get_value(config, key)
    return Effective(key, value, "file" if _is_set(config, key) else "default", False)


def _is_set(config: Config, key: str) -> bool:
    node: Any = config
    for part in key.split("."):
        if part not in node.model_fields_set:
            return False
        node = getattr(node, part)
    return True
