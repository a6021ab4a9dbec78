"""``agent-replay export``: full traces as JSONL or a JSON array, with list's filters, written
atomically with ``--output``, and readable back by ``ingest`` byte for byte."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_replay.errors import StoreError

Run = Callable[..., Any]

NEWEST_FIRST = ["trc_sample4_fork", "trc_sample2", "trc_sample1", "trc_sample3"]


def _jsonl_ids(out: str) -> list[str]:
    return [json.loads(line)["id"] for line in out.splitlines()]


def test_export_defaults_to_jsonl_one_full_trace_a_line(cli: Run, seeded: Path) -> None:
    """Each line is one full trace object, with steps carrying their ids."""
    result = cli("export")
    assert result.code == 0
    lines = result.out.splitlines()
    assert _jsonl_ids(result.out) == NEWEST_FIRST
    sample1 = json.loads(lines[2])
    assert [s["step_number"] for s in sample1["steps"]] == [1, 2, 3, 4, 5]
    assert all(s["id"].startswith("stp_") for s in sample1["steps"])
    assert sample1["steps"][1]["decision"]["chosen"] == "search_docs"
    assert len(sample1["evals"]) == 2


def test_export_jsonl_matches_show_json(cli: Run, seeded: Path) -> None:
    """An exported trace is the same object ``show --json`` prints."""
    exported = json.loads(cli("export", "--agent", "coder").out)
    assert exported == cli("show", "trc_sample3", "--json").json()


def test_export_format_json_prints_one_array(cli: Run, seeded: Path) -> None:
    """``--format json`` prints an array of the full trace objects."""
    result = cli("export", "--format", "json")
    assert result.code == 0
    traces = json.loads(result.out)
    assert [t["id"] for t in traces] == NEWEST_FIRST
    assert len(traces[0]["steps"]) == 1


def test_export_format_json_of_nothing_is_an_empty_array(cli: Run, seeded: Path) -> None:
    """With no matches, ``--format json`` prints [] and exits 0."""
    result = cli("export", "--format", "json", "--status", "running")
    assert result.code == 0
    assert json.loads(result.out) == []


def test_export_jsonl_of_nothing_prints_nothing(cli: Run, seeded: Path) -> None:
    """With no matches, JSONL export prints nothing and exits 0."""
    result = cli("export", "--tag", "absent")
    assert result.code == 0
    assert result.out == ""


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--status", "failed"], ["trc_sample2"]),
        (["--agent", "coder"], ["trc_sample3"]),
        (["--tag", "nightly"], ["trc_sample2"]),
        (["--session", "sess_a"], ["trc_sample2", "trc_sample1"]),
        (["--since", "2026-01-11"], ["trc_sample4_fork", "trc_sample2"]),
        (["--sort", "tokens"], ["trc_sample2", "trc_sample1", "trc_sample4_fork", "trc_sample3"]),
        (["--sort", "duration", "--limit", "1"], ["trc_sample3"]),
    ],
)
def test_export_filters_like_list(
    cli: Run, seeded: Path, option: list[str], expected: list[str]
) -> None:
    """The list filters and sorts select and order the exported traces."""
    result = cli("export", *option)
    assert result.code == 0
    assert _jsonl_ids(result.out) == expected


def test_export_limit_keeps_the_first_n(cli: Run, seeded: Path) -> None:
    """``--limit 2`` exports the two newest traces."""
    assert _jsonl_ids(cli("export", "--limit", "2").out) == NEWEST_FIRST[:2]


def test_export_bad_since_is_a_usage_error(cli: Run, seeded: Path) -> None:
    """An unparseable ``--since`` exits 2."""
    assert cli("export", "--since", "whenever").code == 2


def test_export_output_writes_the_file_and_nothing_to_stdout(
    cli: Run, seeded: Path, tmp_path: Path
) -> None:
    """``--output`` writes the export to the file and reports the count on stderr."""
    target = tmp_path / "all.jsonl"
    result = cli("export", "--output", target)
    assert result.code == 0
    assert result.out == ""
    assert f"exported 4 trace(s) to {target}" in result.err
    assert _jsonl_ids(target.read_text()) == NEWEST_FIRST


def test_export_output_file_equals_stdout_export(cli: Run, seeded: Path, tmp_path: Path) -> None:
    """``-o FILE`` holds exactly the bytes a stdout export prints."""
    target = tmp_path / "all.json"
    assert cli("export", "--format", "json", "-o", target).code == 0
    assert target.read_text() == cli("export", "--format", "json").out


def test_export_output_with_missing_store_leaves_no_file(
    cli: Run, tmp_path: Path, store_dir: Path
) -> None:
    """A failed export (no store) exits 1 and creates neither the file nor a temporary."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = cli("export", "--output", out_dir / "all.jsonl")
    assert result.code == 1
    assert "no agent-replay store" in result.err
    assert list(out_dir.iterdir()) == []


