"""The step timeline of one trace (placeholder until the timeline screen lands)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, Static


class TimelineScreen(Screen[None]):
    """The steps of one trace."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="back", tooltip="Back")]

    def __init__(self, trace_id: str) -> None:
        super().__init__()
        self.trace_id = trace_id

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self.trace_id, markup=False)
        yield Footer()
