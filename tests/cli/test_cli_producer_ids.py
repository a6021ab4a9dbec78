"""The README's native protocol promises about producer ids and invalid events, checked through
the CLI: "every event carries the trace_id the producer generated", `--leave-open` lets a later
stream resume, and "what cannot be understood is skipped with a warning, never guessed"."""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import pytest

Cli = Any  # the `cli` fixture: cli(*args) -> Result(code, out, err)


def ev(kind: str, trace_id: str | None = "rec-1", **fields: Any) -> str:
    event: dict[str, Any] = {"v": 1, "type": kind, **fields}
    if trace_id is not None:
        event["trace_id"] = trace_id
    return json.dumps(event)


@pytest.fixture
def record(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``record(lines, *args)``: ``agent-replay record`` in-process with these stdin lines."""

    def run(lines: list[str], *args: str) -> Any:
        data = "".join(line + "\n" for line in lines).encode()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        return cli("record", *args)

    return run


def test_producer_id_addresses_show_why_and_export(cli: Cli, record: Any) -> None:
    result = record(
        [
            ev("trace_start", agent_name="bot"),
            ev("step", step_type="thought", name="plan"),
            ev("step", step_type="output", name="answer", output="done", caused_by_step=1),
            ev("trace_end", output="done"),
        ]
    )
    assert result.code == 0, result.err
    shown = cli("show", "rec-1", "--json")
    assert shown.code == 0, shown.err
    assert [s["name"] for s in shown.json()["steps"]] == ["plan", "answer"]
    why = cli("why", "rec-1", "--step", "2", "--json")
    assert why.code == 0, why.err
    assert "plan" in why.out
    exported = cli("export", "rec-1", "--format", "json")
    assert exported.code == 0, exported.err
    assert json.loads(exported.out)[0]["id"] == shown.json()["id"]


def test_second_stream_resumes_a_trace_left_open(cli: Cli, record: Any) -> None:
    first = record(
        [ev("trace_start", agent_name="bot"), ev("step", step_type="thought", name="one")],
        "--leave-open",
    )
    assert first.code == 0, first.err
    second = record(
        [ev("step", step_type="output", name="two", output="ok"), ev("trace_end", output="ok")]
    )
    assert second.code == 0, second.err
    [trace] = cli("list", "--json").json()
    assert (trace["status"], trace["step_count"]) == ("completed", 2)
    steps = cli("show", "rec-1", "--json").json()["steps"]
    assert [(s["step_number"], s["name"]) for s in steps] == [(1, "one"), (2, "two")]


def test_unknown_step_type_is_skipped_with_a_warning_and_the_rest_lands(
    cli: Cli, record: Any
) -> None:
    result = record(
        [
            ev("trace_start", agent_name="bot"),
            ev("step", step_type="thought", name="before"),
            ev("step", step_type="not_a_type", name="mystery"),
            ev("step", step_type="output", name="after", tokens_used="12"),
            ev("trace_end"),
        ]
    )
    assert result.code == 1  # an event was rejected (documented)
    assert "line 3" in result.err and "not_a_type" in result.err
    steps = cli("show", "rec-1", "--json").json()["steps"]
    # Nothing invented: the unknown type is not recorded as a thought; the number in a string
    # (unambiguous) is repaired.
    assert [(s["name"], s["step_type"]) for s in steps] == [
        ("before", "thought"),
        ("after", "output"),
    ]
    assert steps[1]["tokens_used"] == 12
