"""The step timeline screen: steps in order, the detail pane, folding, jumping, a 10,000-step
trace, escaping of producer text, an unknown id, and snapshots."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from textual import events
from textual.message import Message
from textual.widgets import Input, Static
from textual.worker import WorkerFailed
from tuikit import SIZE, settle

from agent_replay.screens.timeline import FIRST_STEPS, JumpToStepModal, TimelineScreen
from agent_replay.screens.trace_list import TraceListScreen
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store
from agent_replay.widgets.cursor_lines import STRIP_CACHE_SIZE
from agent_replay.widgets.step_detail import FOLD_LINES, StepDetail
from agent_replay.widgets.step_timeline import StepTimeline

TOOLCHAIN = "trc_demo2toolchain"
TOOLCHAIN_NAMES = [
    "plan",
    "select_tool",
    "search_flights",
    "recover",
    "retry_strategy",
    "select_tool",
    "search_flights",
    "max_tool_attempts",
]


def _timeline(app: Any) -> StepTimeline:
    return app.screen.query_one("#step-timeline", StepTimeline)


def _detail(app: Any) -> StepDetail:
    return app.screen.query_one("#step-detail", StepDetail)


def _visible_lines(timeline: StepTimeline) -> list[str]:
    """The timeline's lines as they are on screen (header first)."""
    return [timeline.render_line(y).text for y in range(timeline.scrollable_content_region.height)]


async def _settle_after_failure(pilot: Any) -> None:
    """``settle``, for a screen whose loader is expected to fail (waiting re-raises it)."""
    for _ in range(2):
        with contextlib.suppress(WorkerFailed):
            await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def _ingest_steps(store: Store, trace_id: str, steps: list[dict[str, Any]], **fields: Any) -> None:
    trace = {"id": trace_id, "agent_name": "test-agent", "status": "completed", "steps": steps}
    trace.update(fields)
    ingest_trace(store, trace)


async def test_steps_appear_in_order(seeded_store, tui) -> None:
    """The demo trace's eight steps are listed in step order, with their names."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline = _timeline(app)
        assert [row.number for row in timeline.rows] == list(range(1, 9))
        assert [row.name for row in timeline.rows] == TOOLCHAIN_NAMES
        lines = _visible_lines(timeline)
        assert "NAME" in lines[0]
        # names first (a summary follows; nested steps are indented)
        shown = [next(n for n in TOOLCHAIN_NAMES if n[:10] in line) for line in lines[1:9]]
        assert shown == TOOLCHAIN_NAMES
        assert timeline.selected_step == 1


async def test_a_forked_step_shows_not_re_run(seeded_store, tui) -> None:
    """A fork's step N carries no copied outcome: its row and detail say "not re-run"."""
    from agent_replay.services.fork import InputEdit, fork_trace

    fork = fork_trace(seeded_store, "trc_demo5regressed", 6, InputEdit({"timeout_s": 120}))
    app = tui(seeded_store, initial_trace=fork.trace_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline = _timeline(app)
        assert timeline.select_step(6)
        await pilot.pause()
        assert timeline.rows[5].not_rerun and not timeline.rows[4].not_rerun
        row = _visible_lines(timeline)[6]
        assert "not re-run" in row and "not run" in row
        title = _detail(app).query_one("#detail-title").render()
        assert "not re-run (recorded error, duration not copied)" in str(title)
        assert _detail(app).section_text("error") is None


async def test_z_folds_and_unfolds_nested_steps(seeded_store, tui) -> None:
    """Steps nest under their parent_step (indented); z folds them away and back."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline = _timeline(app)
        assert [row.depth for row in timeline.rows[:3]] == [0, 1, 2]
        await pilot.press("z")  # on step 1, the plan every other step nests under
        assert timeline.folded_steps == {1}
        hidden = [row.number for row in timeline.rows]
        assert 2 not in hidden and 3 not in hidden
        assert "▸ plan" in _visible_lines(timeline)[1]
        await pilot.press("z")
        assert [row.number for row in timeline.rows] == list(range(1, 9))


async def test_header_shows_agent_status_totals_and_error(seeded_store, tui) -> None:
    """The header line carries the agent, status, totals and the trace's error."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        header = str(app.screen.query_one("#timeline-header").render())
        for part in ("travel-booking-agent", "failed", "8 steps", "1,348 tokens", "$0.0121"):
            assert part in header
        assert "ToolError: search_flights rejected argument 'date' twice" in header


async def test_a_unique_prefix_opens_the_trace(seeded_store, tui) -> None:
    """A unique prefix resolves in the worker; the screen then knows the full id."""
    app = tui(seeded_store, initial_trace="trc_demo2")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.trace_id == TOOLCHAIN
        assert len(_timeline(app).rows) == 8


async def test_a_trace_without_steps_says_so(empty_store, tui) -> None:
    """A trace with no steps opens with an empty timeline and says it has none."""
    _ingest_steps(empty_store, "trc_nosteps", [])
    app = tui(empty_store, initial_trace="trc_nosteps")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)
        assert _timeline(app).selected_step is None
        await pilot.press("down", "end", "f")
        await pilot.pause()
        empty = app.screen.query_one("#detail-empty")
        assert empty.display and "This trace has no steps." in str(empty.render())


