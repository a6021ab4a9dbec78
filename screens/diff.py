"""The side-by-side diff of two traces: A (before) on the left, B (after) on the right.

The comparison is ``services.diff`` (the same alignment as ``agent-replay diff``): steps are
aligned by content, so an inserted step is one ``+`` line with a blank A side, not a cascade of
mismatches. It runs in a thread worker and arrives as ``DiffScreen.DiffLoaded``; the pairs are
shown by ``DiffView`` (one virtual view of pair lines, so both sides always scroll together)
and the highlighted pair's differences by ``PairDetail``. Above them, a summary: both traces,
the counts of each kind, the totals' deltas and the first divergence with what differs there.

Opened from the trace list (two marked traces, or a fork against its parent), from the
timeline of a fork (``d``), and by the fork editor once a fork is saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Static
from textual.worker import get_current_worker

from agent_replay.display import fmt_cost, fmt_int, fmt_ms, safe, truncate
from agent_replay.errors import AgentReplayError
from agent_replay.screens.base import BaseScreen, read_store
from agent_replay.services.diff import Delta, TraceDiff
from agent_replay.widgets.diff_view import (
    KIND_COLORS,
    MARKS,
    DiffRow,
    DiffView,
    change_style,
    diff_rows,
    first_divergence_row,
    signed_cost,
    signed_int,
    signed_ms,
)
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.pair_detail import PairDetail
from agent_replay.widgets.status import status_style
from agent_replay.widgets.step_timeline import STEP_COLORS, STEP_ICONS, annotation_labels
from agent_replay.widgets.title_bar import TitleBar

_MUTED = "$text-muted"
_MAX_PATHS = 3
"""Differing paths named in the first-divergence line."""


def _trace_line(side: str, trace: Mapping[str, Any], other: Mapping[str, Any]) -> Content:
    agent = safe(trace.get("agent_name") or "")
    if trace.get("agent_version"):
        agent += f" {safe(trace['agent_version'])}"
    status = str(trace.get("status") or "")
    steps = len(trace.get("steps") or [])
    parts: list[tuple[str, str] | str | Content] = [
        (f"{side}  ", f"bold {_MUTED}"),
        (str(trace["id"]), "bold"),
        ("  ", ""),
        (agent, "$text-primary"),
        ("  ", ""),
        (status, status_style(status)),
        (f"  {steps:,} step{'s' * (steps != 1)}", _MUTED),
    ]
    if trace.get("parent_trace_id"):
        parent = trace["parent_trace_id"]
        named = ("A" if side == "B" else "B") if parent == other.get("id") else str(parent)
        parts.append((f"  ⑂ fork of {named} at step {trace.get('forked_from_step')}", _MUTED))
    run_labels = annotation_labels(trace.get("annotations") or [])[0]
    if run_labels:
        chips = " ".join(f"#{safe(label)}" for label in run_labels)
        parts.append((f"  {chips}", "bold $text-accent"))
    return Content.assemble(*parts)


def _delta(label: str, delta: Delta, fmt: Any, signed: Any, note: str = "") -> Content:
    change = signed(delta.delta)
    parts: list[tuple[str, str] | str] = [
        (label + " ", _MUTED),
        fmt(delta.a),
        (" → ", _MUTED),
        fmt(delta.b),
    ]
    if change:
        parts.append((f" ({change}{note})", change_style(delta.delta)))
    elif note:
        parts.append((f" ({note.strip()})", _MUTED))
    return Content.assemble(*parts)


def diff_summary(diff: TraceDiff) -> Content:
    """The summary above the pairs: both traces, counts, totals and the first divergence."""
    lines = [_trace_line("A", diff.a, diff.b), _trace_line("B", diff.b, diff.a)]
    counts = diff.counts
    count_parts = [
        Content.assemble(
            (f"{MARKS[kind]} ", f"bold {KIND_COLORS[kind]}"),
            (f"{counts[kind]:,} {kind}", "" if counts[kind] else _MUTED),
        )
        for kind in ("matched", "changed", "inserted", "deleted")
    ]
    differing = list(dict.fromkeys(d.field for d in diff.trace_differences))
    compared = ("input",) if diff.fork_parent else ("input", "output")
    same = [f for f in compared if f not in differing]
    trace_note = []
    if differing:
        verb = "differs" if len(differing) == 1 else "differ"
        trace_note.append(Content.styled(f"trace {', '.join(differing)} {verb}", "$text-warning"))
    if same:
        trace_note.append(Content.styled(f"trace {' and '.join(same)} the same", _MUTED))
    if diff.fork_parent:
        parent = "A" if diff.fork_parent == "a" else "B"
        scope = "⑂ compared up to the fork"
        if diff.beyond_fork:
            later = f"{diff.beyond_fork:,} later step{'s' * (diff.beyond_fork != 1)}"
            scope += f" ({parent}'s {later} left out)"
        trace_note.append(Content.styled(scope, _MUTED))
    lines.append(
        Content.assemble(
            Content("  ").join(count_parts),
            ("   ·   ", _MUTED),
            Content.styled(" · ", _MUTED).join(trace_note),
        )
    )
    totals = diff.totals
    estimated = " est." if diff.cost_estimated else ""
    lines.append(
        Content.styled(" · ", _MUTED).join(
            [
                _delta("steps", totals.steps, _count, signed_int),
                _delta("tokens", totals.tokens, _count, signed_int),
                _delta("time", totals.duration_ms, fmt_ms, signed_ms),
                _delta("cost", totals.cost_usd, fmt_cost, signed_cost, estimated),
            ]
        )
    )
    lines.append(_divergence_line(diff))
    return Content("\n").join(lines)


def _count(value: float | None) -> str:
    return fmt_int(None if value is None else int(value))


def _divergence_line(diff: TraceDiff) -> Content:
    label = ("First divergence  ", f"bold {_MUTED}")
    first = diff.first_divergence
    if first is None:
        return Content.assemble(label, ("none: the steps and the input agree", "$text-success"))
    paths = [safe(d.path) for d in first.differences]
    shown = ", ".join(paths[:_MAX_PATHS]) + (", …" if len(paths) > _MAX_PATHS else "")
    if first.where == "input":
        return Content.assemble(
            label, ("the trace input", "bold $text-warning"), ("  ", ""), (shown, "")
        )
    where = f"A#{first.a_step}" if first.a_step is not None else "A —"
    where += f" / B#{first.b_step}" if first.b_step is not None else " / B —"
    step_type = str(first.step_type)
    what = {
        "changed": f"changed {shown}",
        "inserted": "inserted in B",
        "deleted": "deleted from A",
    }.get(str(first.kind), "")
    return Content.assemble(
        label,
        (where + "  ", "bold"),
        (f"{STEP_ICONS.get(step_type, '·')} {step_type} ", STEP_COLORS.get(step_type, "")),
        (truncate(safe(first.name or ""), 32), "bold"),
        ("  ", ""),
        (what, KIND_COLORS.get(str(first.kind), "")),
    )


class DiffScreen(BaseScreen):
    """Two traces side by side, aligned by content, with what differs in each pair."""

    TITLE = "Diff"
    CSS_PATH = "diff.tcss"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="back", tooltip="Back to where you were"),
        Binding("n", "next_difference", "Next diff", id="next-diff", tooltip="Next difference"),
        Binding(
            "N",
            "previous_difference",
            "Prev diff",
            id="previous-diff",
            tooltip="Previous difference",
        ),
        Binding(
            "g",
            "first_divergence",
            "Divergence",
            id="first-divergence",
            tooltip="Jump to where the traces first part ways",
        ),
        Binding("s", "swap", "Swap", id="swap", tooltip="Compare the other way round"),
        Binding(
            "enter",
            "open_step",
            "Open step",
            id="open-step",
            tooltip="This line's step in its trace's timeline (B's; A's for a deleted step)",
        ),
        Binding(
            "a",
            "open_step('a')",
            "Open A's step",
            id="open-step-a",
            tooltip="This line's step in trace A's timeline",
            show=False,
        ),
    ]

    @dataclass
    class DiffLoaded(Message):
        """The comparison arrived from the worker."""

        diff: TraceDiff
        rows: list[DiffRow]
        """The view's lines, built in the worker."""

    @dataclass
    class DiffLoadFailed(Message):
        """A trace could not be loaded (unknown id, ambiguous prefix, store error)."""

        error: str

    def __init__(self, a_id: str, b_id: str) -> None:
        """Args:
        a_id: trace A ("before"), an id or unique prefix.
        b_id: trace B ("after"), an id or unique prefix.
        """
        super().__init__()
        self.a_id = a_id
        """Trace A: the id given, the full id once loaded."""
        self.b_id = b_id
        """Trace B: the id given, the full id once loaded."""
        self.diff: TraceDiff | None = None
        """The comparison (``None`` until it arrives)."""

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static(Content(f"A {safe(self.a_id)}  ·  B {safe(self.b_id)}"), id="diff-summary")
        with Vertical(id="diff-body"):
            yield DiffView(id="diff-view")
            yield PairDetail(id="pair-detail")
        yield KeyBar()

    @property
    def view(self) -> DiffView:
        return self.query_one("#diff-view", DiffView)

    @property
    def detail(self) -> PairDetail:
        return self.query_one("#pair-detail", PairDetail)

    def on_mount(self) -> None:
        self.query_one("#diff-body").loading = True
        self.view.focus()
        self._load_diff(self.a_id, self.b_id)

    # --- loading ----------------------------------------------------------------------

    @work(thread=True, exclusive=True, exit_on_error=False, group="diff", description="diff")
    def _load_diff(self, a_id: str, b_id: str) -> None:
        """Compare the two traces; the result arrives as a message."""
        from agent_replay.services.diff import diff_stored

        try:
            with read_store(self.app) as store:
                diff = diff_stored(store, a_id, b_id)
        except AgentReplayError as exc:
            self.post_message(self.DiffLoadFailed(exc.message))
            return
        rows = diff_rows(diff)
        if not get_current_worker().is_cancelled:
            self.post_message(self.DiffLoaded(diff, rows))

    @on(DiffLoaded)
    def show_diff(self, message: DiffLoaded) -> None:
        diff = message.diff
        self.diff = diff
        self.a_id, self.b_id = str(diff.a["id"]), str(diff.b["id"])
        self.query_one("#diff-summary", Static).update(diff_summary(diff))
        first = first_divergence_row(diff, message.rows)
        self.view.set_rows(message.rows, titles=(self.a_id, self.b_id), select=first or 0)
        if not message.rows:
            self.detail.query_one("#pair-detail-body", Static).update(
                Content.styled("Neither trace has steps.", _MUTED)
            )
        self.query_one("#diff-body").loading = False

    @on(DiffLoadFailed)
    def leave_after_failure(self, message: DiffLoadFailed) -> None:
        """Say why the traces can't be compared, then go back: there is nothing to show."""
        self.query_one("#diff-body").loading = False
        self.notify(message.error, title="Cannot compare", severity="error", timeout=8)
        if self.is_current and len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    @on(DiffView.RowHighlighted, "#diff-view")
    def show_highlighted_pair(self, message: DiffView.RowHighlighted) -> None:
        if self.diff is not None:
            self.detail.show(self.diff, message.row)
            self.detail.border_title = self._detail_title(message.index)

    def _detail_title(self, index: int) -> str:
        rows = self.view.rows
        differences = sum(1 for row in rows if row.is_difference)
        return f"Line {index + 1:,} of {len(rows):,} · {differences:,} with differences"

    # --- actions ----------------------------------------------------------------------

    def action_next_difference(self) -> None:
        if not self.view.next_difference(1):
            self.notify("No more differences below.", title="Diff", timeout=3)

    def action_previous_difference(self) -> None:
        if not self.view.next_difference(-1):
            self.notify("No more differences above.", title="Diff", timeout=3)

    def action_first_divergence(self) -> None:
        if self.diff is None:
            return
        index = first_divergence_row(self.diff, self.view.rows)
        if index is None:
            self.notify("The traces agree: no divergence.", title="Diff", timeout=3)
            return
        self.view.cursor = index

    def action_open_step(self, side: str = "") -> None:
        """Open the highlighted line's step in its trace's timeline: B's step, or A's when
        ``side`` is ``a`` or the step exists only in A."""
        row = self.view.current
        if row is None or row.trace_part is not None:
            return
        use_a = side == "a" or row.b is None
        step_side = row.a if use_a else row.b
        if step_side is None or step_side.number is None:
            return
        self.app.open_trace(self.a_id if use_a else self.b_id, step_side.number)

    def action_swap(self) -> None:
        self.app.switch_screen(DiffScreen(self.b_id, self.a_id))
