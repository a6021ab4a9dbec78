"""The step hierarchy as a tree with a why-chain overlay, and the texts of the why and decision
panels beside it.

The tree follows ``parent_step`` (the same walk as ``show --tree``: ``tree_order``), shows each
``caused_by_step`` link on its node ("← #3"), and marks every step of the current why-chain.
The chain itself is computed by the screen with ``why_chain``, exactly as the ``why`` command
does; this module only draws it. Producer text is escaped and rendered as plain ``Text``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.reactive import var
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from agent_replay.display import preview, safe, truncate
from agent_replay.services.analysis import Hop, tree_order
from agent_replay.widgets.step_timeline import STEP_ICONS

Step = Mapping[str, Any]

REASONS = {
    "start": "",
    "caused_by": "caused by",
    "parent": "inside",
    "prior_decision": "after decision",
}
"""How each hop of a why-chain was reached, in words (as the ``why`` command says it)."""

CHAIN_STYLE = "bold yellow"
TYPE_STYLES = {"error": "red", "decision": "magenta", "guard_check": "cyan"}


def step_label(step: Step, *, mark: str = "") -> Text:
    """A step as one line: marker, icon, ``#N``, type, name and its causal link.

    Args:
        step: the format's step object.
        mark: ``start`` (the step asked about, ``●``), ``hop`` (on its why-chain, ``▸``) or
            empty.
    """
    on_chain = bool(mark)
    text = Text()
    text.append({"start": "● ", "hop": "▸ "}.get(mark, "  "), style=CHAIN_STYLE)
    text.append(STEP_ICONS.get(step["step_type"], "•") + " ")
    text.append(f"#{step['step_number']} ", style="bold")
    text.append(step["step_type"], style=TYPE_STYLES.get(step["step_type"], "dim"))
    if step.get("name"):
        text.append(" ")
        text.append(truncate(safe(step["name"]), 40), style=CHAIN_STYLE if on_chain else "")
    if step.get("caused_by_step") is not None:
        text.append(f"  ← #{step['caused_by_step']}", style="cyan")
    if step.get("error"):
        text.append("  ✗", style="red")
    return text


class WhyTree(Tree[Step]):
    """The ``parent_step`` hierarchy of a trace's steps, all expanded, with a why-chain marked.

    Set ``chain`` (step numbers, the asked-about step first) to mark a why-chain.
    """

    DEFAULT_CSS = """
    WhyTree {
        padding: 0 1;
    }
    """

    chain: var[tuple[int, ...]] = var(())
    """The why-chain shown: step numbers, the step asked about first."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("steps", id=id, classes=classes)
        self.show_root = False
        self.guide_depth = 3
        self._step_nodes: dict[int, TreeNode[Step]] = {}

    def load(self, steps: Sequence[Step]) -> None:
        """Replace the tree with ``steps``, nested by ``parent_step`` and fully expanded."""
        self.clear()
        self._step_nodes = {}
        order = tree_order(list(steps))
        path: list[TreeNode[Step]] = [self.root]
        for index, (depth, step) in enumerate(order):
            has_children = index + 1 < len(order) and order[index + 1][0] > depth
            del path[depth + 1 :]
            parent = path[depth]
            label = self._label_for(step)
            if has_children:
                node = parent.add(label, data=step, expand=True)
                path.append(node)
            else:
                node = parent.add_leaf(label, data=step)
            self._step_nodes[step["step_number"]] = node
        self.root.expand()

    def node_for(self, step_number: int) -> TreeNode[Step] | None:
        """The node of a step (``None`` if the trace has no such step)."""
        return self._step_nodes.get(step_number)

    def show_step(self, step_number: int) -> None:
        """Move the cursor to a step (which highlights it, so the screen shows its chain)."""
        node = self._step_nodes.get(step_number)
        if node is not None:
            # Reading last_line lays out the tree lines, so a node added just now has its line.
            if self.last_line >= 0:
                self.move_cursor(node)

    def marked_steps(self) -> list[int]:
        """The step numbers currently marked as on the why-chain, in tree order."""
        chain = set(self.chain)
        return [n for n in self._step_nodes if n in chain]

    def _label_for(self, step: Step) -> Text:
        number = step["step_number"]
        mark = ""
        if self.chain and number == self.chain[0]:
            mark = "start"
        elif number in self.chain:
            mark = "hop"
        return step_label(step, mark=mark)

    def watch_chain(self, old: tuple[int, ...], new: tuple[int, ...]) -> None:
        # Relabel only the steps whose marking changed: cheap on a 10,000-step tree.
        for number in set(old) | set(new):
            node = self._step_nodes.get(number)
            if node is not None and node.data is not None:
                node.set_label(self._label_for(node.data))


