"""``agent-replay fork ID --from-step N``: a new trace branching off a recorded run."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import dir_option, json_option


@click.command(name="fork")
@click.argument("trace_id", metavar="ID")
@click.option(
    "--from-step",
    "from_step",
    type=click.IntRange(min=1),
    required=True,
    help="Fork at step N: keep steps 1..N-1, edit the input of step N (N=1: the trace input).",
)
@click.option(
    "--modify-input",
    "modify_input",
    metavar="JSON",
    default=None,
    help="The input edit, as JSON (or @FILE). Merged into an object input by default.",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Replace the input with --modify-input instead of merging it.",
)
@click.option("--tag", "tags", multiple=True, help="Tag the fork (repeatable).")
@dir_option
@json_option
def command(
    trace_id: str,
    from_step: int,
    modify_input: str | None,
    replace: bool,
    tags: tuple[str, ...],
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Fork trace ID at step N and print the fork's full id.

    The fork is a new trace (status forked, linked to ID and N) holding steps 1..N-1 as
    recorded and step N with its input edited; for N = 1 the edit applies to the trace's input.
    The edit is a JSON Merge Patch (RFC 7386) by default: keys of an object merge recursively and
    a null value deletes a key; a non-object value, or --replace, replaces the input whole.
    Steps get fresh ids; tags, session and evals are not copied. `list` marks the fork ⑂, and
    `agent-replay diff ID FORK` shows exactly the edit.

    Exit codes: 0 ok; 1 the write failed; 2 bad JSON, an N the trace doesn't have, or a bad id.

    \b
    Examples:
      agent-replay fork trc_demo5regressed --from-step 3
      agent-replay fork trc_demo5 --from-step 6 --modify-input '{"timeout_s": 120}'
      agent-replay fork trc_demo4 --from-step 1 --modify-input '{"question": "Q2?"}' --tag what-if
      agent-replay fork trc_demo5 --from-step 6 --replace --modify-input @input.json --json
    """
    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import emit_json, open_existing
    from agent_replay.errors import UsageError
    from agent_replay.services.fork import InputEdit, fork_trace, parse_modification

    if any(not tag.strip() for tag in tags):
        raise UsageError("--tag must not be blank")
    edit = None
    if modify_input is not None:
        edit = InputEdit(parse_modification(modify_input), "replace" if replace else "merge")
    elif replace:
        raise UsageError("--replace needs --modify-input (the new input)")
    with open_existing(store_dir) as store:
        result = fork_trace(store, trace_id, from_step, edit, tags=list(tags), clock=SystemClock())
    if as_json:
        emit_json(result.to_json())
        return 0
    click.echo(result.trace_id)
    what = "unmodified"
    if edit is not None:
        target = "trace input" if result.target == "trace_input" else f"step {from_step} input"
        what = f"{target} {'replaced' if edit.mode == 'replace' else 'merged'}"
    click.echo(
        f"forked {result.parent_trace_id} at step {from_step} ({what}); "
        f"{result.step_count} step(s). Compare: agent-replay diff {result.parent_trace_id} "
        f"{result.trace_id}",
        err=True,
    )
    return 0
