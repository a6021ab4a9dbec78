"""``rerun_llm_step``: re-send a recorded ``llm_call``'s messages (as modified at a fork) to the
model that answered them, and make the new reply the fork's step (``fork --rerun``).

Which messages
    The step's ``input``: a list of messages, or an object with ``messages`` (OpenAI and
    Anthropic style, plus an optional ``system``) or ``contents`` (Gemini style, plus an
    optional ``system_instruction``). A message's ``content`` may be text, a list of blocks
    (``text``, ``tool_use``, ``tool_result``) or Gemini ``parts``. ``system``/``developer``
    messages become the system prompt; ``tool``/``function`` messages are sent as user turns
    marked ``[tool result]``; consecutive turns of one role are merged. The recorded
    ``temperature`` and ``max_tokens`` (``max_completion_tokens``, ``max_output_tokens``) are
    kept; without one, the provider's default temperature and ``ai.max_tokens`` apply.
Which model
    The step's recorded ``model`` and the provider it belongs to (``claude-*`` Anthropic,
    ``gemini-*`` Google, ``gpt-*``/``o*`` OpenAI), with that provider's key; ``model=``
    overrides. The call is checked against the budget first, like every AI call.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_replay.clock import Clock
from agent_replay.config import Config
from agent_replay.errors import UsageError
from agent_replay.services.evals.ask import call_cost, check_budget
from agent_replay.services.evals.budget import Budget
from agent_replay.services.evals.providers import (
    Message,
    ProviderClient,
    open_client,
    provider_for_model,
    resolve_ai,
)
from agent_replay.services.outcome import mark_rerun
from agent_replay.trace.base import canonical_time
from agent_replay.trace.io import dumps


@dataclass(frozen=True)
class RecordedCall:
    """The messages and options of a recorded llm_call, ready to send again."""

    system: str
    messages: list[Message]
    temperature: float | None
    max_tokens: int | None


def recorded_call(step_input: Any) -> RecordedCall:
    """Read the messages out of an llm_call's input (see the module doc).

    Raises:
        UsageError: the input holds no messages.
    """
    options: Mapping[str, Any] = step_input if isinstance(step_input, dict) else {}
    if isinstance(step_input, list):
        raw = step_input
    elif isinstance(options.get("messages"), list):
        raw = options["messages"]
    elif isinstance(options.get("contents"), list):
        raw = options["contents"]
    else:
        raise UsageError(
            "the step's input has no recorded messages (a list, or an object with "
            "'messages' or 'contents'); --rerun needs them"
        )
    system_parts = []
    for key in ("system", "system_instruction", "instructions"):
        if options.get(key):
            system_parts.append(_text(options[key]))
    turns: list[Message] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        role = str(item.get("role") or "user").lower()
        text = _text(item.get("content") if "content" in item else item.get("parts"))
        if not text.strip():
            continue
        if role in ("system", "developer"):
            system_parts.append(text)
            continue
        if role in ("tool", "function"):
            role, text = "user", f"[tool result] {text}"
        elif role in ("assistant", "model", "ai"):
            role = "assistant"
        else:
            role = "user"
        if turns and turns[-1].role == role:
            turns[-1] = Message(role, f"{turns[-1].text}\n\n{text}")
        else:
            turns.append(Message(role, text))  # type: ignore[arg-type]
    if not turns:
        raise UsageError("the step's recorded messages hold no user or assistant text to send")
    temperature = options.get("temperature")
    max_tokens = next(
        (
            options[k]
            for k in ("max_tokens", "max_completion_tokens", "max_output_tokens")
            if isinstance(options.get(k), int) and options[k] > 0
        ),
        None,
    )
    return RecordedCall(
        "\n\n".join(system_parts),
        turns,
        float(temperature) if isinstance(temperature, int | float) else None,
        max_tokens,
    )


def _text(value: Any) -> str:
    """Text of a message content: a string, text blocks, tool blocks or Gemini parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return str(value["text"])
        kind = value.get("type")
        if kind == "tool_use" or "function_call" in value or "functionCall" in value:
            call = value.get("function_call") or value.get("functionCall") or value
            return f"[tool call {call.get('name')}({dumps(call.get('input') or call.get('args'))})]"
        if kind == "tool_result" or "function_response" in value:
            return "[tool result] " + _text(value.get("content") or value.get("function_response"))
        if "parts" in value:
            return _text(value["parts"])
        return dumps(value)
    if isinstance(value, list):
        return "\n".join(t for t in (_text(v) for v in value) if t)
    return str(value)


@dataclass(frozen=True)
class RerunResult:
    """The model's new reply at the fork step, and what it took."""

    output: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    latency_ms: float
    at: str
    """When the call was made (canonical UTC)."""
    stop_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "provider": self.provider,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "latency_ms": round(self.latency_ms, 1),
            "at": self.at,
            "stop_reason": self.stop_reason,
        }


