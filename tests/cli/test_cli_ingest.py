"""``agent-replay ingest``: JSON and JSONL from files and stdin, all-or-nothing per trace, with a
summary that names every problem and where it is."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]


def _ids(db: Run, store: Path | None = None) -> list[str]:
    return sorted(row[0] for row in db("SELECT id FROM traces", store=store))


# --- formats -------------------------------------------------------------------------------


def test_ingest_jsonl_file_stores_every_trace_and_step(cli: Run, data: Path, db: Run) -> None:
    """A .jsonl file loads one trace a line, with all their steps."""
    result = cli("ingest", data / "traces.jsonl")
    assert result.code == 0, result.err
    assert result.out.splitlines()[0] == "ingested 4 trace(s), 9 step(s)"
    assert _ids(db) == ["trc_sample1", "trc_sample2", "trc_sample3", "trc_sample4_fork"]
    assert db("SELECT COUNT(*) FROM steps")[0][0] == 9


def test_ingest_json_file_with_one_object_stores_that_trace(cli: Run, data: Path, db: Run) -> None:
    """A .json file holding a single (pretty-printed) trace object loads that trace."""
    result = cli("ingest", data / "single.json")
    assert result.code == 0, result.err
    assert _ids(db) == ["trc_single1"]
    assert db("SELECT COUNT(*) FROM steps WHERE trace_id = 'trc_single1'")[0][0] == 3


def test_ingest_json_file_with_an_array_stores_each_trace(cli: Run, data: Path, db: Run) -> None:
    """A .json file holding an array loads every trace of the array."""
    result = cli("ingest", data / "array.json")
    assert result.code == 0, result.err
    assert _ids(db) == ["trc_array1", "trc_array2"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("traces.jsonl", ["trc_sample1", "trc_sample2", "trc_sample3", "trc_sample4_fork"]),
        ("single.json", ["trc_single1"]),
        ("array.json", ["trc_array1", "trc_array2"]),
    ],
)
def test_ingest_detects_the_format_of_a_file_without_a_known_extension(
    cli: Run, data: Path, db: Run, tmp_path: Path, source: str, expected: list[str]
) -> None:
    """With no .json/.jsonl extension the content decides: JSONL, one object, or an array."""
    copy = tmp_path / "traces.txt"
    shutil.copy(data / source, copy)
    result = cli("ingest", copy)
    assert result.code == 0, result.err
    assert _ids(db) == expected


def test_ingest_format_option_overrides_the_extension(
    cli: Run, data: Path, db: Run, tmp_path: Path
) -> None:
    """``--format jsonl`` reads a JSONL file named .json as JSONL."""
    misnamed = tmp_path / "actually-jsonl.json"
    shutil.copy(data / "traces.jsonl", misnamed)
    result = cli("ingest", misnamed, "--format", "jsonl")
    assert result.code == 0, result.err
    assert len(_ids(db)) == 4


def test_ingest_trusts_the_extension_without_format_option(
    cli: Run, data: Path, db: Run, tmp_path: Path
) -> None:
    """Without ``--format`` a JSONL file named .json is read as one JSON document and rejected."""
    misnamed = tmp_path / "actually-jsonl.json"
    shutil.copy(data / "traces.jsonl", misnamed)
    result = cli("ingest", misnamed)
    assert result.code == 1
    assert "rejected file" in result.err
    assert "not valid JSON" in result.err


def test_ingest_format_json_reads_a_jsonl_named_file_as_one_document(
    cli: Run, data: Path, tmp_path: Path
) -> None:
    """``--format json`` on a one-trace .jsonl file reads it as a JSON document."""
    one_line = tmp_path / "one.jsonl"
    one_line.write_bytes((data / "traces.jsonl").read_bytes().splitlines()[0])
    result = cli("ingest", one_line, "--format", "json", "--json")
    assert result.code == 0, result.err
    assert result.json()["ingested"] == ["trc_sample1"]


# --- stdin ---------------------------------------------------------------------------------


def test_ingest_stdin_sniffs_jsonl(proc: Run, data: Path, db: Run) -> None:
    """``ingest -`` reads JSONL piped on stdin, one trace a line."""
    result = proc("ingest", "-", input=(data / "traces.jsonl").read_text())
    assert result.returncode == 0, result.stderr
    assert "ingested 4 trace(s), 9 step(s)" in result.stdout
    assert len(_ids(db)) == 4


def test_ingest_stdin_sniffs_a_pretty_printed_json_object(proc: Run, data: Path, db: Run) -> None:
    """``ingest -`` reads a multi-line JSON object on stdin as one trace."""
    result = proc("ingest", "-", input=(data / "single.json").read_text())
    assert result.returncode == 0, result.stderr
    assert _ids(db) == ["trc_single1"]


def test_ingest_stdin_sniffs_a_json_array(proc: Run, data: Path, db: Run) -> None:
    """``ingest -`` reads a JSON array on stdin as several traces."""
    result = proc("ingest", "-", input=(data / "array.json").read_text())
    assert result.returncode == 0, result.stderr
    assert _ids(db) == ["trc_array1", "trc_array2"]


def test_ingest_stdin_format_option_skips_sniffing(proc: Run, data: Path, db: Run) -> None:
    """``ingest - --format json`` reads stdin as one JSON document."""
    result = proc("ingest", "-", "--format", "json", input=(data / "array.json").read_text())
    assert result.returncode == 0, result.stderr
    assert _ids(db) == ["trc_array1", "trc_array2"]


def test_ingest_stdin_sniffs_jsonl_with_a_long_first_line(proc: Run, db: Run) -> None:
    """JSONL on stdin is recognised even when its first trace is longer than 4 KB."""
    big = {"id": "trc_big1", "agent_name": "bot", "metadata": {"blob": "x" * 5000}}
    small = {"id": "trc_big2", "agent_name": "bot"}
    result = proc("ingest", "-", input=json.dumps(big) + "\n" + json.dumps(small) + "\n")
    assert result.returncode == 0, result.stderr
    assert _ids(db) == ["trc_big1", "trc_big2"]


def test_ingest_stdin_dry_run_creates_nothing(proc: Run, data: Path, store_dir: Path) -> None:
    """``ingest - --dry-run`` validates stdin without creating the store directory."""
    result = proc("ingest", "-", "--dry-run", input=(data / "traces.jsonl").read_text())
    assert result.returncode == 0, result.stderr
    assert "would ingest 4 trace(s), 9 step(s)" in result.stdout
    assert not store_dir.exists()


# --- tags, dry run -------------------------------------------------------------------------


def test_ingest_tags_are_merged_with_the_traces_own_tags(cli: Run, data: Path, db: Run) -> None:
    """``--tags`` adds tags after a trace's own, without duplicating one it already has."""
    assert cli("ingest", data / "traces.jsonl", "--tags", "nightly, extra").code == 0
    tags = db("SELECT tag FROM tags WHERE trace_id = 'trc_sample2' ORDER BY position")
    assert [row[0] for row in tags] == ["prod", "nightly", "extra"]
    shown = cli("show", "trc_sample1", "--json").json()
    assert shown["tags"] == ["prod", "nightly", "extra"]


