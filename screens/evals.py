"""The eval results screen: stored evaluations as a table, the selected one in full (its
criteria, scores, weights and evidence: which step, which text).

Two scopes. Pushed from a trace's timeline (``e``) it shows that trace's evaluations and can run
the deterministic presets on it (``r``). As the app's ``evals`` mode (``E``) it shows the latest
evaluations of every trace, newest first, a keyset page at a time; Enter opens the selected
evaluation's trace.

Every store access runs in a thread worker that posts a message; producer text (evidence
excerpts, AI summaries) is escaped with ``display.safe`` and shown as plain ``Content``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from agent_replay.display import fmt_cost, fmt_time, safe, truncate
from agent_replay.errors import AgentReplayError
from agent_replay.screens.base import BaseScreen, read_store
from agent_replay.screens.live_watch import fmt_age
from agent_replay.trace.base import canonical_time, time_ms
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.title_bar import TitleBar

PAGE_SIZE = 200
PREFETCH_MARGIN = 40
BAR_WIDTH = 20
"""Cells of the score bar in the detail pane."""
_MUTED = "$text-muted"
_PASS = "bold $text-success"
_FAIL = "bold $text-error"

EMPTY_TRACE = (
    "No evaluations of this trace yet.\n\n"
    "Press r to run the deterministic presets here,\n"
    "or from a shell:   agent-replay eval {id}   (add --ai for an AI review)"
)
EMPTY_STORE = (
    "No evaluations yet.\n\n"
    "Evaluate a trace:   agent-replay eval TRACE_ID\n"
    "Or open a trace and press e, then r."
)


def cost_text(cost: float | None) -> str:
    """A cost precise enough for one cheap AI call (``$0.00045``)."""
    if cost is None:
        return "-"
    if cost >= 0.01:
        return fmt_cost(cost)
    return "$" + f"{cost:.6f}".rstrip("0").rstrip(".")


def verdict(evaluation: Mapping[str, Any]) -> Content:
    """``PASS`` or ``FAIL``, coloured."""
    return Content.styled("PASS", _PASS) if evaluation["passed"] else Content.styled("FAIL", _FAIL)


def score_text(evaluation: Mapping[str, Any]) -> str:
    """``0.60 / 0.70`` (or just the score without a threshold)."""
    threshold = evaluation.get("threshold")
    score = f"{evaluation['score']:.2f}"
    return f"{score} / {threshold:.2f}" if threshold is not None else score


def score_bar(score: float, threshold: float | None, width: int = BAR_WIDTH) -> Content:
    """A bar of ``width`` cells filled to the score, with the threshold marked ``│``."""
    filled = max(0, min(width, round(score * width)))
    mark = None if threshold is None else max(0, min(width - 1, round(threshold * width)))
    style = _PASS if threshold is None or score >= threshold else _FAIL
    parts: list[tuple[str, str]] = []
    for index in range(width):
        if index == mark:
            parts.append(("│", "bold $text"))
        elif index < filled:
            parts.append(("█", style))
        else:
            parts.append(("░", _MUTED))
    return Content.assemble(*parts)


def detail_content(evaluation: Mapping[str, Any]) -> Content:
    """Everything about one evaluation, as lines of plain ``Content``."""
    details = evaluation.get("details") or {}
    lines: list[Content] = [
        Content.assemble(
            (safe(evaluation["evaluator"]), "bold"),
            "  ",
            verdict(evaluation),
            "  ",
            score_text(evaluation),
        ),
        score_bar(float(evaluation["score"]), evaluation.get("threshold")),
    ]
    facts = []
    if evaluation.get("model"):
        facts.append(f"model {safe(evaluation['model'])}")
    if evaluation.get("cost_usd"):
        facts.append(f"cost {cost_text(evaluation['cost_usd'])}")
    if evaluation.get("created_at"):
        facts.append(fmt_time(evaluation["created_at"]))
    if evaluation.get("trace_id"):
        agent = f" ({safe(evaluation['agent_name'])})" if evaluation.get("agent_name") else ""
        facts.append(f"{evaluation['trace_id']}{agent}")
    if facts:
        lines.append(Content.styled(" · ".join(facts), _MUTED))
    if details.get("summary"):
        lines.append(Content(""))
        lines.append(Content(safe(details["summary"])))
    for criterion in details.get("criteria") or []:
        lines.append(Content(""))
        lines.extend(_criterion_lines(criterion))
    lines.extend(_extra_lines(details))
    return Content("\n").join(lines)


def _criterion_lines(criterion: dict[str, Any]) -> list[Content]:
    score = criterion.get("score")
    if score is None:
        icon, style, shown = "•", _MUTED, ""
    elif score >= 1:
        icon, style, shown = "✓", _PASS, f"{score:.2f}"
    else:
        icon, style, shown = "✗", _FAIL, f"{score:.2f}"
    weight = criterion.get("weight") or 0
    head: list[str | tuple[str, str]] = [
        (icon, style),
        " ",
        (safe(criterion.get("name") or ""), "bold"),
    ]
    if shown:
        head += ["  ", (shown, style)]
    if weight:
        head.append((f"  weight {weight:.0%}", _MUTED))
    if criterion.get("applicable") is False:
        head.append(("  not applicable", _MUTED))
    lines = [Content.assemble(*head)]
    if criterion.get("summary"):
        lines.append(Content.assemble("  ", (safe(criterion["summary"]), "")))
    for item in criterion.get("evidence") or []:
        step = item.get("step")
        where = (
            f"step {step} {item.get('field')}" if step is not None else f"trace {item.get('field')}"
        )
        parts: list[Any] = ["    ", (where, "$text-accent")]
        if item.get("text"):
            parts += ["  ", f"“{truncate(safe(item['text']), 160)}”"]
        if item.get("note"):
            parts += ["  ", (f"({safe(item['note'])})", _MUTED)]
        lines.append(Content.assemble(*parts))
    return lines


def _extra_lines(details: dict[str, Any]) -> list[Content]:
    lines: list[Content] = []
    if details.get("risk_level"):
        lines += [
            Content(""),
            Content.assemble(("risk level ", _MUTED), (details["risk_level"], "bold")),
        ]
    if details.get("suggestions"):
        lines += [Content(""), Content.styled("Suggestions", "bold")]
        lines += [Content(f"• {safe(s)}") for s in details["suggestions"]]
    trace = details.get("trace")
    if isinstance(trace, dict) and trace.get("summarized"):
        lines += [
            Content(""),
            Content.styled(
                f"The trace was summarized to fit: {trace.get('steps_shown')} of "
                f"{trace.get('steps_total')} steps sent.",
                _MUTED,
            ),
        ]
    return lines


class EvalsScreen(BaseScreen):
    """Stored evaluations: of one trace, or of every trace (the ``evals`` mode)."""

    TITLE = "Evaluations"
    CSS_PATH = "evals.tcss"
    BINDINGS = [
        Binding("escape", "back", "Back", id="back", tooltip="Back to the previous screen"),
        Binding(
            "r",
            "run_presets",
            "Run presets",
            id="run-presets",
            tooltip="Run the deterministic presets on this trace and store the results",
        ),
        Binding("o", "open_trace", "Open trace", id="open-trace", tooltip="Open the trace"),
        Binding("R", "reload", "Reload", id="reload-evals", tooltip="Reload from the store"),
    ]

    selected: reactive[str | None] = reactive(None, init=False)
    """The id of the evaluation shown in the detail pane."""

    @dataclass
    class EvalsLoaded(Message):
        """A page of evaluations arrived from the worker."""

        evaluations: Sequence[Mapping[str, Any]]
        title: Content
        after: tuple[int, Any] | None = None
        append: bool = False
        trace_id: str | None = None
        """The full id of the trace shown (``None`` for every trace)."""

    @dataclass
    class LoadFailed(Message):
        """The evaluations could not be loaded (an unknown trace id)."""

        error: str

    @dataclass
    class PresetsRan(Message):
        """The deterministic presets ran on the trace and were stored."""

        count: int
        failed: list[str]

    def __init__(self, trace_id: str | None = None, *, step: int | None = None) -> None:
        """Args:
        trace_id: the trace whose evaluations to show (an id or unique prefix); ``None``
            shows every trace's, newest first.
        step: the step the user came from: the first evaluation whose evidence cites it is
            selected, and ``o`` opens the timeline there.
        """
        super().__init__()
        self.step = step
        """The step the user came from (``None``: none)."""
        self.trace_id = trace_id
        """The trace shown (the full id once loaded); ``None`` for every trace."""
        self._evaluations: dict[str, Mapping[str, Any]] = {}
        self._after: tuple[int, Any] | None = None
        self._loading = False
        self._refreshing = False

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static("", id="evals-title")
        with Horizontal(id="evals-body"):
            yield DataTable(id="eval-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="eval-detail", can_focus=True) as detail:
                detail.border_title = "Evaluation"
                yield Static("", id="eval-detail-text")
        yield Static("", id="evals-empty", classes="-empty-state")
        yield KeyBar()

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#eval-table", DataTable)

    @property
    def scoped(self) -> bool:
        """Whether the screen shows one trace's evaluations."""
        return self.trace_id is not None

    def on_mount(self) -> None:
        if self.scoped:
            self.table.add_columns("EVALUATOR", "RESULT", "SCORE", "MODEL", "COST", "WHEN")
        else:
            # The agent shows in the detail pane: five columns fit the table's width.
            self.table.add_columns("RESULT", "EVALUATOR", "SCORE", "TRACE", "WHEN")
        self.query_one("#evals-empty").display = False
        self.table.focus()
        self.reload()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "run_presets":
            return self.scoped
        if action == "open_trace":
            return not self.scoped or self.step is not None
        if action == "back":
            return len(self.app.screen_stack) > 1
        return True

    # --- loading ----------------------------------------------------------------------

    def reload(self, *, quiet: bool = False) -> None:
        """Load the first page again (``quiet``: a live refresh, no loading veil and the
        selection kept)."""
        if not quiet:
            self.query_one("#evals-body").loading = True
        self._refreshing = quiet
        self._loading = True
        self._load(None)

    def store_changed(self) -> None:
        """New results may have been stored (``eval`` in another terminal): read again."""
        if not self._loading:
            self.reload(quiet=True)

    @work(thread=True, exclusive=True, exit_on_error=False, group="evals", description="evals")
    def _load(self, after: tuple[int, Any] | None) -> None:
        from agent_replay.services.evals.records import recent_evals
        from agent_replay.store.trace_detail import resolve_trace_id, trace_json

        try:
            with read_store(self.app) as store:
                if self.trace_id is not None:
                    full_id = resolve_trace_id(store, self.trace_id)
                    # The trace's header and evals; steps 1..0 is none of its steps.
                    trace = trace_json(store, full_id, from_step=1, to_step=0)
                    # Newest run first; a run's results in the order they ran (stable sort).
                    evaluations = sorted(
                        trace["evals"], key=lambda e: e.get("created_at") or "", reverse=True
                    )
                    message = self.EvalsLoaded(evaluations, _trace_title(trace), trace_id=full_id)
                else:
                    page = recent_evals(store, limit=PAGE_SIZE, after=after)
                    title = Content.assemble(
                        ("Evaluations", "bold"), ("  ·  every trace, newest first", _MUTED)
                    )
                    message = self.EvalsLoaded(page.items, title, page.after, after is not None)
        except AgentReplayError as exc:
            self.post_message(self.LoadFailed(exc.message))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    @on(EvalsLoaded)
    def show_evaluations(self, message: EvalsLoaded) -> None:
        table = self.table
        kept = self.selected
        if not message.append:
            self.mark_updated()
        if not message.append:
            table.clear()
            self._evaluations = {}
        if message.trace_id is not None:
            self.trace_id = message.trace_id
        for evaluation in message.evaluations:
            key = str(evaluation["id"])
            self._evaluations[key] = evaluation
            table.add_row(*self._row(evaluation), key=key)
        self._after = message.after
        self._loading = False
        self.query_one("#evals-title", Static).update(message.title)
        self.query_one("#evals-body").loading = False
        empty = not self._evaluations
        self.query_one("#evals-body").display = not empty
        placeholder = self.query_one("#evals-empty", Static)
        placeholder.display = empty
        if empty:
            text = EMPTY_TRACE.format(id=self.trace_id) if self.scoped else EMPTY_STORE
            placeholder.update(Content(safe(text, multiline=True)))
        elif not message.append:
            keys = list(self._evaluations)
            row = 0
            if self._refreshing and kept in self._evaluations:
                row = keys.index(kept)
            elif self.step is not None:
                row = next(
                    (
                        i
                        for i, key in enumerate(keys)
                        if cites_step(self._evaluations[key].get("details"), self.step)
                    ),
                    0,
                )
            table.move_cursor(row=row)
            self.selected = keys[row]

    def _row(self, evaluation: Mapping[str, Any]) -> list[Any]:
        # Rich ``Text`` cells, as the trace list uses: DataTable sizes columns from them.
        created = evaluation.get("created_at")
        now_ms = time_ms(canonical_time(self.app.clock.now()))
        when = Text(fmt_age(time_ms(created), now_ms or 0) if created else "-")
        result = (
            Text("PASS", style="bold green") if evaluation["passed"] else Text("FAIL", "bold red")
        )
        if self.scoped:
            model = evaluation.get("model")
            return [
                Text(safe(evaluation["evaluator"])),
                result,
                Text(score_text(evaluation), justify="right"),
                Text(truncate(safe(model or "-"), 28)),
                Text(cost_text(evaluation.get("cost_usd")) if model else "-", justify="right"),
                when,
            ]
        return [
            result,
            Text(truncate(safe(evaluation["evaluator"]), 24)),
            Text(f"{evaluation['score']:.2f}", justify="right"),
            Text(truncate(str(evaluation["trace_id"]), 24)),
            when,
        ]

    @on(LoadFailed)
    def show_failure(self, message: LoadFailed) -> None:
        self.query_one("#evals-body").loading = False
        self.query_one("#evals-title", Static).update(Content.styled(message.error, _FAIL))
        self.notify(message.error, title="Evaluations", severity="error", timeout=8)

    # --- selection --------------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#eval-table")
    def follow_cursor(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.selected = event.row_key.value
        if (
            not self.scoped
            and self._after is not None
            and not self._loading
            and event.cursor_row >= len(self._evaluations) - PREFETCH_MARGIN
        ):
            self._loading = True
            self._load(self._after)

    def watch_selected(self, selected: str | None) -> None:
        evaluation = self._evaluations.get(selected or "")
        text = self.query_one("#eval-detail-text", Static)
        text.update(detail_content(evaluation) if evaluation else Content(""))
        self.query_one("#eval-detail", VerticalScroll).scroll_home(animate=False)

    @on(DataTable.RowSelected, "#eval-table")
    def open_selected(self, event: DataTable.RowSelected) -> None:
        if not self.scoped:
            self.action_open_trace()

    # --- actions ----------------------------------------------------------------------

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_reload(self) -> None:
        self.reload()

    def action_open_trace(self) -> None:
        evaluation = self._evaluations.get(self.selected or "")
        trace_id = evaluation.get("trace_id") if evaluation else self.trace_id
        if not trace_id:
            return
        step = self.step
        if step is None and evaluation is not None:
            step = first_cited_step(evaluation.get("details"))
        self.app.open_trace(str(trace_id), step)

    def action_run_presets(self) -> None:
        if self.trace_id is not None:
            self.notify("Running the deterministic presets…", title="Evaluate", timeout=3)
            self._run_presets(self.trace_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="evals-run", description="eval")
    def _run_presets(self, trace_id: str) -> None:
        from agent_replay.services.evals.runner import make_plan, run_evals

        store = self.app.store
        with store.db.connection_context():
            run = run_evals(store, trace_id, make_plan(), clock=self.app.clock)
        failed = [o.evaluator for o in run.outcomes if not o.passed]
        self.post_message(self.PresetsRan(len(run.outcomes), failed))

    @on(PresetsRan)
    def show_run(self, message: PresetsRan) -> None:
        if message.failed:
            text = f"{len(message.failed)} of {message.count} failed: {', '.join(message.failed)}"
            self.notify(text, title="Evaluate", severity="warning")
        else:
            self.notify(f"All {message.count} presets passed.", title="Evaluate")
        self.reload()


def _cited_steps(details: Any) -> Iterator[int]:
    """Step numbers an evaluation's details cite (``{"step": N}`` in its evidence)."""
    if isinstance(details, dict):
        step = details.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            yield step
        for value in details.values():
            yield from _cited_steps(value)
    elif isinstance(details, list):
        for value in details:
            yield from _cited_steps(value)


def cites_step(details: Any, step: int) -> bool:
    """Whether an evaluation's details cite ``step``."""
    return any(n == step for n in _cited_steps(details))


def first_cited_step(details: Any) -> int | None:
    """The first step an evaluation's details cite."""
    return next(_cited_steps(details), None)


def _trace_title(trace: Mapping[str, Any]) -> Content:
    agent = safe(trace.get("agent_name") or "")
    return Content.assemble(
        ("Evaluations of ", _MUTED),
        (str(trace["id"]), "bold"),
        ("  ·  ", _MUTED),
        (agent, "bold $text-primary"),
        ("  ·  ", _MUTED),
        (str(trace.get("status") or ""), "bold"),
    )
