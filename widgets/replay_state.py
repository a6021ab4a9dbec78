"""The state of a trace at the replay playhead: the current step, the running totals and the
agent's snapshot (context window, environment, tool state) as last recorded.

It only draws: the replay screen computes a ``PlayheadState`` with the replay service and assigns
it (attributes down). Producer text is escaped and rendered as plain ``Text``, never markup.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.reactive import var
from textual.widgets import Static

from agent_replay.display import fmt_cost, fmt_int, fmt_ms, preview, safe, truncate
from agent_replay.services.replay import SNAPSHOT_FIELDS, PlayheadState
from agent_replay.trace.io import dumps
from agent_replay.widgets.step_timeline import STEP_ICONS

PANE_TITLES = {
    "context_window": "Context window",
    "environment": "Environment",
    "tool_state": "Tool state",
}


def step_summary(step: dict[str, Any] | None) -> Text:
    """The current step: a heading line, then previews of its input and outcome."""
    if step is None:
        return Text("Before the first step. Space plays, → steps forward.", style="dim")
    text = Text()
    text.append(STEP_ICONS.get(step["step_type"], "•") + " ")
    text.append(f"#{step['step_number']} {step['step_type']}", style="bold")
    if step.get("name"):
        text.append(" ")
        text.append(truncate(safe(step["name"]), 40), style="bold")
    facts = [fmt_ms(step.get("duration_ms"))]
    if step.get("tokens_used") is not None:
        facts.append(f"{step['tokens_used']:,} tok")
    if step.get("model"):
        facts.append(truncate(safe(step["model"]), 30))
    text.append("  " + " · ".join(facts), style="dim")
    if step.get("caused_by_step") is not None:
        text.append(f"  ← #{step['caused_by_step']}", style="cyan")
    if step.get("input") is not None:
        text.append("\nin   ", style="dim")
        text.append(preview(step["input"], 200))
    if step.get("error"):
        text.append("\nerr  ", style="dim")
        text.append(safe(step["error"]), style="red")
    elif step.get("decision"):
        text.append("\nchose ", style="dim")
        text.append(preview(step["decision"].get("chosen"), 120), style="bold green")
    elif step.get("output") is not None:
        text.append("\nout  ", style="dim")
        text.append(preview(step["output"], 200))
    return text


def totals_text(state: PlayheadState, end: PlayheadState) -> Text:
    """Tokens, cost and recorded time so far, each beside the run's total."""
    text = Text()
    text.append("Tokens so far  ", style="dim")
    text.append(fmt_int(state.tokens), style="bold")
    text.append(f" / {fmt_int(end.tokens)}", style="dim")
    text.append("\nCost so far    ", style="dim")
    if state.cost_usd is None:
        text.append("not recorded", style="dim")
    else:
        approx = "~" if state.cost_estimated else ""
        text.append(approx + fmt_cost(state.cost_usd), style="bold")
        text.append(f" / {fmt_cost(end.cost_usd)}", style="dim")
        if end.cost_estimated:
            text.append("\n               (estimated from tokens)", style="dim italic")
    text.append("\nElapsed        ", style="dim")
    text.append(fmt_ms(state.elapsed_ms), style="bold")
    text.append(f" / {fmt_ms(end.elapsed_ms)} recorded", style="dim")
    return text


def snapshot_text(name: str, value: Any) -> Text:
    """One snapshot part, readable: a context window as ``role: content`` lines, a mapping as
    ``key: value`` lines, anything else as JSON."""
    text = Text()
    if (
        name == "context_window"
        and isinstance(value, list)
        and all(isinstance(m, dict) and "role" in m for m in value)
    ):
        for index, message in enumerate(value):
            if index:
                text.append("\n")
            text.append(f"{safe(message['role'])}: ", style="bold")
            content = message.get("content")
            if isinstance(content, str):
                text.append(safe(content, multiline=True))
            else:
                text.append(preview(content, 300))
        return text
    if isinstance(value, dict):
        for index, (key, item) in enumerate(value.items()):
            if index:
                text.append("\n")
            text.append(f"{safe(key)}: ", style="bold")
            text.append(preview(item, 300))
        return text
    if isinstance(value, str):
        return Text(safe(value, multiline=True))
    return Text(safe(dumps(value)))


