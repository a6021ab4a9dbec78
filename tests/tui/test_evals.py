"""The eval results screen: one trace's evaluations (from the timeline, ``e``), every trace's
(the ``evals`` mode, ``E``), running the presets from the screen, the detail pane's criteria and
evidence, and snapshots."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from textual.widgets import DataTable, Static
from tuikit import CLOCK, SIZE, settle

from agent_replay.screens.evals import EvalsScreen, score_bar
from agent_replay.screens.timeline import TimelineScreen
from agent_replay.services.evals.runner import make_plan, run_evals
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import eval_dicts

UNGROUNDED = "trc_demo1ungrounded"
DANGEROUS = "trc_demo3dangerous"
GOOD = "trc_demo4goodrun"


def evaluate(store: Store, *trace_ids: str) -> None:
    """Run the deterministic presets through the real service (stamped by the fixed clock)."""
    for trace_id in trace_ids:
        run_evals(store, trace_id, make_plan(), clock=CLOCK)


def evaluate_with_ai(store: Store, trace_id: str) -> None:
    """Run ai-root-cause through the real OpenAI SDK against the local fake API."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
    from aifake import KEY, FakeAI

    from agent_replay.config import Config, set_value
    from agent_replay.services.evals.providers import resolve_ai

    with FakeAI() as fake:
        config = set_value(Config(), "ai.api_keys.openai", KEY)
        config = set_value(config, "ai.base_urls.openai", f"{fake.url}/v1")
        settings = resolve_ai(config, env={})
        plan = make_plan(["ai-root-cause"])
        run_evals(store, trace_id, plan, clock=CLOCK, settings=settings)


def table(app: Any) -> DataTable[Any]:
    return app.screen.query_one("#eval-table", DataTable)


def detail(app: Any) -> str:
    return str(app.screen.query_one("#eval-detail-text", Static).render())


def cells(app: Any, column: int) -> list[str]:
    data = table(app)
    return [str(data.get_row_at(row)[column]) for row in range(data.row_count)]


async def test_e_on_the_timeline_opens_the_traces_evaluations(seeded_store, tui) -> None:
    """From a trace's timeline, e lists that trace's evaluations, newest run first."""
    evaluate(seeded_store, UNGROUNDED, DANGEROUS)
    app = tui(seeded_store, initial_trace="trc_demo1")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)
        await pilot.press("e")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, EvalsScreen) and screen.trace_id == UNGROUNDED
        assert cells(app, 0) == ["hallucination-check", "safety-check", "completeness-check"]
        assert cells(app, 1) == ["FAIL", "PASS", "PASS"]
        assert cells(app, 2) == ["0.60 / 0.70", "1.00 / 0.80", "1.00 / 0.70"]
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)


async def test_the_detail_shows_criteria_weights_and_evidence(seeded_store, tui) -> None:
    """The selected evaluation's criteria with score and weight, and each piece of evidence
    with its step, field and text."""
    evaluate(seeded_store, UNGROUNDED)
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(EvalsScreen(UNGROUNDED))
        await settle(pilot)
        text = detail(app)
        assert "hallucination-check  FAIL  0.60 / 0.70" in text
        assert "✗ grounded in retrieval  0.00  weight 40%" in text
        assert "step 6 output  “Good news!”  (0% of its words are in the retrieved text)" in text
        await pilot.press("down")
        await settle(pilot)
        with seeded_store.db.connection_context():
            second = eval_dicts(seeded_store, UNGROUNDED)[1]["id"]
        assert app.screen.selected == second
        assert "safety-check  PASS  1.00 / 0.80" in detail(app)
        assert "✓ dangerous tool calls  1.00  weight 40%" in detail(app)


