"""What recorded LLM calls cost: ``metadata.cost_usd`` for every ``llm_call`` step that has a
model and tokens but no cost from its producer, from the ``genai-prices`` table.

Called at the one write path (``ingest.prepare`` and the ``TraceRecorder``), so every capture
path (hook, record, run, import, OTLP, ingest, the SDK) gets the same cost for the same call.
A producer's own cost is kept as it is; a cost this module computed is marked
``metadata.cost_source`` (``{"table": "genai-prices", "version", "provider", "model"}``: the
table's version and the entry it matched) and computed again whenever the step's tokens change.
A call the table cannot price (a model it does not know) keeps no cost and says why in
``metadata.cost_missing``; a call with only a total token count is left as it is (input and
output tokens cost differently).

Token counts are read from the step's metadata (flat, or under ``usage``) in each producer's
own convention, and handed to genai-prices in its convention (``input_tokens`` counts every
prompt token, cached ones included; ``output_tokens`` every generated token, reasoning
included), so cache reads, cache writes and reasoning are priced as the table says:

- Anthropic (``cache_creation_input_tokens``, ``cache_read_input_tokens``; Claude Code's OTel
  ``cache_creation_tokens``, ``cache_read_tokens``): the cache counts come on top of
  ``input_tokens``;
- OpenAI and Codex (``cached_input_tokens``, ``prompt_tokens_details.cached_tokens``,
  ``reasoning_output_tokens``, ``*_tokens_details.reasoning_tokens``): parts of the input and
  output counts;
- Gemini (``cached_input_tokens`` or ``cached``, ``thoughts_tokens``, ``tool_tokens``; the raw
  ``usageMetadata`` names too): cached tokens are part of the prompt, thoughts come on top of
  the output, tool-use prompt tokens on top of the input.

``genai-prices`` is imported only when a step needs a price (it costs ~0.5 s): the hook's
drainer and ``record`` pay it only for a stream that has such a call.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from typing import Any

from agent_replay.store.mapping import step_cost
from agent_replay.trace.base import parse_time
from agent_replay.trace.models import Step, Trace

PRICE_TABLE = "genai-prices"
COST = "cost_usd"
SOURCE = "cost_source"
MISSING = "cost_missing"

_ANTHROPIC_CACHE = (
    ("cache_read_input_tokens", "cache_read"),
    ("cache_creation_input_tokens", "cache_write"),
    ("cache_read_tokens", "cache_read"),
    ("cache_creation_tokens", "cache_write"),
)
# Each producer's names for the same counts. Gemini's are the API's ``usageMetadata`` and Gemini
# CLI's telemetry (``api_response``: ``input_token_count`` is the prompt count, cached included).
_INPUT = ("input_tokens", "prompt_tokens", "promptTokenCount", "input_token_count")
_OUTPUT = ("output_tokens", "completion_tokens", "candidatesTokenCount", "output_token_count")
_CACHED = (
    "cached_input_tokens",
    "cached",
    "cachedContentTokenCount",
    "cached_content_token_count",
)
_REASONING = ("reasoning_output_tokens", "reasoning_tokens")
_THOUGHTS = ("thoughts_tokens", "thoughtsTokenCount", "thoughts_token_count")
_TOOL_PROMPT = ("tool_tokens", "toolUsePromptTokenCount", "tool_token_count")


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if value >= 0 else None


def _first(sources: Iterable[Mapping[str, Any]], keys: tuple[str, ...]) -> int | None:
    for source in sources:
        for key in keys:
            found = _count(source.get(key))
            if found is not None:
                return found
    return None


def _details(sources: list[Mapping[str, Any]], parent: str, key: str) -> int | None:
    for source in sources:
        details = source.get(parent)
        if isinstance(details, Mapping):
            found = _count(details.get(key))
            if found is not None:
                return found
    return None


def usage_of(metadata: Mapping[str, Any]) -> dict[str, int] | None:
    """The call's tokens in genai-prices' terms (``input_tokens``, ``output_tokens``,
    ``cache_read_tokens``, ``cache_write_tokens``, ``output_reasoning_tokens``), read from a
    step's metadata; ``None`` when it has no input/output split."""
    sources: list[Mapping[str, Any]] = [metadata]
    nested = metadata.get("usage")
    if isinstance(nested, Mapping):
        sources.insert(0, nested)
    given_in = _first(sources, _INPUT)
    given_out = _first(sources, _OUTPUT)
    if given_in is None and given_out is None:
        return None
    inp, out = given_in or 0, given_out or 0
    usage: dict[str, int] = {}
    anthropic = False
    for key, kind in _ANTHROPIC_CACHE:  # on top of the input count
        found = _first(sources, (key,))
        if found is not None and f"{kind}_tokens" not in usage:
            usage[f"{kind}_tokens"] = found
            inp += found
            anthropic = True
    if not anthropic:
        cached = _first(sources, _CACHED)
        if cached is None:
            cached = _details(sources, "prompt_tokens_details", "cached_tokens")
        if cached is None:
            cached = _details(sources, "input_tokens_details", "cached_tokens")
        if cached:
            usage["cache_read_tokens"] = min(cached, inp)
    reasoning = _first(sources, _REASONING)
    if reasoning is None:
        reasoning = _details(sources, "completion_tokens_details", "reasoning_tokens")
    if reasoning is None:
        reasoning = _details(sources, "output_tokens_details", "reasoning_tokens")
    thoughts = _first(sources, _THOUGHTS)
    if thoughts:  # Gemini counts thoughts apart from the candidates
        out += thoughts
        reasoning = (reasoning or 0) + thoughts
    if reasoning:
        usage["output_reasoning_tokens"] = min(reasoning, out)
    tool_prompt = _first(sources, _TOOL_PROMPT)
    if tool_prompt:
        inp += tool_prompt
    usage["input_tokens"] = inp
    usage["output_tokens"] = out
    return usage


