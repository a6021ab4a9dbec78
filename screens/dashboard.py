"""The dashboard (placeholder until the dashboard screen lands)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header, Static


class DashboardScreen(Screen[None]):
    """Totals and charts over the whole store."""

    def __init__(self, refresh_seconds: float | None = None) -> None:
        super().__init__()
        self.refresh_seconds = refresh_seconds

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("dashboard")
        yield Footer()
