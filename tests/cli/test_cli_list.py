"""``agent-replay list``: one line a trace, newest first, with filters, sorts and ``--json``."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]

NEWEST_FIRST = ["trc_sample4_fork", "trc_sample2", "trc_sample1", "trc_sample3"]


def _ids(out: str) -> list[str]:
    """The ID column of a ``list`` table, header skipped."""
    return [line.split()[0] for line in out.splitlines()[1:] if line.strip()]


def _row(out: str, trace_id: str) -> str:
    [line] = [line for line in out.splitlines() if line.startswith(trace_id + " ")]
    return line


def test_list_prints_the_default_columns(cli: Run, seeded: Path) -> None:
    """The header is ID AGENT STATUS STEPS TOKENS DURATION STARTED."""
    result = cli("list")
    assert result.code == 0
    assert result.out.splitlines()[0].split() == [
        "ID",
        "AGENT",
        "STATUS",
        "STEPS",
        "TOKENS",
        "DURATION",
        "STARTED",
    ]


def test_list_row_shows_a_traces_fields(cli: Run, seeded: Path) -> None:
    """A row holds the id, agent, status, step count, tokens, duration and start time."""
    row = _row(cli("list").out, "trc_sample1")
    assert row.split() == [
        "trc_sample1",
        "support-bot",
        "completed",
        "5",
        "300",
        "5.0s",
        "2026-01-10",
        "10:00:00",
    ]


def test_list_is_newest_first_by_default(cli: Run, seeded: Path) -> None:
    """Without --sort, traces are ordered by start time, newest first."""
    assert _ids(cli("list").out) == NEWEST_FIRST


def test_list_marks_forks(cli: Run, seeded: Path) -> None:
    """A trace with a parent_trace_id carries the fork mark; the others don't."""
    out = cli("list").out
    assert "⑂" in _row(out, "trc_sample4_fork")
    for trace_id in ("trc_sample1", "trc_sample2", "trc_sample3"):
        assert "⑂" not in _row(out, trace_id)


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--status", "failed"], ["trc_sample2"]),
        (["--status", "forked"], ["trc_sample4_fork"]),
        (["--agent", "coder"], ["trc_sample3"]),
        (["--tag", "nightly"], ["trc_sample2"]),
        (["--tag", "prod"], ["trc_sample4_fork", "trc_sample2", "trc_sample1"]),
        (["--session", "sess_a"], ["trc_sample2", "trc_sample1"]),
        (["--since", "2026-01-01"], ["trc_sample4_fork", "trc_sample2", "trc_sample1"]),
        (["--since", "2026-01-12T00:00:00Z"], ["trc_sample4_fork", "trc_sample2"]),
        (["--agent", "support-bot", "--status", "completed"], ["trc_sample1"]),
    ],
)
def test_list_filters_select_matching_traces(
    cli: Run, seeded: Path, option: list[str], expected: list[str]
) -> None:
    """Each filter option keeps only the traces that match it (and they combine)."""
    result = cli("list", *option)
    assert result.code == 0
    assert _ids(result.out) == expected


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("time", ["trc_sample4_fork", "trc_sample2", "trc_sample1", "trc_sample3"]),
        ("tokens", ["trc_sample2", "trc_sample1", "trc_sample4_fork", "trc_sample3"]),
        ("duration", ["trc_sample3", "trc_sample1", "trc_sample2", "trc_sample4_fork"]),
        ("cost", ["trc_sample3", "trc_sample1", "trc_sample2", "trc_sample4_fork"]),
    ],
)
def test_list_sort_orders_largest_first(
    cli: Run, seeded: Path, sort: str, expected: list[str]
) -> None:
    """``--sort`` orders by that key, newest or largest first."""
    assert _ids(cli("list", "--sort", sort).out) == expected


def test_list_limit_keeps_the_first_n(cli: Run, seeded: Path) -> None:
    """``--limit 2`` prints only the two newest traces."""
    assert _ids(cli("list", "--limit", "2").out) == NEWEST_FIRST[:2]


def test_list_limit_applies_after_sorting(cli: Run, seeded: Path) -> None:
    """``--sort tokens --limit 1`` prints the trace with the most tokens."""
    assert _ids(cli("list", "--sort", "tokens", "--limit", "1").out) == ["trc_sample2"]


def test_list_limit_zero_is_a_usage_error(cli: Run, seeded: Path) -> None:
    """``--limit 0`` exits 2."""
    assert cli("list", "--limit", "0").code == 2


def test_list_unknown_status_is_a_usage_error(cli: Run, seeded: Path) -> None:
    """``--status`` accepts only the format's statuses."""
    assert cli("list", "--status", "exploded").code == 2


# --- --since with relative times -----------------------------------------------------------


@pytest.fixture
def recent(cli: Run, tmp_path: Path) -> None:
    """Three traces started 1 hour, 3 days and 30 days before now (the system clock)."""
    now = dt.datetime.now(dt.UTC)
    lines = []
    for trace_id, age in (
        ("trc_hour_old", dt.timedelta(hours=1)),
        ("trc_days_old", dt.timedelta(days=3)),
        ("trc_month_old", dt.timedelta(days=30)),
    ):
        started = (now - age).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        lines.append(json.dumps({"id": trace_id, "agent_name": "a", "started_at": started}))
    source = tmp_path / "recent.jsonl"
    source.write_text("\n".join(lines) + "\n")
    assert cli("ingest", source).code == 0


@pytest.mark.parametrize(
    ("since", "expected"),
    [
        ("12h", ["trc_hour_old"]),
        ("7d", ["trc_hour_old", "trc_days_old"]),
        ("2w", ["trc_hour_old", "trc_days_old"]),
        ("90m", ["trc_hour_old"]),
    ],
)
def test_list_since_accepts_relative_durations(
    cli: Run, recent: None, since: str, expected: list[str]
) -> None:
    """``--since 12h`` / ``7d`` / ``2w`` / ``90m`` count back from now."""
    assert _ids(cli("list", "--since", since).out) == expected


