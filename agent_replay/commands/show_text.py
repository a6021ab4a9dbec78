"""What ``show`` prints, click-free (the read fast path, ``fast_read``, runs it too): the
trace header, then its steps streamed from the store a page at a time and written as they come
(human lines, or the same JSON ``emit_json`` would write), so memory stays flat however long the
trace. ``--tree`` orders the whole trace first, so it holds the steps.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from agent_replay.commands._output import STATUS_COLORS, Painter, step_out_of_range, use_color
from agent_replay.display import (
    STEP_EMOJI,
    fmt_cost,
    fmt_int,
    fmt_ms,
    fmt_time,
    preview,
    safe,
    truncate,
)
from agent_replay.services.outcome import outcome_note
from agent_replay.services.proxy.rerun import replay_mark
from agent_replay.store.core import Store

if TYPE_CHECKING:  # types only: the fast path imports no shapes (see store/shapes)
    from agent_replay.store.shapes import AnnotationJSON, EvalJSON, StepJSON, TraceJSON

PRICING_KEYS = ("cost_source", "cost_missing")


class ShowOptions:
    """The options of ``show``. Plain classes here, not dataclasses: ``dataclasses`` imports
    ``inspect``, ~7 ms of the fast path's start-up (issue 17)."""

    __slots__ = ("steps_only", "evals", "snapshots", "tree", "from_step", "to_step", "as_json")

    def __init__(
        self,
        steps_only: bool = False,
        evals: bool = False,
        snapshots: bool = False,
        tree: bool = False,
        from_step: int | None = None,
        to_step: int | None = None,
        as_json: bool = False,
    ) -> None:
        self.steps_only = steps_only
        self.evals = evals
        self.snapshots = snapshots
        self.tree = tree
        self.from_step = from_step
        self.to_step = to_step
        self.as_json = as_json


class ShowPlan:
    """A resolved ``show``: the trace's own fields (no steps), ready to stream."""

    __slots__ = ("trace_id", "head", "options")

    def __init__(self, trace_id: str, head: TraceJSON, options: ShowOptions) -> None:
        self.trace_id = trace_id
        self.head = head
        self.options = options


def prepare_show(store: Store, text: str, options: ShowOptions) -> ShowPlan:
    """Resolve the trace and check the step window; nothing is printed yet.

    Raises:
        UsageError, NotFoundError, AmbiguousIdError: a bad window, or no such trace.
    """
    from agent_replay.errors import UsageError
    from agent_replay.store.trace_detail import resolve_trace_id, step_span, trace_json

    from_step, to_step = options.from_step, options.to_step
    if from_step is not None and to_step is not None and to_step < from_step:
        raise UsageError(f"--to-step {to_step} is before --from-step {from_step}")
    full_id = resolve_trace_id(store, text)
    if from_step is not None:
        span = step_span(store, full_id)
        if span is None or from_step > span[1]:
            raise step_out_of_range("--from-step", from_step, full_id, span)
    head = trace_json(store, full_id, from_step=from_step, to_step=to_step, with_steps=False)
    return ShowPlan(full_id, head, options)


def write_show(store: Store, plan: ShowPlan) -> None:
    """Print the trace (the store stays open while its steps stream)."""
    from agent_replay.store.trace_detail import iter_step_dicts, step_metadata_with

    o = plan.options

    def steps() -> Iterator[StepJSON]:
        return iter_step_dicts(store, plan.trace_id, from_step=o.from_step, to_step=o.to_step)

    if o.as_json:
        _stream_json(plan.head, steps())
        return
    render = _Renderer(plan.head.get("annotations") or [])
    if not o.steps_only:
        metas = step_metadata_with(
            store, plan.trace_id, PRICING_KEYS, from_step=o.from_step, to_step=o.to_step
        )
        render.header(plan.head, _pricing(metas))
    if o.tree:
        render.tree(list(steps()))
    else:
        render.timeline(steps())
    if o.snapshots:
        render.snapshots(steps())
    if o.evals:
        render.evals(plan.head["evals"])
    sys.stdout.flush()


