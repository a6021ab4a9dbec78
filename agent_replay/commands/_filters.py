"""The trace filter options shared by ``list``, ``export``, ``search`` and ``push``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

STATUSES = ["running", "completed", "failed", "timeout", "forked"]


def _which_options() -> list[Callable[[F], F]]:
    return [
        click.option("--status", type=click.Choice(STATUSES), help="Only traces with this status."),
        click.option("--agent", help="Only traces of this agent name."),
        click.option("--tag", help="Only traces with this tag."),
        click.option("--since", help="Only traces started since: 7d, 12h, 30m, 2w, or 2026-01-01."),
        click.option("--session", help="Only traces of this session id."),
        click.option(
            "--label",
            help="Only traces annotated with this label (on the run or a step; see `annotate`).",
        ),
    ]


def which_options(function: F) -> F:
    """``--status --agent --tag --since --session --label``: which traces (``search``,
    ``push``)."""
    for option in reversed(_which_options()):
        function = option(function)
    return function


def filter_options(function: F) -> F:
    """``--status --agent --tag --since --session --label --sort``."""
    options = [
        *_which_options(),
        click.option(
            "--sort",
            type=click.Choice(["time", "tokens", "duration", "cost"]),
            default="time",
            show_default=True,
            help="Order, largest/newest first.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def build_filter(
    status: str | None,
    agent: str | None,
    tag: str | None,
    since: str | None,
    session: str | None,
    label: str | None = None,
) -> Any:
    """A ``TraceFilter`` from the options (``--since`` relative to the system clock)."""
    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import parse_since
    from agent_replay.store.queries import TraceFilter

    return TraceFilter(
        status=status,
        agent=agent,
        tag=tag,
        session=session,
        since_ms=parse_since(since, SystemClock().now()),
        label=label.strip() if label and label.strip() else None,
    )
