"""Guard policies: list, add (a form with live validation and a preview), enable, disable,
remove.

Every store access runs in a thread worker and comes back as a message: the list
(``PoliciesLoaded``), the outcome of a change (``PolicyChanged``), and, in the add form, the
traces to preview on, their steps and the preview itself. The services are those of
``agent-replay guard`` (``services.guard.manage``), so the app and the CLI refuse the same
policies for the same reasons. Policy names, descriptions and patterns are shown as plain
text (``display.safe``), never as markup.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Label, Static
from textual.worker import get_current_worker

from agent_replay.display import fmt_time, safe, truncate
from agent_replay.errors import AgentReplayError
from agent_replay.screens.base import BaseScreen, PlainToasts, agent_app, read_store
from agent_replay.services.guard.policy import Policy
from agent_replay.widgets.key_bar import KeyBar
from agent_replay.widgets.policy_form import PolicyDraft, PolicyForm, PreviewStep, preview_steps
from agent_replay.widgets.title_bar import TitleBar

if TYPE_CHECKING:
    from agent_replay.store.shapes import StepJSON

ACTION_STYLES = {
    "deny": "bold $text-error",
    "require_review": "bold $text-warning",
    "warn": "$text-accent",
    "allow": "$text-success",
}
PREVIEW_TRACES = 50
"""Most recent traces offered to preview a pattern on."""
EMPTY = (
    "No guard policies yet.\n\n"
    "Press a to add one here, or:   agent-replay guard add --help\n"
    "Load the samples:              agent-replay demo"
)


TABLE_ACTION_STYLES = {
    "deny": "bold red",
    "require_review": "bold yellow",
    "warn": "magenta",
    "allow": "green",
}


def policy_row(policy: Policy) -> list[Text]:
    """The table cells of one policy (user text escaped, as plain ``Text``)."""
    pattern = (policy.raw_pattern or "") if policy.problem else json.dumps(policy.pattern)
    shown = Text(truncate(safe(pattern), 46))
    if policy.problem:
        shown = Text.assemble(("! ", "bold red"), shown)
    return [
        Text("●", style="green") if policy.enabled else Text("○", style="dim"),
        Text(truncate(safe(policy.name), 32)),
        Text(policy.action, style=TABLE_ACTION_STYLES.get(policy.action, "")),
        Text(str(policy.priority), justify="right"),
        Text("open" if policy.fail_open else "closed"),
        shown,
    ]


def policy_detail(policy: Policy | None) -> Content:
    """The panel under the table: the selected policy in full."""
    if policy is None:
        return Content("")
    muted = "$text-muted"
    state = "enabled" if policy.enabled else "disabled"
    fails = "fails open" if policy.fail_open else "fails closed"
    lines = [
        Content.assemble(
            (safe(policy.name), "bold"),
            ("  ·  ", muted),
            (policy.action, ACTION_STYLES.get(policy.action, "")),
            ("  ·  ", muted),
            f"priority {policy.priority} · {state} · {fails}",
        ),
        Content.assemble(
            ("id ", muted), policy.id, ("  added ", muted), fmt_time(policy.created_at)
        ),
        Content.assemble(
            ("pattern ", muted),
            safe(policy.raw_pattern or "")
            if policy.problem
            else safe(json.dumps(policy.pattern, ensure_ascii=False)),
        ),
    ]
    if policy.description:
        lines.append(Content(safe(policy.description)))
    if policy.problem:
        lines.append(
            Content.styled("! cannot be evaluated: " + safe(policy.problem), "$text-error")
        )
    return Content("\n").join(lines)


class ConfirmRemoveModal(PlainToasts, ModalScreen[bool]):
    """Ask before removing a policy; dismisses with ``True`` to remove."""

    DEFAULT_CSS = """
    ConfirmRemoveModal {
        align: center middle;
        & > #confirm-dialog {
            width: 60;
            height: auto;
            padding: 1 2;
            border: round $error;
            background: $panel;
        }
        & #confirm-buttons { height: auto; margin-top: 1; align-horizontal: right; }
        & Button { margin-left: 1; }
    }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "Remove", id="confirm-yes", tooltip="Remove the policy"),
        Binding("n,escape", "answer(False)", "Keep", id="confirm-no", tooltip="Keep the policy"),
    ]

    def __init__(self, policy: Policy) -> None:
        super().__init__()
        self.policy = policy
        """The policy that would be removed."""

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Label(Content.assemble("Remove policy ", (safe(self.policy.name), "bold"), "?"))
            with Horizontal(id="confirm-buttons"):
                yield Button("Keep (n)", id="confirm-keep")
                yield Button("Remove (y)", variant="error", id="confirm-remove")

    def action_answer(self, remove: bool) -> None:
        self.dismiss(remove)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-remove")


