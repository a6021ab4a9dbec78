"""Codex CLI's log events -> steps: model calls (``api_request`` completed by
``response.completed``), prompts, and tools (``tool_decision`` + ``tool_result``). Called by
``logs.apply_logs`` for the records of a Codex conversation.

Pure functions over the staged record dicts; no I/O.
"""

from __future__ import annotations

from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.otel.nodes import (
    Assembly,
    Node,
    iso,
    make_step,
    ms_ns,
    permission_node,
    user_prompt,
)
from agent_replay.services.otel.semconv import as_bool, as_int, first, parse_json


def apply_codex(asm: Assembly, item: dict[str, Any], event: str, t: int) -> None:
    """Codex CLI's own log events: a model call is its ``api_request`` completed by the
    ``response.completed`` record with its tokens; tools are ``tool_decision`` + ``tool_result``
    (named and shaped as on every other Codex path: ``vocabulary``)."""
    attrs = item["attributes"]
    if event == "user_prompt":
        user_prompt(asm, item, t, first(attrs, "prompt"), None)
    elif event == "api_request":
        duration = ms_ns(attrs.get("duration_ms"))
        node = asm.add(
            Node(
                f"log:{item['key']}",
                t - duration if t > duration else t,
                t,
                make_step(
                    "llm_call",
                    vocabulary.MODEL_STEP,
                    t - duration if t > duration else t,
                    t,
                    metadata={
                        k: v
                        for k, v in {
                            "provider": "openai",
                            "endpoint": attrs.get("endpoint"),
                            "status_code": attrs.get("http.response.status_code"),
                            "attempt": attrs.get("attempt"),
                        }.items()
                        if v is not None
                    },
                ),
                order=-2,
            )
        )
        asm.current_call = node.key
        status = as_int(attrs.get("http.response.status_code"))
        if status is not None and status >= 400:
            node.step["error"] = str(first(attrs, "error.message") or f"HTTP {status}")
    elif event == "sse_event":
        counts = {
            ours: as_int(attrs.get(theirs))
            for ours, theirs in (
                ("input_tokens", "input_token_count"),
                ("output_tokens", "output_token_count"),
                ("cached_input_tokens", "cached_token_count"),
                ("reasoning_output_tokens", "reasoning_token_count"),
            )
        }
        usage = {k: v for k, v in counts.items() if v is not None}
        if "input_tokens" not in usage and "output_tokens" not in usage:
            return  # the record of the stream's end without the usage
        call = asm.nodes.get(asm.current_call) if asm.current_call else None
        if call is None or call.step.get("tokens_used") is not None:
            call = asm.add(
                Node(f"log:{item['key']}", t, t, make_step("llm_call", vocabulary.MODEL_STEP, t, t))
            )
        model = first(attrs, "model", "slug")
        fresh = usage.get("input_tokens", 0) - usage.get("cached_input_tokens", 0)
        call.step["tokens_used"] = max(fresh, 0) + usage.get("output_tokens", 0)  # as Codex
        call.step["metadata"]["usage"] = usage
        if model:
            call.step["model"] = str(model)
            call.step["name"] = str(model)
        call.end_ns = max(call.end_ns, t)
        call.step["ended_at"] = iso(call.end_ns)
        call.step["duration_ms"] = (call.end_ns - call.start_ns) / 1e6
    elif event == "tool_decision":
        call_id = first(attrs, "call_id")
        tool = vocabulary.canonical_tool(vocabulary.CODEX, str(first(attrs, "tool_name")), None)
        chosen = str(first(attrs, "decision") or "approved")
        source = str(first(attrs, "source") or "")
        asm.add(
            permission_node(
                f"codex:dec:{call_id}" if call_id else f"log:{item['key']}",
                t,
                tool.name or "tool",
                ("approved", "denied", chosen),
                source,
                "user" if source.lower() == "user" else "policy",
                {"call_id": call_id},
                asm.current_call,
            )
        )
    elif event == "tool_result":
        _codex_tool(asm, item, t)


def _codex_tool(asm: Assembly, item: dict[str, Any], t: int) -> None:
    from agent_replay.services.capture.codex_rollout import tool_outcome

    attrs = item["attributes"]
    call_id = first(attrs, "call_id")
    duration = ms_ns(attrs.get("duration_ms"))
    start = t - duration if t > duration else t
    tool = vocabulary.canonical_tool(
        vocabulary.CODEX,
        str(first(attrs, "tool_name") or "tool"),
        parse_json(attrs.get("arguments")),
    )
    output, error, outcome = tool_outcome(
        attrs.get("output"), success=as_bool(attrs.get("success"))
    )
    decision = asm.nodes.get(f"codex:dec:{call_id}") if call_id else None
    if decision is not None and decision.start_ns > start:
        decision.start_ns = start  # decided before the call ran: list it first
    metadata = {
        **tool.metadata,
        **outcome,
        **{k: attrs[k] for k in ("call_id", "tool_namespace", "mcp_server") if attrs.get(k)},
    }
    asm.add(
        Node(
            f"codex:tool:{call_id}" if call_id else f"log:{item['key']}",
            start,
            t,
            make_step(
                "tool_call",
                tool.name,
                start,
                t,
                input=tool.input,
                output=output,
                error=error,
                metadata=metadata,
            ),
            caused_by=f"codex:dec:{call_id}" if call_id else None,
            fallback_cause=asm.current_call,
            order=1,
        )
    )
