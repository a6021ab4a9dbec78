"""One-line step summaries (``services.summary``) and the not-re-run mark of a fork's step
(``services.outcome``)."""

from __future__ import annotations

from agent_replay.services.outcome import clear_outcome, is_not_rerun, mark_rerun, outcome_note
from agent_replay.services.summary import step_summary


def test_tool_calls_read_as_what_they_ran() -> None:
    """Two Bash calls differ by their command; a file tool shows its file; SQL its query."""
    ls = {"step_type": "tool_call", "name": "Bash", "input": {"command": "ls -la"}}
    cat = {"step_type": "tool_call", "name": "Bash", "input": {"command": "cat\nmissing.txt"}}
    read = {"step_type": "tool_call", "name": "Read", "input": {"file_path": "/src/notes.txt"}}
    sql = {"step_type": "tool_call", "name": "run_sql", "input": {"sql": "SELECT 1", "t": 3}}
    assert [step_summary(s) for s in (ls, cat, read, sql)] == [
        "ls -la",
        "cat missing.txt",
        "/src/notes.txt",
        "SELECT 1",
    ]
    flight = {"step_type": "tool_call", "name": "search", "input": {"origin": "SFO", "n": True}}
    assert step_summary(flight) == "origin=SFO n=true"


def test_model_calls_read_as_their_answer() -> None:
    """An llm_call shows the first words of its reply, or the tools it called."""
    reply = {"content": [{"type": "text", "text": "Good   news!\nRefunds are instant."}]}
    call = {"step_type": "llm_call", "name": "claude-opus-5-5", "output": reply}
    tools = {"step_type": "llm_call", "name": "m", "output": {"tool_calls": [{"name": "grep"}]}}
    decision = {"step_type": "decision", "name": "d", "decision": {"chosen": "retry"}}
    assert step_summary(call) == "Good news! Refunds are instant."
    assert step_summary(tools) == "calls grep"
    assert step_summary(decision) == "chose retry"
    assert step_summary({"step_type": "thought", "name": "plan"}) == ""
    assert len(step_summary({"step_type": "output", "name": "o", "output": "x" * 500})) == 160


def test_a_cleared_outcome_is_marked_until_a_rerun() -> None:
    """clear_outcome drops output, error, tokens, duration, end and cost; mark_rerun unmarks."""
    step = {
        "step_number": 6,
        "step_type": "tool_call",
        "name": "run_sql",
        "input": {"timeout_s": 120},
        "error": "statement timeout (30 s)",
        "tokens_used": 12,
        "duration_ms": 30_000.0,
        "started_at": "2026-06-01T12:00:00.000Z",
        "ended_at": "2026-06-01T12:00:30.000Z",
        "metadata": {"cost_usd": 0.01, "usage": {"input_tokens": 4}, "host": "db1"},
    }
    cleared = clear_outcome(step)
    assert all(k not in cleared for k in ("error", "tokens_used", "duration_ms", "ended_at"))
    assert cleared["input"] == {"timeout_s": 120} and cleared["metadata"]["host"] == "db1"
    assert "cost_usd" not in cleared["metadata"] and "usage" not in cleared["metadata"]
    assert is_not_rerun(cleared) and not is_not_rerun(step)
    assert outcome_note(cleared) == "not re-run (recorded error, tokens, duration, cost not copied)"
    mark_rerun(cleared["metadata"])
    assert not is_not_rerun(cleared) and outcome_note(cleared) == ""
