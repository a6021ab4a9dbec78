"""``make_app`` calms the cyclic collector once per process (``calm_collector``)."""

from __future__ import annotations

import gc

from agent_replay.app import GC_THRESHOLDS


def test_make_app_sets_the_thresholds_and_freezes_once(empty_store, tui) -> None:
    tui(empty_store)
    assert gc.get_threshold() == GC_THRESHOLDS
    frozen = gc.get_freeze_count()
    assert frozen > 0
    garbage = [[] for _ in range(100)]  # new objects: a second freeze would take them
    tui(empty_store)
    assert gc.get_freeze_count() == frozen
    del garbage
