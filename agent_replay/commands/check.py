"""``agent-replay check --golden FILE``: the CI regression gate against a golden dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import dir_option, json_option

MAX_UNMATCHED_SHOWN = 5


@click.command(name="check")
@click.option(
    "--golden",
    "golden_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The golden dataset (from `export --format golden`).",
)
@click.option("--agent", help="Only check runs of this agent name.")
@click.option("--tag", help="Only check runs with this tag (e.g. this CI run's).")
@click.option("--since", help="Only check runs started since: 1d, 12h, 30m, 2w, or 2026-01-01.")
@click.option(
    "--fields",
    help="Compare only these, comma-separated: step_count, step_types, step_names, "
    "tool_inputs, status, model. [default: all but model]",
)
@click.option("--strict", is_flag=True, help="Also fail runs that have no golden counterpart.")
@dir_option
@json_option
def command(
    golden_path: Path,
    agent: str | None,
    tag: str | None,
    since: str | None,
    fields: str | None,
    strict: bool,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Check the runs in the store against a golden dataset of known-good runs.

    Each run (forks excluded) is matched to golden runs by agent name and input hash (SHA-256
    of the canonical JSON of its input) and compared structurally: step count, step types,
    step names, tool-call inputs and final status by default, the models by opt-in
    (--fields). Wording is never compared, so non-deterministic text never fails a build. Each
    regression names the trace, the step and the differing field. Runs stream from the store
    page by page: memory stays flat in the number of runs.

    Exit codes: 0 every matched run passed; 1 a regression (or, with --strict, a run without a
    golden counterpart), an empty golden file, no candidate runs, or none matching the golden
    set; 2 usage: an unknown --fields value, a golden file that is not valid JSON or not a
    golden file.

    \b
    Examples:
      agent-replay export --format golden --tag golden --output golden.json
      agent-replay check --golden golden.json
      agent-replay check --golden golden.json --agent analytics-sql-agent --since 1d
      agent-replay check --golden golden.json --fields step_names,tool_inputs,model --strict
      agent-replay check --golden golden.json --json > check-report.json
    """
    import sys

    from agent_replay.commands._common import Painter, emit_json, open_existing, use_color
    from agent_replay.commands._filters import build_filter
    from agent_replay.services.golden import load_golden
    from agent_replay.services.golden_check import CheckReport, check_runs, parse_fields

    chosen = parse_fields(fields)
    filters = build_filter(None, agent, tag, since, None)
    golden = load_golden(golden_path)
    report = CheckReport(golden.count, chosen, strict=strict, golden_inputs=len(golden.runs))
    paint = Painter(use_color())
    progress = sys.stderr.isatty()
    if not as_json:
        click.echo(
            f"checking runs against {golden.count} golden run(s) from {golden_path}; "
            f"fields: {', '.join(chosen)}"
        )
    with open_existing(store_dir) as store:
        for result in check_runs(store, golden, filters=filters, fields=chosen):
            report.add(result)
            if not as_json and (
                result.outcome == "regression" or (strict and result.outcome == "unmatched")
            ):
                click.echo("\n".join(_result_lines(result, paint)))
            if progress and report.candidates % 1000 == 0:
                click.echo(f"\r  {report.candidates:,} runs…", err=True, nl=False)
    if progress and report.candidates >= 1000:
        click.echo("\r" + " " * 30 + "\r", err=True, nl=False)
    report.require_something_checked(_scope(agent, tag, since))
    if as_json:
        out: dict[str, Any] = report.to_json()
        if not report.ok:
            out["error"] = _verdict(report)
            out["hints"] = []
        emit_json(out)
    else:
        click.echo("\n".join(_summary_lines(report, paint)))
    return 0 if report.ok else 1


def _scope(agent: str | None, tag: str | None, since: str | None) -> str:
    parts = [f"{k} {v}" for k, v in (("agent", agent), ("tag", tag), ("since", since)) if v]
    return ", ".join(parts)


def _result_lines(result: Any, paint: Any) -> list[str]:
    from agent_replay.commands._common import safe

    if result.outcome == "unmatched":
        return [
            f"{paint('FAIL', 'red')}  {result.trace_id}  {safe(result.agent_name)}  "
            "no golden run with this agent name and input (--strict)"
        ]
    # The golden file is user input: its trace ids are escaped like producer text.
    golden = f"  vs golden {safe(result.golden_trace_id)}" if result.golden_trace_id else ""
    lines = [f"{paint('FAIL', 'red')}  {result.trace_id}  {safe(result.agent_name)}{golden}"]
    for d in result.divergences:
        lines.append(f"      {safe(d.message)}")
    return lines


def _verdict(report: Any) -> str:
    parts = []
    if report.regressed:
        parts.append(f"{report.regressed} regression(s)")
    if report.strict and report.unmatched:
        parts.append(f"{report.unmatched} run(s) without a golden counterpart (--strict)")
    return "; ".join(parts)


def _summary_lines(report: Any, paint: Any) -> list[str]:
    from agent_replay.commands._common import safe

    lines = []
    if report.unmatched and not report.strict:
        shown = report.unmatched_runs[:MAX_UNMATCHED_SHOWN]
        ids = ", ".join(f"{r.trace_id} ({safe(r.agent_name)})" for r in shown)
        more = report.unmatched - len(shown)
        lines.append(
            paint(
                f"not checked: {report.unmatched} run(s) without a golden counterpart: {ids}"
                + (f" and {more} more" if more > 0 else "")
                + " (--strict fails them)",
                "dim",
            )
        )
    lines.append(
        f"checked {report.checked} of {report.candidates} run(s): {report.passed} passed, "
        f"{report.regressed} regressed, {report.unmatched} without a golden counterpart; "
        f"{len(report.golden_matched)} of {report.golden_inputs} golden input(s) exercised"
    )
    if report.ok:
        lines.append(paint("ok: no regressions", "green"))
    else:
        lines.append(paint(f"FAILED: {_verdict(report)}", "red"))
    return lines
