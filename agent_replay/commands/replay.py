"""``agent-replay replay ID``: play a trace back in a plain terminal, one line a step.

Steps appear paced by their recorded durations (see ``agent_replay.services.replay``), each with
its running token total. Headless: plain ``click.echo`` lines, never Textual or Rich, so it works
in any terminal, a CI log or a pipe. Ctrl-C stops it; the CLI maps that to exit code 130.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import POSITIVE, dir_option

SLEEP: Callable[[float], None] = time.sleep
"""How the command waits between steps (tests replace it, so they never wait)."""


@click.command(name="replay")
@click.argument("trace_id", metavar="ID")
@click.option(
    "--speed",
    type=float,
    default=5.0,
    show_default=True,
    help="Playback speed: 1 as recorded, 10 ten times faster, 0 instant.",
)
@click.option("--from-step", type=POSITIVE, help="Start the replay at this step.")
@click.option("--to-step", type=POSITIVE, help="Stop the replay after this step.")
@dir_option
def command(
    trace_id: str,
    speed: float,
    from_step: int | None,
    to_step: int | None,
    store_dir: Path | None,
) -> int:
    """Replay trace ID (a unique prefix is enough) step by step, in real time.

    Each step is printed when it finished in the recorded run, scaled by --speed: a step that
    took 2 s appears 0.4 s after the previous one at the default 5x. A step with no recorded
    duration counts as 100 ms and a recorded duration longer than 3 s counts as 3 s, so long
    tool calls never stall the replay. Token totals, cost and elapsed time are those of the
    whole run up to each step, also when --from-step starts mid-way.

    \b
    Examples:
      agent-replay replay trc_demo2
      agent-replay replay trc_demo2 --speed 1
      agent-replay replay trc_demo2 --speed 0 --from-step 3 --to-step 7

    \b
    Exit codes: 0 done, 1 unknown trace, 2 bad option or ambiguous id prefix,
    130 interrupted (Ctrl-C).
    """
    from agent_replay.commands._common import open_existing
    from agent_replay.errors import UsageError
    from agent_replay.services.replay import check_speed
    from agent_replay.store.trace_detail import resolve_trace_id, trace_json

    speed = check_speed(speed)
    if from_step is not None and to_step is not None and to_step < from_step:
        raise UsageError(f"--to-step {to_step} is before --from-step {from_step}")
    with open_existing(store_dir) as store:
        full_id = resolve_trace_id(store, trace_id)
        trace = trace_json(store, full_id)
    return play(
        trace,
        speed=speed,
        from_step=from_step,
        to_step=to_step,
        echo=click.echo,
        sleep=SLEEP,
    )


def play(
    trace: Mapping[str, Any],
    *,
    speed: float,
    from_step: int | None = None,
    to_step: int | None = None,
    echo: Callable[..., Any] = click.echo,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print the replay of ``trace`` (a full trace object), waiting ``sleep`` between steps.

    Args:
        speed: as ``check_speed`` accepts (0 is instant).
        from_step, to_step: the step numbers to replay (inclusive); totals still count from the
            start of the run.
        echo: writes one line (``click.echo``; flushes, so each step shows as it comes).
        sleep: waits a number of seconds.

    Returns:
        The exit code (0).

    Raises:
        KeyboardInterrupt: re-raised after saying where the replay stopped.
    """
    from agent_replay.commands._common import Painter, fmt_cost, fmt_ms, safe, use_color
    from agent_replay.services.replay import Replay, speed_label

    paint = Painter(use_color())
    replay = Replay.from_trace(trace)
    positions = [
        index
        for index, step in enumerate(replay.steps)
        if (from_step is None or step["step_number"] >= from_step)
        and (to_step is None or step["step_number"] <= to_step)
    ]
    agent = safe(trace.get("agent_name") or "")
    scope = ""
    if from_step is not None or to_step is not None:
        scope = f", steps {from_step or 1}–{to_step or 'end'}"
    echo(
        f"replaying {trace['id']} ({agent}, {replay.total} steps{scope}) "
        f"at {speed_label(speed)}" + paint("   Ctrl-C stops", "dim")
    )
    if not positions:
        echo("(no steps in that range)")
        return 0
    shown = 0
    try:
        for index in positions:
            delay = replay.delay_before(index, speed)
            if delay > 0:
                sleep(delay)
            step = replay.steps[index]
            echo(step_line(step, replay.tokens_at(index + 1), paint))
            shown += 1
    except KeyboardInterrupt:
        step_number = replay.steps[positions[shown - 1]]["step_number"] if shown else None
        where = f"after step {step_number}" if step_number is not None else "before the first step"
        echo(f"\nstopped {where} of {replay.total}", err=True)
        raise
    state = replay.state_at(positions[-1] + 1)
    cost = fmt_cost(state.cost_usd)
    if state.cost_usd is not None and state.cost_estimated:
        cost = "~" + cost + " (estimated from tokens)"
    status = trace.get("status") or ""
    last = replay.steps[positions[-1]]["step_number"]
    end = "end of run" if state.at_end else f"stopped at step {last}"
    echo(
        paint(
            f"── {end}: {state.tokens:,} tokens, {cost}, {fmt_ms(state.elapsed_ms)} recorded"
            + (f", {status}" if state.at_end and status else ""),
            "dim",
        )
    )
    if state.at_end and trace.get("error"):
        echo(paint(f"   error: {safe(trace['error'])}", "red"))
    return 0


def step_line(step: dict[str, Any], running_tokens: int, paint: Any) -> str:
    """One revealed step: icon, type, name, duration, tokens and the running token total,
    then a preview of its error, decision or output on a second line."""
    from agent_replay.commands._common import fmt_ms, preview, safe, truncate
    from agent_replay.display import STEP_EMOJI

    icon = STEP_EMOJI.get(step["step_type"], "•")
    name = truncate(safe(step["name"] or ""), 32)
    tokens = f"{step['tokens_used']:,} tok" if step["tokens_used"] is not None else "-"
    line = (
        f"{step['step_number']:>5}  {icon} {step['step_type']:<11} {name:<32} "
        f"{fmt_ms(step['duration_ms']):>7} {tokens:>10}  "
        + paint(f"Σ {running_tokens:,} tok", "dim")
    )
    if step["caused_by_step"] is not None:
        line += paint(f"  ← #{step['caused_by_step']}", "cyan")
    pad = " " * 10
    if step["error"]:
        line += "\n" + pad + paint("error: " + truncate(safe(step["error"]), 100), "red")
    elif step["decision"]:
        line += f"\n{pad}→ chose {preview(step['decision']['chosen'], 80)}"
    elif step["output"] is not None:
        line += "\n" + pad + paint("→ " + preview(step["output"], 100), "dim")
    return line
