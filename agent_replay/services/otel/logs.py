"""Log records -> steps: Claude Code (``claude_code.*``) and Gemini CLI (``gemini_cli.*``)
events of a session, and GenAI log events (``gen_ai.client.inference.operation.details``, the
deprecated message events). A record that describes a span's step (Gemini CLI reports each
model call as a span and as records) is merged into it rather than added.

Pure functions over the staged record dicts; no I/O.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from agent_replay.services.otel import semconv
from agent_replay.services.otel.nodes import Assembly, Node, iso, make_step, merge
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


def _ms(value: Any) -> int:
    number = as_float(value)
    return int(number * 1e6) if number is not None and number >= 0 else 0


def _gemini_text(response_text: Any) -> Any:
    """The model's words from Gemini CLI's ``response_text`` (raw response chunks)."""
    data = parse_json(response_text)
    chunks = data if isinstance(data, list) else [data]
    texts: list[str] = []
    for chunk in chunks:
        if not isinstance(chunk, dict):
            return response_text
        for candidate in chunk.get("candidates") or ():
            parts = ((candidate or {}).get("content") or {}).get("parts") or ()
            texts.extend(p["text"] for p in parts if isinstance(p, dict) and "text" in p)
    return "".join(texts) if texts else response_text


def _apply_claude(asm: Assembly, item: dict[str, Any], event: str, t: int) -> None:
    attrs = item["attributes"]
    request = first(attrs, "request_id")
    if event == "user_prompt":
        _prompt(asm, item, t, first(attrs, "prompt", "prompt_text"), attrs.get("prompt.id"))
    elif event in ("api_request", "api_error"):
        duration = _ms(attrs.get("duration_ms"))
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
            span.step["name"] = f"chat {model}" if model else "chat"
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
                    f"chat {model}" if model else "chat",
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
            _permission(
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
        duration = _ms(attrs.get("duration_ms"))
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


def _prompt(asm: Assembly, item: dict[str, Any], t: int, prompt: Any, prompt_id: Any) -> None:
    """A harness's user prompt: a ``user prompt`` step (the first is the trace's input)."""
    asm.prompts.append(prompt) if isinstance(prompt, str) else None
    metadata = {"role": "user", "prompt_id": prompt_id} if prompt_id else {"role": "user"}
    asm.add(
        Node(
            f"log:{item['key']}",
            t,
            t,
            make_step("thought", "user prompt", t, t, input=prompt, metadata=metadata),
        )
    )


def _permission(
    key: str,
    t: int,
    tool: str,
    options: tuple[str, ...],
    source: str,
    decided_by: str,
    metadata: dict[str, Any],
    caused_by: str | None,
) -> Node:
    """A harness's permission decision on a tool call (the last option is the one chosen)."""
    return Node(
        key,
        t,
        t,
        make_step(
            "decision",
            f"permission: {tool}",
            t,
            t,
            decision={
                "options": [{"option": o} for o in dict.fromkeys(options)],
                "chosen": options[-1],
                "rationale": f"source: {source}" if source else None,
                "decided_by": decided_by,
            },
            metadata={**metadata, "source": source or None},
        ),
        caused_by=caused_by,
        order=-1,
    )


