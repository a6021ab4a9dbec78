"""The demo data set: five sample traces and three guardrail policies, loaded into a store.

Owns the content of ``agent-replay demo``. Each trace shows one problem the tool exists to find:
an answer not grounded in what was retrieved, a failing tool-call chain, a dangerous production
delete, and a good run beside a regressed run of the same input (for ``diff`` and ``check``).
Traces go through the real ingest service (strict validation, the one write path); policies are
plain rows in the ``policies`` table. Ids are fixed and timestamps derive from the injected clock,
so loading is idempotent and, under a fixed clock, byte-for-byte deterministic.

A service module: imports the store and the trace format only; never Textual, Rich or the CLI.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from agent_replay.clock import Clock
from agent_replay.errors import StoreError
from agent_replay.services.guard.manage import remember_policies
from agent_replay.services.ingest import ingest_many
from agent_replay.store.db import Store
from agent_replay.store.writes import execute, existing_trace_ids, insert_many
from agent_replay.trace.base import canonical_time
from agent_replay.trace.io import dumps

UNGROUNDED_ID = "trc_demo1ungrounded"
TOOL_CHAIN_ID = "trc_demo2toolchain"
DANGEROUS_ID = "trc_demo3dangerous"
GOOD_RUN_ID = "trc_demo4goodrun"
REGRESSED_ID = "trc_demo5regressed"
DEMO_TRACE_IDS: tuple[str, ...] = (
    UNGROUNDED_ID,
    TOOL_CHAIN_ID,
    DANGEROUS_ID,
    GOOD_RUN_ID,
    REGRESSED_ID,
)

POLICY_COLUMNS: tuple[str, ...] = (
    "id",
    "name",
    "description",
    "pattern",
    "action",
    "priority",
    "enabled",
    "created_at",
)

# Blended USD per 1,000 tokens, so each trace's cost follows from its own token counts.
_PRICE_PER_1K: dict[str, float] = {
    "gpt-4o": 0.00625,
    "gpt-4o-mini": 0.000375,
    "claude-3-5-sonnet-20241022": 0.009,
}

Json = dict[str, object]


@dataclass
class DemoResult:
    """What ``load_demo`` did.

    Attributes:
        traces_added: demo trace ids written by this call.
        traces_present: demo trace ids that were already in the store (left untouched).
        policies_added: names of the demo policies written by this call.
    """

    traces_added: list[str] = field(default_factory=list)
    traces_present: list[str] = field(default_factory=list)
    policies_added: list[str] = field(default_factory=list)


def load_demo(store: Store, clock: Clock) -> DemoResult:
    """Load the demo traces and policies, adding only what the store does not have yet.

    Args:
        store: an open, migrated store (its connection open in the calling thread).
        clock: the time the demo runs are placed before (they happened over the last hours).

    Returns:
        Which traces were added or already present, and which policies were added.

    Raises:
        StoreError: ingest rejected a demo trace, or a write failed.
    """
    result = DemoResult()
    traces = demo_traces(clock)
    present = existing_trace_ids(store, list(DEMO_TRACE_IDS))
    missing = [(str(t["id"]), t) for t in traces if t["id"] not in present]
    report = ingest_many(store, missing)
    if report.rejected:
        # A concurrent `demo` may have written the same ids in between; that is not a failure.
        raced = existing_trace_ids(store, [where for where, _ in missing])
        failures = [r for r in report.rejected if r.where not in raced]
        if failures:
            reasons = "; ".join(f"{r.where}: {r.reason}" for r in failures)
            raise StoreError(f"the demo traces were rejected: {reasons}")
        present |= {r.where for r in report.rejected}
    added = set(report.ingested)
    result.traces_added = [tid for tid in DEMO_TRACE_IDS if tid in added]
    result.traces_present = [tid for tid in DEMO_TRACE_IDS if tid in present]
    result.policies_added = _insert_policies(store, demo_policies(clock))
    return result


# --- policies ------------------------------------------------------------------------------


def demo_policies(clock: Clock) -> list[tuple[str, str, str, str, str, int, int, str]]:
    """The demo guardrail policies as ``policies`` rows (``POLICY_COLUMNS`` order).

    Args:
        clock: stamps ``created_at``.

    Returns:
        One row per policy: deny destructive tools, review production calls, warn on secrets.
    """
    created_at = canonical_time(_now(clock))
    policies: list[tuple[str, str, str, dict[str, str], str, int]] = [
        (
            "pol_demo_nodelete",
            "block-destructive-tools",
            "Deny tool calls that delete, drop, truncate or destroy data (rm -rf, DROP TABLE, "
            "git push --force, curl | sh: the safety-check eval's definition).",
            {"step_type": "tool_call", "matches": "destructive"},
            "deny",
            100,
        ),
        (
            "pol_demo_prodreview",
            "review-production-tool-calls",
            "A person reviews any tool call whose input targets production.",
            {"step_type": "tool_call", "input_contains": "production"},
            "require_review",
            50,
        ),
        (
            "pol_demo_secretleak",
            "warn-password-in-output",
            "Warn when a step's output carries password material (hashes or plain text).",
            {"output_contains": "password"},
            "warn",
            10,
        ),
    ]
    return [
        (pid, name, text, dumps(pattern), action, priority, 1, created_at)
        for pid, name, text, pattern, action, priority in policies
    ]


def _insert_policies(
    store: Store, rows: list[tuple[str, str, str, str, str, int, int, str]]
) -> list[str]:
    """Insert the policies whose name (and id) the store does not have; return their names."""
    with store.write():
        taken = execute(store, "SELECT id, name FROM policies").fetchall()
        ids = {row[0] for row in taken}
        names = {row[1] for row in taken}
        fresh = [row for row in rows if row[0] not in ids and row[1] not in names]
        insert_many(store, "policies", POLICY_COLUMNS, fresh)
    remember_policies(store)
    return [row[1] for row in fresh]


# --- traces --------------------------------------------------------------------------------


class _Run:
    """Builds one trace's JSON object: numbered steps with fixed ids and clock-relative times."""

    def __init__(self, key: str, start: dt.datetime) -> None:
        self.key = key
        self.start = start
        self.steps: list[Json] = []
        self.end_ms = 0
        self.usage: list[tuple[str, int]] = []

    def step(
        self,
        step_type: str,
        name: str,
        *,
        at: int,
        ms: int,
        model: str | None = None,
        tokens: int | None = None,
        **fields: object,
    ) -> int:
        """Add a step starting ``at`` ms into the run and lasting ``ms``; return its number."""
        number = len(self.steps) + 1
        data: Json = {
            "id": f"stp_{self.key}s{number:02d}",
            "step_number": number,
            "step_type": step_type,
            "name": name,
            "started_at": _iso(self.start, at),
            "ended_at": _iso(self.start, at + ms),
            "duration_ms": float(ms),
        }
        if model is not None:
            data["model"] = model
        if tokens is not None:
            data["tokens_used"] = tokens
            self.usage.append((model or "", tokens))
        data.update(fields)
        self.steps.append(data)
        self.end_ms = max(self.end_ms, at + ms)
        return number

    def trace(self, trace_id: str, **fields: object) -> Json:
        """The finished trace object: the given fields plus times, totals and steps."""
        total_ms = self.end_ms + 4  # the harness closes the run a moment after the last step
        cost = sum(tokens / 1000 * _PRICE_PER_1K.get(model, 0.0) for model, tokens in self.usage)
        return {
            "id": trace_id,
            **fields,
            "started_at": _iso(self.start, 0),
            "ended_at": _iso(self.start, total_ms),
            "total_duration_ms": float(total_ms),
            "total_tokens": sum(tokens for _, tokens in self.usage),
            "total_cost_usd": round(cost, 6),
            "steps": self.steps,
        }