class PolicyFormScreen(PlainToasts, ModalScreen[PolicyDraft | None]):
    """The add form: dismisses with the validated draft, or ``None`` when cancelled."""

    DEFAULT_CSS = """
    PolicyFormScreen {
        align: center middle;
        & > #policy-dialog {
            width: 104;
            height: auto;
            max-height: 100%;
            padding: 0 1;
            border: round $accent;
            border-title-color: $text-accent;
            background: $panel;
        }
        & #policy-buttons { height: auto; align-horizontal: right; }
        & #policy-buttons Button { margin-left: 1; }
    }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="form-cancel", tooltip="Close without saving"),
        Binding("ctrl+s", "save", "Save", id="form-save", tooltip="Add the policy"),
    ]

    @dataclass
    class TracesLoaded(Message):
        """The recent traces to preview on, as ``(label, id)``."""

        traces: list[tuple[str, str]]

    @dataclass
    class StepsLoaded(Message):
        """The steps of the preview trace."""

        trace_id: str
        steps: list[StepJSON]

    @dataclass
    class PreviewReady(Message):
        """The preview trace's steps the pattern matches."""

        matches: list[PreviewStep]
        total: int

    def __init__(self, preview_trace: str | None = None) -> None:
        super().__init__()
        self.preview_trace = preview_trace
        """The trace to preview on first (default: the most recent)."""
        self._trace_id: str | None = None
        self._steps: list[StepJSON] | None = None

    @property
    def form(self) -> PolicyForm:
        return self.query_one("#policy-form", PolicyForm)

    def compose(self) -> ComposeResult:
        with Vertical(id="policy-dialog") as dialog:
            dialog.border_title = "New guard policy"
            yield PolicyForm(id="policy-form")
            with Horizontal(id="policy-buttons"):
                yield Button("Cancel (esc)", id="policy-cancel")
                yield Button("Save (ctrl+s)", variant="primary", id="policy-save", disabled=True)

    def on_mount(self) -> None:
        self.form.show_preview(None)
        self.query_one("#form-name").focus()
        self._load_traces()

    @work(thread=True, exclusive=True, exit_on_error=False, group="traces", description="traces")
    def _load_traces(self) -> None:
        from agent_replay.store.queries import list_traces

        store = agent_app(self).store
        with store.db.connection_context():
            page = list_traces(store, limit=PREVIEW_TRACES)
        traces = [
            (
                f"{item.id} · {truncate(safe(item.data['agent_name']), 24)} · "
                f"{item.step_count:,} steps",
                item.id,
            )
            for item in page.items
        ]
        self.post_message(self.TracesLoaded(traces))

    @on(TracesLoaded)
    def _show_traces(self, message: TracesLoaded) -> None:
        ids = [trace_id for _, trace_id in message.traces]
        wanted = self.preview_trace if self.preview_trace in ids else (ids[0] if ids else None)
        self.form.set_traces(message.traces, select=wanted)

    @on(PolicyForm.TraceChosen)
    def _trace_chosen(self, message: PolicyForm.TraceChosen) -> None:
        self._trace_id, self._steps = message.trace_id, None
        if message.trace_id is None:
            self.form.show_preview(None)
            return
        self._load_steps(message.trace_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="steps", description="steps")
    def _load_steps(self, trace_id: str) -> None:
        from agent_replay.store.trace_detail import step_dicts

        store = agent_app(self).store
        with store.db.connection_context():
            steps = step_dicts(store, trace_id)
        if not get_current_worker().is_cancelled:
            self.post_message(self.StepsLoaded(trace_id, steps))

    @on(StepsLoaded)
    def _steps_loaded(self, message: StepsLoaded) -> None:
        if message.trace_id == self._trace_id:
            self._steps = message.steps
            self._refresh_preview()

    @on(PolicyForm.Changed)
    def _form_changed(self, message: PolicyForm.Changed) -> None:
        self.query_one("#policy-save", Button).disabled = message.draft is None
        self._refresh_preview()

    def _refresh_preview(self) -> None:
        draft = self.form.draft
        if draft is None or self._steps is None:
            self.form.show_preview(None)
            return
        self._preview(draft.pattern, self._steps)

    @work(thread=True, exclusive=True, exit_on_error=False, group="preview", description="preview")
    def _preview(self, pattern: dict[str, str], steps: list[dict[str, Any]]) -> None:
        """Match in a worker: a trace may have thousands of steps with large inputs."""
        matches = preview_steps(pattern, steps)
        if not get_current_worker().is_cancelled:
            self.post_message(self.PreviewReady(matches, len(steps)))

    @on(PreviewReady)
    def _show_preview(self, message: PreviewReady) -> None:
        if self.form.draft is not None:
            self.form.show_preview(message.matches, message.total)

    @on(Button.Pressed, "#policy-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#policy-save")
    def action_save(self) -> None:
        if self.form.draft is None:
            self.notify(self.form.error or "the policy is not valid", title="Cannot save")
            return
        self.dismiss(self.form.draft)