async def test_the_empty_state_line_is_mounted_only_when_there_is_no_step(empty_store, tui) -> None:
    """A timeline that opens on a step never mounts the detail's empty-state line; a trace
    without steps gets it (it appears once there is nothing to show)."""
    _ingest_steps(empty_store, "trc_some", [{"step_number": 1, "step_type": "thought"}])
    _ingest_steps(empty_store, "trc_none", [])
    app = tui(empty_store, initial_trace="trc_some")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert _timeline(app).selected_step == 1
        assert not app.screen.query("#detail-empty")
        app.open_trace("trc_none")
        await settle(pilot)
        empty = app.screen.query_one("#detail-empty")
        assert empty.display and "This trace has no steps." in str(empty.render())


async def test_down_selects_the_next_step_and_shows_it(seeded_store, tui) -> None:
    """Down moves the cursor, posts StepSelected, and the detail shows that step."""
    seen: list[Message] = []
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        await pilot.press("down")
        await pilot.pause()
        selected = [m.step_number for m in seen if isinstance(m, StepTimeline.StepSelected)]
        assert list(dict.fromkeys(selected)) == [1, 2]  # each seen again as it bubbles
        detail = _detail(app)
        assert detail.step is not None and detail.step["step_number"] == 2
        assert "Book me the cheapest nonstop flight" in (detail.section_text("input") or "")
        assert '"date": "next Friday"' in (detail.section_text("output") or "")
        assert detail.section_text("error") is None


async def test_error_step_shows_its_error(seeded_store, tui) -> None:
    """A failed tool call shows its error above its input."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "down")
        await pilot.pause()
        error = _detail(app).section_text("error") or ""
        assert "ValidationError: date must be an ISO date" in error
        assert "✗" in _visible_lines(_timeline(app))[3]


async def test_decision_step_shows_options_choice_and_rationale(seeded_store, tui) -> None:
    """The decision step lists its options with scores, marks the chosen one, and says why."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _timeline(app).select_step(5)
        await pilot.pause()
        decision = _detail(app).section_text("decision") or ""
        assert "✔ retry_with_converted_date  0.74 chosen" in decision
        assert "  call_get_calendar  0.55" in decision
        assert "let the calendar tool resolve 'next Friday'" in decision
        assert "rationale Converting the date myself is the fastest fix." in decision
        assert "confidence 0.74 · decided by agent" in decision


async def test_snapshot_is_shown_for_a_step_that_has_one(seeded_store, tui) -> None:
    """Step 1 carries a snapshot: context window, environment and tool state are shown."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        detail = _detail(app)
        context = detail.section_text("context") or ""
        assert "system\nYou book flights for Acme employees." in context
        assert "user\nBook me the cheapest nonstop flight" in context
        assert '"deployment": "travel-prod"' in (detail.section_text("environment") or "")
        assert '"max_tool_attempts": 2' in (detail.section_text("tool-state") or "")
        await pilot.press("down")
        await pilot.pause()
        assert detail.section_text("context") is None
        assert detail.section_text("tool-state") is None


async def test_f_unfolds_and_folds_long_payloads(empty_store, tui) -> None:
    """A 200-item payload shows its first lines and a note; `f` shows it all, `f` again folds."""
    _ingest_steps(
        empty_store,
        "trc_long",
        [{"step_number": 1, "step_type": "retrieval", "name": "big", "output": list(range(200))}],
    )
    app = tui(empty_store, initial_trace="trc_long")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        detail = _detail(app)
        folded = detail.section_text("output") or ""
        assert folded.splitlines()[-1] == "… 162 more lines (press f to expand)"
        assert len(folded.splitlines()) == FOLD_LINES + 1
        assert detail.has_folded
        await pilot.press("f")
        await pilot.pause()
        assert app.screen.folded is False
        full = detail.section_text("output") or ""
        assert len(full.splitlines()) == 202 and "more lines" not in full
        assert full.splitlines()[-2].strip() == "199"
        await pilot.press("f")
        await pilot.pause()
        assert detail.section_text("output") == folded


async def test_g_jumps_to_a_step_number(seeded_store, tui) -> None:
    """`g` asks for a step number and moves the cursor there."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, JumpToStepModal)
        await pilot.press("7", "enter")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen)
        assert _timeline(app).selected_step == 7
        assert _detail(app).step["step_number"] == 7  # type: ignore[index]


