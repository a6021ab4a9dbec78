"""A fork's step N has not run: its recorded outcome is cleared and the step says so.

A fork of trace P at step N copies P's steps before N as recorded; step N is where the run
branches off, usually with an edited input, so whatever P's step N produced (its output, its
error, its tokens, its duration, its cost) was never observed for the fork. Copying it would make
the fork claim, for instance, that ``{"timeout_s": 120}`` still failed with "statement timeout
(30 s)". So ``clear_outcome`` removes those values and marks the step ``not re-run``
(``metadata.outcome``); ``fork --rerun`` then gives it a real outcome (``mark_rerun``).

Every front end reads the mark through ``is_not_rerun`` / ``outcome_note`` (``show``, the CLI's
fork and diff output, the app's timeline, step detail and diff). Pure: no store, no I/O.
Must not import Textual or Rich.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OUTCOME_KEY = "outcome"
"""The step metadata key holding the mark."""
NOT_RERUN = "not_rerun"
"""``metadata.outcome.state`` of a fork step whose outcome was cleared."""
NOT_RERUN_LABEL = "not re-run"
"""How every front end names the state."""

OUTCOME_FIELDS: tuple[str, ...] = ("output", "error", "tokens_used", "duration_ms", "ended_at")
"""The step fields a fork does not copy at step N (``ended_at`` too: a duration would be
derived from it)."""

OUTCOME_METADATA: frozenset[str] = frozenset(
    {
        # costs (services.costs) and the token counts they are priced from, in each
        # producer's spelling: left behind, they would price the step again at ingest.
        "cost_usd",
        "cost_source",
        "cost_missing",
        "usage",
        "input_tokens",
        "output_tokens",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "promptTokenCount",
        "candidatesTokenCount",
        "totalTokenCount",
        "cached_input_tokens",
        "cached",
        "cachedContentTokenCount",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "cache_read_tokens",
        "cache_creation_tokens",
        "reasoning_output_tokens",
        "reasoning_tokens",
        "thoughts_tokens",
        "thoughtsTokenCount",
        "tool_tokens",
        "toolUsePromptTokenCount",
        "prompt_tokens_details",
        "completion_tokens_details",
        "input_tokens_details",
        "output_tokens_details",
        "stop_reason",
        "exit_code",
    }
)
"""Step metadata keys that describe what the step produced (cleared with the outcome)."""


def clear_outcome(step: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``step`` (a format step object) without its outcome, marked not re-run.

    ``metadata.outcome`` records ``state: "not_rerun"`` and ``cleared``: the names of the
    fields and metadata keys that had a value (so a reader can say what was dropped; the values
    themselves stay in the parent trace).
    """
    out = {k: v for k, v in step.items() if k not in OUTCOME_FIELDS}
    cleared = [k for k in OUTCOME_FIELDS if step.get(k) is not None]
    metadata = dict(step.get("metadata") or {})
    cleared += sorted(k for k in metadata if k in OUTCOME_METADATA)
    metadata = {k: v for k, v in metadata.items() if k not in OUTCOME_METADATA}
    metadata[OUTCOME_KEY] = {"state": NOT_RERUN, "cleared": cleared}
    out["metadata"] = metadata
    return out


def mark_rerun(metadata: dict[str, Any]) -> None:
    """The step got a real outcome (``fork --rerun``): drop the not-re-run mark in place."""
    if is_not_rerun_metadata(metadata):
        metadata.pop(OUTCOME_KEY, None)


def is_not_rerun_metadata(metadata: Any) -> bool:
    """Whether step metadata carries the not-re-run mark."""
    if not isinstance(metadata, dict):
        return False
    mark = metadata.get(OUTCOME_KEY)
    return isinstance(mark, dict) and mark.get("state") == NOT_RERUN


def is_not_rerun(step: Mapping[str, Any] | None) -> bool:
    """Whether a step (format object) is a fork step whose outcome was never observed."""
    return step is not None and is_not_rerun_metadata(step.get("metadata"))


def outcome_note(step: Mapping[str, Any] | None) -> str:
    """``not re-run (output, error cleared)`` for a marked step, ``""`` otherwise."""
    if not is_not_rerun(step):
        return ""
    assert step is not None
    cleared = [k for k in step["metadata"][OUTCOME_KEY].get("cleared") or [] if k in _SHOWN]
    names = ", ".join(_SHOWN[k] for k in cleared)
    return f"{NOT_RERUN_LABEL} (recorded {names} not copied)" if names else NOT_RERUN_LABEL


_SHOWN = {
    "output": "output",
    "error": "error",
    "tokens_used": "tokens",
    "duration_ms": "duration",
    "cost_usd": "cost",
}