def rerun_llm_step(
    step: dict[str, Any],
    config: Config,
    *,
    clock: Clock,
    budget: Budget | None = None,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
    client: ProviderClient | None = None,
) -> RerunResult:
    """Send the (modified) messages of an llm_call step to its model again.

    Args:
        step: the fork's step N (``services.fork.build_fork``'s output), input already edited.
        config: the settings (keys, base URLs, ``ai.max_tokens``).
        clock: stamps the call and dates the price.
        budget: the ``--max-cost`` cap (default: none).
        model: a model to use instead of the recorded one.
        env: the environment (keys; default ``os.environ``).
        client: an open provider client (tests; default: one for the model's provider).

    Raises:
        UsageError: not an llm_call, no recorded messages or model, or a model whose
            provider can't be told.
        NoAIKeyError: no key for that provider.
        BudgetExceeded, PriceUnknownError, AIAuthError, AIRequestError: as for any AI call.
    """
    if step.get("step_type") != "llm_call":
        raise UsageError(
            f"--rerun needs an llm_call at the fork step; step {step.get('step_number')} "
            f"is a {step.get('step_type')}"
        )
    call = recorded_call(step.get("input"))
    wanted = model or step.get("model")
    if client is None:
        if not wanted:
            raise UsageError(
                f"step {step.get('step_number')} recorded no model; name one for the rerun"
            )
        provider = provider_for_model(str(wanted))
        if provider is None:
            raise UsageError(
                f"can't tell which provider serves model {wanted!r}",
                hints=["name a model of Anthropic (claude-*), Google (gemini-*) or OpenAI (gpt-*)"],
            )
        settings = resolve_ai(config, provider=provider, model=str(wanted), env=env)
        active = open_client(settings)
    else:
        active = client
        settings = client.settings
    budget = budget or Budget()
    limit = call.max_tokens or settings.max_tokens
    try:
        now = clock.now()
        prompt = call.system + "".join(m.text for m in call.messages)
        check_budget(
            budget, settings, prompt, limit, now, f"the rerun of step {step.get('step_number')}"
        )
        completion = active.complete(
            call.system,
            call.messages,
            max_tokens=limit,
            json_reply=False,
            temperature=call.temperature,
        )
    finally:
        if client is None:
            active.close()
    cost = call_cost(settings, completion, (completion.input_tokens, completion.output_tokens), now)
    budget.add(cost)
    return RerunResult(
        output=completion.text,
        provider=settings.provider,
        model=completion.model or settings.model,
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
        cost_usd=None if cost is None else round(cost, 8),
        latency_ms=completion.latency_ms,
        at=canonical_time(now),
        stop_reason=completion.stop_reason,
    )


def apply_rerun(fork: dict[str, Any], step_number: int, result: RerunResult) -> dict[str, Any]:
    """A copy of a fork object (not yet written) whose step N holds the rerun's reply.

    Step N gets the new ``output``, ``model``, ``tokens_used`` and ``duration_ms`` (its end
    moves to start + latency), no ``error``, and ``metadata.rerun`` (provider, model, tokens,
    cost, latency, when, and the recorded output it replaces). The fork's ``ended_at`` follows
    step N's end and its ``total_cost_usd`` includes the call.
    """
    out = copy.deepcopy(fork)
    step = next((s for s in out.get("steps") or [] if s["step_number"] == step_number), None)
    if step is None:
        raise UsageError(f"the fork has no step {step_number}")
    original = step.get("output")
    step["output"] = result.output
    step["model"] = result.model
    step["tokens_used"] = result.input_tokens + result.output_tokens
    step["duration_ms"] = round(result.latency_ms, 3)
    step.pop("error", None)
    if step.get("started_at"):
        from agent_replay.trace.base import parse_time

        end = parse_time(step["started_at"]) + dt.timedelta(milliseconds=result.latency_ms)
        step["ended_at"] = canonical_time(end)
        if step is out["steps"][-1]:
            out["ended_at"] = step["ended_at"]
    metadata = dict(step.get("metadata") or {})
    mark_rerun(metadata)  # the step has a real outcome now (services.outcome)
    metadata["rerun"] = {**result.to_json(), "original_output": original}
    metadata["rerun"].pop("output", None)
    step["metadata"] = metadata
    if result.cost_usd is not None:
        out["total_cost_usd"] = round((out.get("total_cost_usd") or 0.0) + result.cost_usd, 9)
    return out


def rerun_fork_step(
    fork: dict[str, Any],
    step_number: int,
    config: Config,
    *,
    clock: Clock,
    budget: Budget | None = None,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], RerunResult]:
    """``rerun_llm_step`` on a built fork's step N, then ``apply_rerun``: the fork object to
    write (``ingest_trace``) and what the call did. Not written here, and no store access, so
    the caller need not hold the store open during the call.

    Raises:
        UsageError: the fork has no step N, or it can't be re-sent (see ``rerun_llm_step``).
        NoAIKeyError, BudgetExceeded, PriceUnknownError, AIAuthError, AIRequestError.
    """
    step = next((s for s in fork.get("steps") or [] if s["step_number"] == step_number), None)
    if step is None:
        raise UsageError(f"the fork has no step {step_number}")
    result = rerun_llm_step(step, config, clock=clock, budget=budget, model=model, env=env)
    return apply_rerun(fork, step_number, result), result
