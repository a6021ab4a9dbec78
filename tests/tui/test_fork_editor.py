"""The fork editor: opened from the timeline at the selected step, pre-filled with that step's
input, live validation (errors with line and column, Save disabled), the preview under merge and
replace, drafts per step, and saving: a fork in the store, ``ForkSaved``, and the diff against
the parent showing exactly the edit. Snapshots with a valid edit and with an error."""

from __future__ import annotations

from typing import Any

from textual.message import Message
from textual.widgets import Button, OptionList, TextArea
from tuikit import SIZE, settle

from agent_replay.screens.diff import DiffScreen
from agent_replay.screens.fork_editor import ForkEditorScreen, describe_json_error, editable_json
from agent_replay.screens.timeline import TimelineScreen
from agent_replay.store.db import Store
from agent_replay.store.trace_detail import trace_json
from agent_replay.trace.io import loads

GOOD = "trc_demo4goodrun"
RUN_SQL = 6
"""The good run's ``run_sql`` tool call: input ``{"sql": ..., "timeout_s": 30}``."""


def _editor(app: Any) -> TextArea:
    return app.screen.query_one("#fork-input", TextArea)


def _text(app: Any, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


def _traces(store: Store) -> list[dict[str, Any]]:
    store.db.connect(reuse_if_open=True)
    try:
        rows = store.db.execute_sql("SELECT id FROM traces").fetchall()
        return [trace_json(store, row[0]) for row in rows]
    finally:
        store.close()


async def _open_editor(pilot: Any, step: int | None = RUN_SQL) -> ForkEditorScreen:
    await pilot.app.push_screen(ForkEditorScreen(GOOD, step=step))
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, ForkEditorScreen)
    return screen


async def _replace_text(pilot: Any, text: str) -> None:
    """Select everything in the editor and type ``text`` over it, key by key."""
    editor = _editor(pilot.app)
    editor.focus()
    editor.select_all()
    await pilot.press(*["enter" if c == "\n" else c for c in text])
    await pilot.pause()


async def test_F_in_the_timeline_opens_the_editor_at_the_selected_step(seeded_store, tui) -> None:
    """`F` on step 6 of the timeline: the editor forks at step 6, holding its input."""
    app = tui(seeded_store, initial_trace=GOOD)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(*["down"] * 5, "F")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ForkEditorScreen)
        assert screen.step == RUN_SQL
        value = loads(_editor(app).text)
        assert value["timeout_s"] == 30 and value["sql"].startswith("SELECT r.name")
        assert screen.steps_list.highlighted == RUN_SQL - 1
        assert screen.valid and not screen.query_one("#fork-save", Button).disabled
        assert _editor(app).has_focus


async def test_step_1_holds_its_own_input(seeded_store, tui) -> None:
    """The editor edits the step's input (``fork --modify-step-input``), step 1 included."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_editor(pilot, step=None)
        assert app.screen.step == 1
        assert loads(_editor(app).text) == app.screen._trace["steps"][0]["input"]
        assert "Step 1's input" in str(_editor(app).border_title)


async def test_picking_another_step_loads_its_input_and_keeps_drafts(seeded_store, tui) -> None:
    """Highlighting another step shows its input; coming back shows the edit made there."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await _open_editor(pilot)
        await _replace_text(pilot, '{"timeout_s": 90}')
        steps = screen.query_one("#fork-steps", OptionList)
        steps.focus()
        await pilot.press("up")
        await pilot.pause()
        assert screen.step == 5
        assert loads(_editor(app).text)["sql"].startswith("SELECT r.name")
        await pilot.press("down")
        await pilot.pause()
        assert screen.step == RUN_SQL
        assert _editor(app).text == '{"timeout_s": 90}'