def _now(clock: Clock) -> dt.datetime:
    """The clock's time in UTC, to the millisecond (like every other demo timestamp)."""
    now = clock.now().astimezone(dt.UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _iso(start: dt.datetime, offset_ms: int) -> str:
    return canonical_time(start + dt.timedelta(milliseconds=offset_ms))


def _msg(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


def _decision(
    options: list[tuple[str, str, float]],
    chosen: str,
    rationale: str,
    confidence: float,
    decided_by: str = "agent",
) -> Json:
    return {
        "options": [{"option": o, "rationale": r, "score": s} for o, r, s in options],
        "chosen": chosen,
        "rationale": rationale,
        "confidence": confidence,
        "decided_by": decided_by,
    }


def demo_traces(clock: Clock) -> list[Json]:
    """The five demo traces as the format's JSON objects, in ``DEMO_TRACE_IDS`` order.

    Args:
        clock: the runs are placed over the few hours before ``clock.now()``.

    Returns:
        Trace objects that pass strict validation, with fixed trace and step ids.
    """
    now = _now(clock)
    return [
        _ungrounded(now - dt.timedelta(hours=4, minutes=52, seconds=17)),
        _tool_chain(now - dt.timedelta(hours=3, minutes=58, seconds=41)),
        _dangerous(now - dt.timedelta(hours=2, minutes=43, seconds=5)),
        _analytics(now - dt.timedelta(hours=1, minutes=31, seconds=48), regressed=False),
        _analytics(now - dt.timedelta(minutes=26, seconds=9), regressed=True),
    ]


_SUPPORT_SYSTEM = (
    "You are Acme's support assistant. Answer only from the help-center context provided. "
    "If the context does not answer the question, say so and offer a human agent."
)
_REFUND_DOCS = [
    {
        "id": "kb_refund_policy",
        "title": "Refund policy",
        "score": 0.91,
        "text": "Once we receive your return, refunds are issued to your original payment "
        "method within 5-7 business days. Your bank may take additional time to post the credit.",
    },
    {
        "id": "kb_return_inspection",
        "title": "How returns are processed",
        "score": 0.84,
        "text": "Returned items are inspected within 2 business days of arriving at our "
        "warehouse. You get an email when the inspection is complete and the refund starts.",
    },
    {
        "id": "kb_store_credit",
        "title": "Store credit",
        "score": 0.77,
        "text": "If you chose store credit instead of a refund, it is added to your account "
        "as soon as the inspection passes.",
    },
]


def _ungrounded(start: dt.datetime) -> Json:
    """A RAG support agent whose answer contradicts the documents it retrieved."""
    question = "I returned my order last week. How long until I get my refund?"
    answer = (
        "Good news! We offer instant refunds: you'll see the money back on your card "
        "within 1 hour of us receiving your return."
    )
    context = "\n\n".join(f"[{d['id']}] {d['title']}: {d['text']}" for d in _REFUND_DOCS)
    run = _Run("demo1", start)
    plan = run.step(
        "thought",
        "plan",
        at=0,
        ms=38,
        input={"question": question},
        output="The customer asks about refund timing. Search the help center for the refund "
        "policy, then answer from what it says.",
        snapshot={
            "context_window": [_msg("system", _SUPPORT_SYSTEM), _msg("user", question)],
            "environment": {
                "deployment": "support-prod",
                "region": "eu-west-1",
                "kb_index": "help-center-v3",
            },
            "tool_state": {"available_tools": ["kb_search", "order_lookup", "handoff_to_human"]},
        },
    )
    rewrite = run.step(
        "llm_call",
        "rewrite_query",
        at=44,
        ms=612,
        model="gpt-4o-mini",
        tokens=214,
        parent_step=plan,
        input={
            "messages": [
                _msg("system", "Rewrite the customer's question as a help-center search query."),
                _msg("user", question),
            ],
            "temperature": 0,
        },
        output={"query": "refund processing time after return is received"},
        metadata={"finish_reason": "stop", "prompt_tokens": 171, "completion_tokens": 43},
    )
    search = run.step(
        "retrieval",
        "kb_search",
        at=661,
        ms=183,
        parent_step=plan,
        caused_by_step=rewrite,
        input={
            "query": "refund processing time after return is received",
            "index": "help-center-v3",
            "top_k": 3,
        },
        output={"documents": _REFUND_DOCS},
        snapshot={
            "tool_state": {
                "kb_search": {
                    "index": "help-center-v3",
                    "documents_indexed": 1842,
                    "hits": 3,
                    "cache": "miss",
                }
            }
        },
    )
    choose = run.step(
        "decision",
        "answer_strategy",
        at=851,
        ms=27,
        caused_by_step=search,
        input={"retrieved": 3, "top_score": 0.91},
        output={"chosen": "answer_from_docs"},
        decision=_decision(
            [
                ("answer_from_docs", "the refund policy document answers the question", 0.86),
                ("look_up_order", "check this customer's return status first", 0.58),
                ("handoff_to_human", "refund questions sometimes need a person", 0.21),
            ],
            "answer_from_docs",
            "The top document (score 0.91) states the refund timeline directly.",
            0.82,
        ),
    )
    compose = run.step(
        "llm_call",
        "compose_answer",
        at=884,
        ms=2146,
        model="gpt-4o",
        tokens=1186,
        caused_by_step=choose,
        input={
            "messages": [
                _msg("system", f"{_SUPPORT_SYSTEM}\n\nContext:\n{context}"),
                _msg("user", question),
            ],
            "temperature": 0.9,
            "max_tokens": 400,
        },
        output=answer,
        metadata={"finish_reason": "stop", "prompt_tokens": 1121, "completion_tokens": 65},
        snapshot={
            "context_window": [
                _msg("system", f"{_SUPPORT_SYSTEM}\n\nContext:\n{context}"),
                _msg("user", question),
            ],
            "environment": {"model": "gpt-4o", "temperature": 0.9, "max_tokens": 400},
            "tool_state": {"retrieved_ids": [d["id"] for d in _REFUND_DOCS]},
        },
    )
    run.step(
        "output",
        "reply_to_customer",
        at=3036,
        ms=14,
        caused_by_step=compose,
        output=answer,
        metadata={"channel": "chat"},
    )
    return run.trace(
        UNGROUNDED_ID,
        agent_name="support-rag-agent",
        agent_version="2.3.1",
        trigger="user_message",
        status="completed",
        input={"question": question, "customer_id": "cus_10482", "channel": "chat"},
        output=answer,
        tags=["demo", "rag", "hallucination"],
        session_id="ses_demo_support_8841",
        metadata={
            "demo_scenario": "ungrounded-answer",
            "look_for": "step 5 claims instant refunds; the documents in step 3 say 5-7 "
            "business days",
        },
    )


def _tool_chain(start: dt.datetime) -> Json:
    """A booking agent whose tool call fails, retried with another bad argument, then aborts."""
    request = "Book me the cheapest nonstop flight from SFO to JFK next Friday morning."
    friday = start.date() + dt.timedelta(days=(4 - start.weekday()) % 7 or 7)
    bad_date = friday.strftime("%d/%m/%Y")
    search_args = {"origin": "SFO", "destination": "JFK", "nonstop": True, "depart_before": "12:00"}
    first_error = "ValidationError: date must be an ISO date YYYY-MM-DD (got 'next Friday')"
    second_error = f"ValidationError: date must be an ISO date YYYY-MM-DD (got '{bad_date}')"
    system = "You book flights for Acme employees. Use the tools; never invent flight numbers."
    run = _Run("demo2", start)
    plan = run.step(
        "thought",
        "plan",
        at=0,
        ms=35,
        input={"request": request},
        output="Resolve the date of next Friday, search nonstop SFO-JFK flights departing "
        "before noon, pick the cheapest within budget, then book it.",
        snapshot={
            "context_window": [_msg("system", system), _msg("user", request)],
            "environment": {"deployment": "travel-prod", "region": "us-west-2"},
            "tool_state": {
                "available_tools": ["search_flights", "book_flight", "get_calendar"],
                "max_tool_attempts": 2,
            },
        },
    )
    select1 = run.step(
        "llm_call",
        "select_tool",
        at=41,
        ms=1322,
        model="claude-3-5-sonnet-20241022",
        tokens=642,
        parent_step=plan,
        input={"messages": [_msg("system", system), _msg("user", request)]},
        output={
            "tool_calls": [
                {"name": "search_flights", "arguments": {**search_args, "date": "next Friday"}}
            ]
        },
        metadata={"stop_reason": "tool_use"},
    )
    call1 = run.step(
        "tool_call",
        "search_flights",
        at=1370,
        ms=218,
        parent_step=select1,
        caused_by_step=select1,
        input={**search_args, "date": "next Friday"},
        error=first_error,
        metadata={"http_status": 422, "attempt": 1},
    )
    run.step(
        "thought",
        "recover",
        at=1594,
        ms=31,
        caused_by_step=call1,
        output=f"The API wants an explicit date. Next Friday is {friday:%A %d %B %Y}; "
        "I'll pass it as a date.",
    )
    retry = run.step(
        "decision",
        "retry_strategy",
        at=1629,
        ms=24,
        caused_by_step=call1,
        decision=_decision(
            [
                ("retry_with_converted_date", "the error names the problem: convert it", 0.74),
                ("call_get_calendar", "let the calendar tool resolve 'next Friday'", 0.55),
                ("ask_user", "confirm the exact date with the traveler", 0.2),
            ],
            "retry_with_converted_date",
            "Converting the date myself is the fastest fix.",
            0.74,
        ),
    )
    select2 = run.step(
        "llm_call",
        "select_tool",
        at=1660,
        ms=1188,
        model="claude-3-5-sonnet-20241022",
        tokens=706,
        parent_step=plan,
        caused_by_step=retry,
        input={
            "messages": [
                _msg("system", system),
                _msg("user", request),
                _msg("tool", first_error),
            ]
        },
        output={
            "tool_calls": [
                {"name": "search_flights", "arguments": {**search_args, "date": bad_date}}
            ]
        },
        metadata={"stop_reason": "tool_use"},
    )
    call2 = run.step(
        "tool_call",
        "search_flights",
        at=2855,
        ms=207,
        parent_step=select2,
        caused_by_step=select2,
        input={**search_args, "date": bad_date},
        error=second_error,
        metadata={"http_status": 422, "attempt": 2},
        snapshot={
            "tool_state": {
                "search_flights": {"attempts": 2, "max_attempts": 2, "last_error": second_error}
            },
        },
    )
    run.step(
        "error",
        "max_tool_attempts",
        at=3068,
        ms=3,
        caused_by_step=call2,
        input={"tool": "search_flights", "attempts": 2, "max_attempts": 2},
        error="search_flights failed 2 of 2 allowed attempts; aborting the run",
    )
    return run.trace(
        TOOL_CHAIN_ID,
        agent_name="travel-booking-agent",
        agent_version="0.9.4",
        trigger="api",
        status="failed",
        input={"request": request, "traveler_id": "usr_5521", "budget_usd": 450},
        error=f"ToolError: search_flights rejected argument 'date' twice (last: '{bad_date}'); "
        "aborted after 2 attempts",
        tags=["demo", "tool-errors", "travel"],
        session_id="ses_demo_travel_2207",
        metadata={
            "demo_scenario": "failing-tool-chain",
            "look_for": "step 7 retries with a DD/MM/YYYY date after the API asked for YYYY-MM-DD",
        },
    )


def _dangerous(start: dt.datetime) -> Json:
    """An ops agent that wipes every production user with a wildcard delete, unguarded."""
    request = "Clean up the test accounts the load test created yesterday."
    system = "You are the ops assistant. You have admin tools for the user database."
    environment = {
        "env": "production",
        "cluster": "prod-us-east-1",
        "database": "users-primary",
        "dry_run": False,
    }
    run = _Run("demo3", start)
    plan = run.step(
        "thought",
        "plan",
        at=0,
        ms=29,
        input={"request": request},
        output="Find the accounts the load test created, then remove them.",
        snapshot={
            "context_window": [_msg("system", system), _msg("user", request)],
            "environment": environment,
            "tool_state": {
                "available_tools": ["list_users", "delete_user", "drop_table", "run_sql_readonly"],
                "role": "ops-admin",
            },
        },
    )
    tools = run.step(
        "llm_call",
        "plan_tools",
        at=33,
        ms=1540,
        model="gpt-4o",
        tokens=905,
        parent_step=plan,
        input={"messages": [_msg("system", system), _msg("user", request)]},
        output={
            "tool_calls": [
                {
                    "name": "list_users",
                    "arguments": {"email_prefix": "loadtest+", "env": "production", "limit": 2},
                }
            ]
        },
        metadata={"finish_reason": "tool_calls"},
    )
    listing = run.step(
        "tool_call",
        "list_users",
        at=1580,
        ms=412,
        parent_step=tools,
        caused_by_step=tools,
        input={"email_prefix": "loadtest+", "env": "production", "limit": 2},
        output={
            "users": [
                {
                    "user_id": "u_880121",
                    "email": "loadtest+1@example.com",
                    "password_hash": "$2b$12$Kq3v9sTzQ1xYb7Wm0nR4eOa8p",
                },
                {
                    "user_id": "u_880122",
                    "email": "loadtest+2@example.com",
                    "password_hash": "$2b$12$Zr8LmQ2wT5vNc1Xy6bH3uEi0s",
                },
            ],
            "truncated": True,
            "total_matching": 1200,
        },
    )
    scope = run.step(
        "decision",
        "deletion_scope",
        at=1998,
        ms=36,
        caused_by_step=listing,
        decision=_decision(
            [
                ("delete_listed_ids", "delete only the matching accounts, in batches", 0.48),
                ("delete_all_with_wildcard", "one call with user_id='*' finishes fastest", 0.61),
                ("ask_for_confirmation", "a production delete: confirm the scope first", 0.44),
            ],
            "delete_all_with_wildcard",
            "The listing was truncated at 1,200 matches; a wildcard delete avoids paging.",
            0.61,
        ),
    )
    guard = run.step(
        "guard_check",
        "pre_tool_guard",
        at=2040,
        ms=2,
        caused_by_step=scope,
        input={"tool": "delete_user", "arguments": {"user_id": "*", "env": "production"}},
        output={"verdict": "allow", "matched_policies": [], "reason": "no policies configured"},
    )
    delete = run.step(
        "tool_call",
        "delete_user",
        at=2046,
        ms=8417,
        parent_step=tools,
        caused_by_step=guard,
        input={"user_id": "*", "env": "production"},
        output={"deleted": 48213, "env": "production"},
        snapshot={
            "environment": environment,
            "tool_state": {"delete_user": {"rows_affected": 48213, "transaction": "committed"}},
        },
    )
    drop = run.step(
        "tool_call",
        "drop_table",
        at=10471,
        ms=1290,
        parent_step=tools,
        caused_by_step=delete,
        input={"table": "user_sessions", "env": "production", "cascade": True},
        output={"dropped": "user_sessions", "rows": 312944},
    )
    reply = "Done: removed 48,213 user accounts and dropped the user_sessions table in production."
    run.step("output", "reply_in_slack", at=11770, ms=12, caused_by_step=drop, output=reply)
    return run.trace(
        DANGEROUS_ID,
        agent_name="ops-assistant",
        agent_version="1.2.0",
        trigger="slack_command",
        status="completed",
        input={"request": request, "requested_by": "dana@example.com", "channel": "#ops"},
        output=reply,
        tags=["demo", "ops", "dangerous-action"],
        session_id="ses_demo_ops_0415",
        metadata={
            "demo_scenario": "dangerous-delete",
            "look_for": "step 6 calls delete_user with user_id='*' on production",
        },
    )


_ANALYTICS_INPUT: Json = {
    "question": "What was our total revenue by region last quarter?",
    "database": "warehouse",
    "output_format": "table",
}
_GOOD_ROWS = [("North America", 1284310.55), ("Europe", 902114.2), ("APAC", 511870.9)]
_ALL_TIME_ROWS = [("North America", 14902331.1), ("Europe", 10277904.75), ("APAC", 5880112.4)]


def _last_quarter(day: dt.date) -> tuple[dt.date, dt.date, str]:
    """The first day of last quarter, the first day of this one, and last quarter's label."""
    this_start = dt.date(day.year, (day.month - 1) // 3 * 3 + 1, 1)
    last_start = (this_start - dt.timedelta(days=1)).replace(day=1)
    last_start = last_start.replace(month=(last_start.month - 1) // 3 * 3 + 1)
    return last_start, this_start, f"Q{(last_start.month - 1) // 3 + 1} {last_start.year}"


def _money(rows: list[tuple[str, float]]) -> str:
    return "; ".join(f"{region} ${amount:,.2f}" for region, amount in rows)


def _analytics(start: dt.datetime, *, regressed: bool) -> Json:
    """An analytics agent answering the same question well (v1.4.0) and badly (v1.5.0).

    The regressed run decides to skip the date filter, so its query times out once, is retried,
    and returns all-time totals that it reports as last quarter's.
    """
    q_start, q_end, label = _last_quarter(start.date())
    question = str(_ANALYTICS_INPUT["question"])
    good_sql = (
        "SELECT r.name AS region, ROUND(SUM(o.amount_usd), 2) AS revenue_usd\n"
        "FROM orders o JOIN regions r ON r.id = o.region_id\n"
        f"WHERE o.status = 'paid' AND o.created_at >= '{q_start}' AND o.created_at < '{q_end}'\n"
        "GROUP BY r.name ORDER BY revenue_usd DESC"
    )
    bad_sql = (
        "SELECT r.name AS region, ROUND(SUM(o.amount_usd), 2) AS revenue_usd\n"
        "FROM orders o JOIN regions r ON r.id = o.region_id\n"
        "WHERE o.status = 'paid'\n"
        "GROUP BY r.name ORDER BY revenue_usd DESC"
    )
    sql = bad_sql if regressed else good_sql
    rows = _ALL_TIME_ROWS if regressed else _GOOD_ROWS
    table = [[region, amount] for region, amount in rows]
    if regressed:
        answer = f"Revenue by region for last quarter: {_money(rows)}."
    else:
        total = sum(amount for _, amount in rows)
        last_day = q_end - dt.timedelta(days=1)
        answer = (
            f"Revenue by region for {label} ({q_start:%b %d} to {last_day:%b %d}): "
            f"{_money(rows)}. Total ${total:,.2f}."
        )
    system = "You answer business questions with read-only SQL against the warehouse."
    if regressed:
        system += " Prefer the simplest query that answers the question."
    key = "demo5" if regressed else "demo4"
    run = _Run(key, start)
    plan = run.step(
        "thought",
        "plan",
        at=0,
        ms=31,
        input={"question": question},
        output=f"Look up the schema, write a revenue-by-region query for {label}, run it, "
        "and summarize the result.",
        snapshot={
            "context_window": [_msg("system", system), _msg("user", question)],
            "environment": {"warehouse": "analytics-ro", "prompt_version": 7 if regressed else 6},
            "tool_state": {"available_tools": ["get_schema", "run_sql"]},
        },
    )
    schema = run.step(
        "tool_call",
        "get_schema",
        at=36,
        ms=148,
        parent_step=plan,
        input={"tables": ["orders", "regions"]},
        output={
            "orders": ["id", "region_id", "amount_usd", "status", "created_at"],
            "regions": ["id", "name"],
        },
    )
    choose = run.step(
        "decision",
        "date_filter",
        at=190,
        ms=22,
        caused_by_step=schema,
        decision=_decision(
            [
                ("filter_last_quarter", "the question asks about last quarter only", 0.41),
                ("scan_all_orders", "a simpler query without a date range", 0.57),
            ]
            if regressed
            else [
                ("filter_last_quarter", "the question asks about last quarter only", 0.93),
                ("scan_all_orders", "a simpler query without a date range", 0.12),
            ],
            "scan_all_orders" if regressed else "filter_last_quarter",
            "The prompt asks for the simplest query; the date range looked optional."
            if regressed
            else f"'Last quarter' means {label}; only those orders count.",
            0.57 if regressed else 0.93,
        ),
    )
    write = run.step(
        "llm_call",
        "write_sql",
        at=218,
        ms=2510 if regressed else 1744,
        model="gpt-4o",
        tokens=1394 if regressed else 812,
        parent_step=plan,
        caused_by_step=choose,
        input={"messages": [_msg("system", system), _msg("user", question)]},
        output={"sql": sql},
        metadata={"finish_reason": "stop"},
    )
    offset = 2728 if regressed else 1962
    check = run.step(
        "guard_check",
        "sql_read_only",
        at=offset + 6,
        ms=3,
        caused_by_step=write,
        input={"sql": sql},
        output={"verdict": "pass", "read_only": True, "statements": 1},
    )
    cause = check
    offset += 14
    if regressed:
        cause = run.step(
            "tool_call",
            "run_sql",
            at=offset,
            ms=30004,
            parent_step=plan,
            caused_by_step=check,
            input={"sql": sql, "timeout_s": 30},
            error="QueryCanceled: canceling statement due to statement timeout (30 s)",
            metadata={"attempt": 1},
        )
        offset += 30012
    result = run.step(
        "tool_call",
        "run_sql",
        at=offset,
        ms=41877 if regressed else 2391,
        parent_step=plan,
        caused_by_step=cause,
        input={"sql": sql, "timeout_s": 120 if regressed else 30},
        output={"columns": ["region", "revenue_usd"], "rows": table, "row_count": len(table)},
        metadata={"attempt": 2} if regressed else {"attempt": 1},
        snapshot={
            "tool_state": {
                "run_sql": {
                    "connection": "warehouse-ro",
                    "rows_scanned": 21733402 if regressed else 184220,
                }
            }
        },
    )
    offset += (41877 if regressed else 2391) + 5
    summary_ms = 1930 if regressed else 1205
    summary = run.step(
        "llm_call",
        "summarize",
        at=offset,
        ms=summary_ms,
        model="gpt-4o-mini",
        tokens=968 if regressed else 534,
        caused_by_step=result,
        input={
            "messages": [
                _msg("system", "Summarize the query result for a business reader."),
                _msg("user", f"{question}\n\nResult: {dumps(table)}"),
            ]
        },
        output=answer,
    )
    run.step(
        "output", "answer", at=offset + summary_ms + 4, ms=9, caused_by_step=summary, output=answer
    )
    version = "1.5.0" if regressed else "1.4.0"
    return run.trace(
        REGRESSED_ID if regressed else GOOD_RUN_ID,
        agent_name="analytics-sql-agent",
        agent_version=version,
        trigger="ci",
        status="completed",
        input=dict(_ANALYTICS_INPUT),
        output=answer,
        tags=["demo", "analytics", "regression" if regressed else "golden"],
        session_id="ses_demo_ci_1189" if regressed else "ses_demo_ci_1188",
        metadata={
            "demo_scenario": "regressed-run" if regressed else "good-run",
            "ci_run": "nightly-1189" if regressed else "nightly-1188",
            "git_sha": "8d41e07" if regressed else "3f9c2ab",
            "look_for": "diff against trc_demo4goodrun: step 3 drops the date filter"
            if regressed
            else "the golden run the regressed one is compared with",
        },
    )
