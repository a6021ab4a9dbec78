"""What ``list`` prints, click-free (the read fast path, ``fast_read``, runs it too)."""

from __future__ import annotations

import sys

from agent_replay.commands._output import (
    STATUS_COLORS,
    Painter,
    emit_json,
    print_table,
    use_color,
)
from agent_replay.display import fmt_int, fmt_ms, fmt_time, safe, truncate
from agent_replay.store.queries import Page


def write_list(page: Page, as_json: bool) -> None:
    """One line a trace (an aligned table), or the JSON list of ``list --json``."""
    if as_json:
        emit_json([item.to_json() for item in page.items])
        return
    if not page.items:
        sys.stderr.write("no traces match\n")
        return
    paint = Painter(use_color())
    rows = []
    for item in page.items:
        data = item.data
        rows.append(
            [
                item.id + (" ⑂" if item.is_fork else ""),
                truncate(safe(data["agent_name"]), 32),
                paint(data["status"], STATUS_COLORS.get(data["status"])),
                fmt_int(item.step_count),
                fmt_int(data["total_tokens"]),
                fmt_ms(data["total_duration_ms"]),
                fmt_time(data["started_at"]),
            ]
        )
    print_table(
        ["ID", "AGENT", "STATUS", "STEPS", "TOKENS", "DURATION", "STARTED"],
        rows,
        right={3, 4, 5},
    )
