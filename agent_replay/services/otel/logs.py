"""Log records -> steps: the events of a harness session (Claude Code ``claude_code.*`` here,
Gemini CLI ``gemini_cli.*`` in ``logs_gemini``, Codex CLI ``codex.*`` in ``logs_codex``) and
GenAI log events (``gen_ai.client.inference.operation.details``, the deprecated message
events). A record that describes a span's step (Gemini CLI reports each model call as a span
and as records) is merged into it rather than added.

Pure functions over the staged record dicts; no I/O.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.otel import semconv
from agent_replay.services.otel.logs_codex import apply_codex
from agent_replay.services.otel.logs_gemini import apply_gemini
from agent_replay.services.otel.nodes import (
    Assembly,
    Node,
    make_step,
    merge,
    ms_ns,
    permission_node,
    user_prompt,
)
from agent_replay.services.otel.semconv import as_bool, as_float, as_int, first, parse_json
from agent_replay.trace.base import parse_time

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _record_time(item: dict[str, Any]) -> int:
    ns = item.get("time_ns") or item.get("observed_ns") or 0
    if not ns:
        stamp = item["attributes"].get("event.timestamp")
        if isinstance(stamp, str):
            try:
                ns = int((parse_time(stamp) - _EPOCH).total_seconds() * 1e9)
            except ValueError:
                ns = 0
    return int(ns)


def _apply_claude(asm: Assembly, item: dict[str, Any], event: str, t: int) -> None:
    attrs = item["attributes"]
    request = first(attrs, "request_id")
    if event == "user_prompt":
        user_prompt(asm, item, t, first(attrs, "prompt", "prompt_text"), attrs.get("prompt.id"))
    elif event in ("api_request", "api_error"):
        duration = ms_ns(attrs.get("duration_ms"))
        start = t - duration if t > duration else t
        usage = {
            k: as_int(attrs.get(k))
            for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
            if as_int(attrs.get(k)) is not None
        }
        cost = as_float(attrs.get("cost_usd"))
        if cost is not None and cost >= 0:
            asm.cost_usd += cost
            asm.has_cost = True
        error = None
        if event == "api_error":
            error = str(first(attrs, "error", "status_code") or "API error")
            status = attrs.get("status_code")
            if status and str(status) not in error:
                error = f"{error} (status {status})"
        model = first(attrs, "model")
        metadata = {
            "provider": "anthropic",
            "request_id": request,
            "usage": usage or None,
            "cost_usd": cost,
            "prompt_id": attrs.get("prompt.id"),
            **{k: attrs[k] for k in ("ttft_ms", "query_source", "speed", "attempt") if k in attrs},
        }
        span = asm.span_step(response_id=request) if request else None
        if span is not None:  # traces on too: the llm_request span is this call
            span.harness_matched = True
            span.step["name"] = vocabulary.model_step_name(model)
            merge(span, model=model, error=error, metadata=metadata)
            asm.aliases[f"claude:req:{request}"] = span.key
            return
        asm.add(
            Node(
                f"claude:req:{request}" if request else f"log:{item['key']}",
                start,
                t,
                make_step(
                    "llm_call",
                    vocabulary.model_step_name(model),
                    start,
                    t,
                    model=model,
                    tokens_used=sum(usage.values()) if usage else None,
                    error=error,
                    metadata={k: v for k, v in metadata.items() if v is not None},
                ),
                response_id=str(request) if request else None,
            )
        )
    elif event == "tool_decision":
        tool = first(attrs, "tool_name") or "tool"
        use_id = first(attrs, "tool_use_id")
        chosen = str(first(attrs, "decision") or "accept")
        source = str(first(attrs, "source") or "")
        decided_by = "policy" if source in ("config", "hook", "mode", "classifier") else "user"
        asm.add(
            permission_node(
                f"claude:dec:{use_id}" if use_id else f"log:{item['key']}",
                t,
                str(tool),
                ("accept", "reject", chosen),
                source,
                decided_by,
                {"tool_use_id": use_id},
                f"claude:req:{request}" if request else None,
            )
        )
    elif event == "tool_result":
        tool = first(attrs, "tool_name") or "tool"
        use_id = first(attrs, "tool_use_id")
        duration = ms_ns(attrs.get("duration_ms"))
        start = t - duration if t > duration else t
        error = None
        if as_bool(attrs.get("success")) is False:
            error = str(first(attrs, "error", "error_type") or "tool failed")
        decision_key = f"claude:dec:{use_id}"
        tool_input = parse_json(first(attrs, "tool_input", "tool_parameters"))
        tool_output = parse_json(first(attrs, "tool_result", "tool_output"))
        metadata = {
            k: attrs[k]
            for k in (
                "tool_use_id",
                "tool_source",
                "decision_source",
                "tool_input_size_bytes",
                "tool_result_size_bytes",
                "error_type",
            )
            if k in attrs
        }
        span = asm.span_step(tool_call_id=use_id) if use_id else None
        if span is not None:  # traces on too: the tool span is this call
            span.harness_matched = True
            merge(span, input=tool_input, output=tool_output, error=error, metadata=metadata)
            span.caused_by = span.caused_by or decision_key
            decision = asm.nodes.get(decision_key)
            if decision is not None and decision.start_ns > span.start_ns:
                decision.start_ns = span.start_ns  # decided before the call ran: list it first
            span.fallback_cause = span.fallback_cause or (
                f"claude:req:{request}" if request else None
            )
            asm.aliases[f"claude:tool:{use_id}"] = span.key
            return
        asm.add(
            Node(
                f"claude:tool:{use_id}" if use_id else f"log:{item['key']}",
                start,
                t,
                make_step(
                    "tool_call",
                    str(tool),
                    start,
                    t,
                    input=tool_input,
                    output=tool_output,
                    error=error,
                    metadata=metadata,
                ),
                caused_by=decision_key if use_id else None,
                fallback_cause=f"claude:req:{request}" if request else None,
                order=1,
            )
        )
    elif event == "assistant_response":
        text = first(attrs, "response")
        if isinstance(text, str):
            asm.answers.append((t, text))
        key = asm.resolve(f"claude:req:{request}") if request else None
        node = asm.nodes.get(key) if key else None
        if node is not None:
            merge(node, output=text)
        else:
            asm.add(
                Node(
                    f"log:{item['key']}",
                    t,
                    t,
                    make_step("output", "assistant response", t, t, output=text),
                )
            )


def _apply_genai(asm: Assembly, item: dict[str, Any], event: str, t: int) -> None:
    attrs = item["attributes"]
    if event != "gen_ai.client.inference.operation.details":
        # Deprecated message events as log records: only meaningful on their span's step.
        node = asm.linked(item)
        if node is not None:
            inputs, outputs = semconv.message_events(
                [{"name": event, "attributes": attrs, "body": item.get("body")}]
            )
            if inputs and node.step.get("input") is None:
                node.step["input"] = inputs
            if outputs and node.step.get("output") is None:
                node.step["output"] = outputs
        return
    tokens, usage = semconv.usage(attrs)
    response_id = first(attrs, "gen_ai.response.id")
    inputs = parse_json(attrs.get("gen_ai.input.messages"))
    outputs = parse_json(attrs.get("gen_ai.output.messages"))
    node = asm.linked(item)
    if node is None and response_id:
        key = asm.by_response.get(str(response_id))
        node = asm.nodes.get(key) if key else None
    if node is not None:
        merge(node, input=inputs, output=outputs, model=semconv.model(attrs))
        if node.step.get("tokens_used") is None and tokens is not None:
            node.step["tokens_used"] = tokens
            node.step["metadata"].setdefault("usage", usage)
        return
    if response_id is None and tokens is None and outputs is None:
        return  # a request-only record (Gemini CLI sends one before each call): nothing new
    model = semconv.model(attrs)
    op = semconv.operation(attrs) or "chat"
    asm.add(
        Node(
            f"log:{item['key']}",
            t,
            t,
            make_step(
                "retrieval" if op in ("embeddings", "retrieval") else "llm_call",
                f"{op} {model}" if model else op,
                t,
                t,
                model=model,
                input=inputs,
                output=outputs,
                tokens_used=tokens,
                metadata={
                    k: v
                    for k, v in {
                        "provider": semconv.provider(attrs),
                        "response_id": response_id,
                        "usage": usage or None,
                    }.items()
                    if v is not None
                },
            ),
            response_id=str(response_id) if response_id else None,
        )
    )


# Harness events that create steps go before those that only merge into them.
_PASS = {
    "gemini_cli.config": 0,
    "claude_code.assistant_response": 2,
    "gen_ai.client.inference.operation.details": 2,
}


def apply_logs(asm: Assembly, logs: list[dict[str, Any]]) -> None:
    timed = [(_PASS.get(item["event"], 1), _record_time(item), item["key"], item) for item in logs]
    timed.sort(key=lambda entry: entry[:3])
    for _, t, _, item in timed:
        event = item["event"]
        prefix, _, bare = event.partition(".")
        if event == "gemini_cli.config":
            mode = item["attributes"].get("approval_mode")
            asm.approval_mode = str(mode) if mode else asm.approval_mode
        elif prefix == "claude_code":
            _apply_claude(asm, item, bare, t)
        elif prefix == "gemini_cli":
            apply_gemini(asm, item, bare, t)
        elif prefix == "codex":
            apply_codex(asm, item, bare, t)
        else:
            _apply_genai(asm, item, event, t)