async def test_invalid_json_shows_where_and_disables_save(seeded_store, tui) -> None:
    """Broken JSON: the error names its line and column, Save is disabled and ctrl+s does
    nothing."""
    seen: list[Message] = []
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        screen = await _open_editor(pilot)
        await _replace_text(pilot, '{"timeout_s": 120,\n}')
        assert not screen.valid
        assert screen.error_position == (1, 18)  # the comma
        assert "✗ Line 1, column 18: trailing comma is not allowed" in _text(
            app, "#fork-validation"
        )
        assert screen.query_one("#fork-save", Button).disabled
        assert screen.check_action("save", ()) is None  # shown, but disabled
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ForkEditorScreen)
        assert not any(isinstance(m, ForkEditorScreen.ForkSaved) for m in seen)
        assert len(_traces(seeded_store)) == 5


async def test_fixing_the_json_enables_save_again(seeded_store, tui) -> None:
    """Deleting the stray comma makes the JSON valid: the error goes, Save comes back."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await _open_editor(pilot)
        await _replace_text(pilot, '{"timeout_s": 120,')
        assert not screen.valid
        await pilot.press("backspace", "}")
        await pilot.pause()
        assert screen.valid and screen.error_position is None
        assert "✓ Valid JSON" in _text(app, "#fork-validation")
        assert not screen.query_one("#fork-save", Button).disabled


async def test_merge_preview_keeps_the_other_keys(seeded_store, tui) -> None:
    """Under merge, a patch changes only the keys it names: the preview and the change list
    say so."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_editor(pilot)
        await _replace_text(pilot, '{"timeout_s": 120}')
        preview = _text(app, "#fork-preview-text")
        assert '"timeout_s": 120' in preview and '"sql": "SELECT r.name' in preview
        changes = _text(app, "#fork-changes")
        assert "1 change to the input" in changes
        assert "input.timeout_s  changed\n was  30\n now  120" in changes


async def test_replace_mode_makes_the_json_the_whole_input(seeded_store, tui) -> None:
    """ctrl+t switches to replace: the input becomes exactly the JSON typed."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await _open_editor(pilot)
        await _replace_text(pilot, '{"timeout_s": 120}')
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert screen.mode == "replace"
        assert screen.query_one("#mode-replace").value
        assert '"sql"' not in _text(app, "#fork-preview-text")
        changes = _text(app, "#fork-changes")
        assert "2 changes to the input" in changes and "input.sql  removed" in changes


async def test_ctrl_r_puts_the_recorded_input_back(seeded_store, tui) -> None:
    """ctrl+r resets the editor to the step's recorded input."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await _open_editor(pilot)
        original = _editor(app).text
        await _replace_text(pilot, "[")
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert _editor(app).text == original and screen.valid


async def test_editing_a_step_input_saves_a_fork_and_lands_on_its_diff(seeded_store, tui) -> None:
    """Edit step 6's timeout in place, ctrl+s: ``ForkSaved``, a fork in the store, and the
    diff against the parent showing exactly that one change."""
    seen: list[Message] = []
    app = tui(seeded_store, initial_trace=GOOD)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        await pilot.press(*["down"] * 5, "F")
        await settle(pilot)
        editor = _editor(app)
        line = next(i for i, text in enumerate(editor.text.splitlines()) if "timeout_s" in text)
        editor.move_cursor((line, len(editor.document.get_line(line))))
        await pilot.press("backspace", "backspace", "1", "2", "0")
        await pilot.pause()
        assert loads(editor.text)["timeout_s"] == 120
        await pilot.press("ctrl+s")
        await settle(pilot)

        # one message (the hook sees it again as it bubbles up to the app)
        saved = list({id(m): m for m in seen if isinstance(m, ForkEditorScreen.ForkSaved)}.values())
        assert len(saved) == 1
        fork_id = saved[0].result.trace_id
        fork = next(t for t in _traces(seeded_store) if t["id"] == fork_id)
        assert fork["parent_trace_id"] == GOOD and fork["forked_from_step"] == RUN_SQL
        assert fork["status"] == "forked" and len(fork["steps"]) == RUN_SQL
        assert fork["steps"][-1]["input"]["timeout_s"] == 120
        (recorded,) = fork["metadata"]["fork"]["edits"]
        assert (recorded["target"], recorded["mode"]) == ("step_input", "merge")
        assert recorded["modification"]["timeout_s"] == 120  # the whole edited input, merged

        screen = app.screen
        assert isinstance(screen, DiffScreen)
        assert (screen.a_id, screen.b_id) == (GOOD, fork_id)
        assert [type(s) for s in app.screen_stack[-2:]] == [TimelineScreen, DiffScreen]
        assert screen.diff is not None
        assert screen.diff.counts == {"matched": 5, "changed": 1, "inserted": 0, "deleted": 0}
        assert not screen.diff.trace_differences
        (changed,) = [p for p in screen.diff.pairs if p.kind == "changed"]
        edited, cleared = changed.differences
        assert (edited.path, edited.a, edited.b) == ("input.timeout_s", 30, 120)
        assert (cleared.path, cleared.kind) == ("output", "removed")  # step 6 not re-run