async def test_g_to_a_missing_step_warns_and_stays(seeded_store, tui) -> None:
    """Jumping to a step the trace doesn't have says so and leaves the cursor alone."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("down", "g", "9", "9", "enter")
        await pilot.pause()
        assert _timeline(app).selected_step == 2
        assert any("no step 99" in n.message for n in app._notifications)


async def test_escape_in_the_jump_prompt_cancels(seeded_store, tui) -> None:
    """Escape closes the jump prompt without moving (and without leaving the timeline)."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("g", "5", "escape")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen)
        assert _timeline(app).selected_step == 1
        assert not app.screen.query(Input)


async def test_click_selects_a_step(seeded_store, tui) -> None:
    """Clicking a line selects that step (line 0 is the column header)."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.click("#step-timeline", offset=(12, 4))
        await pilot.pause()
        assert _timeline(app).selected_step == 4
        assert _detail(app).step["name"] == "recover"  # type: ignore[index]


async def test_escape_goes_back_to_the_trace_list(seeded_store, tui) -> None:
    """Escape pops the timeline."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, TraceListScreen)


async def test_unknown_trace_id_notifies_and_goes_back(seeded_store, tui) -> None:
    """An id that resolves to nothing is reported, and the screen gives way."""
    app = tui(seeded_store, initial_trace="trc_nope")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _settle_after_failure(pilot)
        assert isinstance(app.screen, TraceListScreen)
        assert any("no trace matches 'trc_nope'" in n.message for n in app._notifications)


async def test_ambiguous_prefix_notifies_and_goes_back(seeded_store, tui) -> None:
    """A prefix matching several traces is reported, and the screen gives way."""
    app = tui(seeded_store, initial_trace="trc_demo")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _settle_after_failure(pilot)
        assert isinstance(app.screen, TraceListScreen)
        assert any("is ambiguous" in n.message for n in app._notifications)


@pytest.mark.parametrize(
    ("key", "module", "screen_name"),
    [
        ("t", "agent_replay.screens.tree_why", "TreeWhyScreen"),
        ("p", "agent_replay.screens.replay", "ReplayScreen"),
    ],
)
async def test_t_and_p_open_their_views(
    seeded_store, tui, key: str, module: str, screen_name: str
) -> None:
    """`t` opens the tree/why view and `p` the replay."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await pilot.pause()
        assert type(app.screen).__name__ == screen_name
        assert type(app.screen).__module__ == module


async def test_t_p_f_and_e_open_on_the_selected_step(seeded_store, tui) -> None:
    """Tree/why, replay, the fork editor and evals open on the step under the cursor."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _timeline(app).select_step(7)
        await pilot.pause()
        await pilot.press("t")
        await settle(pilot)
        assert type(app.screen).__name__ == "TreeWhyScreen" and app.screen.step == 7
        assert "Why #7" in str(app.screen.query_one("#why-text").render())
        await pilot.press("escape", "p")
        await settle(pilot)
        assert type(app.screen).__name__ == "ReplayScreen" and app.screen.position == 7
        await pilot.press("escape", "F")
        await settle(pilot)
        assert type(app.screen).__name__ == "ForkEditorScreen" and app.screen.step == 7
        await pilot.press("escape")
        await settle(pilot)
        app.screen.query_one("#step-timeline", StepTimeline).select_step(3)
        await pilot.press("e")
        await settle(pilot)
        assert type(app.screen).__name__ == "EvalsScreen" and app.screen.step == 3


