"""``agent-replay annotations ID``: the annotations of a trace, oldest first."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import dir_option, json_option


@click.command(name="annotations")
@click.argument("trace_id", metavar="ID")
@click.option("--label", default=None, help="Only annotations with this label.")
@dir_option
@json_option
def command(trace_id: str, label: str | None, store_dir: Path | None, as_json: bool) -> int:
    """List the annotations of trace ID: the run's and its steps', oldest first.

    --json prints {"trace_id": ..., "annotations": [...]}, each the trace format's annotation
    object (id, step_number, label, note, score, author, created_at).

    \b
    Examples:
      agent-replay annotations trc_demo1
      agent-replay annotations trc_demo2 --label wrong-tool --json
    """
    from agent_replay.commands._common import (
        emit_json,
        fmt_time,
        open_existing,
        print_table,
        safe,
        truncate,
    )
    from agent_replay.store.trace_detail import annotation_dicts, resolve_trace_id

    with open_existing(store_dir) as store:
        full_id = resolve_trace_id(store, trace_id)
        found = annotation_dicts(store, full_id)
    if label is not None:
        found = [a for a in found if a["label"] == label.strip()]
    if as_json:
        emit_json({"trace_id": full_id, "annotations": found})
        return 0
    if not found:
        click.echo(f"no annotations on {full_id}", err=True)
        return 0
    rows = [
        [
            "run" if a["step_number"] is None else f"#{a['step_number']}",
            truncate(safe(a["label"]), 24),
            "-" if a["score"] is None else f"{a['score']:g}",
            truncate(safe(a["author"] or "-"), 16),
            fmt_time(a["created_at"]),
            truncate(safe(a["note"] or ""), 60),
        ]
        for a in found
    ]
    print_table(["ON", "LABEL", "SCORE", "AUTHOR", "CREATED", "NOTE"], rows, right={2})
    return 0
