"""Bundles: ``export ID... --format bundle`` writes one self-contained, redacted file;
``ingest FILE`` merges it (twice adds nothing); ``open FILE`` reads it without ever writing."""

from __future__ import annotations

import hashlib
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from probe import TUI, probe

from agent_replay.clock import FixedClock
from agent_replay.services.bundle import open_bundle
from agent_replay.services.demo import load_demo
from agent_replay.services.evals.runner import make_plan, run_evals
from agent_replay.services.fork import fork_trace
from agent_replay.services.ingest import ingest_trace
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import DB_ERRORS, ReadOnlyStoreError, ensure_database

Run = Callable[..., Any]
SECRET = "sk-ant-api03-" + "Q" * 40


@pytest.fixture
def source(store_dir: Path, clock: FixedClock) -> str:
    """The demo store with evaluations, annotations, a fork, and a trace holding a secret
    (ingested as it came: ingest is not where this test looks for redaction)."""
    store = ensure_database(store_dir)
    load_demo(store, clock)
    run_evals(store, "trc_demo4goodrun", make_plan(), clock=clock)
    recorder = TraceRecorder(store, clock=clock)
    recorder.annotate("trc_demo4goodrun", label="good", note="the reference run", score=1.0)
    recorder.annotate("trc_demo2toolchain", label="wrong-tool", step_number=3)
    fork = fork_trace(store, "trc_demo2toolchain", 3, clock=clock)
    ingest_trace(
        store,
        {
            "id": "trc_leaky",
            "agent_name": "deploy-bot",
            "steps": [{"step_number": 1, "step_type": "tool_call", "output": f"key {SECRET}"}],
        },
        clock=clock,
    )
    store.close()
    return fork.trace_id


def _bundle(cli: Run, tmp_path: Path, *ids: str) -> Path:
    path = tmp_path / "handoff.bundle"
    result = cli("export", *ids, "--format", "bundle", "--output", path)
    assert result.code == 0, result.err
    return path


def test_a_bundle_round_trips_through_ingest(cli: Run, source: str, tmp_path: Path) -> None:
    """export → ingest into an empty store → show --json identical, for every trace."""
    bundled = ["trc_demo2toolchain", "trc_demo4goodrun", "trc_leaky", source]  # source: a fork
    path = _bundle(cli, tmp_path, "demo2", "demo4", "trc_leaky", source)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("handoff")) == [
        "handoff.bundle"  # one file: no -wal, -shm or journal beside it
    ]
    originals = {i: cli("show", i, "--json").json() for i in bundled}
    other = tmp_path / "other"
    merged = cli("--dir", other, "ingest", path, "--json")
    assert merged.code == 0, merged.err
    assert sorted(merged.json()["ingested"]) == sorted(bundled)
    for trace_id, original in originals.items():
        copy = cli("--dir", other, "show", trace_id, "--json").json()
        if trace_id == "trc_leaky":  # the one difference: the secret
            assert SECRET not in str(copy) and "[REDACTED:" in str(copy)
            continue
        assert copy == original
    assert originals["trc_demo4goodrun"]["evals"] and originals["trc_demo4goodrun"]["annotations"]
    listed = cli("--dir", other, "list", "--json").json()
    assert sorted(t["id"] for t in listed) == sorted(bundled)
    assert [t["id"] for t in cli("--dir", other, "list", "--label", "good", "--json").json()] == [
        "trc_demo4goodrun"
    ]


def test_merging_a_bundle_twice_adds_nothing(cli: Run, source: str, tmp_path: Path) -> None:
    """The second ingest reports every trace as present and changes no row."""
    path = _bundle(cli, tmp_path, "demo2", "demo4")
    other = tmp_path / "other"
    assert cli("--dir", other, "ingest", path).code == 0

    def rows() -> list[int]:
        with sqlite3.connect(other / "traces.db") as db:
            return [
                db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("traces", "steps", "decisions", "evals", "annotations")
            ]

    before = rows()
    again = cli("--dir", other, "ingest", path, "--json")
    assert again.code == 0
    assert again.json()["ingested"] == [] and sorted(again.json()["present"]) == [
        "trc_demo2toolchain",
        "trc_demo4goodrun",
    ]
    assert rows() == before
    human = cli("--dir", other, "ingest", path)
    assert "ingested 0 trace(s), 0 step(s) from the bundle; 2 already present" in human.out


def test_a_bundle_holds_those_traces_redacted_and_nothing_else(
    cli: Run, source: str, tmp_path: Path
) -> None:
    """No secret in any byte of the file; no policies, no other traces."""
    path = _bundle(cli, tmp_path, "trc_leaky", "demo4")
    assert SECRET.encode() not in path.read_bytes()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM policies").fetchone()[0] == 0
        assert sorted(r[0] for r in db.execute("SELECT id FROM traces")) == [
            "trc_demo4goodrun",
            "trc_leaky",
        ]
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_bundle_usage_errors(cli: Run, source: str, tmp_path: Path) -> None:
    """A bundle needs --output; ids and filters don't mix; an unknown id writes nothing."""
    assert cli("export", "demo2", "--format", "bundle").code == 2
    assert cli("export", "demo2", "--status", "failed", "--format", "bundle", "-o", "x").code == 2
    missing = cli("export", "demo2", "nope", "--format", "bundle", "-o", tmp_path / "x.bundle")
    assert missing.code == 1 and not (tmp_path / "x.bundle").exists()
    by_filter = cli("export", "--label", "good", "--format", "bundle", "-o", tmp_path / "g.bundle")
    assert by_filter.code == 0
    assert cli("--dir", tmp_path / "g", "ingest", tmp_path / "g.bundle", "--json").json()[
        "ingested"
    ] == ["trc_demo4goodrun"]


def test_an_opened_bundle_refuses_every_write_and_is_never_changed(
    cli: Run, source: str, tmp_path: Path, clock: FixedClock
) -> None:
    """Reads work; a write (an eval, an annotation) fails with the read-only message."""
    path = _bundle(cli, tmp_path, "demo2")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    store = open_bundle(path)
    try:
        with pytest.raises(ReadOnlyStoreError, match="read-only") as caught:
            run_evals(store, "demo2", make_plan(), clock=clock)
        assert "agent-replay ingest" in " ".join(caught.value.hints)
        with pytest.raises(ReadOnlyStoreError):
            TraceRecorder(store, clock=clock).annotate("trc_demo2toolchain", label="x")
        with pytest.raises(DB_ERRORS, match="readonly"):  # and underneath, SQLite itself
            store.db.execute_sql("DELETE FROM traces")
    finally:
        store.close()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_open_is_headless_until_the_app_starts(cli: Run, source: str, tmp_path: Path) -> None:
    """Without a terminal, open prints help and exits 2 without importing Textual or Rich;
    a file that is not a bundle is an error naming it."""
    path = _bundle(cli, tmp_path, "demo2")
    result = probe(argv=["open", str(path)], banned=TUI)
    assert result.code == 2 and result.loaded == []
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    refused = cli("open", text)
    assert refused.code == 1 and "is not an agent-replay bundle" in refused.err
