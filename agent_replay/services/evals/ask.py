"""Asking a model for JSON it must answer in: one call, the reply validated against a pydantic
schema and sent back once with the validation error if it isn't the JSON asked for (a second
bad reply is an ``AIReplyError``); what each call cost (``CallStats``), checked against the
``--max-cost`` budget before it is made; and how much trace text the next call can afford
(``trace_budget_bytes``). The presets that ask (``ai``, ``divergence``) build the prompts.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_replay.clock import Clock
from agent_replay.services.evals.budget import Budget
from agent_replay.services.evals.errors import AIReplyError, PriceUnknownError
from agent_replay.services.evals.prices import BYTES_PER_TOKEN, cost_usd, estimate_tokens
from agent_replay.services.evals.prompt import MAX_PROMPT_TOKENS
from agent_replay.services.evals.providers import (
    AISettings,
    Completion,
    Message,
    ProviderClient,
)

MIN_TRACE_TOKENS = 400
"""The smallest trace worth sending: below this, the budget stops the preset instead."""
MAX_BAD_REPLY_ECHO = 4000
"""Characters of a malformed reply sent back with the request to fix it."""


@dataclass
class CallStats:
    """What the calls of one request cost (kept even when the request fails)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    latency_ms: float = 0.0
    retried: bool = False
    model: str | None = None
    usage_estimated: bool = False

    def add(self, completion: Completion, cost: float | None) -> None:
        self.calls += 1
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        self.latency_ms += completion.latency_ms
        self.model = completion.model
        self.usage_estimated |= not completion.usage_reported
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_ms": round(self.latency_ms, 1),
            "retried": self.retried,
            "usage_estimated": self.usage_estimated,
        }


def call_cost(
    settings: AISettings, completion: Completion | None, tokens: tuple[int, int], when: dt.datetime
) -> float | None:
    """The price of a call (``None`` when the price table doesn't know the model)."""
    names = [settings.model]
    if completion is not None and completion.model and completion.model != settings.model:
        names.insert(0, completion.model)
    for name in names:
        try:
            return cost_usd(settings.provider, name, tokens[0], tokens[1], when=when)
        except PriceUnknownError:
            continue
    return None


def estimate_call(
    settings: AISettings, prompt: str, max_tokens: int, when: dt.datetime
) -> float | None:
    """A high estimate of a call's cost: the prompt's tokens plus the whole reply allowance.

    Raises:
        PriceUnknownError: never; ``None`` means the price is unknown.
    """
    return call_cost(settings, None, (estimate_tokens(prompt), max_tokens), when)


def check_budget(
    budget: Budget, settings: AISettings, prompt: str, max_tokens: int, when: dt.datetime, what: str
) -> None:
    """Stop before a call that would not fit under the cap.

    Raises:
        BudgetExceeded: the call's estimate doesn't fit.
        PriceUnknownError: a cap is set but the model's price is unknown.
    """
    if not budget.capped:
        return
    estimate = estimate_call(settings, prompt, max_tokens, when)
    if estimate is None:
        raise PriceUnknownError(
            f"--max-cost can't be enforced: no price is known for {settings.label}",
            hints=["choose a model the price table knows (--model), or drop --max-cost"],
        )
    budget.check(estimate, what)


def extract_json(text: str) -> Any:
    """The JSON object in a reply: the whole text, else a fenced block, else the outermost
    ``{...}``.

    Raises:
        ValueError: there is no JSON object in the text.
    """
    stripped = text.strip()
    candidates = [stripped]
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", stripped, re.DOTALL)
    if fenced:
        candidates.append(fenced.group(1))
    first, last = stripped.find("{"), stripped.rfind("}")
    if 0 <= first < last:
        candidates.append(stripped[first : last + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    if not stripped:
        raise ValueError("the reply was empty")
    raise ValueError("the reply is not a JSON object")


def ask_json(
    client: ProviderClient,
    system: str,
    user: str,
    reply_model: type[BaseModel],
    *,
    budget: Budget,
    clock: Clock,
    stats: CallStats,
    max_tokens: int | None = None,
    what: str = "the AI call",
) -> BaseModel:
    """Ask for a JSON reply matching ``reply_model``; a bad reply is sent back once to be fixed.

    ``stats`` accumulates the calls' tokens and cost (also when this raises).

    Raises:
        AIReplyError: the reply was still not valid after the retry.
        BudgetExceeded, PriceUnknownError: a call would not fit under ``budget``.
        AIAuthError, AIRequestError: the API call failed.
    """
    settings = client.settings
    limit = max_tokens or settings.max_tokens
    messages = [Message("user", user)]
    problem = ""
    for attempt in (1, 2):
        prompt = system + "".join(m.text for m in messages)
        now = clock.now()
        check_budget(
            budget, settings, prompt, limit, now, what if attempt == 1 else f"the retry of {what}"
        )
        completion = client.complete(system, messages, max_tokens=limit)
        cost = call_cost(
            settings, completion, (completion.input_tokens, completion.output_tokens), now
        )
        budget.add(cost)
        stats.add(completion, cost)
        try:
            return reply_model.model_validate(extract_json(completion.text))
        except (ValueError, ValidationError) as exc:
            problem = _reply_problem(exc, completion)
        if attempt == 2:
            hints = []
            if completion.truncated:
                hints.append(
                    f"the reply hit the {limit}-token limit: "
                    f"agent-replay config set ai.max_tokens {limit * 2}"
                )
            raise AIReplyError(
                f"{settings.label} did not reply with valid JSON (after one retry): {problem}",
                reply=completion.text,
                hints=hints,
            )
        stats.retried = True
        messages = [
            Message("user", user),
            Message("assistant", completion.text[:MAX_BAD_REPLY_ECHO] or "(empty)"),
            Message(
                "user",
                f"That reply could not be used: {problem}. Reply again with only the JSON "
                "object described in the instructions: no prose, no code fences.",
            ),
        ]
    raise AssertionError("unreachable")


def _reply_problem(exc: Exception, completion: Completion) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for error in exc.errors()[:5]:
            where = ".".join(str(p) for p in error["loc"]) or "reply"
            parts.append(f"{where}: {error['msg']}")
        text = "; ".join(parts)
    else:
        text = str(exc)
    if completion.truncated:
        text += " (the reply was cut off at the token limit)"
    return text


def trace_budget_bytes(
    settings: AISettings,
    budget: Budget,
    system: str,
    when: dt.datetime,
    what: str = "the next AI call",
) -> int:
    """How many bytes of trace text the next call may carry: at most ``MAX_PROMPT_TOKENS``,
    and no more than the budget left can pay for (with the whole reply allowance).

    Raises:
        BudgetExceeded: not even a minimal trace fits under the cap.
        PriceUnknownError: a cap is set but the model's price is unknown.
    """
    tokens = MAX_PROMPT_TOKENS
    if budget.capped:
        remaining = budget.remaining_usd or 0.0
        fixed = estimate_call(settings, system + " " * 400, settings.max_tokens, when)
        per_token = call_cost(settings, None, (1_000_000, 0), when)
        if fixed is None or per_token is None:
            raise PriceUnknownError(
                f"--max-cost can't be enforced: no price is known for {settings.label}",
                hints=["choose a model the price table knows (--model), or drop --max-cost"],
            )
        affordable = int((remaining - fixed) / (per_token / 1_000_000)) if per_token else tokens
        if affordable < MIN_TRACE_TOKENS:
            budget.check(fixed + MIN_TRACE_TOKENS * per_token / 1_000_000, what)
        tokens = max(MIN_TRACE_TOKENS, min(tokens, affordable))
    return tokens * BYTES_PER_TOKEN