def _ours(metadata: Mapping[str, Any]) -> bool:
    source = metadata.get(SOURCE)
    return isinstance(source, Mapping) and source.get("table") == PRICE_TABLE


def needs_price(step: Step) -> bool:
    """Whether the step is an ``llm_call`` with a model and tokens whose cost is not the
    producer's (never priced, or priced by this module from counts that may have changed)."""
    if step.step_type != "llm_call" or not step.model:
        return False
    metadata = step.metadata
    if COST in metadata and not _ours(metadata):
        return False  # the producer's own cost
    return _ours(metadata) or MISSING in metadata or usage_of(metadata) is not None


def price_step(step: Step) -> None:
    """Set (or clear) the step's table cost, when ``needs_price``; mutates its metadata."""
    if not needs_price(step):
        return
    metadata = step.metadata
    for key in (COST, SOURCE, MISSING):
        metadata.pop(key, None)
    usage = usage_of(metadata)
    if usage is None:
        return  # a total alone can't be priced (input and output cost differ)
    assert step.model is not None
    price = lookup(step.model, usage, _when(step))
    if isinstance(price, str):
        metadata[MISSING] = price
        return
    cost, source = price
    metadata[COST] = cost
    metadata[SOURCE] = source


def price_steps(steps: Iterable[Step]) -> None:
    """``price_step`` for each step."""
    for step in steps:
        if needs_price(step):
            price_step(step)


def derive_total(trace: Trace) -> None:
    """A trace without a producer total costs the sum of its steps' costs (when any has
    one); ``metadata.cost_from_steps`` counts them, ``cost_unpriced_steps`` the llm_calls
    the sum lacks."""
    if trace.total_cost_usd is not None:
        return
    costs = [c for c in (step_cost(s.metadata) for s in trace.steps) if c is not None]
    if not costs:
        return
    trace.total_cost_usd = sum(costs)
    trace.metadata["cost_from_steps"] = len(costs)
    unpriced = sum(1 for s in trace.steps if MISSING in s.metadata)
    if unpriced:
        trace.metadata["cost_unpriced_steps"] = unpriced


def _when(step: Step) -> dt.datetime | None:
    stamp = step.started_at or step.ended_at
    if stamp is None:
        return None
    try:
        return parse_time(stamp)
    except ValueError:
        return None


def lookup(
    model: str, usage: dict[str, int], when: dt.datetime | None
) -> tuple[float, dict[str, Any]] | str:
    """``(cost, cost_source)`` of a call from the table, or why it has no price."""
    # deferred: ~0.5 s, paid only when a step needs a price
    from genai_prices import Usage, calc_price
    from genai_prices import __version__ as version

    try:
        result = calc_price(Usage(**usage), model, genai_request_timestamp=when)
    except LookupError:
        return f"{PRICE_TABLE} {version} has no price for model {model!r}"
    except (ValueError, ArithmeticError) as exc:
        return f"{PRICE_TABLE} {version} could not price the call: {exc}"
    source = {
        "table": PRICE_TABLE,
        "version": version,
        "provider": result.provider.id,
        "model": result.model.id,
    }
    return float(result.total_price), source
