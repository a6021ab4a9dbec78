"""``agent-replay show ID``: the trace header and its step timeline (or tree)."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import POSITIVE, dir_option, json_option


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
    from agent_replay.commands._common import open_current
    from agent_replay.commands.show_text import ShowOptions, prepare_show, write_show

    options = ShowOptions(steps_only, evals, snapshots, tree, from_step, to_step, as_json)
    with open_current(store_dir) as store:
        plan = prepare_show(store, trace_id, options)
        write_show(store, plan)
    return 0