def _stream_json(head: TraceJSON, steps: Iterator[StepJSON]) -> None:
    """Write ``head`` with ``steps`` in its ``steps`` key, byte for byte what ``emit_json``
    writes for the whole object, one step at a time."""
    from agent_replay.trace.io import dumps_bytes

    whole = dumps_bytes({**_with_steps_key(head)}, indent=True)
    marker = b'\n  "steps": []'
    cut = whole.index(marker)  # top level: a newline never appears inside a JSON string
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    write = out.write if out is not None else (lambda b: sys.stdout.write(b.decode()))
    sys.stdout.flush()
    write(whole[:cut] + b'\n  "steps": [')
    first = True
    for step in steps:
        body = dumps_bytes(step, indent=True).replace(b"\n", b"\n    ")
        write((b"\n    " if first else b",\n    ") + body)
        first = False
    write((b"]" if first else b"\n  ]") + whole[cut + len(marker) :] + b"\n")
    if out is not None:
        out.flush()


def _with_steps_key(head: TraceJSON) -> dict[str, Any]:
    """``head`` with an empty ``steps`` where ``trace_dict`` puts it (before evals)."""
    out: dict[str, Any] = {}
    for key, value in head.items():
        if key == "evals":
            out["steps"] = []
        out[key] = value
    out.setdefault("steps", [])
    return out


class _Lines:
    """The renderer's output: ``append`` writes one line to stdout."""

    def append(self, line: str) -> None:
        sys.stdout.write(line + "\n")