async def test_r_runs_the_presets_and_shows_the_results(seeded_store, tui) -> None:
    """A trace without evaluations shows how to get some; r runs and stores the presets."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(EvalsScreen(DANGEROUS))
        await settle(pilot)
        empty = app.screen.query_one("#evals-empty", Static)
        assert empty.display and "Press r to run the deterministic presets" in str(empty.render())
        await pilot.press("r")
        await settle(pilot)
        assert cells(app, 0) == ["hallucination-check", "safety-check", "completeness-check"]
        assert cells(app, 1) == ["PASS", "FAIL", "PASS"]
        assert not empty.display
    with seeded_store.db.connection_context():
        stored = eval_dicts(seeded_store, DANGEROUS)
    assert [e["evaluator"] for e in stored] == [
        "hallucination-check",
        "safety-check",
        "completeness-check",
    ]


async def test_E_shows_every_traces_evaluations_and_enter_opens_one(seeded_store, tui) -> None:
    """The evals mode lists the evaluations of all traces; Enter opens the selected trace."""
    evaluate(seeded_store, UNGROUNDED, GOOD)
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("E")
        await settle(pilot)
        assert app.current_mode == "evals"
        # Newest first: the good run was evaluated last (same instant: insertion order).
        assert cells(app, 3) == [GOOD] * 3 + [UNGROUNDED] * 3
        assert cells(app, 1)[:3] == ["completeness-check", "safety-check", "hallucination-check"]
        assert "trc_demo4goodrun (analytics-sql-agent)" in detail(app)
        first_trace = cells(app, 3)[0]
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen) and app.screen.trace_id == first_trace


async def test_an_evaluation_stored_right_after_the_evals_mode_opens_appears(
    seeded_store, tui
) -> None:
    """Opened straight on the evals mode: results stored between the first read and the
    change watcher's first check are listed (the watcher's baseline is taken before that
    read)."""
    app = tui(seeded_store, initial_mode="evals", refresh_interval=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert table(app).row_count == 0
        with seeded_store.db.connection_context():  # the test thread's own connection
            evaluate(seeded_store, GOOD)
        for _ in range(60):  # the watcher checks every second
            await pilot.pause(0.1)
            if table(app).row_count == 3:
                break
        assert cells(app, 3) == [GOOD] * 3


async def test_an_unknown_trace_is_reported(seeded_store, tui) -> None:
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(EvalsScreen("trc_nope"))
        await settle(pilot)
        title = str(app.screen.query_one("#evals-title", Static).render())
        assert "no trace matches 'trc_nope'" in title


async def test_an_ai_evaluation_shows_its_model_cost_and_fix(seeded_store, tui) -> None:
    evaluate_with_ai(seeded_store, UNGROUNDED)
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(EvalsScreen(UNGROUNDED))
        await settle(pilot)
        assert cells(app, 3) == ["gpt-5.4-nano"]
        text = detail(app)
        assert "model gpt-5.4-nano · cost $0.00045" in text
        assert "suggested fix\n  Lower the temperature and quote the policy." in text
        assert "step 99 step  “made up”  (cited (no such step in the trace))" in text


def test_score_bar_marks_the_threshold() -> None:
    bar = str(score_bar(0.6, 0.7, width=10))
    assert bar == "██████░│░░"


# --- snapshots -------------------------------------------------------------------------------


def _snapshot(snap_compare: Any, app: Any, screen: Any = None, *keys: str) -> bool:
    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        if screen is not None:
            pilot.app.push_screen(screen)
            await settle(pilot)
        if keys:
            await pilot.press(*keys)
        await settle(pilot)

    return bool(snap_compare(app, terminal_size=SIZE, run_before=run_before))


def test_snapshot_evals_of_the_ungrounded_trace(seeded_store, tui, snap_compare) -> None:
    """The failing hallucination-check selected: grounding evidence at step 6."""
    evaluate(seeded_store, UNGROUNDED)
    assert _snapshot(snap_compare, tui(seeded_store), EvalsScreen(UNGROUNDED))


def test_snapshot_evals_of_the_dangerous_trace(seeded_store, tui, snap_compare) -> None:
    """safety-check selected: the delete_user and drop_table calls as evidence."""
    evaluate(seeded_store, DANGEROUS)
    assert _snapshot(snap_compare, tui(seeded_store), EvalsScreen(DANGEROUS), "down")


def test_snapshot_evals_mode_every_trace(seeded_store, tui, snap_compare) -> None:
    """The evals mode with three traces evaluated."""
    evaluate(seeded_store, UNGROUNDED, DANGEROUS, GOOD)
    assert _snapshot(snap_compare, tui(seeded_store), None, "E")


def test_snapshot_evals_empty_trace(seeded_store, tui, snap_compare) -> None:
    """A trace with no evaluations: how to get some."""
    assert _snapshot(snap_compare, tui(seeded_store), EvalsScreen(GOOD))


def test_snapshot_evals_ai_root_cause(seeded_store, tui, snap_compare) -> None:
    """An AI root-cause analysis: model, cost, the cited evidence checked, the suggested fix."""
    evaluate_with_ai(seeded_store, UNGROUNDED)
    assert _snapshot(snap_compare, tui(seeded_store), EvalsScreen(UNGROUNDED))
