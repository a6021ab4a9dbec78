"""Reading a trace for meaning: the why-chain of a step, its decision points, and the step
hierarchy. Works on the format's JSON objects (as the store returns them), so the CLI and the
TUI walk exactly the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from agent_replay.errors import NotFoundError

_Step = TypeVar("_Step", bound=Mapping[str, Any])  # a step object: the store's, or a file's

Reason = Literal["start", "caused_by", "parent", "prior_decision"]


@dataclass
class Hop:
    """One link of a why-chain: the step reached and how it was reached."""

    step: Mapping[str, Any]
    reason: Reason

    def to_json(self) -> dict[str, Any]:
        s = self.step
        return {
            "step_number": s["step_number"],
            "step_type": s["step_type"],
            "name": s["name"],
            "reason": self.reason,
            "decision": s["decision"],
        }


def why_chain(steps: Sequence[Mapping[str, Any]], step_number: int) -> list[Hop]:
    """Walk back from a step: ``caused_by_step``, else ``parent_step``, else the nearest earlier
    decision step. Every hop goes strictly backwards, so the walk always ends.

    Raises:
        NotFoundError: the trace has no such step.
    """
    by_number = {s["step_number"]: s for s in steps}
    current = by_number.get(step_number)
    if current is None:
        raise NotFoundError(f"the trace has no step {step_number}")
    decisions = sorted(n for n, s in by_number.items() if s["step_type"] == "decision")
    chain = [Hop(current, "start")]
    while True:
        number = current["step_number"]
        target: int | None
        reason: Reason
        if current.get("caused_by_step") in by_number:
            target, reason = current["caused_by_step"], "caused_by"
        elif current.get("parent_step") in by_number:
            target, reason = current["parent_step"], "parent"
        else:
            earlier = [d for d in decisions if d < number]
            if not earlier:
                return chain
            target, reason = earlier[-1], "prior_decision"
        if target is None or target >= number:  # defensive: links always point back
            return chain
        current = by_number[target]
        chain.append(Hop(current, reason))


def decision_points(steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every step carrying a decision, as ``{step_number, name, ...decision}``."""
    return [
        {"step_number": s["step_number"], "name": s["name"], **s["decision"]}
        for s in steps
        if s.get("decision")
    ]


def tree_order(steps: Sequence[_Step]) -> list[tuple[int, _Step]]:
    """Steps in depth-first order of the ``parent_step`` hierarchy, with their depth."""
    children: dict[int | None, list[_Step]] = {}
    numbers = {s["step_number"] for s in steps}
    for s in sorted(steps, key=lambda s: s["step_number"]):
        parent = s.get("parent_step") if s.get("parent_step") in numbers else None
        children.setdefault(parent, []).append(s)
    out: list[tuple[int, _Step]] = []
    stack = [(0, s) for s in reversed(children.get(None, []))]
    while stack:
        depth, s = stack.pop()
        out.append((depth, s))
        stack.extend((depth + 1, c) for c in reversed(children.get(s["step_number"], [])))
    return out
