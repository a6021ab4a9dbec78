"""Each LLM response's tokens counted once in the whole store, not once per trace.

Some instrumentations report one API call twice, in two OTel traces (OpenLLMetry's Anthropic
instrumentation: an ``anthropic.messages.create`` span and an ``anthropic.chat`` span, each a
trace of its own, with the same ``gen_ai.response.id``). The builder already counts a response
once within a trace (``build``); across traces, ``otel_responses`` records which trace (and
step) counts each response id. A step whose response another trace counts keeps its tokens
in ``metadata.duplicate_usage`` and says where they are counted
(``metadata.tokens_counted_in``), with ``tokens_used`` and its cost left empty.

Called by the OTLP writer for each trace it (re)builds, inside the batch's transaction. The
first trace to claim a response keeps it across rebuilds; a claim whose trace is gone (deleted,
pruned) is taken over by the next trace that has the response. Ids are compared within one
reporting process when the resource names it (``service.instance.id``).
"""

from __future__ import annotations

from typing import Any

from peewee import JOIN

from agent_replay.services.otel.runner import InList
from agent_replay.store.db import Store
from agent_replay.store.models import OtelResponseRow, TraceRow
from agent_replay.store.statements import insert_statement

_Response = OtelResponseRow
_OWNERS = InList(
    lambda keys: (
        _Response.select(
            _Response.response_id, _Response.trace_id, _Response.step_number, TraceRow.id
        )
        .join(TraceRow, JOIN.LEFT_OUTER, on=TraceRow.id == _Response.trace_id)
        .where(_Response.response_id.in_(keys))
    )
)
_FORGET = InList(lambda keys: _Response.delete().where(_Response.response_id.in_(keys)))
_CLAIM = insert_statement(
    _Response, [_Response.response_id, _Response.trace_id, _Response.step_number]
)


def duplicate(step: dict[str, Any], where: dict[str, Any]) -> None:
    """Mark a step whose response is counted in another step (this trace's or another's)."""
    metadata = step.setdefault("metadata", {})
    metadata["tokens_counted_in"] = where
    if "usage" in metadata:
        metadata["duplicate_usage"] = metadata.pop("usage")  # unpriced: it is counted there
    for key in ("cost_usd", "cost_source", "cost_missing"):
        metadata.pop(key, None)
    step["tokens_used"] = None


def count_once(store: Store, traces: list[dict[str, Any]], building: set[str]) -> None:
    """Leave out of each trace the tokens of responses another trace counts; claim the rest.

    The traces are taken in order, as if each one's claims were written before the next is
    looked at (a later trace of the batch sees an earlier one's claims), with one read of the
    stored claims and one write of the new ones for the whole batch.

    Args:
        store: the store (inside the writer's transaction).
        traces: built traces (the format's objects, with their ids); mutated.
        building: the ids of the traces this batch rebuilds (their claims count although
            their rows are not written yet).
    """
    wanted: list[tuple[dict[str, Any], str, list[dict[str, Any]]]] = []
    for trace in traces:
        steps = [
            s
            for s in trace["steps"]
            if s.get("tokens_used") is not None and (s.get("metadata") or {}).get("response_id")
        ]
        if steps:
            wanted.append((trace, _scope(trace), steps))
    if not wanted:
        return
    ids = sorted(
        {scope + str(s["metadata"]["response_id"]) for _, scope, steps in wanted for s in steps}
    )
    # response id -> (the trace claiming it, its step number, whether that trace is stored)
    known: dict[str, tuple[str, int, bool]] = {
        response_id: (owner, int(number), exists is not None)
        for response_id, owner, number, exists in _OWNERS.rows(store, ids)
    }
    claims: dict[str, tuple[str, str, int]] = {}  # one claim per response (the last, as before)
    for trace, scope, steps in wanted:
        mine: dict[str, tuple[str, str, int]] = {}
        for step in steps:
            response_id = scope + str(step["metadata"]["response_id"])
            owner, number, stored = known.get(response_id) or (trace["id"], 0, False)
            if owner != trace["id"] and (stored or owner in building):
                duplicate(step, {"trace_id": owner, "step_number": number})
            else:
                mine[response_id] = (response_id, trace["id"], int(step["step_number"]))
        for response_id, claim in mine.items():  # seen by the traces after this one
            known[response_id] = (claim[1], claim[2], False)
        claims.update(mine)
    if claims:
        _FORGET.run(store, list(claims))
        _CLAIM.run_many(store, list(claims.values()))


def _scope(trace: dict[str, Any]) -> str:
    """Response ids are compared within the process that reported them when the resource
    names it (``service.instance.id``): one program reporting a call twice. Two programs that
    happen to share ids (two runs against one mock server) are not one call."""
    resource = (trace.get("metadata") or {}).get("resource") or {}
    instance = resource.get("service.instance.id")
    return f"{instance}/" if isinstance(instance, str) and instance else ""
