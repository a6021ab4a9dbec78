"""``agent-replay diff A B``: two traces compared step by step, aligned by content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import dir_option, json_option

MARKS = {"matched": "=", "changed": "~", "inserted": "+", "deleted": "-"}
COLORS = {"matched": None, "changed": "yellow", "inserted": "green", "deleted": "red"}
MAX_SHOWN_DIFFS = 6
"""Field differences printed per step (``--json`` has them all)."""
CONTEXT = 56


@click.command(name="diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--compact", is_flag=True, help="Summary only: counts, first divergence, totals.")
@click.option(
    "--exit-code", is_flag=True, help="Exit 1 when the traces differ (0 when they agree)."
)
@click.option(
    "--full",
    is_flag=True,
    help="Compare whole traces even when one is a fork of the other.",
)
@click.option("--ai", "use_ai", is_flag=True, help="Add an AI account of why the traces diverged.")
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    default=None,
    help="Hard cap in USD on what the --ai call may spend.",
)
@dir_option
@json_option
def command(
    a: str,
    b: str,
    compact: bool,
    exit_code: bool,
    full: bool,
    use_ai: bool,
    max_cost: float | None,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Compare trace A (before) with trace B (after); ids or unique prefixes.

    Steps are aligned by content (type, name, normalized input), not by step number, so an
    inserted or deleted step shows as one. Each row is marked = matched, ~ changed (with the
    fields that differ), + inserted (only in B) or - deleted (only in A), with token, duration
    and cost deltas. Then the trace input/output differences, the first divergence and totals.

    When one trace is a fork of the other, only the fork's extent is compared (the parent's later
    steps are left out, and status/output are not compared), so a fork against its parent shows
    exactly its modification; --full compares whole traces.

    Exit codes: 0 (also when the traces differ); 1 with --exit-code when they differ, or an
    id that matches no trace; 2 usage (an ambiguous id prefix).

    \b
    Examples:
      agent-replay diff trc_demo4goodrun trc_demo5regressed
      agent-replay diff trc_demo4 trc_demo5 --compact
      agent-replay diff PARENT FORK --json
      agent-replay diff trc_a trc_b --exit-code >/dev/null || echo "runs differ"
      agent-replay diff trc_demo4 trc_demo5 --ai --max-cost 0.02
    """
    from agent_replay.commands._common import emit_json, open_existing, resolve_store_dir
    from agent_replay.services.diff import diff_stored

    settings = None
    if use_ai:  # resolve the key first: no key is an error before any work is done
        from agent_replay.config import load_config
        from agent_replay.services.evals.providers import resolve_ai

        settings = resolve_ai(load_config(resolve_store_dir(store_dir)))
    with open_existing(store_dir) as store:
        result = diff_stored(store, a, b, fork_scope=not full)
    explanation = None
    ai_error = None
    if settings is not None and not result.identical:
        from agent_replay.clock import SystemClock
        from agent_replay.services.evals.budget import Budget
        from agent_replay.services.evals.divergence import explain_divergence
        from agent_replay.services.evals.errors import AIError

        try:
            explanation = explain_divergence(
                result, settings, clock=SystemClock(), budget=Budget(max_cost)
            )
        except AIError as exc:
            ai_error = exc
    if as_json:
        out = result.to_json(compact=compact)
        if explanation is not None:
            out["ai"] = explanation.to_json()
        emit_json(out)
    else:
        lines = render(result, compact=compact)
        if explanation is not None:
            from agent_replay.display import safe

            lines += ["", *(safe(line) for line in explanation.lines())]
        click.echo("\n".join(lines))
    if ai_error is not None:
        click.echo(f"error: {ai_error.message}", err=True)
        for hint in ai_error.hints:
            click.echo(f"  hint: {hint}", err=True)
        return 1
    return 1 if exit_code and not result.identical else 0


def render(result: Any, *, compact: bool = False, color: bool | None = None) -> list[str]:
    """The human report of a ``TraceDiff`` as lines (producer text escaped)."""
    from agent_replay.commands._common import Painter, use_color

    paint = Painter(use_color() if color is None else color)
    lines: list[str] = []
    _header(result, lines, paint)
    if not compact:
        lines.append("")
        _pairs(result, lines, paint)
    _trace_fields(result, lines, paint)
    lines.append("")
    _summary(result, lines, paint)
    return lines


