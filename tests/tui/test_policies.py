"""The guard policies screen: list, detail, enable/disable, remove, the add form with live
validation and preview; blocked guard checks highlighted in the timeline."""

from __future__ import annotations

from typing import Any

from textual.widgets import Button, DataTable, Input, Select, Static
from tuikit import CLOCK, SIZE, settle

from agent_replay.screens.policies import PoliciesScreen, PolicyFormScreen
from agent_replay.services.guard.manage import list_policies
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store
from agent_replay.widgets.policy_form import PolicyForm
from agent_replay.widgets.step_timeline import StepTimeline

DANGEROUS = "trc_demo3dangerous"
BLOCKED_TRACE = "trc_guarded"


def _names(app: Any) -> list[str]:
    screen = app.screen
    assert isinstance(screen, PoliciesScreen)
    return [p.name for p in screen.policies]


def _stored(store: Store) -> dict[str, bool]:
    with store.db.connection_context():
        return {p.name: p.enabled for p in list_policies(store)}


async def _open_policies(pilot: Any) -> None:
    await settle(pilot)
    await pilot.press("G")
    await settle(pilot)


async def _open_form(pilot: Any) -> PolicyForm:
    await _open_policies(pilot)
    await pilot.press("a")
    await settle(pilot)
    assert isinstance(pilot.app.screen, PolicyFormScreen)
    return pilot.app.screen.query_one(PolicyForm)


async def _fill(pilot: Any, form: PolicyForm, **fields: str) -> None:
    for key, value in fields.items():
        form.query_one(f"#form-{key}", Input).value = value
    await settle(pilot)


async def _preview_on(pilot: Any, form: PolicyForm, trace_id: str) -> None:
    form.query_one("#form-trace", Select).value = trace_id
    await settle(pilot)


# --- the list ------------------------------------------------------------------------------


async def test_g_lists_the_policies_highest_priority_first(seeded_store, tui) -> None:
    """G opens the policies mode with the demo's three policies, highest priority first."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await _open_policies(pilot)
        assert _names(app) == [
            "block-destructive-tools",
            "review-production-tool-calls",
            "warn-password-in-output",
        ]
        detail = str(app.screen.query_one("#policy-detail", Static).render())
        assert "Deny tool calls that delete" in detail and "fails closed" in detail


async def test_e_disables_and_enables_the_selected_policy(seeded_store, tui) -> None:
    """e switches the policy under the cursor off, and on again."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await _open_policies(pilot)
        await pilot.press("e")
        await settle(pilot)
        assert _stored(seeded_store)["block-destructive-tools"] is False
        assert not app.screen.selected.enabled
        await pilot.press("e")
        await settle(pilot)
        assert _stored(seeded_store)["block-destructive-tools"] is True


async def test_x_asks_before_removing(seeded_store, tui) -> None:
    """x asks; n keeps the policy, y removes it."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        await _open_policies(pilot)
        await pilot.press("down", "x")
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        assert len(_stored(seeded_store)) == 3
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert "review-production-tool-calls" not in _stored(seeded_store)
        assert _names(app) == ["block-destructive-tools", "warn-password-in-output"]


async def test_an_empty_store_shows_how_to_add_policies(empty_store, tui) -> None:
    """No policies: the empty state, not an empty table."""
    app = tui(empty_store, initial_mode="policies")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.screen.query_one("#policies-empty").display
        assert not app.screen.query_one("#policies-table", DataTable).display


# --- the add form --------------------------------------------------------------------------


async def test_the_form_explains_what_is_wrong_as_you_type(seeded_store, tui) -> None:
    """An unknown key, then a regex RE2 refuses: the reason shows and Save stays disabled."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        form = await _open_form(pilot)
        save = app.screen.query_one("#policy-save", Button)
        await _fill(pilot, form, name="no-wipes", pattern='{"nam_regex": "x"}')
        assert form.error and "unknown pattern key 'nam_regex'" in form.error
        assert save.disabled
        await _fill(pilot, form, pattern='{"name_regex": "(?=wipe)"}')
        assert form.error and "invalid perl operator" in form.error
        assert save.disabled
        await _fill(pilot, form, pattern='{"name_contains": "wipe"}')
        assert form.error is None and not save.disabled


