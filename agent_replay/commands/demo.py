"""``agent-replay demo``: load the sample traces and policies; idempotent."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import dir_option, json_option


@click.command(name="demo")
@dir_option
@json_option
def command(store_dir: Path | None, as_json: bool) -> int:
    """Load 5 sample traces, each showing a problem agent-replay solves, and 3 guard policies.

    The traces: an answer not grounded in what was retrieved, a failing tool-call chain, a
    dangerous delete, and a good run plus a regressed run of the same input. Safe to run
    again; works in an empty directory (creates ./.agent-replay).

    \b
    Examples:
      agent-replay demo
      agent-replay demo && agent-replay list
    """
    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import emit_json, open_or_create, resolve_store_dir
    from agent_replay.config import ensure_config
    from agent_replay.services.demo import load_demo

    with open_or_create(store_dir) as store:
        result = load_demo(store, SystemClock())
    ensure_config(resolve_store_dir(store_dir))
    if as_json:
        emit_json(
            {
                "ok": True,
                "traces_added": result.traces_added,
                "traces_present": result.traces_present,
                "policies_added": result.policies_added,
            }
        )
        return 0
    if result.traces_added:
        click.echo(
            f"loaded {len(result.traces_added)} demo trace(s) and "
            f"{len(result.policies_added)} policy(ies)"
        )
    else:
        click.echo("demo data already loaded")
    click.echo("next: agent-replay list   ·   agent-replay show trc_demo1")
    return 0
