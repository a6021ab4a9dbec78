"""``agent-replay annotate ID [--step N] --label L``: a person's judgement of a run or a step."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import POSITIVE, dir_option, json_option


def default_author() -> str | None:
    """The login name, as the annotation's author (``None`` when the system has none)."""
    import getpass

    try:
        return getpass.getuser() or None
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (some containers)
        return None


@click.command(name="annotate")
@click.argument("trace_id", metavar="ID")
@click.option(
    "--step",
    "step_number",
    type=POSITIVE,
    default=None,
    help="Annotate this step (default: the whole run).",
)
@click.option("--label", required=True, help="The label: good, bad, wrong-tool, needs-review, …")
@click.option("--note", default=None, help="A free-text note.")
@click.option("--score", type=float, default=None, help="A score (any number, e.g. 0 to 1).")
@click.option(
    "--author", default=None, help="Who annotates (default: your login name; '' for none)."
)
@dir_option
@json_option
def command(
    trace_id: str,
    step_number: int | None,
    label: str,
    note: str | None,
    score: float | None,
    author: str | None,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Annotate trace ID (a unique prefix is enough), or its step N, with a label.

    Annotations are how people judge runs: `list --label good` finds the runs marked good,
    `export --format golden --label good` turns them into a golden set for `check`, `show`
    prints them, and `push` carries them to the team store. The note is redacted like
    everything else written. Annotating again adds another annotation (nothing is replaced).

    \b
    Examples:
      agent-replay annotate trc_demo1 --label good
      agent-replay annotate trc_demo2 --step 4 --label wrong-tool --note "should search first"
      agent-replay annotate trc_demo5 --label regression --score 0.2 --json
    """
    import math

    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import emit_json, open_existing, safe
    from agent_replay.errors import UsageError
    from agent_replay.services.recorder import TraceRecorder
    from agent_replay.store.trace_detail import resolve_trace_id

    if not label.strip():
        raise UsageError("--label must not be blank")
    if score is not None and not math.isfinite(score):
        raise UsageError(f"--score must be a finite number (got {score})")
    who = default_author() if author is None else (author.strip() or None)
    with open_existing(store_dir) as store:
        full_id = resolve_trace_id(store, trace_id)
        annotation = TraceRecorder(store, clock=SystemClock()).annotate(
            full_id, label=label, step_number=step_number, note=note, score=score, author=who
        )
    if as_json:
        emit_json({"trace_id": full_id, **annotation})
        return 0
    where = f"step {step_number} of {full_id}" if step_number else full_id
    click.echo(annotation["id"])
    click.echo(f"annotated {where}: {safe(annotation['label'])}", err=True)
    return 0
