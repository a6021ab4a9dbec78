"""Harness stream formats mapped onto native events: ``codex exec --json`` (``codex-exec``),
``gemini -p --output-format stream-json`` (``gemini-stream``) and
``claude -p --output-format stream-json --verbose`` (``claude-stream``).

Each mapper reads the harness's JSON lines and feeds native protocol v1 events to the same
``EventEngine`` that ``record`` uses, so redaction, group commit and the report work the same.
What they map to:

- assistant text -> ``thought`` steps, except the last text of the run -> ``output``; streamed
  chunks (Gemini ``delta`` messages, Claude's per-block lines of one reply) merge into one step;
- tool calls -> ``tool_call`` steps opened when the call starts and closed with its result,
  paired by the harness's call id, named and shaped as the harness's hooks show them
  (``vocabulary``: Codex's ``command_execution`` is ``Bash`` with the command line unwrapped
  from ``bash -lc``); a failed call gets ``error`` set (a blocked one, the hook's reason);
- model usage -> ``llm_call`` steps carrying the tokens (Claude: one per API reply, counted once
  per message id; Codex: one per turn; Gemini: one per model in the final stats);
- warnings and errors -> ``error`` steps (a Codex warning item doesn't fail the trace).

Event types a mapper knows but has no use for are ignored silently; unknown ones are skipped
with one warning per kind. Text still streaming in is held until its message is complete.
Never imports Textual, Rich or an AI SDK.

One module per format: ``stream_codex``, ``stream_gemini``, ``stream_claude``, over the shared
``stream_sink.StreamSink``; ``make_sink`` (here) picks one for ``record --format``.
"""

from __future__ import annotations

from agent_replay.services.capture.events import EventEngine
from agent_replay.services.capture.pump import LineSink
from agent_replay.services.capture.stream_claude import ClaudeStreamSink
from agent_replay.services.capture.stream_codex import CodexExecSink
from agent_replay.services.capture.stream_gemini import GeminiStreamSink
from agent_replay.services.capture.stream_sink import StreamSink


def make_sink(fmt: str, engine: EventEngine, *, agent_name: str | None = None) -> LineSink:
    """The mapper for a ``record --format`` value."""
    mappers: dict[str, type[StreamSink]] = {
        "codex-exec": CodexExecSink,
        "gemini-stream": GeminiStreamSink,
        "claude-stream": ClaudeStreamSink,
    }
    return mappers[fmt](engine, agent_name=agent_name)