async def test_the_preview_lists_the_matching_steps_of_the_chosen_trace(seeded_store, tui) -> None:
    """A valid pattern previews the steps of the chosen trace it matches."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        form = await _open_form(pilot)
        await _preview_on(pilot, form, DANGEROUS)
        await _fill(
            pilot, form, name="no-drops", pattern='{"step_type": "tool_call", "name_regex": "drop"}'
        )
        assert len(form.preview_lines) == 1 and "drop_table" in form.preview_lines[0]
        title = str(form.query_one("#form-preview-title", Static).render())
        assert title == "1 of 8 steps match"


async def test_saving_adds_the_policy(seeded_store, tui) -> None:
    """ctrl+s saves a valid policy; it is stored and selected in the list."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        form = await _open_form(pilot)
        await _fill(
            pilot,
            form,
            name="ops-may-list",
            pattern='{"name_contains": "list_users"}',
            priority="200",
            description="Listing users is fine.",
        )
        form.query_one("#form-action", Select).value = "allow"
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, PoliciesScreen)
        assert _names(app)[0] == "ops-may-list"
        assert app.screen.selected.name == "ops-may-list"
        with seeded_store.db.connection_context():
            added = next(p for p in list_policies(seeded_store) if p.name == "ops-may-list")
        assert (added.action, added.priority, added.description) == (
            "allow",
            200,
            "Listing users is fine.",
        )


async def test_a_policy_saved_while_the_store_changes_is_still_selected(seeded_store, tui) -> None:
    """The change watcher's reload (any commit, the save's own too) replaces the reload that
    was to select the policy just saved (seen in CI): the cursor still lands on it."""
    fired: list[bool] = []

    def watcher_fires_right_after_the_save(message: Any) -> None:
        if isinstance(message, PoliciesScreen.PolicyChanged) and not fired:
            fired.append(True)  # run once the screen has handled it: its reload is in flight
            app.call_later(app.screen.store_changed)

    app = tui(seeded_store, refresh_interval=None)
    async with app.run_test(size=SIZE, message_hook=watcher_fires_right_after_the_save) as pilot:
        form = await _open_form(pilot)
        await _fill(pilot, form, name="ops-may-list", pattern='{"name_contains": "list_users"}')
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert fired
        assert "ops-may-list" in _names(app)
        assert app.screen.selected.name == "ops-may-list"


async def test_a_taken_name_is_reported_and_nothing_is_added(seeded_store, tui) -> None:
    """The service refuses a duplicate name; the app says so."""
    app = tui(seeded_store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        form = await _open_form(pilot)
        await _fill(pilot, form, name="block-destructive-tools", pattern='{"name_contains": "x"}')
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert any("exists already" in n.message for n in app._notifications)
        assert len(_stored(seeded_store)) == 3


async def test_escape_closes_the_form_without_saving(seeded_store, tui) -> None:
    app = tui(seeded_store)
    async with app.run_test(size=SIZE) as pilot:
        form = await _open_form(pilot)
        await _fill(pilot, form, name="x", pattern='{"name_contains": "x"}')
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, PoliciesScreen)
        assert len(_stored(seeded_store)) == 3


# --- blocked attempts in the timeline ------------------------------------------------------


