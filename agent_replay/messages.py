"""App-wide Textual messages. Workers post these; screens handle them on the UI thread."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class OpenTraces(Message):
    """Ask the app to show the trace list, optionally filtered (dashboard drill-down)."""

    query: str = ""
    """A filter-bar query, e.g. ``status:failed agent:bot``."""
