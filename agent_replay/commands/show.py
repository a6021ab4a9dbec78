"""``agent-replay show ID``: the trace header and its step timeline (or tree)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import POSITIVE, dir_option, json_option

STEP_ICONS = {
    "thought": "💭",
    "tool_call": "🔧",
    "llm_call": "🤖",
    "retrieval": "📚",
    "output": "📤",
    "decision": "🔀",
    "error": "❌",
    "guard_check": "🛡",
}


@click.command(name="show")
@click.argument("trace_id", metavar="ID")
@click.option("--steps-only", is_flag=True, help="Print the step timeline without the header.")
@click.option("--evals", is_flag=True, help="Also print the stored evaluations.")
@click.option("--snapshots", is_flag=True, help="Also print each step's state snapshot.")
@click.option("--tree", is_flag=True, help="Steps as a parent_step hierarchy; causal links marked.")
@click.option("--from-step", type=POSITIVE, help="First step number to show.")
@click.option("--to-step", type=POSITIVE, help="Last step number to show.")
@dir_option
@json_option
def command(
    trace_id: str,
    steps_only: bool,
    evals: bool,
    snapshots: bool,
    tree: bool,
    from_step: int | None,
    to_step: int | None,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Show trace ID (a unique prefix is enough): header, then one line a step.

    \b
    Examples:
      agent-replay show trc_demo1
      agent-replay show trc_demo1 --tree
      agent-replay show trc_demo1 --from-step 100 --to-step 200 --snapshots
      agent-replay show trc_demo1 --json > trace.json
    """
    from agent_replay.commands._common import emit_json, open_current, step_out_of_range
    from agent_replay.errors import UsageError
    from agent_replay.store.queries import resolve_trace_id, step_span, trace_json

    if from_step is not None and to_step is not None and to_step < from_step:
        raise UsageError(f"--to-step {to_step} is before --from-step {from_step}")
    with open_current(store_dir) as store:
        full_id = resolve_trace_id(store, trace_id)
        if from_step is not None:
            span = step_span(store, full_id)
            if span is None or from_step > span[1]:
                raise step_out_of_range("--from-step", from_step, full_id, span)
        trace = trace_json(store, full_id, from_step=from_step, to_step=to_step)
    if as_json:
        emit_json(trace)
        return 0
    lines: list[str] = []
    render = _Renderer(lines, trace.get("annotations") or [])
    if not steps_only:
        render.header(trace)
    if tree:
        render.tree(trace["steps"])
    else:
        render.timeline(trace["steps"])
    if snapshots:
        render.snapshots(trace["steps"])
    if evals:
        render.evals(trace["evals"])
    click.echo("\n".join(lines))
    return 0


class _Renderer:
    """Builds the human output as lines (one write at the end: 10,000 steps print fast)."""

    def __init__(self, lines: list[str], annotations: list[dict[str, Any]]) -> None:
        from agent_replay.commands._common import Painter, use_color

        self.lines = lines
        self.paint = Painter(use_color())
        self.by_step: dict[int | None, list[dict[str, Any]]] = {}
        for annotation in annotations:
            self.by_step.setdefault(annotation["step_number"], []).append(annotation)

    def _annotation(self, a: dict[str, Any]) -> str:
        """``✎ good 0.9 (alice): the note`` (producer and person text escaped)."""
        from agent_replay.commands._common import safe, truncate

        score = f" {a['score']:g}" if a["score"] is not None else ""
        author = f" ({truncate(safe(a['author']), 24)})" if a["author"] else ""
        note = f": {truncate(safe(a['note']), 100)}" if a["note"] else ""
        return f"✎ {self.paint(safe(a['label']), 'magenta')}{score}{author}{note}"

    def header(self, t: dict[str, Any]) -> None:
        from agent_replay.commands._common import (
            STATUS_COLORS,
            fmt_cost,
            fmt_int,
            fmt_ms,
            fmt_time,
            preview,
            safe,
        )

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
        priced = _pricing(t)
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

    def _step_line(self, s: dict[str, Any], indent: str = "") -> str:
        from agent_replay.commands._common import fmt_cost, fmt_ms, preview, safe, truncate
        from agent_replay.services.outcome import outcome_note
        from agent_replay.services.proxy.rerun import replay_mark

        p = self.paint
        icon = STEP_ICONS.get(s["step_type"], "•")
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

    def timeline(self, steps: list[dict[str, Any]]) -> None:
        if not steps:
            self.lines.append("(no steps)")
            return
        for s in steps:
            self.lines.append(self._step_line(s))

    def tree(self, steps: list[dict[str, Any]]) -> None:
        from agent_replay.services.analysis import tree_order

        if not steps:
            self.lines.append("(no steps)")
            return
        for depth, s in tree_order(steps):
            self.lines.append(self._step_line(s, indent="│  " * depth))

    def snapshots(self, steps: list[dict[str, Any]]) -> None:
        from agent_replay.commands._common import preview

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

    def evals(self, evals: list[dict[str, Any]]) -> None:
        from agent_replay.commands._common import safe

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


def _pricing(trace: dict[str, Any]) -> str:
    """Where the trace's cost came from when agent-replay computed it: how many steps the
    price table priced (and its version), and the llm_calls it could not price, with why."""
    steps = trace.get("steps") or []
    tables = sorted(
        {
            f"{source.get('table')} {source.get('version')}"
            for s in steps
            if isinstance(source := s["metadata"].get("cost_source"), dict)
        }
    )
    missing = [s["metadata"]["cost_missing"] for s in steps if s["metadata"].get("cost_missing")]
    if not tables and not missing:
        return ""
    parts = []
    if tables:
        count = sum(1 for s in steps if isinstance(s["metadata"].get("cost_source"), dict))
        parts.append(f"{count} llm_call(s) from {', '.join(tables)}")
    if missing:
        parts.append(f"{len(missing)} without a price ({missing[0]})")
    return "; ".join(parts)