@pytest.mark.parametrize("value", ["7x", "yesterday", "2026-13-45"])
def test_list_since_bad_value_is_a_usage_error_with_a_message(
    cli: Run, seeded: Path, value: str
) -> None:
    """An unparseable ``--since`` exits 2 and says what forms are accepted."""
    result = cli("list", "--since", value)
    assert result.code == 2
    assert f"--since {value!r}" in result.err
    assert "7d" in result.err


# --- JSON ----------------------------------------------------------------------------------


def test_list_json_is_an_array_of_trace_objects_without_steps(cli: Run, seeded: Path) -> None:
    """``--json`` prints trace objects with id, step_count and is_fork, and no steps."""
    result = cli("list", "--json")
    assert result.code == 0
    traces = result.json()
    assert [t["id"] for t in traces] == NEWEST_FIRST
    for trace in traces:
        assert "steps" not in trace
        assert {"id", "agent_name", "status", "step_count", "is_fork", "tags"} <= set(trace)
    by_id = {t["id"]: t for t in traces}
    assert by_id["trc_sample1"]["step_count"] == 5
    assert by_id["trc_sample1"]["is_fork"] is False
    assert by_id["trc_sample4_fork"]["is_fork"] is True
    assert by_id["trc_sample4_fork"]["parent_trace_id"] == "trc_sample1"


def test_list_json_uses_the_formats_field_names(cli: Run, seeded: Path) -> None:
    """Trace fields keep the format's names and values (agent_name, total_tokens, ...)."""
    [trace] = cli("list", "--json", "--agent", "coder").json()
    assert trace["agent_name"] == "coder"
    assert trace["total_tokens"] == 50
    assert trace["total_duration_ms"] == 60000
    assert trace["total_cost_usd"] == 0.5
    assert trace["session_id"] == "sess_b"
    assert trace["tags"] == ["dev"]
    assert trace["started_at"] == "2025-12-20T08:00:00.000Z"


def test_list_json_objects_ingest_back(cli: Run, seeded: Path, tmp_path: Path) -> None:
    """What ``list --json`` prints, ``ingest`` accepts (step_count and is_fork are ignored)."""
    listing = tmp_path / "listing.json"
    listing.write_text(cli("list", "--json").out)
    other = tmp_path / "other"
    result = cli("ingest", listing, "--dir", other, "--json")
    assert result.code == 0, result.out
    assert sorted(result.json()["ingested"]) == sorted(NEWEST_FIRST)


def test_list_no_matches_exits_0_with_a_note_on_stderr(cli: Run, seeded: Path) -> None:
    """A filter matching nothing exits 0, prints no table, and says so on stderr."""
    result = cli("list", "--agent", "nobody")
    assert result.code == 0
    assert result.out == ""
    assert "no traces match" in result.err


def test_list_json_no_matches_prints_an_empty_array(cli: Run, seeded: Path) -> None:
    """``--json`` with no matches prints [] and exits 0."""
    result = cli("list", "--json", "--agent", "nobody")
    assert result.code == 0
    assert result.json() == []


def test_list_missing_store_exits_1_with_a_hint(cli: Run, store_dir: Path) -> None:
    """With no store, list exits 1, names the directory and hints at how to create one."""
    result = cli("list")
    assert result.code == 1
    assert f"no agent-replay store at {store_dir}" in result.err
    assert "hint:" in result.err
    assert "agent-replay init" in result.err
    assert not store_dir.exists()


def test_list_json_failure_prints_the_error_object_on_stdout(cli: Run, store_dir: Path) -> None:
    """Under ``--json`` a failure prints {ok: false, error, hints} on stdout."""
    result = cli("list", "--json")
    assert result.code == 1
    payload = result.json()
    assert set(payload) == {"ok", "error", "hints"}
    assert payload["ok"] is False
    assert "no agent-replay store" in payload["error"]
    assert any("agent-replay init" in hint for hint in payload["hints"])


def test_list_json_usage_error_prints_the_error_object_on_stdout(cli: Run, seeded: Path) -> None:
    """A bad ``--since`` under ``--json`` exits 2 and prints the error object."""
    result = cli("list", "--json", "--since", "soon")
    assert result.code == 2
    assert result.json()["ok"] is False
    assert "--since" in result.json()["error"]


def test_list_corrupt_store_exits_1(cli: Run, store_dir: Path) -> None:
    """A traces.db that is not a database is a runtime failure naming the file."""
    store_dir.mkdir()
    (store_dir / "traces.db").write_text("not a database")
    result = cli("list")
    assert result.code == 1
    assert "cannot open the store" in result.err


def test_list_dir_option_reads_that_store(
    cli: Run, data: Path, tmp_path: Path, store_dir: Path
) -> None:
    """``list --dir PATH`` lists the store in PATH rather than $AGENT_REPLAY_DIR."""
    other = tmp_path / "other"
    assert cli("ingest", data / "array.json", "--dir", other).code == 0
    assert _ids(cli("list", "--dir", other).out) == ["trc_array2", "trc_array1"]
    assert not store_dir.exists()


def test_root_dir_option_applies_to_list(
    cli: Run, data: Path, tmp_path: Path, store_dir: Path
) -> None:
    """``agent-replay --dir PATH list`` reads the store in PATH."""
    other = tmp_path / "other"
    assert cli("--dir", other, "ingest", data / "single.json").code == 0
    assert _ids(cli("--dir", other, "list").out) == ["trc_single1"]
    assert not store_dir.exists()
