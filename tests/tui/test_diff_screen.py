"""The side-by-side diff screen: opened by marking two traces in the list, by `d` on a fork
(in the list and in its timeline); the aligned lines, the summary, the detail of a pair,
`n`/`N`/`g` navigation, swapping, a trace-input line, escaping, a big diff, and a snapshot."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable
from tuikit import CLOCK, SIZE, settle

from agent_replay.screens.diff import DiffScreen
from agent_replay.screens.timeline import TimelineScreen
from agent_replay.screens.trace_list import TraceListScreen
from agent_replay.services.fork import InputEdit, fork_trace
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store
from agent_replay.widgets.cursor_lines import STRIP_CACHE_SIZE
from agent_replay.widgets.diff_view import DiffView
from agent_replay.widgets.pair_detail import PairDetail

GOOD = "trc_demo4goodrun"
REGRESSED = "trc_demo5regressed"
DEMO_KINDS = [
    "matched",
    "matched",
    "changed",
    "changed",
    "changed",
    "inserted",
    "changed",
    "changed",
    "changed",
]
"""The demo pair's alignment: the regressed run inserts a failing run_sql before its retry."""


def _view(app: Any) -> DiffView:
    return app.screen.query_one("#diff-view", DiffView)


def _detail(app: Any) -> PairDetail:
    return app.screen.query_one("#pair-detail", PairDetail)


def _lines(view: DiffView) -> list[str]:
    """The view's lines as they are on screen (the column header first)."""
    return [view.render_line(y).text for y in range(view.scrollable_content_region.height)]


def _list_row(app: Any, trace_id: str) -> int:
    table = app.screen.query_one("#trace-table", DataTable)
    return [str(key.value) for key in table.rows].index(trace_id)


async def _highlight(pilot: Any, trace_id: str) -> None:
    table = pilot.app.screen.query_one("#trace-table", DataTable)
    table.move_cursor(row=_list_row(pilot.app, trace_id))
    await pilot.pause()


async def _open_diff(pilot: Any, a_id: str, b_id: str) -> None:
    await pilot.app.push_screen(DiffScreen(a_id, b_id))
    await settle(pilot)


def _fork(store: Store, trace_id: str, step: int, value: Any) -> str:
    store.db.connect(reuse_if_open=True)
    result = fork_trace(store, trace_id, step, InputEdit(value), clock=CLOCK)
    store.close()
    return result.trace_id


async def test_marking_two_traces_and_d_opens_their_diff(seeded_store, tui) -> None:
    """`m` on the good run, `m` on the regressed one, `d`: A is the first marked, B the second,
    aligned with one inserted step."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "m", "up", "m", "d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        assert (screen.a_id, screen.b_id) == (GOOD, REGRESSED)
        assert screen.diff is not None
        assert [pair.kind for pair in screen.diff.pairs] == DEMO_KINDS
        inserted = [row for row in _view(app).rows if row.kind == "inserted"]
        assert len(inserted) == 1 and inserted[0].a is None
        assert inserted[0].b is not None and inserted[0].b.number == 6
        assert inserted[0].b.name == "run_sql" and inserted[0].b.failed


async def test_marks_are_badges_and_a_third_drops_the_oldest(seeded_store, tui) -> None:
    """Marked rows carry an A or B badge; marking a third keeps the last two."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("m", "down", "m", "down", "m")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TraceListScreen)
        assert screen.marks == [GOOD, "trc_demo3dangerous"]
        table = screen.query_one("#trace-table", DataTable)
        cells = [str(table.get_row_at(i)[0]) for i in range(3)]
        assert cells == [REGRESSED, f" A  {GOOD}", " B  trc_demo3dangerous"]
        assert "d diffs them" in str(screen.query_one("#list-status").render())