async def test_enter_on_a_why_hop_opens_its_step_in_the_timeline(seeded_store, tui) -> None:
    """In the why panel, ↓ picks a hop and Enter shows that step in the timeline."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _timeline(app).select_step(7)
        await pilot.press("t")
        await settle(pilot)
        await pilot.press("w", "down", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TimelineScreen)
        chain = app.screen_stack[-2]._chain
        assert screen.timeline.selected_step == chain[1].step["step_number"] != 7


async def test_a_annotates_the_selected_step_and_the_row_shows_it(seeded_store, tui) -> None:
    """a, a label, a note: written through the recorder, the row carries #label."""
    from agent_replay.store.trace_detail import annotation_dicts

    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _timeline(app).select_step(3)
        await pilot.press("a", *"wrong-tool", "enter", *"search first", "enter")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)
        timeline = _timeline(app)
        assert timeline.selected_step == 3 and timeline.rows[2].labels == ("wrong-tool",)
        assert "#wrong-tool" in _visible_lines(timeline)[3]
    with seeded_store.db.connection_context():
        (annotation,) = annotation_dicts(seeded_store, TOOLCHAIN)
    assert (annotation["step_number"], annotation["note"]) == (3, "search first")


async def test_the_timeline_of_a_running_trace_grows_on_its_own(empty_store, tui) -> None:
    """A step recorded while the timeline is open appears (the store watcher), the cursor
    staying on the step it was on."""
    from tuikit import CLOCK

    from agent_replay.services.recorder import TraceRecorder

    recorder = TraceRecorder(empty_store, clock=CLOCK)
    with empty_store.db.connection_context():
        trace_id = recorder.start_trace("live-agent", trace_id="trc_liveone")
        recorder.step(trace_id, {"step_number": 1, "step_type": "thought", "name": "plan"})
        recorder.step(trace_id, {"step_number": 2, "step_type": "thought", "name": "think"})
    app = tui(empty_store, initial_trace=trace_id, refresh_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.check_store()  # the baseline
        await settle(pilot)
        assert _timeline(app).select_step(1)
        with empty_store.db.connection_context():
            recorder.step(trace_id, {"step_number": 3, "step_type": "tool_call", "name": "ls"})
        app.check_store()
        await settle(pilot)
        timeline = _timeline(app)
        assert [row.number for row in timeline.rows] == [1, 2, 3]
        assert timeline.selected_step == 1


async def test_a_step_recorded_right_after_the_open_appears(empty_store, tui) -> None:
    """Opened straight on a running trace: a step committed between the open's read and the
    poll's first check is shown (the watcher's baseline is taken before that read)."""
    from tuikit import CLOCK

    from agent_replay.services.recorder import TraceRecorder

    recorder = TraceRecorder(empty_store, clock=CLOCK)
    with empty_store.db.connection_context():
        trace_id = recorder.start_trace("live-agent", trace_id="trc_livefirst")
        recorder.step(trace_id, {"step_number": 1, "step_type": "thought", "name": "plan"})
    app = tui(empty_store, initial_trace=trace_id, refresh_interval=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert [row.number for row in _timeline(app).rows] == [1]
        with empty_store.db.connection_context():
            recorder.step(trace_id, {"step_number": 2, "step_type": "thought", "name": "next"})
        for _ in range(60):  # the poll runs every second
            await pilot.pause(0.1)
            if len(_timeline(app).rows) == 2:
                break
        assert [row.number for row in _timeline(app).rows] == [1, 2]


async def test_steps_that_arrive_below_the_view_are_counted_until_seen(empty_store, tui) -> None:
    """A running trace grows past the bottom of the view: the header says "N new ↓" and the
    cursor stays put; scrolling to the end shows them and the count goes."""
    from tuikit import CLOCK

    from agent_replay.services.recorder import TraceRecorder

    recorder = TraceRecorder(empty_store, clock=CLOCK)
    with empty_store.db.connection_context():
        trace_id = recorder.start_trace("live-agent", trace_id="trc_livetwo")
        for number in range(1, 41):
            recorder.step(trace_id, {"step_number": number, "step_type": "thought"})
    app = tui(empty_store, initial_trace=trace_id, refresh_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.check_store()  # the baseline
        await settle(pilot)
        with empty_store.db.connection_context():
            for number in range(41, 44):
                recorder.step(trace_id, {"step_number": number, "step_type": "tool_call"})
        app.check_store()
        await settle(pilot)
        timeline = _timeline(app)
        assert len(timeline.rows) == 43 and timeline.selected_step == 1
        assert timeline.new_below == 3
        assert _visible_lines(timeline)[0].rstrip().endswith("3 new ↓")
        await pilot.press("end")
        await settle(pilot)
        assert timeline.new_below == 0
        assert "new ↓" not in _visible_lines(timeline)[0]


async def test_question_mark_explains_icons_and_keys(seeded_store, tui) -> None:
    """? opens the help modal: the screen's keys and every marker; Esc closes it."""
    from agent_replay.screens.modals import HelpModal

    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpModal)
        text = str(app.screen.query_one("#help-text").render())
        for marker in ("◉", "⑂", "⊘", "⋯", "not re-run"):
            assert marker in text
        assert "Tree/why" in text or "tree and why-chain" in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen)


async def test_ten_thousand_steps_open_and_render_only_what_is_visible(empty_store, tui) -> None:
    """A 10,000-step trace opens, `end` reaches step 10000, and only visible lines render."""
    steps = [
        {
            "step_number": n,
            "step_type": ("thought", "tool_call", "llm_call")[n % 3],
            "name": f"step-{n}",
            "input": {"n": n},
            "duration_ms": float(n % 100),
            "tokens_used": n % 50,
        }
        for n in range(1, 10_001)
    ]
    _ingest_steps(empty_store, "trc_huge", steps)
    app = tui(empty_store, initial_trace="trc_huge")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline = _timeline(app)
        assert len(timeline.rows) == 10_000
        await pilot.press("end")
        await pilot.pause()
        assert timeline.selected_step == 10_000
        assert _detail(app).step["step_number"] == 10_000  # type: ignore[index]
        assert "step-10000" in _visible_lines(timeline)[-1]
        page = timeline.scrollable_content_region.height
        rendered = {index for index, _width, _cursor in timeline.strip_cache.keys()}
        assert len(timeline.strip_cache) <= STRIP_CACHE_SIZE
        assert all(i < page or i >= 10_000 - page for i in rendered)
        await pilot.press("home", "pagedown")
        await pilot.pause()
        assert timeline.selected_step == page  # one page of rows below the header
        assert len(timeline.strip_cache) <= STRIP_CACHE_SIZE


async def test_a_long_trace_shows_its_first_steps_then_all_of_them(empty_store, tui) -> None:
    """A trace longer than FIRST_STEPS arrives in two messages: its first steps (the header
    already counting every step), then the whole trace, the cursor kept where it was."""
    steps = [{"step_number": n, "step_type": "thought", "name": f"step-{n}"} for n in range(1, 501)]
    _ingest_steps(empty_store, "trc_long", steps)
    seen: list[Message] = []
    app = tui(empty_store, initial_trace="trc_long")
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        loads = list({id(m): m for m in seen if isinstance(m, TimelineScreen.TraceLoaded)}.values())
        assert [(len(m.prepared), m.complete) for m in loads] == [
            (FIRST_STEPS, False),
            (500, True),
        ]
        assert loads[0].step_count == 500
        assert len(_timeline(app).rows) == 500
        assert "500 steps" in str(app.screen.query_one("#timeline-header").render())


async def test_a_trace_opens_with_its_steps_on_its_first_frame(seeded_store, tui) -> None:
    """open_trace pushes the timeline once its first steps are read: the screen has them,
    and the first step's title in the detail, before it first paints (no empty frame, no
    loading indicator); the step's sections follow on the next frame (one mounted before the
    first would not be laid out in time for it). A second open while the first is read is
    dropped (that Enter would have reached the new screen)."""
    first_frame: list[tuple[int, bool, str, str | None]] = []

    def on_message(message: Message) -> None:
        if not isinstance(message, events.ScreenResume) or not app.screen_stack:
            return
        screen = app.screen
        if isinstance(screen, TimelineScreen):
            title = str(screen.detail.query_one("#detail-title", Static).render())
            first_frame.append(
                (
                    len(screen.timeline.rows),
                    screen.timeline.loading,
                    title.split("\n")[0],
                    screen.detail.section_text("input"),
                )
            )

    app = tui(seeded_store)
    async with app.run_test(size=SIZE, message_hook=on_message) as pilot:
        await settle(pilot)
        app.open_trace(TOOLCHAIN)
        app.open_trace("trc_demo4goodrun")
        await settle(pilot)
        assert first_frame == [(len(TOOLCHAIN_NAMES), False, "Step 1  ∴ thought  plan", None)]
        assert _detail(app).section_text("input")  # on the frame after
        assert [type(s).__name__ for s in app.screen_stack] == ["TraceListScreen", "TimelineScreen"]
        assert app.screen.trace_id == TOOLCHAIN  # type: ignore[attr-defined]


async def test_a_slow_first_read_shows_the_panes_loading_then_the_steps(
    seeded_store, tui, monkeypatch
) -> None:
    """When the first steps take longer than SHOW_WAIT (another connection holds the store),
    the timeline is shown anyway with both panes loading; the steps replace the indicators
    once the store lets the read through."""
    import sqlite3

    from agent_replay.screens import timeline as timeline_module

    monkeypatch.setattr(timeline_module, "SHOW_WAIT", 0.05)
    assert seeded_store.path is not None
    # No change watcher: its connection, open from the first read on, would keep the holder
    # below from taking its exclusive lock (in WAL mode every open connection keeps one out)
    app = tui(seeded_store, refresh_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        holder = sqlite3.connect(seeded_store.path, isolation_level=None)
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")  # readers wait (busy_timeout) until it ends
        try:
            app.open_trace(TOOLCHAIN)
            for _ in range(100):
                await pilot.pause(0.02)
                if isinstance(app.screen, TimelineScreen):
                    break
            screen = app.screen
            assert isinstance(screen, TimelineScreen)
            for _ in range(20):
                await pilot.pause()
            assert screen.timeline.loading and screen.detail.loading
            # What is painted: an indicator in the place of each pane (a cover, not a child)
            assert len(_painted_loading(app)) == 2
            assert not screen.timeline.rows
        finally:
            holder.execute("COMMIT")
            holder.close()
        await settle(pilot)
        assert [row.name for row in _timeline(app).rows] == TOOLCHAIN_NAMES
        assert not _painted_loading(app)


def _painted_loading(app: Any) -> list[Any]:
    from textual.widgets import LoadingIndicator

    visible = app.screen._compositor.visible_widgets
    return [w for w in visible if isinstance(w, LoadingIndicator)]


async def test_the_first_resume_leaves_out_a_restyle_that_would_change_nothing(
    seeded_store, tui
) -> None:
    """A timeline pushed once the warm-up has loaded its CSS skips the restyle of the push's
    ScreenResume (its nodes were styled as they mounted): restyling them all afterwards
    changes no style."""
    resumes: list[bool] = []

    def on_message(message: Message) -> None:
        if isinstance(message, events.ScreenResume) and isinstance(app.screen, TimelineScreen):
            resumes.append(message.refresh_styles)

    app = tui(seeded_store)
    async with app.run_test(size=SIZE, message_hook=on_message) as pilot:
        await settle(pilot)
        app.open_trace(TOOLCHAIN)
        await settle(pilot)
        screen = app.screen
        nodes = [screen, *screen.walk_children(with_self=False)]
        before = [(node, node.rich_style, node.styles.css) for node in nodes]
        screen.update_node_styles(animate=False)
        await pilot.pause()
        assert [(n, n.rich_style, n.styles.css) for n, _, _ in before] == before
        assert resumes == [False]  # Textual's push asks for the restyle


async def test_a_first_timeline_loading_its_css_restyles_on_resume(seeded_store, tui) -> None:
    """Opened before the warm-up loaded the screen's CSS (a trace given on the command line),
    the push's resume restyles the screen, which was styled without it."""
    resumes: list[bool] = []

    def on_message(message: Message) -> None:
        if isinstance(message, events.ScreenResume) and isinstance(app.screen, TimelineScreen):
            resumes.append(message.refresh_styles)

    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE, message_hook=on_message) as pilot:
        await settle(pilot)
        assert resumes[:1] == [True]
        assert app.screen.styles.layout is not None
        assert app.screen.styles.layout.name == "horizontal"


async def test_a_timeline_pushed_as_it_is_loads_its_trace(seeded_store, tui) -> None:
    """A TimelineScreen pushed without open_trace reads its trace itself once mounted."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.push_screen(TimelineScreen(TOOLCHAIN))
        await settle(pilot)
        assert [row.name for row in _timeline(app).rows] == TOOLCHAIN_NAMES
        assert not app.screen.query("LoadingIndicator")


async def test_producer_text_is_shown_literally(empty_store, tui) -> None:
    """Markup and escape sequences in producer text are shown as typed, never interpreted."""
    name = "[b]x[/]\x1b[31m"
    _ingest_steps(
        empty_store,
        "trc_evil",
        [{"step_number": 1, "step_type": "tool_call", "name": name, "output": "[i]out\x1b[0m"}],
        agent_name="[red]agent[/]",
    )
    app = tui(empty_store, initial_trace="trc_evil")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        line = _visible_lines(_timeline(app))[1]
        assert "[b]x[/]\\x1b[31m" in line
        assert "\x1b" not in line
        detail = _detail(app)
        title = str(detail.query_one("#detail-title").render())
        assert "[b]x[/]\\x1b[31m" in title
        assert detail.section_text("output") == "[i]out\\x1b[0m"
        header = str(app.screen.query_one("#timeline-header").render())
        assert "[red]agent[/]" in header


def _snapshot(snap_compare: Any, app: Any, *keys: str) -> bool:
    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        if keys:
            await pilot.press(*keys)
        await settle(pilot)

    return bool(snap_compare(app, terminal_size=SIZE, run_before=run_before))


def test_snapshot_timeline_error_step(seeded_store, tui, snap_compare) -> None:
    """The failing tool chain with its failed tool call selected."""
    assert _snapshot(snap_compare, tui(seeded_store, initial_trace=TOOLCHAIN), "down", "down")


def test_snapshot_timeline_decision_step(seeded_store, tui, snap_compare) -> None:
    """The failing tool chain with its retry decision selected."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    assert _snapshot(snap_compare, app, "down", "down", "down", "down")


def test_multi_line_strings_read_as_highlighted_text() -> None:
    """An input's multi-line SQL is shown as lines under its key (no literal \\n), its
    language told by the key or by how the text starts."""
    from agent_replay.widgets.step_detail import guess_language, payload_content

    content, folded = payload_content({"sql": "SELECT 1\nFROM t", "timeout_s": 30}, True)
    text = content.plain
    assert "SELECT 1\nFROM t" in text and "\\n" not in text and '"timeout_s": 30' in text
    assert not folded and content.spans  # highlighted
    assert guess_language("diff --git a/x b/x\n@@ -1 +1 @@") == "diff"
    assert guess_language("import os\nprint(1)") == "python"
    assert guess_language("ls -la\nrm x", key="command") == "bash"
    assert guess_language("Hello there") is None


def test_the_footer_fits_whole_keys_into_any_width() -> None:
    """Full descriptions when they fit, then the app's keys bare, then short forms, then whole
    keys dropped with "? more": never a word cut in half."""
    from agent_replay.widgets.key_bar import KeyItem, fit_keys

    items = [
        KeyItem("esc", "Back", False),
        KeyItem("g", "Go to step", False),
        KeyItem("t", "Tree/why", False),
        KeyItem("q", "Quit", True),
        KeyItem("D", "Dashboard", True),
    ]
    assert fit_keys(items, 200).plain == " esc Back  g Go to step  t Tree/why  q Quit  D Dashboard"
    assert fit_keys(items, 42).plain == " esc Back  g Go to step  t Tree/why  q D"
    assert fit_keys(items, 34).plain == " esc Back  g Go  t Tree/why  q D"
    narrow = fit_keys(items, 26).plain
    assert narrow.endswith("? more") and "Dashb" not in narrow and len(narrow) <= 26


async def test_the_palette_names_each_commands_key(seeded_store, tui) -> None:
    """The command palette lists the screen's commands with their keys."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert "Tree/why  [t]" in titles and "Traces  [T]" in titles and "Copy input  [y]" in titles


async def test_component_styles_are_styled_when_drawn_and_follow_focus_and_theme(
    seeded_store, tui
) -> None:
    """The timeline's component classes are styled when it is next drawn, not at each
    restyle (CursorLines): a restyle leaves them stale, the cursor's style still follows the
    focus and the bar track's the theme."""
    app = tui(seeded_store, initial_trace=TOOLCHAIN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline = _timeline(app)
        focused = timeline.component_style("cursor")
        track = timeline.component_style("bar-track", partial=False)
        timeline.update_node_styles(animate=False)
        assert timeline._components_stale  # not styled by the restyle itself
        _detail(app).focus()
        await settle(pilot)
        assert not timeline._components_stale  # styled for the repaint the blur asked for
        blurred = timeline.component_style("cursor")
        assert blurred != focused and focused.bold and not blurred.bold
        app.theme = "textual-light"
        await settle(pilot)
        assert timeline.component_style("bar-track", partial=False) != track
