"""``explain_divergence``: an AI account of why two traces diverged (``diff A B --ai``).

The model gets the diff's summary (counts, the first divergence with its field differences,
the trace-level differences and metric deltas) and both traces, each rendered and summarized
to fit (half of the room each), all inside one untrusted-data fence. It replies with JSON:
where the runs part ways, the cause, the effect on the outcome, which run is better, a
recommendation and a confidence. Same budget rules as the AI presets: the call's estimated
cost must fit under the cap first, and a malformed reply is retried once.

Works on anything shaped like ``services.diff.TraceDiff`` (``a``, ``b`` and
``to_json(compact=True)``); imports nothing from the diff service.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import Field

from agent_replay.clock import Clock
from agent_replay.services.evals.ai import QUOTE_RULES, _Reply
from agent_replay.services.evals.ask import CallStats, ask_json, trace_budget_bytes
from agent_replay.services.evals.budget import Budget
from agent_replay.services.evals.prompt import Fence, render_trace
from agent_replay.services.evals.providers import AISettings, ProviderClient, open_client
from agent_replay.trace.io import dumps

MAX_DIFF_CHARS = 12_000
"""The diff summary's share of the prompt (characters; the rest is the two traces)."""


class DiffLike(Protocol):
    """What ``explain_divergence`` reads of a diff (``services.diff.TraceDiff`` fits)."""

    a: Mapping[str, Any]
    b: Mapping[str, Any]

    def to_json(self, *, compact: bool = False, full_steps: bool = False) -> dict[str, Any]: ...


class StepPair(_Reply):
    a: int | None = None
    b: int | None = None


class DivergenceReply(_Reply):
    summary: str
    divergence_step: StepPair = Field(default_factory=StepPair)
    cause: str
    effect: str
    better_run: Literal["a", "b", "same", "unclear"] = "unclear"
    recommendation: str = ""
    confidence: float = Field(ge=0, le=1)


@dataclass
class DivergenceExplanation:
    """The model's account of a divergence, and what it cost."""

    summary: str
    a_step: int | None
    b_step: int | None
    cause: str
    effect: str
    better_run: str
    recommendation: str
    confidence: float
    provider: str
    model: str
    cost_usd: float | None
    usage: dict[str, Any] = field(default_factory=dict)
    summarized: bool = False
    """Whether either trace was summarized to fit."""

    def to_json(self) -> dict[str, Any]:
        """For ``diff --ai --json`` (under an ``ai`` key, say)."""
        return {
            "summary": self.summary,
            "divergence_step": {"a": self.a_step, "b": self.b_step},
            "cause": self.cause,
            "effect": self.effect,
            "better_run": self.better_run,
            "recommendation": self.recommendation,
            "confidence": self.confidence,
            "provider": self.provider,
            "model": self.model,
            "cost_usd": self.cost_usd,
            "usage": self.usage,
            "summarized": self.summarized,
        }

    def lines(self) -> list[str]:
        """Plain lines for the terminal (producer text unescaped: escape before printing)."""
        where = []
        if self.a_step is not None:
            where.append(f"A step {self.a_step}")
        if self.b_step is not None:
            where.append(f"B step {self.b_step}")
        out = [f"AI ({self.provider} {self.model}): {self.summary}"]
        if where:
            out.append(f"  diverged at: {', '.join(where)}")
        out.append(f"  cause: {self.cause}")
        out.append(f"  effect: {self.effect}")
        if self.better_run in ("a", "b"):
            out.append(f"  better run: {self.better_run.upper()}")
        if self.recommendation:
            out.append(f"  recommendation: {self.recommendation}")
        cost = f"${self.cost_usd:.4f}" if self.cost_usd is not None else "cost unknown"
        out.append(f"  confidence {self.confidence:.2f} · {cost}")
        return out


TASK = (
    "You are an expert debugger of AI agent runs. You get two recorded runs, A and B, and a "
    "structural diff of them (steps aligned by content). Explain why they diverged: the "
    "first step where they meaningfully part ways, what caused it (a changed input, prompt "
    "or model, a tool result, nondeterminism, ...), how it changed the outcome, which run "
    "is better, and what to do about it."
)

REPLY_FORMAT = """{
  "summary": "two or three sentences: why the runs diverged",
  "divergence_step": {"a": step number in A or null, "b": step number in B or null},
  "cause": "what made them part ways",
  "effect": "how the outcome differs",
  "better_run": "a" | "b" | "same" | "unclear",
  "recommendation": "what to change or investigate",
  "confidence": a number from 0.0 to 1.0
}"""


def explain_divergence(
    diff: DiffLike,
    settings: AISettings | None = None,
    *,
    clock: Clock,
    budget: Budget | None = None,
    client: ProviderClient | None = None,
) -> DivergenceExplanation:
    """Ask the model why the two traces of ``diff`` diverged.

    Args:
        diff: the diff (``services.diff.diff_stored``/``diff_traces``); ``a``/``b`` carry steps.
        settings: the provider (``providers.resolve_ai``); not needed with ``client``.
        clock: dates the prices.
        budget: the ``--max-cost`` cap (default: none).
        client: an open provider client (default: one opened from ``settings``).

    Raises:
        BudgetExceeded, PriceUnknownError: the call would not fit under the cap.
        AIAuthError, AIRequestError, AIReplyError: the call failed.
    """
    budget = budget or Budget()
    own = client is None
    if client is None:
        if settings is None:
            raise ValueError("explain_divergence needs settings or a client")
        client = open_client(settings)
    try:
        return _explain(diff, client, budget, clock)
    finally:
        if own:
            client.close()


def _explain(
    diff: DiffLike, client: ProviderClient, budget: Budget, clock: Clock
) -> DivergenceExplanation:
    settings = client.settings
    fence = Fence.new()
    system = "\n\n".join(
        [
            TASK,
            fence.notice("the two runs and their diff"),
            f"Reply with one JSON object and nothing else, with exactly these fields:\n"
            f"{REPLY_FORMAT}",
            QUOTE_RULES,
        ]
    )
    summary = dumps(diff.to_json(compact=True))
    if len(summary) > MAX_DIFF_CHARS:
        summary = summary[:MAX_DIFF_CHARS] + "…[diff summary cut]"
    room = trace_budget_bytes(
        settings, budget, system + summary, clock.now(), "the divergence explanation"
    )
    half = max(1200, (room - len(summary.encode())) // 2)
    run_a = render_trace(diff.a, half)
    run_b = render_trace(diff.b, half)
    body = "\n".join(
        [
            "## DIFF SUMMARY (JSON)",
            summary,
            "## RUN A",
            run_a.text,
            "## RUN B",
            run_b.text,
        ]
    )
    user = (
        f"Here are the two runs and their diff.\n{fence.wrap(body)}\n"
        "Reply with the JSON object described in your instructions."
    )
    stats = CallStats()
    reply = ask_json(
        client,
        system,
        user,
        DivergenceReply,
        budget=budget,
        clock=clock,
        stats=stats,
        what="the divergence explanation",
    )
    assert isinstance(reply, DivergenceReply)
    return DivergenceExplanation(
        summary=reply.summary,
        a_step=reply.divergence_step.a,
        b_step=reply.divergence_step.b,
        cause=reply.cause,
        effect=reply.effect,
        better_run=reply.better_run,
        recommendation=reply.recommendation,
        confidence=reply.confidence,
        provider=settings.provider,
        model=stats.model or settings.model,
        cost_usd=None if stats.cost_usd is None else round(stats.cost_usd, 8),
        usage=stats.to_json(),
        summarized=run_a.summarized or run_b.summarized,
    )
