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
            ],
        )

    def hints_for(self, command: str) -> list[str]:
        """How to set a key, then what the command at hand can do without one."""
        without = _WITHOUT_AI.get(command) or _WITHOUT_AI.get(command.split(" ")[0])
        return [*self.hints, without] if without else list(self.hints)


# What each AI-using command does without a key (the hint after "set a key").
_WITHOUT_AI = {
    "eval": "deterministic presets need no key: agent-replay eval ID",
    "diff": "without --ai the diff needs no key: agent-replay diff A B",
    "fork": "without --rerun the fork needs no key: agent-replay fork ID --from-step N",
    "config test-ai": "then check it again: agent-replay config test-ai",
    "check": "without AI criteria the check needs no key",
}


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
