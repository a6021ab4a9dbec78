"""App-wide Textual messages. Workers post these; screens handle them on the UI thread."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class OpenTraces(Message):
    """Ask the app to show the trace list, optionally filtered (dashboard drill-down)."""

    query: str = ""
    """A filter-bar query, e.g. ``status:failed agent:bot``."""


@dataclass
class StoreChanged(Message):
    """Another connection committed to the store (``store.changes.ChangeSignal``): the app
    tells the current screen, which refreshes what it shows in place."""

    version: int = 0
    """The app's count of changes seen so far (``AgentReplayApp.store_version``)."""