def test_export_failing_midway_leaves_no_half_written_file(
    cli: Run, seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error after the first trace leaves no output file and no temporary behind."""
    import agent_replay.store.queries as queries

    real = queries.iter_trace_json

    def failing(*args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        traces = real(*args, **kwargs)
        yield next(traces)
        raise StoreError("disk gone")

    monkeypatch.setattr(queries, "iter_trace_json", failing)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = cli("export", "--output", out_dir / "all.jsonl")
    assert result.code == 1
    assert "disk gone" in result.err
    assert list(out_dir.iterdir()) == []


def test_export_failing_midway_keeps_the_previous_file(
    cli: Run, seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed export over an existing file leaves that file as it was."""
    import agent_replay.store.queries as queries

    def failing(*args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield {"id": "trc_partial"}
        raise StoreError("disk gone")

    monkeypatch.setattr(queries, "iter_trace_json", failing)
    target = tmp_path / "all.jsonl"
    target.write_text("previous export\n")
    assert cli("export", "-o", target).code == 1
    assert target.read_text() == "previous export\n"


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_export_ingest_export_is_byte_identical(
    cli: Run, seeded: Path, data: Path, tmp_path: Path, fmt: str
) -> None:
    """Exporting, ingesting the export into a fresh store and exporting again gives the same
    bytes."""
    for name in ("single.json", "array.json", "escapes.json"):
        assert cli("ingest", data / name).code == 0
    first = tmp_path / f"first.{fmt}"
    assert cli("export", "--format", fmt, "-o", first).code == 0
    fresh = tmp_path / "fresh"
    assert cli("ingest", first, "--dir", fresh).code == 0
    second = tmp_path / f"second.{fmt}"
    assert cli("export", "--format", fmt, "-o", second, "--dir", fresh).code == 0
    assert second.read_bytes() == first.read_bytes()
    assert len(first.read_bytes()) > 1000


def test_export_piped_into_ingest_stdin_copies_the_store(
    proc: Run, seeded: Path, tmp_path: Path
) -> None:
    """``export | ingest - --dir other`` (real processes) copies every trace."""
    exported = proc("export")
    assert exported.returncode == 0, exported.stderr
    other = tmp_path / "other"
    ingested = proc("ingest", "-", "--dir", other, input=exported.stdout)
    assert ingested.returncode == 0, ingested.stderr
    assert "ingested 4 trace(s), 9 step(s)" in ingested.stdout


def test_export_missing_store_exits_1(cli: Run, store_dir: Path) -> None:
    """Export without a store exits 1 and does not create one."""
    assert cli("export").code == 1
    assert not store_dir.exists()


def test_export_dir_option_reads_that_store(
    cli: Run, data: Path, tmp_path: Path, store_dir: Path
) -> None:
    """``export --dir PATH`` exports the store in PATH."""
    other = tmp_path / "other"
    assert cli("ingest", data / "array.json", "--dir", other).code == 0
    assert _jsonl_ids(cli("export", "--dir", other).out) == ["trc_array2", "trc_array1"]


def test_export_output_in_a_missing_directory_names_that_path(
    cli: Run, seeded: Path, tmp_path: Path
) -> None:
    """An --output in a directory that doesn't exist is a usage error naming that path."""
    target = tmp_path / "no-such-dir" / "all.jsonl"
    result = cli("export", "-o", target)
    assert result.code == 2
    assert "unexpected" not in result.err
    assert ".tmp" not in result.err
    assert str(target) in result.err
