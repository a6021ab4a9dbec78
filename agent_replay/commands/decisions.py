"""``agent-replay decisions ID``: every decision point of a trace."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import dir_option, json_option


@click.command(name="decisions")
@click.argument("trace_id", metavar="ID")
@dir_option
@json_option
def command(trace_id: str, store_dir: Path | None, as_json: bool) -> int:
    """List the decision points of trace ID: options (rationale, score), the chosen one,
    rationale, confidence and who decided.

    \b
    Examples:
      agent-replay decisions trc_demo1
      agent-replay decisions trc_demo1 --json | jq '.decisions[].chosen'
    """
    from agent_replay.commands._common import Painter, emit_json, open_existing, safe, use_color
    from agent_replay.services.analysis import decision_points
    from agent_replay.store.trace_detail import resolve_trace_id, step_dicts

    with open_existing(store_dir) as store:
        full_id = resolve_trace_id(store, trace_id)
        points = decision_points(step_dicts(store, full_id))
    if as_json:
        emit_json({"trace_id": full_id, "decisions": points})
        return 0
    if not points:
        click.echo("no decision points recorded", err=True)
        return 0
    paint = Painter(use_color())
    for point in points:
        name = f" {safe(point['name'])}" if point["name"] else ""
        confidence = point["confidence"]
        facts = [f"by {point['decided_by']}"]
        if confidence is not None:
            facts.append(f"confidence {confidence:.2f}")
        click.echo(f"#{point['step_number']}{name}  ({', '.join(facts)})")
        click.echo(f"  chose: {paint(safe(point['chosen']), 'green')}")
        if point["rationale"]:
            click.echo(f"  because: {safe(point['rationale'])}")
        for option in point["options"]:
            mark = "●" if option["option"] == point["chosen"] else "○"
            score = f" [{option['score']:.2f}]" if option.get("score") is not None else ""
            why = f" — {safe(option['rationale'])}" if option.get("rationale") else ""
            click.echo(f"    {mark} {safe(option['option'])}{score}{why}")
        click.echo("")
    return 0