async def test_a_fork_at_step_1_changes_step_1s_input(seeded_store, tui) -> None:
    """At step 1 the edit goes to step 1's input; the diff shows step 1 changed."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_editor(pilot, step=1)
        await _replace_text(pilot, '{"database": "staging"}')
        await pilot.press("ctrl+s")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen) and screen.diff is not None
        assert screen.diff.trace_differences == []
        (changed,) = [p for p in screen.diff.pairs if p.kind == "changed"]
        assert changed.a_number == 1
        assert [d.path for d in changed.differences] == ["input.database", "output"]


async def test_a_step_the_trace_lacks_falls_back_to_the_first(seeded_store, tui) -> None:
    """Asked for step 99 of an 8-step trace, the editor says so and forks at step 1."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await _open_editor(pilot, step=99)
        assert app.screen.step == 1
        assert any("no step 99" in n.message for n in app._notifications)


async def test_tab_indents_in_the_editor_and_ctrl_n_moves_on(seeded_store, tui) -> None:
    """Tab stays in the editor (it indents, later keys still type); ctrl+n leaves it."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _open_editor(pilot)
        editor = _editor(app)
        await _replace_text(pilot, "{")
        await pilot.press("enter", "tab", *'"a": 1', "enter", "}")
        await pilot.pause()
        assert app.focused is editor
        assert '\n    "a": 1' in editor.text or '\n\t"a": 1' in editor.text
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert app.focused is not editor


def test_editable_json_escapes_raw_control_characters() -> None:
    """C1 controls and DEL, legal raw in JSON strings, are written as \\u escapes."""
    text = editable_json({"k": "a\x9bb\x7f\x1b"})
    assert "\x9b" not in text and "\x7f" not in text and "\x1b" not in text
    assert loads(text) == {"k": "a\x9bb\x7f\x1b"}


def test_describe_json_error_keeps_line_and_column() -> None:
    """The parser's message becomes "Line L, column C: why"."""
    why, line, column = describe_json_error(
        "--modify-input is not valid JSON: unexpected end of data: line 1 column 5 (char 4)"
    )
    assert (why, line, column) == ("Line 1, column 5: unexpected end of data", 1, 5)


def _snapshot(snap_compare: Any, app: Any, text: str | None) -> bool:
    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await pilot.app.push_screen(ForkEditorScreen(GOOD, step=RUN_SQL))
        await settle(pilot)
        if text is not None:
            await _replace_text(pilot, text)
        _editor(pilot.app).cursor_blink = False  # a steady cursor: the same SVG every run
        await settle(pilot)

    return bool(snap_compare(app, terminal_size=SIZE, run_before=run_before))


def test_snapshot_fork_editor_with_a_valid_edit(seeded_store, tui, snap_compare) -> None:
    """Step 6 of the good run with its timeout raised: valid, the preview and one change."""
    text = editable_json({"timeout_s": 120})
    assert _snapshot(snap_compare, tui(seeded_store), text)


def test_snapshot_fork_editor_with_an_error(seeded_store, tui, snap_compare) -> None:
    """A trailing comma: the error with its line and column, Save disabled."""
    assert _snapshot(snap_compare, tui(seeded_store), '{\n  "timeout_s": 120,\n}')