def _update_box(box: Static, text: Text) -> None:
    """Show ``text`` in a box of automatic height without a layout pass unless it needs more
    lines than it has: a pass re-arranges and re-renders the whole column (every pane below
    moves), which made a step cost tens of milliseconds. A box that grew keeps its height
    (``min-height``) while the playhead moves, so stepping back and forth does not make the
    panes below jump; ``ReplayState.on_resize`` lets it fit its content again."""
    box.update(text, layout=False)
    width = box.size.width
    if not width:  # not laid out yet: the first pass sizes it
        box.refresh(layout=True)
        return
    needed = box.get_content_height(box.size, box.size, width)
    if needed > box.size.height:
        box.styles.min_height = needed + box.styles.gutter.height  # asks for the pass


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class ReplayState(Vertical):
    """The playhead's state: current step, totals, and one pane per snapshot part.

    Assign ``end`` (the state at the end of the run) once, then ``state`` at every move.
    """

    DEFAULT_CSS = """
    ReplayState {
        height: 1fr;
    }
    ReplayState > .replay-state--box {
        height: auto;
        padding: 0 1;
        border: round $surface-lighten-2;
        border-title-color: $text-muted;
    }
    ReplayState > .replay-state--pane {
        height: auto;
        max-height: 10;
        padding: 0 1;
        border: round $surface-lighten-2;
        border-title-color: $text-muted;
    }
    ReplayState > #pane-context-window {
        height: 1fr;
        max-height: 100%;
    }
    ReplayState > .replay-state--pane.-fresh {
        border: round $accent;
        border-title-color: $text;
    }
    """

    state: var[PlayheadState | None] = var(None)
    """The state shown (``None`` until the trace has loaded)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.end: PlayheadState | None = None
        """The state at the end of the run, for the "of" figures."""
        self._panes: dict[str, tuple[int, bool] | None] = {}
        """What each snapshot pane shows (the part's step, fresh or not): a move that
        changes none repaints none of them (each repaint is a layout pass)."""

    def compose(self) -> ComposeResult:
        current = Static("", id="replay-current", classes="replay-state--box")
        current.border_title = "Current step"
        yield current
        totals = Static("", id="replay-totals", classes="replay-state--box")
        totals.border_title = "So far"
        yield totals
        for name in SNAPSHOT_FIELDS:
            # Not focusable: the replay screen owns the arrow keys (the mouse still scrolls).
            pane = VerticalScroll(
                id=f"pane-{_kebab(name)}", classes="replay-state--pane", can_focus=False
            )
            pane.border_title = PANE_TITLES[name]
            with pane:
                yield Static("", id=f"snapshot-{_kebab(name)}")

    def on_resize(self) -> None:
        """A new width wraps differently: the boxes fit their content again."""
        for box in self.query(".replay-state--box"):
            box.styles.min_height = None

    def watch_state(self, state: PlayheadState | None) -> None:
        if state is None:
            return
        end = self.end or state
        _update_box(self.query_one("#replay-current", Static), step_summary(state.current))
        _update_box(self.query_one("#replay-totals", Static), totals_text(state, end))
        current = state.current["step_number"] if state.current else None
        for name in SNAPSHOT_FIELDS:
            part = state.snapshot.get(name)
            shown = None if part is None else (part.step_number, part.step_number == current)
            if name in self._panes and self._panes[name] == shown:
                continue
            self._panes[name] = shown
            pane = self.query_one(f"#pane-{_kebab(name)}", VerticalScroll)
            body = self.query_one(f"#snapshot-{_kebab(name)}", Static)
            if part is None:
                pane.border_title = PANE_TITLES[name]
                body.update(Text("not recorded yet", style="dim"))
                pane.set_class(False, "-fresh")
                continue
            fresh = part.step_number == current
            where = "recorded at this step" if fresh else f"as of step {part.step_number}"
            pane.border_title = f"{PANE_TITLES[name]} · {where}"
            pane.set_class(fresh, "-fresh")
            body.update(snapshot_text(name, part.value))
