"""agent-replay: time-travel debugging for AI agents.

This module holds the version and the public library API, loaded lazily so that
``import agent_replay`` stays cheap for the hook and never pulls in Textual.
"""

from __future__ import annotations

__version__ = "0.1.0"

# name -> module that defines it; resolved on first attribute access (PEP 562).
_LAZY = {
    "ensure_database": "agent_replay.store.db",
    "run_migrations": "agent_replay.store.migrations",
    "ingest_trace": "agent_replay.services.ingest",
    "get_trace": "agent_replay.store.trace_detail",
    "TraceRecorder": "agent_replay.services.recorder",
    "Store": "agent_replay.store.db",
    "Trace": "agent_replay.trace.models",
    "Step": "agent_replay.trace.models",
    "Decision": "agent_replay.trace.models",
    "Snapshot": "agent_replay.trace.models",
}

__all__ = ["__version__", *_LAZY]

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_replay.services.ingest import ingest_trace
    from agent_replay.services.recorder import TraceRecorder
    from agent_replay.store.db import Store, ensure_database
    from agent_replay.store.migrations import run_migrations
    from agent_replay.store.trace_detail import get_trace
    from agent_replay.trace.models import Decision, Snapshot, Step, Trace


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'agent_replay' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
