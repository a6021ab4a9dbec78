"""What a Codex CLI rollout holds, record by record: the envelopes, the response item and
event kinds known (and the ones deliberately ignored), and the forms a tool output has been
written in (``parse_output``: a plain string, a ``Process exited with code N`` header, a JSON
object with ``metadata.exit_code``). ``codex_rollout`` maps these onto a trace.
"""

from __future__ import annotations

import re
from typing import Any

from agent_replay.services.capture.session_writer import text_of
from agent_replay.trace.io import loads

ENVELOPES = frozenset(
    {
        "session_meta",
        "response_item",
        "event_msg",
        "turn_context",
        "compacted",
        "world_state",
        "token_usage_record",
    }
)
IGNORED_RECORDS = frozenset({"compacted", "world_state", "token_usage_record"})
# Older rollouts write response items without the envelope.
ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)
CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
# Events that repeat what the response items already hold, or carry nothing for the trace.
IGNORED_EVENTS = frozenset(
    {
        "agent_message",
        "agent_message_delta",
        "agent_reasoning",
        "agent_reasoning_delta",
        "agent_reasoning_raw_content",
        "agent_reasoning_section_break",
        "thread_settings_applied",
        "session_configured",
        "item_started",
        "item_updated",
        "exec_command_begin",
        "exec_command_output_delta",
        "patch_apply_begin",
        "mcp_tool_call_begin",
        "mcp_tool_call_end",
        "web_search_begin",
        "web_search_end",
        "view_image_tool_call",
        "turn_diff",
        "plan_update",
        "background_event",
        "stream_error",
        "entered_review_mode",
        "exited_review_mode",
        "context_compacted",
    }
)
EXIT_CODE_LINE = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")


def exit_code_of(value: Any) -> int | None:
    """An exit code (negative for a signal), or ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_output(raw: Any) -> tuple[Any, int | None, bool | None]:
    """A tool output as ``(output, exit code, success)``, from the forms Codex has written:
    a plain string, a ``Process exited with code N … Output:`` header over the output, a
    JSON ``{"output": …, "metadata": {"exit_code": N}}`` string, or ``{content, success}``."""
    success = None
    if isinstance(raw, dict):
        success = raw.get("success") if isinstance(raw.get("success"), bool) else None
        raw = raw.get("content", raw.get("output"))
    if isinstance(raw, list):
        raw = text_of(raw)
    if not isinstance(raw, str):
        return raw, None, success
    text, exit_code = raw, None
    if text.startswith("{") and '"output"' in text:
        try:
            parsed = loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            meta = parsed.get("metadata")
            exit_code = exit_code_of(meta.get("exit_code")) if isinstance(meta, dict) else None
            return parsed["output"], exit_code, success
    head, sep, body = text.partition("Output:\n")
    match = EXIT_CODE_LINE.search(head) if sep and head.endswith("\n") else None
    if match is not None or (sep and head.endswith("\n") and "Wall time:" in head):
        return body, int(match.group(1)) if match else None, success
    return text, exit_code, success
