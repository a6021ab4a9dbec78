"""Every screen, both modals and the tree tab at a wide (160×45) and a narrow (80×24) terminal:
what a user sees, and that nothing is cut mid-word or lost without a hint at 80 columns.

One app run per snapshot, on the demo store with the fixed clock and theme (see conftest)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tuikit import CLOCK, settle

from agent_replay.services.evals.runner import make_plan, run_evals
from agent_replay.store.db import Store

WIDE = (160, 45)
NARROW = (80, 24)
TOOLCHAIN = "trc_demo2toolchain"
GOOD = "trc_demo4goodrun"
REGRESSED = "trc_demo5regressed"
DANGEROUS = "trc_demo3dangerous"


def _evaluated(store: Store) -> None:
    run_evals(store, DANGEROUS, make_plan(), clock=CLOCK)


def _timeline_at(step: int) -> Callable[[Any], Any]:
    def select(app: Any) -> None:
        app.screen.query_one("#step-timeline").select_step(step)

    return select


# name: (app options, store preparation, (action on the app, keys)...)
SCREENS: dict[str, tuple[dict[str, Any], Callable[[Store], None] | None, list[Any]]] = {
    "trace_list": ({}, None, []),
    "timeline": ({"initial_trace": TOOLCHAIN}, None, [_timeline_at(3)]),
    "tree_why": ({"initial_trace": TOOLCHAIN}, None, [_timeline_at(7), "t"]),
    "diff": ({}, None, [lambda app: app.push_screen(_diff())]),
    "fork_editor": ({"initial_trace": GOOD}, None, [_timeline_at(6), "F"]),
    "evals": ({"initial_trace": DANGEROUS}, _evaluated, ["e"]),
    "guard_policies": ({"initial_mode": "policies"}, None, []),
    "live_watch": ({"initial_mode": "watch"}, None, []),
    "dashboard": ({"initial_mode": "dashboard"}, None, []),
    "replay": ({"initial_trace": TOOLCHAIN}, None, [_timeline_at(4), "p"]),
    "jump_modal": ({"initial_trace": TOOLCHAIN}, None, ["g", "5"]),
    "help_modal": ({"initial_trace": TOOLCHAIN}, None, ["question_mark"]),
}


def _diff() -> Any:
    from agent_replay.screens.diff import DiffScreen

    return DiffScreen(GOOD, REGRESSED)


CASES = [(name, size) for name in SCREENS for size in (WIDE, NARROW)]


@pytest.mark.parametrize(("name", "size"), CASES, ids=[f"{name}-{w}x{h}" for name, (w, h) in CASES])
def test_snapshot(seeded_store, tui, snap_compare, name: str, size: tuple[int, int]) -> None:
    """The screen as drawn, wide and narrow."""
    options, prepare, steps = SCREENS[name]
    if prepare is not None:
        prepare(seeded_store)

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        for step in steps:
            if callable(step):
                result = step(pilot.app)
                if result is not None:
                    await result
            else:
                await pilot.press(step)
            await settle(pilot)

    app = tui(seeded_store, refresh_interval=None, **options)
    assert snap_compare(app, terminal_size=size, run_before=run_before)
