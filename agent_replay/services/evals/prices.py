"""What AI calls cost: tokens times the per-token prices of ``genai-prices``.

``genai-prices`` (pydantic/genai-prices) is a maintained, versioned table of LLM prices covering
Anthropic, Google and OpenAI, including each model's price history; it ships its data in the
package and makes no network call unless asked to update. Its import costs ~0.5 s, so it is
imported only when a cost is computed.

Token estimates (before a call) are deliberately high: UTF-8 bytes / ``BYTES_PER_TOKEN`` (2),
which over-counts English (~4 characters a token) and still covers the worst cases (CJK text,
hex and base64 blobs, single characters separated by spaces), plus the whole reply allowance.
"""

from __future__ import annotations

import datetime as dt
import math
from functools import cache

from agent_replay.services.evals.errors import PriceUnknownError

PROVIDER_IDS = {"anthropic": "anthropic", "google": "google", "openai": "openai"}
"""Our provider names -> genai-prices provider ids."""

BYTES_PER_TOKEN = 2
"""UTF-8 bytes counted as one token in estimates (a conservative ratio)."""

MESSAGE_OVERHEAD_TOKENS = 16
"""Tokens a provider adds around each message (role markers), for estimates."""


def estimate_tokens(text: str) -> int:
    """A high estimate of the tokens in ``text`` (UTF-8 bytes / 2, rounded up)."""
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


@cache
def _known(provider: str, model: str) -> bool:
    try:
        cost_usd(provider, model, 1, 1)
    except PriceUnknownError:
        return False
    return True


def price_known(provider: str, model: str) -> bool:
    """Whether the table has a price for this model."""
    return _known(provider, model)


def cost_usd(
    provider: str,
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    when: dt.datetime | None = None,
) -> float:
    """The price in USD of a call with these token counts.

    Args:
        provider: anthropic, google or openai.
        model: the model name as sent or as the provider reported it.
        when: the time of the call (prices change; default: now).

    Raises:
        PriceUnknownError: the table has no price for the model.
    """
    from genai_prices import Usage, calc_price  # deferred: ~0.5 s, AI paths only

    try:
        result = calc_price(
            Usage(input_tokens=max(0, input_tokens), output_tokens=max(0, output_tokens)),
            model,
            provider_id=PROVIDER_IDS.get(provider, provider),
            genai_request_timestamp=when,
        )
    except LookupError:
        raise PriceUnknownError(
            f"no price is known for {provider} model {model!r}",
            hints=["use a model the price table knows, or run without --max-cost"],
        ) from None
    return float(result.total_price)