def test_ingest_dry_run_writes_nothing_not_even_the_store(
    cli: Run, data: Path, store_dir: Path
) -> None:
    """``--dry-run`` reports what it would ingest and leaves no store directory behind."""
    result = cli("ingest", data / "traces.jsonl", "--dry-run")
    assert result.code == 0, result.err
    assert result.out.splitlines()[0] == "would ingest 4 trace(s), 9 step(s)"
    assert not store_dir.exists()


def test_ingest_dry_run_json_summary_lists_the_ids(cli: Run, data: Path, store_dir: Path) -> None:
    """``--dry-run --json`` says dry_run and lists the ids it would write."""
    result = cli("ingest", data / "array.json", "--dry-run", "--json")
    assert result.code == 0
    summary = result.json()
    assert summary["dry_run"] is True
    assert summary["ingested"] == ["trc_array1", "trc_array2"]
    assert summary["steps"] == 3
    assert not store_dir.exists()


def test_ingest_dry_run_still_fails_on_an_invalid_trace(
    cli: Run, data: Path, store_dir: Path
) -> None:
    """A dry run of a file with an invalid trace exits 1 and still writes nothing."""
    result = cli("ingest", data / "one_invalid.jsonl", "--dry-run")
    assert result.code == 1
    assert "steps[1].caused_by_step" in result.err
    assert not store_dir.exists()


def test_ingest_dry_run_predicts_already_stored_ids(cli: Run, data: Path) -> None:
    """A dry run of traces already in the store reports them rejected and exits 1."""
    assert cli("ingest", data / "array.json").code == 0
    result = cli("ingest", data / "array.json", "--dry-run", "--json")
    assert result.code == 1
    assert result.json()["ingested"] == []


# --- rejections ----------------------------------------------------------------------------