async def test_m_on_a_marked_trace_unmarks_it(seeded_store, tui) -> None:
    """`m` toggles: pressed twice on a row, the row is unmarked."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("m", "m")
        await pilot.pause()
        assert app.screen.marks == []


async def test_escape_clears_the_marks(seeded_store, tui) -> None:
    """With no filter, escape clears the marks."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("m", "down", "m", "escape")
        await pilot.pause()
        assert app.screen.marks == []
        table = app.screen.query_one("#trace-table", DataTable)
        assert str(table.get_row_at(0)[0]) == REGRESSED


async def test_one_mark_and_d_diffs_it_against_the_highlighted_trace(seeded_store, tui) -> None:
    """With one mark, `d` compares the marked trace (A) with the highlighted one (B)."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "m", "up", "d")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        assert (app.screen.a_id, app.screen.b_id) == (GOOD, REGRESSED)


async def test_d_without_marks_on_a_plain_trace_explains(seeded_store, tui) -> None:
    """`d` with nothing marked on a trace that is not a fork says how to compare."""
    app = tui(seeded_store, initial_mode="traces")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, TraceListScreen)
        assert any("Mark two traces" in n.message for n in app._notifications)


async def test_d_on_a_highlighted_fork_diffs_it_against_its_parent(seeded_store, tui) -> None:
    """A fork highlighted with nothing marked: `d` compares its parent (A) with it (B)."""
    fork_id = _fork(seeded_store, GOOD, 6, {"timeout_s": 120})
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _highlight(pilot, fork_id)
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        assert (screen.a_id, screen.b_id) == (GOOD, fork_id)
        assert screen.diff is not None and screen.diff.fork_parent == "a"


async def test_d_in_a_fork_timeline_diffs_against_the_parent(seeded_store, tui) -> None:
    """In a fork's timeline, `d` opens the diff against its parent: exactly the modification."""
    fork_id = _fork(seeded_store, GOOD, 6, {"timeout_s": 120})
    app = tui(seeded_store, initial_trace=fork_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        assert (screen.a_id, screen.b_id) == (GOOD, fork_id)
        assert screen.diff is not None
        assert screen.diff.counts == {"matched": 5, "changed": 1, "inserted": 0, "deleted": 0}
        changed = screen.diff.pairs[5]
        # the edit, and step 6's recorded output not copied (not re-run)
        assert [d.path for d in changed.differences] == ["input.timeout_s", "output"]
        assert _view(app).cursor == 5  # it opens on the first divergence
        assert "input.timeout_s  changed\n A  30\n B  120" in _detail(app).text


async def test_d_in_a_timeline_that_is_not_a_fork_is_hidden(seeded_store, tui) -> None:
    """A trace that is not a fork has no parent to diff against: `d` does nothing there."""
    app = tui(seeded_store, initial_trace=GOOD)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.check_action("diff_parent", ()) is False


async def test_the_summary_names_counts_totals_and_the_first_divergence(seeded_store, tui) -> None:
    """The summary: both traces, the counts, the totals' deltas, the first divergence."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_diff(pilot, GOOD, REGRESSED)
        summary = str(app.screen.query_one("#diff-summary").render())
        for part in (
            "A  trc_demo4goodrun  analytics-sql-agent 1.4.0  completed  8 steps",
            "B  trc_demo5regressed  analytics-sql-agent 1.5.0  completed  9 steps",
            "= 2 matched  ~ 6 changed  + 1 inserted  - 0 deleted",
            "trace output differs",
            "tokens 1,346 → 2,362 (+1,016)",
            "First divergence  A#3 / B#3  ◆ decision date_filter  changed decision.chosen",
        ):
            assert part in summary


async def test_it_opens_on_the_first_divergence_with_its_differences(seeded_store, tui) -> None:
    """The cursor starts on the first divergence; the detail shows each differing field."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_diff(pilot, GOOD, REGRESSED)
        assert _view(app).cursor == 2
        text = _detail(app).text
        assert "~ changed   A#3 ◆ decision date_filter  ↔  B#3 ◆ decision date_filter" in text
        assert "decision.chosen  changed\n A  filter_last_quarter\n B  scan_all_orders" in text


async def test_n_moves_to_the_next_difference_and_N_back(seeded_store, tui) -> None:
    """`n` goes to the next line that differs (skipping matched ones), `N` back, `g` to the
    first divergence."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await _open_diff(pilot, GOOD, REGRESSED)
        view = _view(app)
        await pilot.press("n")
        await pilot.pause()
        assert view.cursor == 3
        await pilot.press("n", "n")
        await pilot.pause()
        assert view.cursor == 5 and view.rows[5].kind == "inserted"
        assert "inserted (only in B)" in _detail(app).text
        assert "error   QueryCanceled" in _detail(app).text
        await pilot.press("N")
        await pilot.pause()
        assert view.cursor == 4
        await pilot.press("g")
        await pilot.pause()
        assert view.cursor == 2
        await pilot.press("N")
        await pilot.pause()
        assert view.cursor == 2
        assert any("No more differences above" in n.message for n in app._notifications)


async def test_home_then_n_skips_the_matched_steps(seeded_store, tui) -> None:
    """From the first line (matched), `n` lands on the first difference."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_diff(pilot, GOOD, REGRESSED)
        await pilot.press("home", "n")
        await pilot.pause()
        assert _view(app).cursor == 2


async def test_lines_show_both_sides_and_a_blank_side_for_an_insertion(seeded_store, tui) -> None:
    """A paired line shows A's and B's step; the inserted step's line leaves A blank."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_diff(pilot, GOOD, REGRESSED)
        lines = _lines(_view(app))
        assert lines[0].startswith(" A  trc_demo4goodrun")
        assert " B  trc_demo5regressed" in lines[0] and "ΔTOKENS" in lines[0]
        assert lines[1].count("thought") == 2 and " = " in lines[1]
        inserted = lines[6]
        left, _, right = inserted.partition(" + ")
        assert set(left) == {"╌"}
        assert "run_sql" in right and "+30.0s" in right
        assert "+582" in lines[4] and "+766ms" in lines[4]  # write_sql: tokens and time
        assert "trace" in lines[10] and "output" in lines[10]  # the outcome line


async def test_s_swaps_the_sides(seeded_store, tui) -> None:
    """`s` compares the other way round: the insertion becomes a deletion."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_diff(pilot, GOOD, REGRESSED)
        await pilot.press("s")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        assert (screen.a_id, screen.b_id) == (REGRESSED, GOOD)
        assert screen.diff is not None and screen.diff.counts["deleted"] == 1
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, TraceListScreen)  # swapping replaced the screen