class _Renderer:
    """Writes the human output line by line as the steps stream in (``sys.stdout`` buffers
    them on a pipe): memory stays flat however long the trace."""

    def __init__(self, annotations: list[AnnotationJSON]) -> None:
        self.lines = _Lines()
        self.paint = Painter(use_color())
        self.by_step: dict[int | None, list[AnnotationJSON]] = {}
        for annotation in annotations:
            self.by_step.setdefault(annotation["step_number"], []).append(annotation)

    def _annotation(self, a: AnnotationJSON) -> str:
        """``✎ good 0.9 (alice): the note`` (producer and person text escaped)."""

        score = f" {a['score']:g}" if a["score"] is not None else ""
        author = f" ({truncate(safe(a['author']), 24)})" if a["author"] else ""
        note = f": {truncate(safe(a['note']), 100)}" if a["note"] else ""
        return f"✎ {self.paint(safe(a['label']), 'magenta')}{score}{author}{note}"

    def header(self, t: TraceJSON, priced: str) -> None:

        p = self.paint
        add = self.lines.append
        add(f"{p('Trace', 'dim')}    {t['id']}")
        agent = safe(t["agent_name"]) + (
            f" {safe(t['agent_version'])}" if t["agent_version"] else ""
        )
        add(f"{p('Agent', 'dim')}    {agent}")
        add(f"{p('Status', 'dim')}   {p(t['status'], STATUS_COLORS.get(t['status']))}")
        if t["parent_trace_id"]:
            add(f"{p('Fork of', 'dim')}  {t['parent_trace_id']} at step {t['forked_from_step']}")
        if t["session_id"]:
            add(f"{p('Session', 'dim')}  {safe(t['session_id'])}")
        if t["trigger"]:
            add(f"{p('Trigger', 'dim')}  {safe(t['trigger'])}")
        add(
            f"{p('Started', 'dim')}  {fmt_time(t['started_at'])}   "
            f"{p('Duration', 'dim')} {fmt_ms(t['total_duration_ms'])}   "
            f"{p('Tokens', 'dim')} {fmt_int(t['total_tokens'])}   "
            f"{p('Cost', 'dim')} {fmt_cost(t['total_cost_usd'])}"
        )
        if priced:
            add(f"{p('Priced', 'dim')}   {safe(priced)}")
        if t["tags"]:
            add(f"{p('Tags', 'dim')}     {', '.join(safe(tag) for tag in t['tags'])}")
        if t["input"] is not None:
            add(f"{p('Input', 'dim')}    {preview(t['input'], 100)}")
        if t["output"] is not None:
            add(f"{p('Output', 'dim')}   {preview(t['output'], 100)}")
        if t["error"]:
            add(f"{p('Error', 'dim')}    {p(safe(t['error']), 'red')}")
        for index, annotation in enumerate(self.by_step.get(None, [])):
            title = p("Labels", "dim") if index == 0 else "      "
            add(f"{title}   {self._annotation(annotation)}")
        add("")

    def _step_line(self, s: StepJSON, indent: str = "") -> str:
        p = self.paint
        icon = STEP_EMOJI.get(s["step_type"], "•")
        name = truncate(safe(s["name"] or ""), 40)
        parts = [f"{s['step_number']:>5}  {indent}{icon} {s['step_type']:<11} {name}"]
        meta = []
        if s["duration_ms"] is not None:
            meta.append(fmt_ms(s["duration_ms"]))
        if s["tokens_used"] is not None:
            meta.append(f"{s['tokens_used']:,} tok")
        if s["model"]:
            meta.append(safe(s["model"]))
        cost = s["metadata"].get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            meta.append(fmt_cost(float(cost)))
        elif s["metadata"].get("cost_missing"):
            meta.append("no price")
        if s["caused_by_step"] is not None:
            meta.append(p(f"← caused by #{s['caused_by_step']}", "cyan"))
        served = replay_mark(s)
        if served is not None:
            meta.append(p(safe(served), "cyan"))
        if meta:
            parts.append(p("  " + "  ".join(meta), "dim"))
        line = "".join(parts)
        not_rerun = outcome_note(s)
        if not_rerun:
            line += f"\n       {indent}{p('○ ' + not_rerun, 'yellow')}"
        if s["error"]:
            line += "\n       " + indent + p("error: " + truncate(safe(s["error"]), 100), "red")
        elif s["decision"]:
            d = s["decision"]
            line += f"\n       {indent}→ chose {preview(d['chosen'], 60)}"
        elif s["output"] is not None:
            line += f"\n       {indent}{p('→ ' + preview(s['output'], 90), 'dim')}"
        for annotation in self.by_step.get(s["step_number"], []):
            line += f"\n       {indent}{self._annotation(annotation)}"
        return line

    def timeline(self, steps: Iterable[StepJSON]) -> None:
        empty = True
        for s in steps:
            empty = False
            self.lines.append(self._step_line(s))
        if empty:
            self.lines.append("(no steps)")

    def tree(self, steps: list[StepJSON]) -> None:
        from agent_replay.services.analysis import tree_order

        if not steps:
            self.lines.append("(no steps)")
            return
        for depth, s in tree_order(steps):
            self.lines.append(self._step_line(s, indent="│  " * depth))

    def snapshots(self, steps: Iterable[StepJSON]) -> None:

        self.lines.append("")
        self.lines.append(self.paint("Snapshots", "dim"))
        found = False
        for s in steps:
            snap = s["snapshot"]
            if not snap:
                continue
            found = True
            self.lines.append(f"  step {s['step_number']}:")
            for key in ("context_window", "environment", "tool_state"):
                if snap.get(key) is not None:
                    self.lines.append(f"    {key}: {preview(snap[key], 110)}")
        if not found:
            self.lines.append("  (no snapshots)")

    def evals(self, evals: list[EvalJSON]) -> None:

        self.lines.append("")
        self.lines.append(self.paint("Evaluations", "dim"))
        if not evals:
            self.lines.append("  (none; run `agent-replay eval ID`)")
            return
        for e in evals:
            verdict = self.paint("pass", "green") if e["passed"] else self.paint("FAIL", "red")
            threshold = f" (threshold {e['threshold']:.2f})" if e["threshold"] is not None else ""
            model = f"  {safe(e['model'])}" if e["model"] else ""
            self.lines.append(
                f"  {verdict}  {safe(e['evaluator'])}: {e['score']:.2f}{threshold}{model}"
            )


def _pricing(metadatas: list[dict[str, Any]]) -> str:
    """Where the trace's cost came from when agent-replay computed it: how many steps the
    price table priced (and its version), and the llm_calls it could not price, with why
    (``metadatas``: the steps' metadata objects that hold ``cost_source`` or ``cost_missing``)."""
    tables = sorted(
        {
            f"{source.get('table')} {source.get('version')}"
            for m in metadatas
            if isinstance(source := m.get("cost_source"), dict)
        }
    )
    missing = [m["cost_missing"] for m in metadatas if m.get("cost_missing")]
    if not tables and not missing:
        return ""
    parts = []
    if tables:
        count = sum(1 for m in metadatas if isinstance(m.get("cost_source"), dict))
        parts.append(f"{count} llm_call(s) from {', '.join(tables)}")
    if missing:
        parts.append(f"{len(missing)} without a price ({missing[0]})")
    return "; ".join(parts)
