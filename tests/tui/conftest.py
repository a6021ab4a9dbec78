"""Fixtures for the Textual app: a seeded store, a fixed clock and size, a pinned theme, and
snapshots stored under the top-level ``snapshots/<test module>/``.

Determinism: fixed clock (every relative time comes from it), fixed terminal size, the demo
data loaded through the real services with that clock (fixed ids), no temp path on screen
(``store_label`` is a display name), the theme pinned in the app, animations off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_textual_snapshot
from tuikit import CLOCK

from agent_replay.app import AgentReplayApp, make_app
from agent_replay.services.demo import load_demo
from agent_replay.store.db import Store, ensure_database

SNAPSHOT_ROOT = Path(__file__).resolve().parents[2] / "snapshots"


class _SnapshotsUnderRoot(pytest_textual_snapshot.SVGImageExtension):
    """SVGs live in ``snapshots/<test module>/`` at the repository root."""

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(SNAPSHOT_ROOT / Path(test_location.filepath).stem)


@pytest.fixture(autouse=True)
def _snapshot_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest-textual-snapshot (pinned 1.1.0) reads this module global inside snap_compare.
    monkeypatch.setattr(pytest_textual_snapshot, "SVGImageExtension", _SnapshotsUnderRoot)


@pytest.fixture(autouse=True)
def _calm_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.setenv("TZ", "UTC")


@pytest.fixture
def empty_store(tmp_path: Path) -> Iterator[Store]:
    store = ensure_database(tmp_path / "empty")
    yield store
    store.close()


@pytest.fixture
def seeded_store(tmp_path: Path) -> Iterator[Store]:
    """The demo traces and policies, loaded through the real services with the fixed clock."""
    store = ensure_database(tmp_path / "seeded")
    load_demo(store, CLOCK)
    yield store
    store.close()


@pytest.fixture
def tui() -> Callable[..., AgentReplayApp]:
    """``tui(store, **options)`` builds the app the way the CLI does, deterministically."""

    def build(store: Store, **options: Any) -> AgentReplayApp:
        app = make_app(store, CLOCK, store_label="demo store", **options)
        app.animation_level = "none"
        return app

    return build