def why_text(hops: Sequence[Hop], selected: int | None = None) -> Text:
    """The why panel: each hop of the chain with how it was reached, and at each decision the
    option chosen and why. Hop ``selected`` (an index into ``hops``) is highlighted: Enter
    opens it in the timeline."""
    text = Text()
    if not hops:
        return text
    first = hops[0].step
    text.append("Why ", style="bold")
    text.append_text(_step_ref(first))
    text.append("?\n", style="bold")
    if selected == 0:
        text.stylize("reverse", 0, len(text) - 1)
    for depth, hop in enumerate(hops[1:], start=1):
        s = hop.step
        pad = "  " * depth
        start = len(text)
        text.append(f"{pad}↑ ")
        text.append(REASONS[hop.reason], style="italic dim")
        text.append(" ")
        text.append_text(_step_ref(s, style=CHAIN_STYLE))
        if depth == selected:
            text.stylize("reverse", start + len(pad), len(text))
        text.append("\n")
        decision = s.get("decision")
        if decision:
            text.append(f"{pad}    chose ", style="dim")
            text.append(preview(decision["chosen"], 60), style="bold")
            text.append("\n")
            if decision.get("rationale"):
                text.append(f"{pad}    because ", style="dim")
                text.append(safe(decision["rationale"]))
                text.append("\n")
    if len(hops) == 1:
        text.append(
            "  (no recorded cause: no caused_by_step, parent_step or earlier decision)",
            style="dim",
        )
    text.rstrip()
    return text


def _step_ref(step: Step, style: str = "") -> Text:
    ref = Text(f"#{step['step_number']} {step['step_type']}", style="bold")
    if step.get("name"):
        ref.append(" ")
        ref.append(truncate(safe(step["name"]), 48), style=style)
    return ref


def decisions_text(points: Sequence[dict[str, Any]]) -> Text:
    """The decisions panel: every decision point with its options (● the chosen one), scores,
    rationales, confidence and who decided."""
    text = Text()
    if not points:
        text.append("No decision points recorded in this trace.", style="dim")
        return text
    for index, d in enumerate(points):
        if index:
            text.append("\n")
        text.append(f"#{d['step_number']} ", style="bold")
        text.append(truncate(safe(d.get("name") or "decision"), 40), style="bold magenta")
        facts = []
        if d.get("decided_by"):
            facts.append(f"by {safe(d['decided_by'])}")
        if d.get("confidence") is not None:
            facts.append(f"confidence {d['confidence']:.2f}")
        if facts:
            text.append(f"  ({', '.join(facts)})", style="dim")
        text.append("\n  chose ", style="dim")
        text.append(preview(d.get("chosen"), 70), style="bold green")
        text.append("\n")
        if d.get("rationale"):
            text.append("  because ", style="dim")
            text.append(safe(d["rationale"]))
            text.append("\n")
        for option in d.get("options") or []:
            chosen = option.get("option") == d.get("chosen")
            text.append("    ● " if chosen else "    ○ ", style="green" if chosen else "dim")
            text.append(preview(option.get("option"), 40), style="bold" if chosen else "")
            if option.get("score") is not None:
                text.append(f" [{option['score']:.2f}]", style="dim")
            text.append("\n")
            if option.get("rationale"):
                text.append("      " + safe(option["rationale"]) + "\n", style="dim")
    text.rstrip()
    return text
