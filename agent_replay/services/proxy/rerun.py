"""Re-running a session from a step: the command line, and how served steps are marked.

The TUI's timeline (``R`` on an ``llm_call`` step) and ``show`` use these; stdlib only, no
store access (they work on trace and step objects already loaded).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from agent_replay.errors import UsageError

DEFAULT_PORT = 8787


def is_replayable(step: dict[str, Any]) -> bool:
    """Whether the proxy recorded this step with its response (so a replay can serve it)."""
    proxy = (step.get("metadata") or {}).get("proxy")
    return (
        step.get("step_type") == "llm_call"
        and isinstance(proxy, dict)
        and isinstance(proxy.get("request_hash"), str)
        and "response_body" in proxy
    )


def rerun_command(
    trace: dict[str, Any],
    step_number: int,
    *,
    store_dir: str | None = None,
    port: int = DEFAULT_PORT,
) -> str:
    """The command that re-runs ``trace`` from ``step_number``: the proxy serves the recorded
    model calls before it and asks the model again from it on (``--until-step N-1 --then
    live``); the re-run is recorded as a fork.

    Args:
        trace: the trace object (``id`` and ``steps``).
        step_number: an ``llm_call`` step the proxy recorded.
        store_dir: the store directory to name with ``--dir`` (``None``: the default store).
        port: the proxy's port (the agent's base URL points there).

    Raises:
        UsageError: the step is not a model call the proxy recorded.
    """
    step = next((s for s in trace.get("steps") or [] if s.get("step_number") == step_number), None)
    if step is None:
        raise UsageError(f"trace {trace.get('id')} has no step {step_number}")
    if step.get("step_type") != "llm_call":
        raise UsageError(
            f"step {step_number} is a {step.get('step_type')} step: re-runs start at a model call"
        )
    if not is_replayable(step):
        raise UsageError(
            f"step {step_number} was not recorded through `agent-replay proxy`: there is no "
            "response to replay",
            hints=["record the session through the proxy (agent-replay proxy) to re-run it"],
        )
    parts = [
        "agent-replay",
        "proxy",
        "--replay",
        str(trace["id"]),
        "--until-step",
        str(step_number - 1),
    ]
    if port != DEFAULT_PORT:
        parts += ["--port", str(port)]
    if store_dir is not None:
        parts += ["--dir", store_dir]
    return shlex.join(parts)


def replay_mark(step: Mapping[str, Any]) -> str | None:
    """How a step of a re-run was answered, for display (``None``: not served from a replay)."""
    mark = (step.get("metadata") or {}).get("replay")
    if not isinstance(mark, dict) or mark.get("served") is not True:
        return None
    source = f"{mark.get('trace')} #{mark.get('step')}"
    if mark.get("override"):
        return f"✎ override {mark['override']} (replay of {source})"
    return f"↺ replayed from {source}"
