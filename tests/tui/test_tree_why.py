"""The tree and why view: the step hierarchy, the why-chain of the selected step, decisions."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static
from tuikit import SIZE, settle

from agent_replay.screens.tree_why import TreeWhyScreen
from agent_replay.services.analysis import why_chain
from agent_replay.services.ingest import ingest_many
from agent_replay.store.trace_detail import step_dicts
from agent_replay.widgets.why_tree import WhyTree

TOOLCHAIN = "trc_demo2toolchain"


async def _open(app: Any, pilot: Any, trace_id: str = TOOLCHAIN, **options: Any) -> Any:
    await settle(pilot)
    app.push_screen(TreeWhyScreen(trace_id, **options))
    await settle(pilot)
    return app.screen


def _text(screen: Any, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def _chain(store: Any, step: int) -> list[int]:
    with store.db.connection_context():
        steps = step_dicts(store, TOOLCHAIN)
    return [hop.step["step_number"] for hop in why_chain(steps, step)]


async def test_tree_nests_steps_by_parent_step(seeded_store, tui) -> None:
    """Steps hang under their parent_step: 3 under 2 under 1, 7 under 6 under 1."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        tree = screen.query_one(WhyTree)

        def parent(n: int) -> int | None:
            node = tree.node_for(n)
            assert node is not None and node.parent is not None
            data = node.parent.data
            return None if data is None else data["step_number"]

        assert [parent(n) for n in range(1, 9)] == [None, 1, 2, None, None, 1, 6, None]
        assert all(tree.node_for(n).is_expanded for n in (1, 2, 6))


async def test_causal_links_are_shown_on_nodes(seeded_store, tui) -> None:
    """A step's caused_by_step shows on its node as ``← #N``."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        label = str(screen.query_one(WhyTree).node_for(6).label)
        assert "#6 llm_call select_tool" in label
        assert "← #5" in label


async def test_selecting_a_step_marks_exactly_its_why_chain(seeded_store, tui) -> None:
    """Moving the cursor to step 6 marks the steps of why_chain(6), and no others."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        tree = screen.query_one(WhyTree)
        tree.show_step(6)
        await settle(pilot)
        expected = _chain(seeded_store, 6)
        assert expected == [6, 5, 3, 2, 1]
        assert screen.step == 6
        assert tree.chain == tuple(expected)
        marked = {n for n in range(1, 9) if str(tree.node_for(n).label)[0] in "●▸"}
        assert marked == set(expected)


async def test_cursor_keys_move_the_selection(seeded_store, tui) -> None:
    """Down from step 1 selects step 2, whose chain is 2 → 1."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        assert screen.step == 1
        await pilot.press("down")
        await settle(pilot)
        assert screen.step == 2
        assert screen.query_one(WhyTree).chain == (2, 1)


async def test_why_panel_explains_each_hop(seeded_store, tui) -> None:
    """The why panel names each hop's reason, and the decision's choice and rationale."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, step=6)
        why = _text(screen, "#why-text")
        assert why.startswith("Why #6 llm_call select_tool?")
        assert "caused by #5 decision retry_strategy" in why
        assert "chose retry_with_converted_date" in why
        assert "because Converting the date myself is the fastest fix." in why
        assert "caused by #3 tool_call search_flights" in why
        assert "inside #1 thought plan" in why


async def test_why_panel_shows_a_prior_decision_hop(seeded_store, tui) -> None:
    """A step with no link of its own is explained by the nearest earlier decision."""
    trace = {
        "id": "trc_priordecision",
        "agent_name": "bot",
        "started_at": "2026-05-01T00:00:00Z",
        "steps": [
            {
                "step_number": 1,
                "step_type": "decision",
                "name": "route",
                "decision": {
                    "options": [{"option": "search", "rationale": "need facts", "score": 0.9}],
                    "chosen": "search",
                    "rationale": "the question needs facts",
                },
            },
            {"step_number": 2, "step_type": "thought", "name": "next"},
        ],
    }
    ingest_many(seeded_store, [("t", trace)])
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, "trc_priordecision", step=2)
        why = _text(screen, "#why-text")
        assert "after decision #1 decision route" in why
        assert "chose search" in why
        assert "because the question needs facts" in why


async def test_decisions_panel_lists_every_decision(seeded_store, tui) -> None:
    """The decisions panel shows options with rationale and score, the choice, the
    rationale, the confidence and who decided."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        text = _text(screen, "#decisions-text")
        assert "#5 retry_strategy  (by agent, confidence 0.74)" in text
        assert "chose retry_with_converted_date" in text
        assert "because Converting the date myself is the fastest fix." in text
        assert "● retry_with_converted_date [0.74]\n      the error names the problem" in text
        assert "○ call_get_calendar [0.55]\n      let the calendar tool resolve" in text
        assert "○ ask_user [0.20]\n      confirm the exact date with the traveler" in text


async def test_w_and_d_focus_the_side_panels(seeded_store, tui) -> None:
    """``w`` focuses the why panel, ``d`` the decisions, ``s`` the tree again."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("w")
        assert app.focused is screen.query_one("#why-panel")
        await pilot.press("d")
        assert app.focused is screen.query_one("#decisions-panel")
        await pilot.press("s")
        assert app.focused is screen.query_one(WhyTree)


async def test_escape_goes_back(seeded_store, tui) -> None:
    """Escape pops the screen."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await _open(app, pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, TreeWhyScreen)


async def test_p_opens_the_replay_at_the_selected_step(seeded_store, tui) -> None:
    """``p`` opens the replay, paused with the selected step current."""
    from agent_replay.screens.replay import ReplayScreen

    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await _open(app, pilot, step=6)
        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, ReplayScreen)
        assert app.screen.position == 6
        assert not app.screen.playing


async def test_a_prefix_resolves_and_an_unknown_id_is_reported(seeded_store, tui) -> None:
    """A unique prefix opens the trace; an unknown id shows the error instead of a tree."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await _open(app, pilot, "demo2")
        assert screen.trace_id == TOOLCHAIN
        app.pop_screen()
        screen = await _open(app, pilot, "nope")
        assert "no trace matches 'nope'" in _text(screen, "#why-text")
        assert any("no trace matches" in n.message for n in app._notifications)


def test_snapshot_why_chain_of_step_6(seeded_store, tui, snap_compare) -> None:
    """Step 6 of the tool-chain trace selected: a four-hop chain through a decision."""

    async def run_before(pilot: Any) -> None:
        await _open(pilot.app, pilot, step=6)

    assert snap_compare(tui(seeded_store), terminal_size=SIZE, run_before=run_before)