def test_ingest_one_invalid_trace_exits_1_and_stores_the_valid_ones(
    cli: Run, data: Path, db: Run
) -> None:
    """An invalid trace among valid ones: exit 1, the valid traces are stored."""
    result = cli("ingest", data / "one_invalid.jsonl")
    assert result.code == 1
    assert result.out.splitlines()[0] == "ingested 2 trace(s), 3 step(s); rejected 1"
    assert _ids(db) == ["trc_mixed1", "trc_mixed3"]


def test_ingest_stores_nothing_of_an_invalid_trace(cli: Run, data: Path, db: Run) -> None:
    """No row of the rejected trace is written: no trace, no steps."""
    cli("ingest", data / "one_invalid.jsonl")
    assert db("SELECT COUNT(*) FROM traces WHERE id = 'trc_mixed2'")[0][0] == 0
    assert db("SELECT COUNT(*) FROM steps WHERE trace_id = 'trc_mixed2'")[0][0] == 0
    assert db("SELECT COUNT(*) FROM steps")[0][0] == 3


def test_ingest_names_the_problem_its_path_and_its_line(cli: Run, data: Path) -> None:
    """The message gives the line, the field path and what is wrong with it."""
    result = cli("ingest", data / "one_invalid.jsonl")
    assert "rejected line 2:" in result.err
    assert "steps[1].caused_by_step: must reference" in result.err


def test_ingest_json_summary_has_the_documented_shape(cli: Run, data: Path) -> None:
    """``--json``: {ok, dry_run, ingested, steps, rejected: [{where, reason, problems}]}."""
    result = cli("ingest", data / "one_invalid.jsonl", "--json")
    assert result.code == 1
    summary = result.json()
    assert set(summary) == {"ok", "dry_run", "ingested", "steps", "rejected"}
    assert summary["ok"] is False
    assert summary["dry_run"] is False
    assert summary["ingested"] == ["trc_mixed1", "trc_mixed3"]
    assert summary["steps"] == 3
    [rejection] = summary["rejected"]
    assert set(rejection) == {"where", "reason", "problems"}
    assert rejection["where"] == "line 2"
    assert "steps[1].caused_by_step" in rejection["reason"]
    [problem] = rejection["problems"]
    assert problem["path"] == "steps[1].caused_by_step"
    assert "(got 5)" in problem["message"]


def test_ingest_json_summary_of_a_clean_run_is_ok(cli: Run, data: Path) -> None:
    """A successful ``--json`` ingest reports ok, the ids and no rejections."""
    result = cli("ingest", data / "array.json", "--json")
    assert result.code == 0
    assert result.json() == {
        "ok": True,
        "dry_run": False,
        "ingested": ["trc_array1", "trc_array2"],
        "steps": 3,
        "rejected": [],
    }


def test_ingest_reports_a_malformed_json_line_with_its_number(
    cli: Run, data: Path, db: Run
) -> None:
    """A line that is not JSON is rejected by line number; the other lines still load."""
    result = cli("ingest", data / "malformed_line.jsonl")
    assert result.code == 1
    assert "rejected line 2:" in result.err
    assert "not valid JSON" in result.err
    assert _ids(db) == ["trc_malformed1", "trc_malformed3"]


def test_ingest_malformed_line_in_json_summary_has_a_reason_but_no_problems(
    cli: Run, data: Path
) -> None:
    """Under ``--json`` a parse failure is a rejection with where, a reason and no field paths."""
    [rejection] = cli("ingest", data / "malformed_line.jsonl", "--json").json()["rejected"]
    assert rejection["where"] == "line 2"
    assert "not valid JSON" in rejection["reason"]
    assert rejection["problems"] == []


def test_ingest_a_trace_that_is_not_an_object_is_rejected(
    cli: Run, tmp_path: Path, db: Run
) -> None:
    """An array element that is not an object is rejected by its position in the array."""
    source = tmp_path / "mixed.json"
    source.write_text('[{"id": "trc_ok1", "agent_name": "a"}, 42]')
    result = cli("ingest", source, "--json")
    assert result.code == 1
    [rejection] = result.json()["rejected"]
    assert rejection["where"] == "trace 2"
    assert "must be a JSON object" in rejection["reason"]
    assert _ids(db) == ["trc_ok1"]


