"""``agent-replay why ID --step N``: the causal chain behind a step."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import POSITIVE, dir_option, json_option

REASONS = {
    "start": "",
    "caused_by": "caused by",
    "parent": "inside",
    "prior_decision": "after decision",
}


@click.command(name="why")
@click.argument("trace_id", metavar="ID")
@click.option("--step", "step_number", type=POSITIVE, required=True)
@dir_option
@json_option
def command(trace_id: str, step_number: int, store_dir: Path | None, as_json: bool) -> int:
    """Explain why step N of trace ID happened.

    Walks back through caused_by_step links, falling back to parent_step and then to the
    nearest earlier decision; each decision on the way shows the option chosen and why.

    \b
    Examples:
      agent-replay why trc_demo2 --step 6
      agent-replay why trc_demo2 --step 6 --json
    """
    from agent_replay.commands._common import (
        Painter,
        emit_json,
        open_existing,
        preview,
        safe,
        step_out_of_range,
    )
    from agent_replay.services.analysis import why_chain
    from agent_replay.store.trace_detail import resolve_trace_id, step_dicts

    with open_existing(store_dir) as store:
        full_id = resolve_trace_id(store, trace_id)
        steps = step_dicts(store, full_id)
    if not any(s["step_number"] == step_number for s in steps):
        numbers = [s["step_number"] for s in steps]
        span = (min(numbers), max(numbers)) if numbers else None
        raise step_out_of_range("--step", step_number, full_id, span)
    chain = why_chain(steps, step_number)
    if as_json:
        emit_json({"trace_id": full_id, "step": step_number, "chain": [h.to_json() for h in chain]})
        return 0
    from agent_replay.commands._common import use_color

    paint = Painter(use_color())
    for index, hop in enumerate(chain):
        s = hop.step
        label = f"#{s['step_number']} {s['step_type']}" + (
            f" {safe(s['name'])}" if s["name"] else ""
        )
        if index == 0:
            click.echo(f"why {label}?")
            continue
        click.echo(f"{'  ' * index}↑ {paint(REASONS[hop.reason], 'dim')} {label}")
        decision = s.get("decision")
        if decision:
            pad = "  " * index + "    "
            click.echo(f"{pad}chose {preview(decision['chosen'], 80)}")
            if decision.get("rationale"):
                click.echo(f"{pad}because {preview(decision['rationale'], 100)}")
    if len(chain) == 1:
        click.echo("  (no recorded cause: no caused_by_step, parent_step or earlier decision)")
    return 0