def _header(result: Any, lines: list[str], paint: Any) -> None:
    from agent_replay.commands._common import safe

    for side, trace in (("A", result.a), ("B", result.b)):
        version = f" {safe(trace['agent_version'])}" if trace.get("agent_version") else ""
        steps = len(trace.get("steps") or [])
        fork = ""
        if trace.get("parent_trace_id"):
            fork = f"  ⑂ fork of {trace['parent_trace_id']} at step {trace['forked_from_step']}"
        lines.append(
            f"{paint(side, 'dim')}  {trace['id']}  {safe(trace['agent_name'])}{version}  "
            f"{trace['status']}  {steps} step(s){fork}"
        )
    if result.fork_parent:
        parent = "A" if result.fork_parent == "a" else "B"
        note = f"compared up to the fork's extent ({parent} is the parent"
        if result.beyond_fork:
            note += f"; its {result.beyond_fork} later step(s) are left out"
        lines.append(paint(note + "; --full compares whole traces)", "dim"))


def _step_label(step: dict[str, Any] | None) -> str:
    from agent_replay.commands._common import safe, truncate

    if step is None:
        return ""
    return f"{step['step_type']:<11} {truncate(safe(step.get('name') or ''), 28)}"


def _pairs(result: Any, lines: list[str], paint: Any) -> None:
    from agent_replay.commands._common import fmt_ms, print_table
    from agent_replay.services.outcome import is_not_rerun

    if not result.pairs:
        lines.append("(no steps on either side)")
        return
    rows: list[list[str]] = []
    for pair in result.pairs:
        a_no = "-" if pair.a is None else str(pair.a_number)
        b_no = "-" if pair.b is None else str(pair.b_number)
        mark = paint(MARKS[pair.kind], COLORS[pair.kind])
        label = _step_label(pair.step)
        if pair.kind == "changed" and pair.a.get("name") != pair.b.get("name"):
            label = f"{_step_label(pair.a)} → {_step_label(pair.b).split(' ', 1)[1].strip()}"
        note = ""
        if pair.moved_from is not None:
            note = f"moved from A#{pair.moved_from}"
        elif pair.moved_to is not None:
            note = f"moved to B#{pair.moved_to}"
        elif pair.kind == "changed":
            note = "changed: " + ", ".join(pair.fields)
        if is_not_rerun(pair.a) or is_not_rerun(pair.b):
            note = f"{note}; {'A' if is_not_rerun(pair.a) else 'B'} not re-run".lstrip("; ")
        rows.append(
            [
                a_no,
                b_no,
                mark,
                label,
                _signed(_change(pair.kind, pair.tokens), "tok"),
                _signed_ms(_change(pair.kind, pair.duration_ms), fmt_ms),
                _signed_cost(_change(pair.kind, pair.cost_usd)),
                paint(note, "dim") if note else "",
            ]
        )
    table: list[str] = []
    print_table(
        ["A", "B", "", "step", "Δtokens", "Δtime", "Δcost", ""],
        rows,
        right={0, 1, 4, 5, 6},
        out=table.append,
    )
    # Interleave each changed pair's field differences under its row.
    lines.append(table[0])
    for row_text, pair in zip(table[1:], result.pairs, strict=True):
        lines.append(row_text)
        if pair.kind == "changed":
            lines.extend(_field_lines(pair.differences, pair.truncated, "        ", paint))
        elif pair.kind in ("inserted", "deleted") and pair.moved_from is None:
            lines.extend(_step_detail(pair.step, "        ", paint))


def _change(kind: str, metric: Any) -> float | None:
    """A row's metric change: the delta of a pair, plus or minus the value of a lone step."""
    if kind == "inserted":
        return metric.b
    if kind == "deleted":
        return None if metric.a is None else -metric.a
    return metric.delta


def _step_detail(step: dict[str, Any], indent: str, paint: Any) -> list[str]:
    from agent_replay.commands._common import preview, safe, truncate

    if step.get("error"):
        return [paint(f"{indent}error: {truncate(safe(step['error']), 90)}", "red")]
    if step.get("input") is not None:
        return [paint(f"{indent}input: {preview(step['input'], 90)}", "dim")]
    if step.get("output") is not None:
        return [paint(f"{indent}output: {preview(step['output'], 90)}", "dim")]
    return []