def test_ingest_the_same_ids_again_rejects_them_as_already_stored(
    cli: Run, data: Path, db: Run
) -> None:
    """Re-ingesting stored ids exits 1, says they are already in the store, duplicates nothing."""
    assert cli("ingest", data / "array.json").code == 0
    again = cli("ingest", data / "array.json", "--json")
    assert again.code == 1
    summary = again.json()
    assert summary["ingested"] == []
    assert sorted(r["where"] for r in summary["rejected"]) == ["trace 1", "trace 2"]
    assert all("already in the store" in r["reason"] for r in summary["rejected"])
    assert db("SELECT COUNT(*) FROM steps")[0][0] == 3


def test_ingest_an_id_twice_in_one_input_keeps_the_first(cli: Run, tmp_path: Path, db: Run) -> None:
    """A second trace with the same id in one input is rejected; the first is stored."""
    source = tmp_path / "twice.jsonl"
    source.write_text(
        '{"id": "trc_twice", "agent_name": "first"}\n{"id": "trc_twice", "agent_name": "second"}\n'
    )
    result = cli("ingest", source, "--json")
    assert result.code == 1
    [rejection] = result.json()["rejected"]
    assert rejection["where"] == "line 2"
    assert "appears twice" in rejection["reason"]
    assert db("SELECT agent_name FROM traces") == [("first",)]


def test_ingest_missing_file_is_a_usage_error(cli: Run, tmp_path: Path, store_dir: Path) -> None:
    """A file that does not exist exits 2 with a message naming it, creating no store."""
    missing = tmp_path / "nope.jsonl"
    result = cli("ingest", missing)
    assert result.code == 2
    assert f"no such file: {missing}" in result.err
    assert not store_dir.exists()


def test_ingest_missing_file_under_json_prints_the_error_object(cli: Run, tmp_path: Path) -> None:
    """``--json`` failure: stdout carries {ok: false, error, hints}."""
    result = cli("ingest", tmp_path / "nope.jsonl", "--json")
    assert result.code == 2
    payload = result.json()
    assert payload["ok"] is False
    assert "no such file" in payload["error"]
    assert isinstance(payload["hints"], list)


def test_ingest_dir_option_writes_to_that_store(
    cli: Run, data: Path, tmp_path: Path, db: Run, store_dir: Path
) -> None:
    """``ingest --dir PATH`` creates and fills the store in PATH."""
    other = tmp_path / "other"
    assert cli("ingest", data / "array.json", "--dir", other).code == 0
    assert _ids(db, store=other) == ["trc_array1", "trc_array2"]
    assert not store_dir.exists()


def test_ingest_without_file_argument_is_a_usage_error(cli: Run) -> None:
    """``ingest`` with no FILE exits 2."""
    result = cli("ingest")
    assert result.code == 2
    assert "Missing argument" in result.err


def test_ingest_unknown_format_is_a_usage_error(cli: Run, data: Path) -> None:
    """``--format yaml`` is refused with exit 2."""
    assert cli("ingest", data / "array.json", "--format", "yaml").code == 2


# --- progress ------------------------------------------------------------------------------


def _stderr_on_a_terminal(*args: str | Path) -> tuple[int, str]:
    """Run the CLI with stderr attached to a pseudo-terminal; return the code and what it got."""
    parent, child = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "agent_replay", *(str(arg) for arg in args)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=child,
            timeout=60,
            check=False,
        )
        os.close(child)
        received = b""
        while select.select([parent], [], [], 0.5)[0]:
            try:
                chunk = os.read(parent, 4096)
            except OSError:  # the terminal's other side is closed: all read
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(parent)
    return result.returncode, received.decode()


def test_ingest_shows_progress_when_stderr_is_a_terminal(data: Path, tmp_path: Path) -> None:
    """On a terminal, ingest reports traces and steps done on stderr."""
    code, stderr = _stderr_on_a_terminal("ingest", data / "array.json", "--dir", tmp_path / "s")
    assert code == 0
    assert "2 traces, 3 steps" in stderr


def test_ingest_shows_no_progress_when_stderr_is_not_a_terminal(cli: Run, data: Path) -> None:
    """Piped or captured stderr gets no progress line."""
    result = cli("ingest", data / "array.json")
    assert result.code == 0
    assert "traces, " not in result.err


def test_ingest_json_shows_no_progress_even_on_a_terminal(data: Path, tmp_path: Path) -> None:
    """``--json`` keeps the terminal free of progress output."""
    code, stderr = _stderr_on_a_terminal(
        "ingest", data / "array.json", "--dir", tmp_path / "s", "--json"
    )
    assert code == 0
    assert "traces, " not in stderr
