"""The tree and why view of one trace: the step hierarchy, the why-chain of the selected step and
every decision point.

The trace loads in a thread worker. Moving the cursor onto a step marks its why-chain in the tree
and explains it in the side panel; the chain is ``why_chain`` from the analysis service, the same
walk the ``why`` command prints. Producer text is escaped and shown as plain ``Text``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static, Tree

from agent_replay.display import fmt_int, fmt_ms, safe, truncate
from agent_replay.screens.base import TraceScreen
from agent_replay.services.analysis import decision_points, why_chain
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.title_bar import TitleBar
from agent_replay.widgets.why_tree import WhyTree, decisions_text, why_text


class WhyPanel(VerticalScroll, can_focus=True):
    """The why-chain panel: ↑/↓ pick a hop, Enter opens it in the timeline."""

    BINDINGS = [
        Binding("up", "hop(-1)", "Previous hop", id="hop-up", show=False),
        Binding("down", "hop(1)", "Next hop", id="hop-down", show=False),
        Binding(
            "enter",
            "open_hop",
            "Open hop",
            id="open-hop",
            tooltip="Open the selected hop's step in the timeline",
        ),
    ]

    @dataclass
    class HopMoved(Message):
        """↑/↓ in the panel."""

        delta: int

    @dataclass
    class HopChosen(Message):
        """Enter in the panel."""

    def action_hop(self, delta: int) -> None:
        self.post_message(self.HopMoved(delta))

    def action_open_hop(self) -> None:
        self.post_message(self.HopChosen())


class TreeWhyScreen(TraceScreen):
    """The steps of a trace as a tree; the why-chain of the step under the cursor; decisions."""

    TITLE = "Tree and why"
    CSS_PATH = "tree_why.tcss"
    BINDINGS = [
        Binding(
            "escape",
            "back",
            "Back",
            id="back",
            tooltip="Back to the previous screen",
            priority=True,
        ),
        Binding("w", "focus_why", "Why", id="why", tooltip="Focus the why-chain panel"),
        Binding("d", "focus_decisions", "Decisions", id="decisions", tooltip="Focus the decisions"),
        Binding("s", "focus_tree", "Steps", id="steps", tooltip="Focus the step tree", show=False),
        Binding(
            "p", "replay", "Replay", id="replay", tooltip="Replay the trace up to the selected step"
        ),
    ]

    step: reactive[int | None] = reactive(None, init=False)
    """The selected step number, whose why-chain is shown."""

    def __init__(self, trace_id: str, *, step: int | None = None) -> None:
        """Args:
        trace_id: a trace id or unique prefix.
        step: the step to select first (default: the first step).
        """
        super().__init__(trace_id)
        self._initial_step = step
        self._steps: Sequence[Mapping[str, Any]] = []
        self._chain: list[Any] = []
        self.hop = 0
        """Index of the hop picked in the why panel (0: the step itself)."""

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static("", id="tree-why-title")
        with Horizontal(id="tree-why-body"):
            yield WhyTree(id="why-tree")
            with Vertical(id="tree-why-side"):
                with WhyPanel(id="why-panel") as why:
                    why.border_title = "Why"
                    yield Static("", id="why-text")
                with VerticalScroll(id="decisions-panel", can_focus=True) as decisions:
                    decisions.border_title = "Decisions"
                    yield Static("", id="decisions-text")
        yield KeyBar()

    @property
    def why_tree(self) -> WhyTree:
        return self.query_one("#why-tree", WhyTree)

    def on_mount(self) -> None:
        self.why_tree.loading = True
        self.load_trace()

    @on(TraceScreen.TraceLoaded)
    def show_trace(self, message: TraceScreen.TraceLoaded) -> None:
        trace = message.trace
        self.trace_id = trace["id"]
        self._steps = trace["steps"]
        self.query_one("#tree-why-title", Static).update(_title(trace))
        self.query_one("#decisions-text", Static).update(
            decisions_text(decision_points(self._steps))
        )
        tree = self.why_tree
        tree.loading = False
        tree.load(self._steps)
        tree.focus()
        if not self._steps:
            self.query_one("#why-text", Static).update(Text("This trace has no steps."))
            return
        numbers = [s["step_number"] for s in self._steps]
        first = self._initial_step
        if first is None or first not in numbers:
            first = numbers[0]
        tree.show_step(first)
        self.step = first

    @on(TraceScreen.TraceLoadFailed)
    def show_error(self, message: TraceScreen.TraceLoadFailed) -> None:
        self.why_tree.loading = False
        self.query_one("#why-text", Static).update(Text(message.error, style="red"))
        self.notify(message.error, title="Tree and why", severity="error")

    # --- the why-chain ----------------------------------------------------------------

    @on(Tree.NodeHighlighted, "#why-tree")
    def follow_cursor(self, event: Tree.NodeHighlighted[dict[str, Any]]) -> None:
        if event.node.data is not None:
            self.step = event.node.data["step_number"]

    def watch_step(self, step: int | None) -> None:
        if step is None or not self._steps:
            return
        self._chain = why_chain(self._steps, step)
        self.why_tree.chain = tuple(h.step["step_number"] for h in self._chain)
        self.hop = 0
        self._show_chain()
        self.query_one("#why-panel", VerticalScroll).scroll_home(animate=False)

    def _show_chain(self) -> None:
        panel = self.query_one("#why-panel", WhyPanel)
        selected = self.hop if panel.has_focus else None
        self.query_one("#why-text", Static).update(why_text(self._chain, selected))

    @on(WhyPanel.HopMoved)
    def move_hop(self, message: WhyPanel.HopMoved) -> None:
        if self._chain:
            self.hop = max(0, min(self.hop + message.delta, len(self._chain) - 1))
            self._show_chain()

    @on(WhyPanel.HopChosen)
    def open_hop(self) -> None:
        """Enter on a hop: that step in the trace's timeline."""
        if self._chain:
            step = self._chain[self.hop].step["step_number"]
            self.app.open_trace(self.trace_id, step)

    @on(events.DescendantFocus)
    @on(events.DescendantBlur)
    def redraw_hops(self) -> None:
        if self._chain:
            self._show_chain()

    # --- actions ----------------------------------------------------------------------

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_focus_why(self) -> None:
        self.query_one("#why-panel").focus()

    def action_focus_decisions(self) -> None:
        self.query_one("#decisions-panel").focus()

    def action_focus_tree(self) -> None:
        self.why_tree.focus()

    def action_replay(self) -> None:
        from agent_replay.screens.replay import ReplayScreen

        # The cursor, not ``step``: a NodeHighlighted still queued hasn't updated ``step`` yet.
        node = self.why_tree.cursor_node
        step = node.data["step_number"] if node is not None and node.data else self.step
        self.app.push_screen(ReplayScreen(self.trace_id, at_step=step))


def _title(trace: Mapping[str, Any]) -> Text:
    text = Text()
    text.append(trace["id"], style="bold")
    text.append("  ")
    text.append(truncate(safe(trace["agent_name"]), 40))
    text.append(f"  {trace['status']}", style="red" if trace["status"] == "failed" else "dim")
    text.append(
        f"  {len(trace['steps'])} steps · {fmt_int(trace['total_tokens'])} tokens · "
        f"{fmt_ms(trace['total_duration_ms'])}",
        style="dim",
    )
    return text