def _field_lines(differences: list[Any], truncated: int, indent: str, paint: Any) -> list[str]:
    from agent_replay.commands._common import safe

    out: list[str] = []
    for d in differences[:MAX_SHOWN_DIFFS]:
        a_text, b_text = d.context(CONTEXT)
        path = safe(d.path)
        if d.kind == "added":
            out.append(f"{indent}{path}: {paint('added', 'green')} {safe(b_text)}")
        elif d.kind == "removed":
            out.append(f"{indent}{path}: {paint('removed', 'red')} {safe(a_text)}")
        else:
            out.append(f"{indent}{path}: {safe(a_text)}")
            out.append(f"{indent}{' ' * len(path)}→ {safe(b_text)}")
    more = len(differences) - MAX_SHOWN_DIFFS + truncated
    if more > 0:
        out.append(paint(f"{indent}… {more} more difference(s) (see --json)", "dim"))
    return out


def _trace_fields(result: Any, lines: list[str], paint: Any) -> None:
    if result.fork_parent:
        fields = ["input"]
    else:
        fields = ["input", "output", "status", "error"]
    lines.append("")
    for name in fields:
        found = [d for d in result.trace_differences if d.field == name]
        if not found:
            if name in ("input", "output"):
                lines.append(f"{paint('Trace ' + name, 'dim')}: same")
            continue
        lines.append(f"{paint('Trace ' + name, 'dim')}: differs")
        lines.extend(_field_lines(found, 0, "  ", paint))


def _summary(result: Any, lines: list[str], paint: Any) -> None:
    from agent_replay.commands._common import fmt_cost, fmt_int, fmt_ms, safe

    counts = result.counts
    lines.append(
        f"{paint('Steps', 'dim')}: {counts['matched']} matched, {counts['changed']} changed, "
        f"{counts['inserted']} inserted, {counts['deleted']} deleted"
        + (f" ({result.beyond_fork} beyond the fork)" if result.beyond_fork else "")
    )
    first = result.first_divergence
    if first is None:
        lines.append(f"{paint('First divergence', 'dim')}: none, the traces agree")
    elif first.where == "input":
        lines.append(f"{paint('First divergence', 'dim')}: the trace input")
        lines.extend(_field_lines(first.differences[:2], 0, "  ", paint))
    else:
        at = f"A#{first.a_step}" if first.a_step is not None else "-"
        at += f" / B#{first.b_step}" if first.b_step is not None else " / -"
        what = {
            "changed": "changed " + ", ".join(dict.fromkeys(d.field for d in first.differences)),
            "inserted": "inserted in B",
            "deleted": "deleted from A",
        }[first.kind]
        name = safe(first.name or "")
        lines.append(f"{paint('First divergence', 'dim')}: {at} {first.step_type} {name}: {what}")
        if first.kind == "changed":
            lines.extend(_field_lines(first.differences[:2], 0, "  ", paint))
    t = result.totals
    estimate = " (estimated)" if result.cost_estimated else ""
    lines.append(
        f"{paint('Totals', 'dim')}: steps {t.steps.a} → {t.steps.b}   "
        f"tokens {fmt_int(_int(t.tokens.a))} → {fmt_int(_int(t.tokens.b))}   "
        f"time {fmt_ms(t.duration_ms.a)} → {fmt_ms(t.duration_ms.b)}   "
        f"cost {fmt_cost(t.cost_usd.a)} → {fmt_cost(t.cost_usd.b)}{estimate}"
    )
    verdict = "identical" if result.identical else "the traces differ"
    lines.append(paint(verdict, "green" if result.identical else "yellow"))


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _signed(value: float | None, unit: str) -> str:
    if value is None or value == 0:
        return ""
    suffix = f" {unit}" if unit else ""
    return f"{int(value):+,}{suffix}"


def _signed_ms(value: float | None, fmt_ms: Any) -> str:
    if value is None or value == 0:
        return ""
    return ("+" if value > 0 else "-") + fmt_ms(abs(value))


def _signed_cost(value: float | None) -> str:
    if value is None or abs(value) < 5e-7:
        return ""
    return ("+" if value > 0 else "-") + f"${abs(value):.4f}"
