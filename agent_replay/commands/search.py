"""``agent-replay search``: traces and steps by text, ranked, with the matching step and a
snippet (the search index: ``store/search``)."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import POSITIVE, dir_option, json_option
from agent_replay.commands._filters import build_filter, which_options


@click.command(name="search")
@click.argument("query")
@which_options
@click.option("--limit", type=POSITIVE, default=20, show_default=True, help="Traces at most.")
@click.option(
    "--hits",
    type=POSITIVE,
    default=3,
    show_default=True,
    help="Matching steps shown per trace.",
)
@dir_option
@json_option
def command(
    query: str,
    status: str | None,
    agent: str | None,
    tag: str | None,
    since: str | None,
    session: str | None,
    label: str | None,
    limit: int,
    hits: int,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Search the names, inputs, outputs and errors of traces and their steps.

    Every word must appear (in one step, or in the trace's own fields); "quoted words" must
    appear together; word* matches words starting with it. Case doesn't matter. Results are
    traces, best match first, each with its best matching steps and a snippet. --json prints
    the `list --json` trace objects, each with a "search" object (score, matches, hits).

    \b
    Examples:
      agent-replay search refund
      agent-replay search '"connection refused"' --status failed --since 7d
      agent-replay search 'timeout*' --agent support-bot --json
    """
    from agent_replay.commands._common import (
        STATUS_COLORS,
        Painter,
        emit_json,
        fmt_time,
        open_existing,
        safe,
        truncate,
        use_color,
    )
    from agent_replay.store.search import parse_search
    from agent_replay.store.trace_search import search

    if not parse_search(query):
        raise click.UsageError("the query has no words to search for")
    filters = build_filter(status, agent, tag, since, session, label)
    with open_existing(store_dir) as store:
        results = search(store, query, filters, limit=limit, per_trace=hits)
    if as_json:
        emit_json([result.to_json() for result in results])
        return 0
    if not results:
        click.echo("no traces match", err=True)
        return 0
    paint = Painter(use_color())
    for result in results:
        data = result.trace.data
        more = f"  {result.matches} matches" if result.matches > 1 else ""
        click.echo(
            f"{result.trace.id}  {truncate(safe(data['agent_name']), 32)}  "
            f"{paint(data['status'], STATUS_COLORS.get(data['status']))}  "
            f"{fmt_time(data['started_at'])}{more}"
        )
        for hit in result.hits:
            where = "trace" if hit.step_number is None else f"#{hit.step_number}"
            label = " ".join(
                safe(part) for part in (hit.step_type, hit.name) if part and hit.step_number
            )
            click.echo(
                f"  {where:>5} {truncate(label, 40) + '  ' if label else ''}"
                f"{hit.field}: {_highlight(hit.snippet, hit.highlights, paint)}"
            )
    return 0


def _highlight(snippet: str, spans: list[tuple[int, int]], paint: object) -> str:
    """The snippet escaped, its matched words in colour (on a terminal)."""
    from agent_replay.commands._common import safe

    out, last = [], 0
    for start, end in spans:
        out.append(safe(snippet[last:start]))
        out.append(paint(safe(snippet[start:end]), "yellow"))  # type: ignore[operator]
        last = end
    out.append(safe(snippet[last:]))
    return "".join(out)