class PoliciesScreen(BaseScreen):
    """Every guard policy, highest priority first; add, enable/disable and remove them."""

    TITLE = "Guard policies"
    CSS_PATH = "policies.tcss"
    BINDINGS = [
        Binding("a", "add_policy", "Add", id="policy-add", tooltip="Add a policy"),
        Binding(
            "e",
            "toggle_enabled",
            "Enable/disable",
            id="policy-toggle",
            tooltip="Switch the selected policy on or off",
        ),
        Binding(
            "x,delete",
            "remove_policy",
            "Remove",
            id="policy-remove",
            tooltip="Remove the selected policy",
        ),
        Binding("r", "reload", "Reload", id="policy-reload", tooltip="Reload from the store"),
    ]

    @dataclass
    class PoliciesLoaded(Message):
        """The policies arrived from the worker."""

        policies: list[Policy]

    @dataclass
    class PolicyChanged(Message):
        """A change was saved (or refused): what to tell the user, what to select next."""

        note: str
        select: str | None = None
        error: bool = False

    def __init__(self) -> None:
        super().__init__()
        self.policies: list[Policy] = []
        """The policies shown, in table order."""
        self._select: str | None = None
        """The policy to put the cursor on once the next load arrives (the one just saved)."""

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#policies-table", DataTable)

    @property
    def selected(self) -> Policy | None:
        """The policy under the cursor."""
        if not self.policies:
            return None
        return self.policies[min(self.table.cursor_row, len(self.policies) - 1)]

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Vertical(id="policies-body"):
            yield DataTable(id="policies-table", cursor_type="row", zebra_stripes=True)
            yield Static(EMPTY, id="policies-empty", classes="-empty-state", markup=False)
            yield Static("", id="policy-detail")
        yield Static("", id="policies-status")
        yield KeyBar()

    def on_mount(self) -> None:
        self.table.add_columns("ON", "NAME", "ACTION", "PRIORITY", "FAILS", "PATTERN")
        self.query_one("#policies-empty").display = False
        self.table.focus()
        self.load()

    # --- loading ----------------------------------------------------------------------

    @work(
        thread=True, exclusive=True, exit_on_error=False, group="policies", description="policies"
    )
    def load(self) -> None:
        """Read every policy; the result arrives as ``PoliciesLoaded``."""
        from agent_replay.services.guard.manage import list_policies

        with read_store(self.app) as store:
            policies = list_policies(store)
        if not get_current_worker().is_cancelled:
            self.post_message(self.PoliciesLoaded(policies))

    def store_changed(self) -> None:
        """Another terminal may have changed the policies (``guard add``, ``guard disable``):
        read them again (the view is redrawn only if they differ)."""
        self.load()

    @on(PoliciesLoaded)
    def show_policies(self, message: PoliciesLoaded) -> None:
        # Kept on the screen, not in the load: a load started by the change watcher replaces
        # (``exclusive``) the one a save started, and the saved policy is still selected.
        select, self._select = self._select, None
        if select is None and message.policies == self.policies and self.table.row_count:
            return  # the store changed elsewhere, not the policies: keep the view as it is
        previous = self.selected.id if self.selected else None
        wanted = select or previous
        self.policies = message.policies
        table = self.table
        table.clear()
        for policy in self.policies:
            table.add_row(*policy_row(policy), key=policy.id)
        empty = not self.policies
        self.query_one("#policies-empty").display = empty
        table.display = not empty
        self.query_one("#policy-detail").display = not empty
        ids = [p.id for p in self.policies]
        if wanted in ids:
            table.move_cursor(row=ids.index(wanted))
        enabled = sum(p.enabled for p in self.policies)
        status = self.query_one("#policies-status", Static)
        status.update(
            Content(
                f"{len(self.policies)} policies · {enabled} enabled · strictest wins: "
                "deny > require_review > warn > allow · a higher-priority allow excepts"
            )
            if self.policies
            else Content("")
        )
        self._show_detail()

    @on(DataTable.RowHighlighted, "#policies-table")
    def _row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        self.query_one("#policy-detail", Static).update(policy_detail(self.selected))

    # --- changes ----------------------------------------------------------------------

    @work(thread=True, exclusive=True, exit_on_error=False, group="change", description="change")
    def _change(self, kind: str, policy_id: str | None, draft: PolicyDraft | None = None) -> None:
        from agent_replay.services.guard import manage as guard_store

        store = self.app.store
        try:
            with store.db.connection_context():
                if kind == "add" and draft is not None:
                    added = guard_store.add_policy(
                        store,
                        self.app.clock,
                        name=draft.name,
                        pattern=draft.pattern,
                        action=draft.action,
                        description=draft.description,
                        priority=draft.priority,
                        fail_open=draft.fail_open,
                    )
                    note, select = f"added {added.name}", added.id
                elif kind == "remove" and policy_id is not None:
                    removed = guard_store.remove_policy(store, policy_id)
                    note, select = f"removed {removed.name}", None
                elif policy_id is not None:
                    changed = guard_store.set_enabled(store, policy_id, kind == "enable")
                    note, select = f"{kind}d {changed.name}", changed.id
                else:
                    return
        except AgentReplayError as exc:
            self.post_message(self.PolicyChanged(exc.message, error=True))
            return
        self.post_message(self.PolicyChanged(note, select))

    @on(PolicyChanged)
    def _changed(self, message: PolicyChanged) -> None:
        if message.error:
            self.notify(message.note, title="Policy not saved", severity="error")
            return
        self.notify(safe(message.note), title="Guard policies")
        self._select = message.select
        self.load()

    # --- actions ----------------------------------------------------------------------

    def action_add_policy(self) -> None:
        self.app.push_screen(PolicyFormScreen(), self._add_draft)

    def _add_draft(self, draft: PolicyDraft | None) -> None:
        if draft is not None:
            self._change("add", None, draft)

    def action_toggle_enabled(self) -> None:
        policy = self.selected
        if policy is not None:
            self._change("disable" if policy.enabled else "enable", policy.id)

    def action_remove_policy(self) -> None:
        policy = self.selected
        if policy is None:
            return

        def confirmed(remove: bool | None) -> None:
            if remove:
                self._change("remove", policy.id)

        self.app.push_screen(ConfirmRemoveModal(policy), confirmed)

    def action_reload(self) -> None:
        self.load()