def _ingest_blocked(store: Store) -> None:
    """A session as `hook --enforce` records it: the attempt, then the deny that blocked it."""
    reason = 'policy "block-destructive-tools" (deny): Deny tool calls that delete data.'
    trace = {
        "id": BLOCKED_TRACE,
        "agent_name": "claude-code",
        "status": "completed",
        "started_at": "2026-06-01T11:00:00Z",
        "ended_at": "2026-06-01T11:00:05Z",
        "steps": [
            {
                "step_number": 1,
                "step_type": "thought",
                "name": "user_prompt",
                "input": "clean up the test users",
                "started_at": "2026-06-01T11:00:00Z",
                "ended_at": "2026-06-01T11:00:00Z",
            },
            {
                "step_number": 2,
                "step_type": "tool_call",
                "name": "Bash",
                "input": {"command": "psql -c 'DELETE FROM users'"},
                "error": "blocked by agent-replay guard: " + reason,
                "started_at": "2026-06-01T11:00:01Z",
                "ended_at": "2026-06-01T11:00:01Z",
            },
            {
                "step_number": 3,
                "step_type": "guard_check",
                "name": "block-destructive-tools",
                "input": {"tool": "Bash", "arguments": {"command": "psql -c 'DELETE FROM users'"}},
                "output": {
                    "decision": "deny",
                    "action": "deny",
                    "policy": "block-destructive-tools",
                    "reason": reason,
                    "matches": [
                        {
                            "policy": "block-destructive-tools",
                            "id": "pol_demo_nodelete",
                            "policy_action": "deny",
                            "priority": 100,
                            "overridden": False,
                        }
                    ],
                },
                "caused_by_step": 2,
                "started_at": "2026-06-01T11:00:01Z",
                "ended_at": "2026-06-01T11:00:01Z",
                "metadata": {"enforced": True, "harness": "claude"},
            },
            {
                "step_number": 4,
                "step_type": "output",
                "name": "assistant_message",
                "output": "A guard policy blocked the delete.",
                "started_at": "2026-06-01T11:00:05Z",
                "ended_at": "2026-06-01T11:00:05Z",
            },
        ],
    }
    with store.db.connection_context():
        ingest_trace(store, trace, clock=CLOCK)


async def test_a_blocked_guard_check_is_highlighted_in_the_timeline(seeded_store, tui) -> None:
    """The deny that stopped an attempt is a blocked row; the demo's allow checks are not."""
    _ingest_blocked(seeded_store)
    app = tui(seeded_store, initial_trace=BLOCKED_TRACE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rows = {r.number: r for r in app.screen.query_one(StepTimeline).rows}
        assert rows[3].blocked and not rows[2].blocked
    app = tui(seeded_store, initial_trace=DANGEROUS)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rows = app.screen.query_one(StepTimeline).rows
        assert [r.blocked for r in rows if r.step_type == "guard_check"] == [False]


# --- snapshots -----------------------------------------------------------------------------


def _snapshot(snap_compare: Any, app: Any, run: Any = None) -> bool:
    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        if run is not None:
            await run(pilot)
        await settle(pilot)

    return bool(snap_compare(app, terminal_size=SIZE, run_before=run_before))


def test_snapshot_policies_empty(empty_store, tui, snap_compare) -> None:
    """No policies yet: how to add one."""
    assert _snapshot(snap_compare, tui(empty_store, initial_mode="policies"))


def test_snapshot_form_with_preview(seeded_store, tui, snap_compare) -> None:
    """A valid pattern previewed on the dangerous trace."""

    async def run(pilot: Any) -> None:
        form = await _open_form(pilot)
        await _preview_on(pilot, form, DANGEROUS)
        await _fill(
            pilot,
            form,
            name="review-user-tools",
            pattern='{"step_type": "tool_call", "name_contains": "user"}',
            priority="60",
            description="A person checks anything touching users.",
        )
        form.query_one("#form-action", Select).value = "require_review"
        await settle(pilot)
        form.query_one("#form-preview").focus()  # no blinking cursor in the picture

    assert _snapshot(snap_compare, tui(seeded_store), run)


def test_snapshot_form_with_a_refused_regex(seeded_store, tui, snap_compare) -> None:
    """A lookahead RE2 refuses: the reason, Save disabled, no preview."""

    async def run(pilot: Any) -> None:
        form = await _open_form(pilot)
        await _preview_on(pilot, form, DANGEROUS)
        await _fill(pilot, form, name="no-wipes", pattern='{"name_regex": "(?=wipe)"}')
        form.query_one("#form-preview").focus()

    assert _snapshot(snap_compare, tui(seeded_store), run)


def test_snapshot_timeline_with_a_blocked_attempt(seeded_store, tui, snap_compare) -> None:
    """A session where a deny policy blocked a tool call: the guard check is highlighted."""
    _ingest_blocked(seeded_store)
    app = tui(seeded_store, initial_trace=BLOCKED_TRACE)

    async def run(pilot: Any) -> None:
        await pilot.press("down")

    assert _snapshot(snap_compare, app, run)
