"""``agent-replay fork ID --from-step N``: a new trace branching off a recorded run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import POSITIVE, dir_option, json_option


@click.command(name="fork")
@click.argument("trace_id", metavar="ID")
@click.option(
    "--from-step",
    "from_step",
    type=POSITIVE,
    required=True,
    help="Fork at step N: keep steps 1..N-1 as recorded, and step N (its input editable).",
)
@click.option(
    "--modify-input",
    "modify_input",
    metavar="JSON",
    default=None,
    help="Edit the fork's input (the run's input, e.g. '{\"task\": \"...\"}'), as JSON or @FILE. "
    "Merged into an object input by default.",
)
@click.option(
    "--modify-step-input",
    "modify_step_input",
    metavar="JSON",
    default=None,
    help="Edit step N's input, as JSON or @FILE (what the app's fork editor edits).",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Replace the input(s) with the given JSON instead of merging.",
)
@click.option("--tag", "tags", multiple=True, help="Tag the fork (repeatable).")
@click.option(
    "--rerun",
    is_flag=True,
    help="Re-send step N (an llm_call with recorded messages) to its model; record the reply.",
)
@click.option("--model", default=None, help="With --rerun: use this model instead.")
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    default=None,
    help="With --rerun: hard cap in USD on the call.",
)
@click.option(
    "--no-redact",
    is_flag=True,
    help="Keep secrets in the fork's text (edits included); redaction is on by default.",
)
@dir_option
@json_option
def command(
    trace_id: str,
    from_step: int,
    modify_input: str | None,
    modify_step_input: str | None,
    replace: bool,
    tags: tuple[str, ...],
    rerun: bool,
    model: str | None,
    max_cost: float | None,
    no_redact: bool,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Fork trace ID at step N and print the fork's full id.

    The fork is a new trace (status forked, linked to ID and N) holding steps 1..N-1 as
    recorded and step N, whose recorded outcome (output, error, tokens, duration) is not
    copied: the fork has not run it, and `show` marks it "not re-run". --modify-input edits
    the fork's input (the run's input); --modify-step-input edits step N's input; either, both
    or neither. An edit is a JSON Merge Patch (RFC 7386) by default: keys of an object merge
    recursively and a null value deletes a key; a non-object value, or --replace, replaces the
    input whole. Steps get fresh ids; tags, session and evals are not copied. `list` marks the
    fork ⑂, and `agent-replay diff ID FORK` shows the edits and step N's cleared outcome.

    Exit codes: 0 ok; 1 the write failed; 2 bad JSON, an N the trace doesn't have, or a bad id.

    \b
    Examples:
      agent-replay fork trc_demo5regressed --from-step 3
      agent-replay fork trc_demo2 --from-step 2 --modify-input '{"task": "revised prompt"}'
      agent-replay fork trc_demo5 --from-step 6 --modify-step-input '{"timeout_s": 120}'
      agent-replay fork trc_demo5 --from-step 6 --replace --modify-step-input @input.json --json
      agent-replay fork trc_demo1 --from-step 5 --modify-step-input @msgs.json --rerun

    With --rerun, step N must be an llm_call whose messages were recorded: its messages (edited
    by --modify-step-input) are re-sent to the recorded model's provider (your key; --max-cost
    caps it) and the reply becomes the fork's step N, so you see what the model would have said.
    """
    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import emit_json, open_existing, redaction
    from agent_replay.errors import UsageError
    from agent_replay.services.fork import EditMode, InputEdit, fork_trace, parse_modification

    if any(not tag.strip() for tag in tags):
        raise UsageError("--tag must not be blank")
    mode: EditMode = "replace" if replace else "merge"
    trace_edit = step_edit = None
    if modify_input is not None:
        trace_edit = InputEdit(parse_modification(modify_input, source="--modify-input"), mode)
    if modify_step_input is not None:
        value = parse_modification(modify_step_input, source="--modify-step-input")
        step_edit = InputEdit(value, mode)
    if replace and trace_edit is None and step_edit is None:
        raise UsageError("--replace needs --modify-input or --modify-step-input (the new input)")
    if rerun:
        return _fork_and_rerun(
            store_dir,
            trace_id,
            from_step,
            (step_edit, trace_edit),
            list(tags),
            model,
            max_cost,
            as_json,
            redaction(no_redact, store_dir),
        )
    if model is not None or max_cost is not None:
        raise UsageError("--model and --max-cost go with --rerun")
    with open_existing(store_dir) as store:
        result = fork_trace(
            store,
            trace_id,
            from_step,
            step_edit,
            trace_edit=trace_edit,
            tags=list(tags),
            clock=SystemClock(),
            redact=redaction(no_redact, store_dir),
        )
    if as_json:
        emit_json(result.to_json())
        return 0
    click.echo(result.trace_id)
    changes = [
        f"{'trace input' if e.target == 'trace_input' else f'step {from_step} input'} "
        f"{'replaced' if e.edit.mode == 'replace' else 'merged'}"
        for e in result.edits
    ]
    what = ", ".join(changes) or "unmodified"
    click.echo(
        f"forked {result.parent_trace_id} at step {from_step} ({what}); "
        f"{result.step_count} step(s). Compare: agent-replay diff {result.parent_trace_id} "
        f"{result.trace_id}",
        err=True,
    )
    click.echo(
        f"step {from_step}: {result.not_rerun} — the fork has not run it (--rerun re-sends an "
        "llm_call to its model)",
        err=True,
    )
    return 0


def _fork_and_rerun(
    store_dir: Path | None,
    trace_id: str,
    from_step: int,
    edits: tuple[Any, Any],
    tags: list[str],
    model: str | None,
    max_cost: float | None,
    as_json: bool,
    redact: bool,
) -> int:
    """Build the fork, re-send step N to the model (no store held during the call), write it."""
    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import emit_json, open_existing, resolve_store_dir
    from agent_replay.config import load_config
    from agent_replay.services.evals.budget import Budget
    from agent_replay.services.evals.rerun import rerun_fork_step
    from agent_replay.services.fork import build_fork
    from agent_replay.services.ingest import ingest_trace
    from agent_replay.store.trace_detail import resolve_trace_id, trace_json

    step_edit, trace_edit = edits
    clock = SystemClock()
    with open_existing(store_dir) as store:
        parent = trace_json(store, resolve_trace_id(store, trace_id))
    fork = build_fork(parent, from_step, step_edit, trace_edit=trace_edit, tags=tags, clock=clock)
    config = load_config(resolve_store_dir(store_dir))
    fork, rerun = rerun_fork_step(
        fork, from_step, config, clock=clock, budget=Budget(max_cost), model=model
    )
    with open_existing(store_dir) as store:
        written = ingest_trace(store, fork, clock=clock, redact=redact)
    if as_json:
        emit_json(
            {"trace_id": written.id, "parent_trace_id": parent["id"], "rerun": rerun.to_json()}
        )
        return 0
    click.echo(written.id)
    click.echo(
        f"forked {parent['id']} at step {from_step} and re-ran it on {rerun.provider} "
        f"{rerun.model}. Compare: agent-replay diff {parent['id']} {written.id}",
        err=True,
    )
    return 0
