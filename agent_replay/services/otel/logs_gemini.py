"""Gemini CLI's log events (``gemini_cli.*``) -> steps. Gemini CLI reports each model call
both as a span and as ``api_response`` records: a record that describes a span's step is merged
into it rather than added. Called by ``logs.apply_logs``.

Pure functions over the staged record dicts; no I/O.
"""

from __future__ import annotations

from typing import Any

from agent_replay.services.capture import vocabulary
from agent_replay.services.otel import semconv
from agent_replay.services.otel.nodes import (
    Assembly,
    Node,
    make_step,
    merge,
    ms_ns,
    user_prompt,
)
from agent_replay.services.otel.semconv import as_bool, as_int, first, parse_json


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


def _gemini_decided_by(decision: str, approval_mode: str | None) -> str:
    if decision == "auto_accept" or (approval_mode or "").lower() in ("yolo", "auto_edit"):
        return "policy"
    return "user"


def apply_gemini(asm: Assembly, item: dict[str, Any], event: str, t: int) -> None:
    attrs = item["attributes"]
    if event == "user_prompt":
        user_prompt(asm, item, t, first(attrs, "prompt"), attrs.get("prompt_id"))
    elif event in ("api_response", "api_error"):
        model = first(attrs, "model")
        duration = ms_ns(attrs.get("duration_ms"))
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
            node.step["name"] = vocabulary.model_step_name(model or node.step.get("model"))
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
                    vocabulary.model_step_name(model),
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
        duration = ms_ns(attrs.get("duration_ms"))
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
