"""The spending cap of a run of AI calls (``--max-cost``).

Before every call the caller asks ``check`` with that call's estimated cost (a high estimate of
the prompt's tokens, plus the full reply allowance, at the model's prices); the call is made
only if what is already spent plus the estimate fits under the cap. After the call, ``add``
records its real cost from the provider's token usage. So the cap is hard: spending never
passes it, as long as the provider counts no more tokens than the (deliberately high) estimate
of ``prices.estimate_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_replay.services.evals.errors import BudgetExceeded


@dataclass
class Budget:
    """What may be spent (``limit_usd``; ``None``: no cap) and what has been."""

    limit_usd: float | None = None
    spent_usd: float = 0.0
    calls: int = 0

    @property
    def capped(self) -> bool:
        return self.limit_usd is not None

    @property
    def remaining_usd(self) -> float | None:
        if self.limit_usd is None:
            return None
        return max(0.0, self.limit_usd - self.spent_usd)

    def fits(self, estimate_usd: float) -> bool:
        """Whether a call estimated at ``estimate_usd`` fits under the cap."""
        if self.limit_usd is None:
            return True
        return self.spent_usd + estimate_usd <= self.limit_usd + 1e-12

    def check(self, estimate_usd: float, what: str = "the next AI call") -> None:
        """Raise ``BudgetExceeded`` unless a call estimated at ``estimate_usd`` fits."""
        if self.fits(estimate_usd):
            return
        assert self.limit_usd is not None
        raise BudgetExceeded(
            f"budget reached: {what} is estimated at ${estimate_usd:.4f}; "
            f"${self.spent_usd:.4f} of the ${self.limit_usd:.4f} cap is spent",
            estimate=estimate_usd,
            spent=self.spent_usd,
            limit=self.limit_usd,
        )

    def add(self, cost_usd: float | None) -> None:
        """Record a call's real cost."""
        self.calls += 1
        self.spent_usd += cost_usd or 0.0