def _apply_codex(asm: Assembly, item: dict[str, Any], event: str, t: int) -> None:
    """Codex CLI's own log events: a model call is its ``api_request`` completed by the
    ``response.completed`` record with its tokens; tools are ``tool_decision`` + ``tool_result``
    (named and shaped as on every other Codex path: ``vocabulary``)."""
    attrs = item["attributes"]
    if event == "user_prompt":
        _prompt(asm, item, t, first(attrs, "prompt"), None)
    elif event == "api_request":
        duration = _ms(attrs.get("duration_ms"))
        node = asm.add(
            Node(
                f"log:{item['key']}",
                t - duration if t > duration else t,
                t,
                make_step(
                    "llm_call",
                    "llm_call",
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
            call = asm.add(Node(f"log:{item['key']}", t, t, make_step("llm_call", None, t, t)))
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
        from agent_replay.services.capture import vocabulary

        call_id = first(attrs, "call_id")
        tool = vocabulary.canonical_tool(vocabulary.CODEX, str(first(attrs, "tool_name")), None)
        chosen = str(first(attrs, "decision") or "approved")
        source = str(first(attrs, "source") or "")
        asm.add(
            _permission(
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
    from agent_replay.services.capture import vocabulary
    from agent_replay.services.capture.codex_rollout import tool_outcome

    attrs = item["attributes"]
    call_id = first(attrs, "call_id")
    duration = _ms(attrs.get("duration_ms"))
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


def _gemini_decided_by(decision: str, approval_mode: str | None) -> str:
    if decision == "auto_accept" or (approval_mode or "").lower() in ("yolo", "auto_edit"):
        return "policy"
    return "user"


def _apply_gemini(asm: Assembly, item: dict[str, Any], event: str, t: int) -> None:
    attrs = item["attributes"]
    if event == "user_prompt":
        _prompt(asm, item, t, first(attrs, "prompt"), attrs.get("prompt_id"))
    elif event in ("api_response", "api_error"):
        model = first(attrs, "model")
        duration = _ms(attrs.get("duration_ms"))
        start = t - duration if t > duration else t
        usage = {
            k: as_int(attrs.get(k))
            for k in (
                "input_token_count",
                "output_token_count",
                "cached_content_token_count",
                "thoughts_token_count",
                "tool_token_count",
                "total_token_count",
            )
            if as_int(attrs.get(k)) is not None
        }
        tokens = usage.get("total_token_count")
        if tokens is None and ("input_token_count" in usage or "output_token_count" in usage):
            tokens = (usage.get("input_token_count") or 0) + (usage.get("output_token_count") or 0)
        response_text = attrs.get("response_text")
        output = _gemini_text(response_text) if response_text is not None else None
        if isinstance(output, str):
            asm.answers.append((t, output))
        error = None
        if event == "api_error":
            error = str(first(attrs, "error", "error_message", "status_code") or "API error")
        response_id = semconv.response_id_in(response_text)
        metadata = {
            k: v
            for k, v in {
                "provider": "gcp.gemini",
                "usage": usage or None,
                "role": attrs.get("role"),
                "prompt_id": attrs.get("prompt_id"),
                "status_code": attrs.get("status_code"),
                "finish_reasons": parse_json(attrs.get("finish_reasons")),
                "response_id": response_id,
            }.items()
            if v is not None
        }
        node = asm.match(item, "llm_call", t, None, model)
        if node is not None:
            node.harness_matched = True
            merge(
                node, tokens_used=tokens, output=output, error=error, model=model, metadata=metadata
            )
            if response_id and not node.response_id:
                node.response_id = response_id
                asm.by_response.setdefault(response_id, node.key)
            return
        asm.add(
            Node(
                f"log:{item['key']}",
                start,
                t,
                make_step(
                    "llm_call",
                    "llm_call",
                    start,
                    t,
                    model=model,
                    tokens_used=tokens,
                    output=output,
                    error=error,
                    metadata=metadata,
                ),
                response_id=response_id,
            )
        )
    elif event == "tool_call":
        name = first(attrs, "function_name")
        duration = _ms(attrs.get("duration_ms"))
        start = t - duration if t > duration else t
        details = parse_json(attrs.get("metadata"))
        error = None
        if as_bool(attrs.get("success")) is False:
            error = str(first(attrs, "error", "error_type") or "tool failed")
        elif isinstance(details, dict) and (
            details.get("isError") is True or as_int(details.get("exitCode")) not in (None, 0)
        ):
            code = as_int(details.get("exitCode"))
            error = f"exit code {code}" if code is not None else "tool reported an error"
        metadata = {
            k: v
            for k, v in {
                "tool_type": attrs.get("tool_type"),
                "content_length": attrs.get("content_length"),
                "mcp_server_name": attrs.get("mcp_server_name")
                if attrs.get("mcp_server_name") not in (None, "null")
                else None,
                "details": details if isinstance(details, dict) else None,
                "prompt_id": attrs.get("prompt_id"),
            }.items()
            if v is not None
        }
        node = asm.match(item, "tool_call", t, str(name) if name else None, None)
        if node is not None:
            node.harness_matched = True
            merge(
                node, input=parse_json(attrs.get("function_args")), error=error, metadata=metadata
            )
        else:
            node = asm.add(
                Node(
                    f"log:{item['key']}",
                    start,
                    t,
                    make_step(
                        "tool_call",
                        str(name or "tool"),
                        start,
                        t,
                        input=parse_json(attrs.get("function_args")),
                        error=error,
                        metadata=metadata,
                    ),
                )
            )
        decision = first(attrs, "decision")
        if decision:
            chosen = str(decision)
            options = dict.fromkeys(("accept", "reject", "modify", chosen))
            key = f"dec:{item['key']}"
            asm.add(
                Node(
                    key,
                    node.start_ns,
                    node.start_ns,
                    make_step(
                        "decision",
                        f"permission: {name or 'tool'}",
                        node.start_ns,
                        node.start_ns,
                        decision={
                            "options": [{"option": o} for o in options],
                            "chosen": chosen,
                            "decided_by": _gemini_decided_by(chosen, asm.approval_mode),
                        },
                        metadata={"approval_mode": asm.approval_mode},
                    ),
                    parent=node.parent,
                    order=-1,
                )
            )
            node.caused_by = node.caused_by or key


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
            _apply_gemini(asm, item, bare, t)
        elif prefix == "codex":
            _apply_codex(asm, item, bare, t)
        else:
            _apply_genai(asm, item, event, t)
