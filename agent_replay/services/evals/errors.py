"""The failures of AI evaluation, all ``AgentReplayError``s (exit 1 unless said otherwise)."""

from __future__ import annotations

from agent_replay.config import ENV_KEYS, PROVIDER_LABELS
from agent_replay.errors import AgentReplayError


class AIError(AgentReplayError):
    """An AI call could not produce a usable result."""


class NoAIKeyError(AIError):
    """No API key is configured for any provider (or for the one asked for)."""

    def __init__(self, provider: str | None = None) -> None:
        if provider is None:
            names = ", ".join(
                f"{names[0]} (or {', '.join(names[1:])})" if len(names) > 1 else names[0]
                for names in ENV_KEYS.values()
            )
            message = f"no AI provider key configured: set one of {names}"
        else:
            names = " or ".join(ENV_KEYS[provider])
            message = f"no {PROVIDER_LABELS[provider]} API key configured: set {names}"
        example = provider or "anthropic"
        super().__init__(
            message,
            hints=[
                f"or store one: agent-replay config set ai.api_keys.{example} -  "
                "(reads the key from stdin)",
                "deterministic presets need no key: agent-replay eval ID",
            ],
        )


class AIAuthError(AIError):
    """The provider rejected the key (401/403, or Gemini's API_KEY_INVALID)."""


class AIRequestError(AIError):
    """The API call failed after the SDK's retries (rate limit, server error, network)."""

    def __init__(self, message: str, *, status: int | None = None, hints: list[str] | None = None):
        super().__init__(message, hints=hints)
        self.status = status


class AIReplyError(AIError):
    """The model's reply was not the JSON asked for (after one retry)."""

    def __init__(self, message: str, *, reply: str = "", hints: list[str] | None = None) -> None:
        super().__init__(message, hints=hints)
        self.reply = reply


class BudgetExceeded(AIError):
    """The next call's estimated cost would take spending past ``--max-cost``."""

    def __init__(self, message: str, *, estimate: float, spent: float, limit: float) -> None:
        super().__init__(message, hints=["raise --max-cost, or evaluate fewer presets"])
        self.estimate = estimate
        self.spent = spent
        self.limit = limit


class PriceUnknownError(AIError):
    """No price is known for the model, so a cost cap can't be enforced."""
