"""The arguments of the tools ``agent-replay mcp`` serves (``agent_tools``): one pydantic model
per tool, whose JSON schema is the tool's ``inputSchema`` (every argument documented, unknown
ones refused), and the sizing defaults every reading tool shares.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_FIELD_CHARS = 1_000
"""Longest text value returned by default (longer ones are cut, saying how much is left)."""
DEFAULT_BUDGET_CHARS = 40_000
"""About how many characters of JSON one result may take (roughly 10,000 tokens)."""

Status = Literal["running", "completed", "failed", "timeout", "forked"]
Sort = Literal["time", "tokens", "duration", "cost"]
Preset = Literal["hallucination-check", "safety-check", "completeness-check"]


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Sizing(ToolArgs):
    max_field_chars: int = Field(
        DEFAULT_FIELD_CHARS,
        ge=40,
        le=100_000,
        description="Longest text value returned; longer values are cut and marked "
        "'…[N more chars]'.",
    )


class Which(ToolArgs):
    status: Status | None = Field(None, description="Only traces with this status.")
    agent: str | None = Field(None, description="Only traces of this agent name (exact).")
    tag: str | None = Field(None, description="Only traces with this tag.")
    label: str | None = Field(
        None, description="Only traces annotated with this label (e.g. 'good')."
    )
    session: str | None = Field(None, description="Only traces of this session id.")
    since: str | None = Field(
        None,
        description="Only traces started since: a duration (7d, 12h, 30m, 2w) or a date "
        "(2026-01-01) or an ISO time.",
    )


class ListTracesArgs(Which, Sizing):
    """Arguments of ``list_traces``."""

    text: str | None = Field(
        None,
        description="Free text: words searched (as prefixes) in names, inputs, outputs, errors "
        "and session ids of traces and their steps, or a trace id prefix.",
    )
    sort: Sort = Field("time", description="Order, newest/largest first.")
    limit: int = Field(20, ge=1, le=200, description="At most this many traces.")


class GetTraceArgs(Sizing):
    """Arguments of ``get_trace``."""

    trace_id: str = Field(description="A trace id (trc_…) or a unique prefix of one.")
    from_step: int | None = Field(
        None, ge=1, description="First step number of the window (default: 1)."
    )
    to_step: int | None = Field(
        None,
        ge=1,
        description="Last step number of the window (default: from_step + max_steps - 1).",
    )
    max_steps: int = Field(50, ge=1, le=500, description="At most this many steps returned.")
    budget_chars: int = Field(
        DEFAULT_BUDGET_CHARS,
        ge=2_000,
        le=1_000_000,
        description="About how many characters of JSON the result may take; steps past it "
        "are left for the next call (the note says where to continue).",
    )
    snapshots: bool = Field(False, description="Include each step's state snapshot.")


class SearchArgs(Which, Sizing):
    """Arguments of ``search``."""

    query: str = Field(
        description="Words that must all appear (in one step or in the trace's own fields); "
        '"quoted words" must appear together; word* matches a prefix. Case is ignored.'
    )
    limit: int = Field(10, ge=1, le=100, description="At most this many traces.")
    hits: int = Field(3, ge=1, le=20, description="Matching steps shown per trace.")


class DiffArgs(Sizing):
    """Arguments of ``diff_traces``."""

    a: str = Field(description="The 'before' trace: an id or a unique prefix.")
    b: str = Field(description="The 'after' trace: an id or a unique prefix.")
    full: bool = Field(
        False,
        description="Compare whole traces even when one is a fork of the other (default: "
        "only the fork's extent).",
    )
    max_pairs: int = Field(
        60,
        ge=1,
        le=1_000,
        description="At most this many step pairs that differ are listed (matched pairs are "
        "counted, not listed).",
    )


class WhyArgs(Sizing):
    """Arguments of ``why_step``."""

    trace_id: str = Field(description="A trace id or a unique prefix.")
    step: int = Field(ge=1, description="The step number to explain.")


class DecisionsArgs(Sizing):
    """Arguments of ``decisions``."""

    trace_id: str = Field(description="A trace id or a unique prefix.")
    limit: int = Field(100, ge=1, le=1_000, description="At most this many decision points.")


class EvalArgs(Sizing):
    """Arguments of ``eval_trace``."""

    trace_id: str = Field(description="A trace id or a unique prefix.")
    presets: list[Preset] = Field(
        default_factory=list,
        description="Deterministic presets to run (default: all three). Results are returned, "
        "not stored.",
    )


class ForkArgs(Sizing):
    """Arguments of ``fork_trace``."""

    trace_id: str = Field(description="The trace to fork: an id or a unique prefix.")
    from_step: int = Field(
        ge=1, description="Fork at this step: the fork keeps steps 1..N-1 and step N."
    )
    modify_input: Any = Field(
        None,
        description="A change to the fork's trace input: a JSON Merge Patch (RFC 7386) when "
        "both are objects, else (or with replace) the new input.",
    )
    modify_step_input: Any = Field(
        None, description="A change to step N's input, applied the same way."
    )
    replace: bool = Field(False, description="Replace the inputs whole instead of merging.")
    tags: list[str] = Field(default_factory=list, description="Tags for the fork.")


class AnnotateArgs(ToolArgs):
    """Arguments of ``annotate``."""

    trace_id: str = Field(description="A trace id or a unique prefix.")
    label: str = Field(
        min_length=1,
        max_length=200,
        description="The label: good, bad, wrong-tool, needs-review, …",
    )
    step: int | None = Field(None, ge=1, description="Annotate this step (default: the run).")
    note: str | None = Field(None, max_length=10_000, description="A free-text note.")
    score: float | None = Field(None, description="A score (e.g. 0 to 1).")