async def test_a_different_trace_input_is_the_first_line(seeded_store, tui) -> None:
    """A fork whose trace input changed (``--modify-input``): a `trace input` line comes first
    and is the first divergence."""
    store = seeded_store
    store.db.connect(reuse_if_open=True)
    edit = InputEdit({"database": "staging"})
    fork_id = fork_trace(store, GOOD, 1, trace_edit=edit, clock=CLOCK).trace_id
    store.close()
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_diff(pilot, GOOD, fork_id)
        view = _view(app)
        assert view.rows[0].trace_part == "input"
        assert view.cursor == 0
        text = _detail(app).text
        assert "The trace input differs" in text
        assert "input.database  changed\n A  warehouse\n B  staging" in text
        assert "First divergence  the trace input  input.database" in str(
            app.screen.query_one("#diff-summary").render()
        )


async def test_an_unknown_trace_is_reported_and_the_screen_goes_back(seeded_store, tui) -> None:
    """An id that matches nothing: an error notification, back to the list."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await _open_diff(pilot, GOOD, "trc_nope")
        assert isinstance(app.screen, TraceListScreen)
        assert any("no trace matches 'trc_nope'" in n.message for n in app._notifications)


async def test_producer_text_is_shown_literally(empty_store, tui) -> None:
    """Markup and escape sequences in step names and values are shown, never interpreted."""
    evil = "[b]x[/]\x1b[31m"
    for trace_id, output in (("trc_a", "[i]one"), ("trc_b", "[i]two\x1b[0m")):
        ingest_trace(
            empty_store,
            {
                "id": trace_id,
                "agent_name": "[red]agent[/]",
                "status": "completed",
                "steps": [
                    {"step_number": 1, "step_type": "tool_call", "name": evil, "output": output}
                ],
            },
        )
    app = tui(empty_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_diff(pilot, "trc_a", "trc_b")
        line = _lines(_view(app))[1]
        assert line.count("[b]x[/]\\x1b[31m") == 2 and "\x1b" not in line
        text = _detail(app).text
        assert " B  [i]two\\x1b[0m" in text and "\x1b" not in text
        assert "[red]agent[/]" in str(app.screen.query_one("#diff-summary").render())


async def test_a_big_diff_renders_only_what_is_visible(empty_store, tui) -> None:
    """Two 5,000-step traces: the view opens, `end` reaches the last line, and only visible
    lines are rendered."""
    for trace_id, changed in (("trc_big_a", None), ("trc_big_b", 2_500)):
        steps = [
            {
                "step_number": n,
                "step_type": ("thought", "tool_call", "llm_call")[n % 3],
                "name": f"step-{n}",
                "input": {"n": n, "v": 2 if n == changed else 1},
                "duration_ms": float(n % 100),
            }
            for n in range(1, 5_001)
        ]
        ingest_trace(
            empty_store,
            {"id": trace_id, "agent_name": "big", "status": "completed", "steps": steps},
        )
    app = tui(empty_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_diff(pilot, "trc_big_a", "trc_big_b")
        view = _view(app)
        assert len(view.rows) == 5_000
        assert view.cursor == 2_499  # the one changed step
        await pilot.press("end")
        await pilot.pause()
        assert "step-5000" in _lines(view)[-1]
        assert len(view.strip_cache) <= STRIP_CACHE_SIZE
        page = view.scrollable_content_region.height
        rendered = {index for index, _width, _cursor in view.strip_cache.keys()}
        # the lines of three screens at most: the first frame, the divergence, the end
        assert all(i < page or abs(i - 2_499) < page or i >= 5_000 - page for i in rendered)


async def test_enter_on_a_diff_row_opens_that_step_in_its_timeline(seeded_store, tui) -> None:
    """Enter on a changed row: B's step in B's timeline; a opens A's."""
    from agent_replay.screens.timeline import TimelineScreen

    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await app.push_screen(DiffScreen(GOOD, "trc_demo5regressed"))
        await settle(pilot)
        row = _view(app).current
        assert row is not None and row.b is not None
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TimelineScreen) and screen.trace_id == "trc_demo5regressed"
        assert screen.timeline.selected_step == row.b.number
        await pilot.press("escape", "a")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen) and app.screen.trace_id == GOOD
        assert row.a is not None and app.screen.timeline.selected_step == row.a.number


async def test_annotation_labels_show_in_the_diff(seeded_store, tui) -> None:
    """A run label shows in the summary and a step label beside the step: people's
    judgement is shown, never counted as a difference."""
    from agent_replay.services.recorder import TraceRecorder

    recorder = TraceRecorder(seeded_store, clock=CLOCK)
    with seeded_store.db.connection_context():
        recorder.annotate(GOOD, label="golden")
        recorder.annotate(REGRESSED, label="wrong-date", step_number=3)
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await app.push_screen(DiffScreen(GOOD, REGRESSED))
        await settle(pilot)
        summary = str(app.screen.query_one("#diff-summary").render())
        assert "#golden" in summary.splitlines()[0]
        view = _view(app)
        (row,) = [r for r in view.rows if r.b is not None and r.b.number == 3]
        assert row.b is not None and row.b.labels == ("wrong-date",)
        index = list(view.rows).index(row)
        assert "#wrong-date" in view.render_row(index, 120, False).text
