"""The trace format's rules: strict mode refuses with every problem and its path, lenient mode
coerces, drops and warns but never raises on an object."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.errors import TraceFormatError
from agent_replay.trace.models import STEP_FIELDS, TRACE_FIELDS, canonical_time, parse_time
from agent_replay.trace.validate import Validated, validate_trace

# --- helpers ------------------------------------------------------------------------------


def problems_of(data: Any, **kwargs: Any) -> list[tuple[str, str]]:
    """The problems strict validation reports (fails the test if it accepts the data)."""
    with pytest.raises(TraceFormatError) as info:
        validate_trace(data, **kwargs)
    return info.value.problems


def paths_of(data: Any) -> list[str]:
    return [path for path, _ in problems_of(data)]


def message_at(data: Any, path: str) -> str:
    found = [msg for p, msg in problems_of(data) if p == path]
    assert found, f"no problem reported at {path}"
    return found[0]


def steps(*specs: dict[str, Any]) -> dict[str, Any]:
    """A trace with these steps (step_type defaults to thought)."""
    return {
        "agent_name": "a",
        "steps": [{"step_type": "thought", **spec} for spec in specs],
    }


def numbered(*numbers: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"step_number": n, **extra} for n in numbers]


# --- strict mode: the trace -----------------------------------------------------------------


def test_minimal_trace_is_valid() -> None:
    """Only agent_name is required; status defaults to completed."""
    trace = validate_trace({"agent_name": "bot"}).trace
    assert trace.agent_name == "bot"
    assert trace.status == "completed"
    assert trace.steps == []


def test_agent_name_required() -> None:
    assert problems_of({"status": "completed"}) == [("agent_name", "Field required")]


@pytest.mark.parametrize("name", ["", None, 5])
def test_agent_name_must_be_non_empty_string(name: Any) -> None:
    assert paths_of({"agent_name": name}) == ["agent_name"]


@pytest.mark.parametrize("status", ["running", "completed", "failed", "timeout", "forked"])
def test_every_status_accepted(status: str) -> None:
    assert validate_trace({"agent_name": "a", "status": status}).trace.status == status


@pytest.mark.parametrize("status", ["done", "COMPLETED", "", None])
def test_status_outside_enum_refused(status: Any) -> None:
    assert paths_of({"agent_name": "a", "status": status}) == ["status"]


def test_not_an_object_refused_with_label() -> None:
    with pytest.raises(TraceFormatError) as info:
        validate_trace(["agent_name"], label="line 7")
    assert info.value.problems == [("", "a trace must be a JSON object (got list)")]
    assert info.value.message.startswith("invalid line 7: ")


def test_label_names_the_trace_in_message() -> None:
    with pytest.raises(TraceFormatError) as info:
        validate_trace({"agent_name": ""}, label="line 12")
    assert info.value.message.startswith("invalid line 12: agent_name: ")


@pytest.mark.parametrize(
    "field", ["total_tokens", "total_duration_ms", "total_cost_usd"], ids=lambda f: f
)
def test_trace_totals_non_negative(field: str) -> None:
    assert paths_of({"agent_name": "a", field: -1}) == [field]
    assert getattr(validate_trace({"agent_name": "a", field: 0}).trace, field) == 0


def test_read_only_list_fields_accepted_and_ignored() -> None:
    """``list --json`` objects carry step_count/is_fork; ingest accepts them back."""
    trace = validate_trace({"agent_name": "a", "step_count": 3, "is_fork": False}).trace
    assert "step_count" not in trace.model_dump()


def test_tags_trimmed_and_deduplicated() -> None:
    trace = validate_trace({"agent_name": "a", "tags": [" x ", "y", "x"]}).trace
    assert trace.tags == ["x", "y"]


def test_blank_tag_refused() -> None:
    assert paths_of({"agent_name": "a", "tags": ["ok", "  "]}) == ["tags"]


@pytest.mark.parametrize("bad_id", ["abc", "stp_abc", "trc_", "trc_has space"])
def test_trace_id_must_be_trace_prefixed(bad_id: str) -> None:
    assert paths_of({"agent_name": "a", "id": bad_id}) == ["id"]


# --- strict mode: steps -------------------------------------------------------------------


@pytest.mark.parametrize("number", [0, -1])
def test_step_number_positive(number: int) -> None:
    assert paths_of(steps({"step_number": number})) == ["steps[0].step_number"]


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (steps({"step_number": 2**63}), "steps[0].step_number"),
        (
            steps({"step_number": 1}, {"step_number": 2, "caused_by_step": 2**63}),
            "steps[1].caused_by_step",
        ),
        ({"agent_name": "a", "forked_from_step": 2**63}, "forked_from_step"),
        ({"agent_name": "a", "total_tokens": 2**63}, "total_tokens"),
        (steps({"step_number": 1, "tokens_used": 2**63}), "steps[0].tokens_used"),
    ],
    ids=["step_number", "caused_by_step", "forked_from_step", "total_tokens", "tokens_used"],
)
def test_integers_beyond_the_store_range_refused(data: dict[str, Any], path: str) -> None:
    assert path in paths_of(data)


def test_step_number_required() -> None:
    assert problems_of(steps({})) == [("steps[0].step_number", "Field required")]


def test_step_number_unique() -> None:
    problems = problems_of(steps(*numbered(1, 2, 2)))
    assert problems == [("steps[2].step_number", "duplicate step number 2")]


def test_steps_may_be_listed_out_of_order() -> None:
    trace = validate_trace(steps(*numbered(3, 1, 2))).trace
    assert [s.step_number for s in trace.steps] == [3, 1, 2]


@pytest.mark.parametrize(
    "step_type",
    [
        "thought",
        "tool_call",
        "llm_call",
        "retrieval",
        "output",
        "decision",
        "error",
        "guard_check",
    ],
)
def test_every_step_type_accepted(step_type: str) -> None:
    trace = validate_trace(steps({"step_number": 1, "step_type": step_type})).trace
    assert trace.steps[0].step_type == step_type


@pytest.mark.parametrize("step_type", ["Thought", "tool", "", None])
def test_step_type_outside_enum_refused(step_type: Any) -> None:
    assert paths_of(steps({"step_number": 1, "step_type": step_type})) == ["steps[0].step_type"]


def test_parent_step_must_be_earlier() -> None:
    data = steps({"step_number": 1}, {"step_number": 2, "parent_step": 2})
    assert problems_of(data) == [("steps[1].parent_step", "must reference an earlier step (got 2)")]


def test_parent_step_must_exist() -> None:
    data = steps({"step_number": 1}, {"step_number": 5, "parent_step": 3})
    assert problems_of(data) == [
        ("steps[1].parent_step", "references step 3, which does not exist")
    ]


def test_parent_step_valid_reference_kept() -> None:
    data = steps({"step_number": 1}, {"step_number": 2, "parent_step": 1})
    assert validate_trace(data).trace.steps[1].parent_step == 1


def test_caused_by_step_to_later_step() -> None:
    data = steps(*numbered(1, 2, 3), {"step_number": 4, "caused_by_step": 7})
    assert problems_of(data) == [
        ("steps[3].caused_by_step", "must reference an earlier step (got 7)")
    ]


def test_caused_by_step_to_itself() -> None:
    data = steps({"step_number": 1}, {"step_number": 2, "caused_by_step": 2})
    assert paths_of(data) == ["steps[1].caused_by_step"]


def test_caused_by_step_must_exist() -> None:
    data = steps({"step_number": 1}, {"step_number": 3, "caused_by_step": 2})
    assert problems_of(data) == [
        ("steps[1].caused_by_step", "references step 2, which does not exist")
    ]


def test_caused_by_step_references_by_number_not_position() -> None:
    """Step 5 listed first may still be caused by step 2 listed later."""
    data = steps({"step_number": 5, "caused_by_step": 2}, {"step_number": 2})
    assert validate_trace(data).trace.steps[0].caused_by_step == 2


@pytest.mark.parametrize("link", ["parent_step", "caused_by_step"])
def test_links_must_be_positive(link: str) -> None:
    data = steps({"step_number": 1}, {"step_number": 2, link: 0})
    assert f"steps[1].{link}" in paths_of(data)


def test_decision_only_on_decision_steps() -> None:
    data = steps({"step_number": 1, "step_type": "tool_call", "decision": {"chosen": "x"}})
    assert problems_of(data) == [
        ("steps[0].decision", "only decision steps may carry a decision (step_type is 'tool_call')")
    ]


def test_decision_chosen_among_options() -> None:
    decision = {"options": [{"option": "a"}, {"option": "b"}], "chosen": "c"}
    data = steps({"step_number": 1, "step_type": "decision", "decision": decision})
    assert problems_of(data) == [
        ("steps[0].decision.chosen", "must be one of the options ['a', 'b'] (got 'c')")
    ]


def test_decision_without_options_may_choose_anything() -> None:
    data = steps({"step_number": 1, "step_type": "decision", "decision": {"chosen": "go"}})
    decision = validate_trace(data).trace.steps[0].decision
    assert decision is not None
    assert decision.chosen == "go"
    assert decision.decided_by == "agent"


@pytest.mark.parametrize("confidence", [-0.01, 1.01, 2])
def test_confidence_out_of_range(confidence: float) -> None:
    decision = {"chosen": "a", "confidence": confidence}
    data = steps({"step_number": 1, "step_type": "decision", "decision": decision})
    assert paths_of(data) == ["steps[0].decision.confidence"]


@pytest.mark.parametrize("confidence", [0, 0.0, 0.5, 1, 1.0])
def test_confidence_bounds_inclusive(confidence: float) -> None:
    decision = {"chosen": "a", "confidence": confidence}
    data = steps({"step_number": 1, "step_type": "decision", "decision": decision})
    assert validate_trace(data).trace.steps[0].decision.confidence == confidence  # type: ignore[union-attr]


@pytest.mark.parametrize("decided_by", ["agent", "user", "policy"])
def test_decided_by_enum_accepted(decided_by: str) -> None:
    decision = {"chosen": "a", "decided_by": decided_by}
    data = steps({"step_number": 1, "step_type": "decision", "decision": decision})
    assert validate_trace(data).trace.steps[0].decision.decided_by == decided_by  # type: ignore[union-attr]


def test_decided_by_outside_enum_refused() -> None:
    decision = {"chosen": "a", "decided_by": "model"}
    data = steps({"step_number": 1, "step_type": "decision", "decision": decision})
    assert paths_of(data) == ["steps[0].decision.decided_by"]


def test_decision_option_needs_a_name() -> None:
    decision = {"options": [{"option": ""}], "chosen": "a"}
    data = steps({"step_number": 1, "step_type": "decision", "decision": decision})
    assert "steps[0].decision.options[0].option" in paths_of(data)


@pytest.mark.parametrize("field", ["tokens_used", "duration_ms"])
def test_step_measures_non_negative(field: str) -> None:
    assert paths_of(steps({"step_number": 1, field: -1})) == [f"steps[0].{field}"]


def test_eval_cost_non_negative() -> None:
    data = {
        "agent_name": "a",
        "evals": [{"evaluator": "e", "score": 1, "passed": True, "cost_usd": -1}],
    }
    assert paths_of(data) == ["evals[0].cost_usd"]


# --- strict mode: unknown fields and coercion ---------------------------------------------


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"agent_name": "a", "agent": "x"}, "agent"),
        (
            {"agent_name": "a", "steps": [{"step_number": 1, "step_type": "thought", "x": 1}]},
            "steps[0].x",
        ),
        (
            steps(
                {"step_number": 1, "step_type": "decision", "decision": {"chosen": "a", "why": 1}}
            ),
            "steps[0].decision.why",
        ),
        (
            steps(
                {
                    "step_number": 1,
                    "step_type": "decision",
                    "decision": {"chosen": "a", "options": [{"option": "a", "p": 1}]},
                }
            ),
            "steps[0].decision.options[0].p",
        ),
        (steps({"step_number": 1, "snapshot": {"memory": {}}}), "steps[0].snapshot.memory"),
        (
            {"agent_name": "a", "evals": [{"evaluator": "e", "score": 1, "passed": True, "z": 0}]},
            "evals[0].z",
        ),
    ],
    ids=["trace", "step", "decision", "option", "snapshot", "eval"],
)
def test_unknown_fields_refused(data: dict[str, Any], path: str) -> None:
    assert problems_of(data) == [(path, "unknown field")]


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (steps({"step_number": "5"}), "steps[0].step_number"),
        (steps({"step_number": 1.0}), "steps[0].step_number"),
        (steps({"step_number": True}), "steps[0].step_number"),
        (steps({"step_number": 1, "tokens_used": "10"}), "steps[0].tokens_used"),
        ({"agent_name": "a", "total_cost_usd": "0.5"}, "total_cost_usd"),
        ({"agent_name": 7}, "agent_name"),
        ({"agent_name": "a", "tags": "x"}, "tags"),
        ({"agent_name": "a", "metadata": "x"}, "metadata"),
        ({"agent_name": "a", "started_at": 1767261600}, "started_at"),
    ],
    ids=[
        "str-step-number",
        "float-step-number",
        "bool-step-number",
        "str-tokens",
        "str-cost",
        "int-name",
        "str-tags",
        "str-metadata",
        "epoch-time",
    ],
)
def test_strict_mode_never_coerces(data: dict[str, Any], path: str) -> None:
    assert paths_of(data) == [path]


def test_strict_mode_reports_every_problem_at_once() -> None:
    """Type errors and cross-field errors together, each with its exact path."""
    data = {
        "agent_name": "",
        "status": "done",
        "colour": "blue",
        "total_tokens": -5,
        "steps": [
            {"step_number": 1, "step_type": "thinking"},
            {"step_number": 2, "step_type": "thought", "decision": {"chosen": "a"}},
            {"step_number": 2, "step_type": "thought"},
            {"step_number": 4, "step_type": "thought", "caused_by_step": 7},
            {"step_number": 5, "step_type": "thought", "parent_step": 3},
            {
                "step_number": 6,
                "step_type": "decision",
                "decision": {"options": [{"option": "x"}], "chosen": "y", "confidence": 3},
            },
            {
                "step_number": 7,
                "step_type": "tool_call",
                "started_at": "2026-01-01T10:00:00Z",
                "ended_at": "2026-01-01T09:59:59Z",
            },
        ],
    }
    assert sorted(paths_of(data)) == sorted(
        [
            "agent_name",
            "status",
            "colour",
            "total_tokens",
            "steps[0].step_type",
            "steps[1].decision",
            "steps[2].step_number",
            "steps[3].caused_by_step",
            "steps[4].parent_step",
            "steps[5].decision.confidence",
            "steps[5].decision.chosen",
            "steps[6].ended_at",
        ]
    )
    with pytest.raises(TraceFormatError) as info:
        validate_trace(data)
    assert "steps[3].caused_by_step: must reference an earlier step (got 7)" in info.value.message
    problems = dict(info.value.problems)
    assert problems["steps[3].caused_by_step"] == "must reference an earlier step (got 7)"
    assert problems["steps[2].step_number"] == "duplicate step number 2"
    assert problems["colour"] == "unknown field"


def test_semantic_problems_all_reported_when_types_are_valid() -> None:
    data = steps(
        *numbered(1, 2, 3),
        {"step_number": 4, "caused_by_step": 7},
        {"step_number": 5, "caused_by_step": 9, "parent_step": 5},
    )
    assert paths_of(data) == [
        "steps[3].caused_by_step",
        "steps[4].parent_step",
        "steps[4].caused_by_step",
    ]


# --- timestamps ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_time", "canonical"),
    [
        ("2026-01-01T10:00:00Z", "2026-01-01T10:00:00.000Z"),
        ("2026-01-01T10:00:00z", "2026-01-01T10:00:00.000Z"),
        ("2026-01-01T10:00:00+00:00", "2026-01-01T10:00:00.000Z"),
        ("2026-01-01T10:00:00", "2026-01-01T10:00:00.000Z"),
        ("2026-01-01 10:00:00Z", "2026-01-01T10:00:00.000Z"),
        ("2026-01-01T10:00:00.5Z", "2026-01-01T10:00:00.500Z"),
        ("2026-01-01T10:00:00.123456Z", "2026-01-01T10:00:00.123456Z"),
        ("2026-01-01T10:00:00.123000Z", "2026-01-01T10:00:00.123Z"),
        ("2026-01-01T00:30:00+02:00", "2025-12-31T22:30:00.000Z"),
        ("2026-01-01T10:00:00-05:30", "2026-01-01T15:30:00.000Z"),
    ],
)
def test_timestamps_normalized_to_canonical_utc(given_time: str, canonical: str) -> None:
    data = steps({"step_number": 1, "started_at": given_time})
    data["started_at"] = given_time
    trace = validate_trace(data).trace
    assert trace.started_at == canonical
    assert trace.steps[0].started_at == canonical


def test_offset_timestamp_keeps_original_in_metadata() -> None:
    trace = validate_trace(
        {
            "agent_name": "a",
            "started_at": "2026-01-01T10:00:00+02:00",
            "ended_at": "2026-01-01T09:00:00Z",
            "metadata": {"run": 1},
        }
    ).trace
    assert trace.started_at == "2026-01-01T08:00:00.000Z"
    assert trace.ended_at == "2026-01-01T09:00:00.000Z"
    assert trace.metadata == {
        "run": 1,
        "original_times": {"started_at": "2026-01-01T10:00:00+02:00"},
    }


def test_step_offset_timestamp_keeps_original_in_step_metadata() -> None:
    data = steps({"step_number": 1, "ended_at": "2026-01-01T12:00:00-03:00"})
    step = validate_trace(data).trace.steps[0]
    assert step.ended_at == "2026-01-01T15:00:00.000Z"
    assert step.metadata == {"original_times": {"ended_at": "2026-01-01T12:00:00-03:00"}}


@pytest.mark.parametrize(
    "given_time", ["2026-01-01T10:00:00Z", "2026-01-01T10:00:00+00:00", "2026-01-01T10:00:00"]
)
def test_utc_timestamp_adds_no_original(given_time: str) -> None:
    assert validate_trace({"agent_name": "a", "started_at": given_time}).trace.metadata == {}


def test_canonical_timestamps_are_stable() -> None:
    """Validating the canonical output again changes nothing (no new original_times)."""
    first = validate_trace({"agent_name": "a", "started_at": "2026-01-01T10:00:00+02:00"}).trace
    second = validate_trace(first.model_dump()).trace
    assert second.model_dump() == first.model_dump()


@pytest.mark.parametrize(
    "bad", ["yesterday", "", "2026-13-01T00:00:00Z", "2026-01-01T25:00:00Z", "01/02/2026"]
)
def test_bad_timestamps_refused(bad: str) -> None:
    assert paths_of({"agent_name": "a", "started_at": bad}) == ["started_at"]
    assert paths_of(steps({"step_number": 1, "ended_at": bad})) == ["steps[0].ended_at"]


def test_bad_timestamp_message_names_value_once() -> None:
    assert problems_of({"agent_name": "a", "started_at": "yesterday"}) == [
        ("started_at", "must be an ISO-8601 timestamp (got 'yesterday')")
    ]


def test_trace_ended_before_started_refused() -> None:
    data = {
        "agent_name": "a",
        "started_at": "2026-01-01T10:00:00Z",
        "ended_at": "2026-01-01T09:59:59.999Z",
    }
    assert paths_of(data) == ["ended_at"]


def test_step_ended_before_started_refused() -> None:
    data = steps(
        {
            "step_number": 1,
            "started_at": "2026-01-01T10:00:00Z",
            "ended_at": "2026-01-01T09:00:00Z",
        }
    )
    assert paths_of(data) == ["steps[0].ended_at"]


def test_end_order_compares_instants_not_strings() -> None:
    """10:00+02:00 is 08:00Z, so an end at 09:00Z is after it."""
    data = {
        "agent_name": "a",
        "started_at": "2026-01-01T10:00:00+02:00",
        "ended_at": "2026-01-01T09:00:00Z",
    }
    validate_trace(data)
    data["ended_at"] = "2026-01-01T07:59:59Z"
    assert paths_of(data) == ["ended_at"]


def test_zero_length_span_allowed() -> None:
    data = {
        "agent_name": "a",
        "started_at": "2026-01-01T10:00:00Z",
        "ended_at": "2026-01-01T10:00:00Z",
    }
    assert validate_trace(data).trace.ended_at == "2026-01-01T10:00:00.000Z"


def test_canonical_time_round_trips_through_parse() -> None:
    text = "2026-03-04T05:06:07.891Z"
    assert canonical_time(parse_time(text)) == text


def test_canonical_time_of_early_year_is_iso() -> None:
    """Years before 1000 stay four digits, so the canonical form parses back."""
    trace = validate_trace({"agent_name": "a", "started_at": "0999-01-01T00:00:00+01:00"}).trace
    assert trace.started_at == "0998-12-31T23:00:00.000Z"
    assert canonical_time(parse_time(trace.started_at)) == trace.started_at


# --- the validator does not mutate its input ----------------------------------------------


@pytest.mark.parametrize("lenient", [False, True])
def test_input_not_mutated(lenient: bool) -> None:
    data = {
        "agent_name": "a",
        "started_at": "2026-01-01T10:00:00+02:00",
        "extra": 1,
        "steps": [{"step_number": "2", "step_type": "thought", "caused_by_step": 9}],
    }
    before = copy.deepcopy(data)
    try:
        validate_trace(data, lenient=lenient)
    except TraceFormatError:
        pass
    assert data == before


# --- lenient mode -------------------------------------------------------------------------


def lenient(data: dict[str, Any]) -> Validated:
    return validate_trace(data, lenient=True)


def test_lenient_coerces_numbers() -> None:
    result = lenient(
        {
            "agent_name": "a",
            "total_tokens": "12",
            "steps": [{"step_number": "5", "step_type": "thought", "tokens_used": "3"}],
        }
    )
    assert result.trace.total_tokens == 12
    assert result.trace.steps[0].step_number == 5
    assert result.trace.steps[0].tokens_used == 3
    assert result.warnings == []


@pytest.mark.parametrize(
    ("epoch", "canonical"),
    [
        (1767261600, "2026-01-01T10:00:00.000Z"),
        (1767261600.25, "2026-01-01T10:00:00.250Z"),
        (1767261600123, "2026-01-01T10:00:00.123Z"),
    ],
    ids=["seconds", "fractional-seconds", "milliseconds"],
)
def test_lenient_accepts_epoch_times(epoch: float, canonical: str) -> None:
    assert lenient({"agent_name": "a", "started_at": epoch}).trace.started_at == canonical


def test_lenient_drops_unknown_fields_with_warnings() -> None:
    result = lenient(
        {
            "agent_name": "a",
            "colour": "blue",
            "steps": [
                {
                    "step_number": 1,
                    "step_type": "decision",
                    "zap": 1,
                    "decision": {"chosen": "x", "why": 2, "options": [{"option": "x", "p": 0}]},
                }
            ],
        }
    )
    assert result.trace.steps[0].decision is not None
    assert result.warnings == [
        "trace.colour: unknown field dropped",
        "steps[0].zap: unknown field dropped",
        "steps[0].decision.why: unknown field dropped",
        "steps[0].decision.options[0].p: unknown field dropped",
    ]


def test_lenient_drops_invalid_references() -> None:
    result = lenient(
        steps(
            {"step_number": 1},
            {"step_number": 2, "caused_by_step": 7},
            {"step_number": 3, "parent_step": 3, "caused_by_step": 1},
        )
    )
    by_number = {s.step_number: s for s in result.trace.steps}
    assert by_number[2].caused_by_step is None
    assert by_number[3].parent_step is None
    assert by_number[3].caused_by_step == 1
    assert result.warnings == [
        "steps[1].caused_by_step: invalid reference 7; dropped",
        "steps[2].parent_step: invalid reference 3; dropped",
    ]


def test_lenient_renumbers_duplicates() -> None:
    result = lenient(steps(*numbered(1, 2, 2, 1)))
    assert [s.step_number for s in result.trace.steps] == [1, 2, 3, 4]
    assert len(result.warnings) == 2
    assert all("duplicate" in w for w in result.warnings)


def test_lenient_drops_decision_on_non_decision_step() -> None:
    result = lenient(
        steps({"step_number": 1, "step_type": "tool_call", "decision": {"chosen": "a"}})
    )
    assert result.trace.steps[0].decision is None
    assert result.warnings == ["steps[0].decision: not a decision step; dropped"]


def test_lenient_adds_chosen_to_options() -> None:
    decision = {"options": [{"option": "a"}], "chosen": "b"}
    result = lenient(steps({"step_number": 1, "step_type": "decision", "decision": decision}))
    kept = result.trace.steps[0].decision
    assert kept is not None
    assert [o.option for o in kept.options] == ["a", "b"]
    assert len(result.warnings) == 1


def test_lenient_defaults_missing_agent_name_but_never_guesses_a_step_type() -> None:
    result = lenient(
        {
            "steps": [
                {"step_number": 1, "step_type": "ponder"},
                {"step_number": 2, "step_type": "output"},
            ]
        }
    )
    assert result.trace.agent_name == "unknown"
    assert [(s.step_number, s.step_type) for s in result.trace.steps] == [(2, "output")]
    assert len(result.warnings) == 2
    assert any(w.startswith("steps[0].step_type") for w in result.warnings)


def test_lenient_drops_values_it_cannot_keep() -> None:
    result = lenient(
        {
            "agent_name": "a",
            "status": "weird",
            "total_cost_usd": -1,
            "started_at": "not a time",
            "steps": [{"step_type": "thought"}, {"step_number": 2, "step_type": "thought"}],
        }
    )
    trace = result.trace
    assert trace.status == "completed"
    assert trace.total_cost_usd is None
    assert trace.started_at is None
    assert [s.step_number for s in trace.steps] == [2]
    assert len(result.warnings) == 4


def test_lenient_drops_end_before_start() -> None:
    result = lenient(
        {
            "agent_name": "a",
            "started_at": "2026-01-01T10:00:00Z",
            "ended_at": "2026-01-01T09:00:00Z",
        }
    )
    assert result.trace.ended_at is None
    assert result.trace.started_at == "2026-01-01T10:00:00.000Z"
    assert result.warnings == ["ended_at: before started_at; dropped"]


def test_lenient_refuses_only_non_objects() -> None:
    with pytest.raises(TraceFormatError):
        lenient("agent")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "epoch",
    [1e20, 1e300, -1e300, float("inf"), 1e15, 2**64, 10**400],
    ids=["1e20", "1e300", "-1e300", "inf", "1e15", "2**64", "10**400"],
)
def test_lenient_drops_out_of_range_epoch(epoch: float) -> None:
    result = lenient({"agent_name": "a", "started_at": epoch})
    assert result.trace.started_at is None
    assert len(result.warnings) == 1 and result.warnings[0].startswith("started_at: ")


@pytest.mark.parametrize("options", [1, 1.5, True, "ab", {"a": 1}])
def test_lenient_drops_non_list_decision_options(options: Any) -> None:
    decision = {"chosen": "a", "options": options}
    result = lenient(steps({"step_number": 1, "step_type": "decision", "decision": decision}))
    kept = result.trace.steps[0].decision
    assert kept is not None
    assert (kept.chosen, kept.options) == ("a", [])
    assert result.warnings == ["steps[0].decision.options: Input should be a valid list; dropped"]


# Arbitrary JSON built from the format's own field names, so the fuzz reaches deep paths.
_KEYS = st.sampled_from(
    sorted({*TRACE_FIELDS, *STEP_FIELDS, "options", "option", "chosen", "confidence", "x"})
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats()
    | st.sampled_from(
        ["", "thought", "decision", "2026-01-01T10:00:00+02:00", "1", "-3", "a", "trc_x"]
    )
    | st.text(max_size=5)
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=25,
)
_STEPISH = st.dictionaries(_KEYS, _JSON, max_size=8).map(lambda d: {"step_type": "decision", **d})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trace=st.dictionaries(_KEYS, _JSON, max_size=8),
    step_list=st.lists(_STEPISH, max_size=5),
)
def test_lenient_never_raises_and_yields_a_strictly_valid_trace(
    trace: dict[str, Any], step_list: list[dict[str, Any]]
) -> None:
    """Whatever object a producer sends, lenient mode returns a trace strict mode accepts."""
    if step_list:
        trace["steps"] = step_list
    result = validate_trace(trace, lenient=True)
    again = validate_trace(result.trace.model_dump())
    assert again.trace.model_dump() == result.trace.model_dump()
