"""The one look of a trace status, for every screen: the app theme's colour variable per status.

Screens that draw ``Content`` use ``status_style`` (``$variables`` resolve against the theme
where the text is drawn); Rich ``Text`` cells (the trace list's and the dashboard's tables)
use ``status_rich_style`` with the app's resolved ``theme_variables``. Either way the colour
comes from the theme, one per status: a fork is not a failure, and a running trace does not
look like one that timed out (``$text-accent`` is ``$text-warning`` in the dark theme, so
running is drawn in ``$text-primary``). A failure is bold.

A TUI module: imports Rich, never the store.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.style import Style

STATUS_VARIABLES: dict[str, str] = {
    "completed": "text-success",
    "failed": "text-error",
    "timeout": "text-warning",
    "running": "text-primary",
    "forked": "text-secondary",
}
"""The theme variable each trace status is drawn in."""


def status_style(status: str, *, bold: bool = False) -> str:
    """A ``Content`` style for ``status`` (``bold $text-error``); unknown statuses: plain."""
    variable = STATUS_VARIABLES.get(status)
    weight = "bold" if bold or status == "failed" else ""
    return f"{weight} ${variable}".strip() if variable else weight


def status_rich_style(status: str, variables: Mapping[str, str]) -> Style:
    """The Rich style of ``status`` with the theme's resolved colours (``App.theme_variables``)."""
    variable = STATUS_VARIABLES.get(status)
    color = variables.get(variable) if variable else None
    return Style(color=color, bold=status == "failed" or None)
