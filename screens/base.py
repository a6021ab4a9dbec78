"""The base of every full screen: the typed app, toasts that never parse markup, worker failures
surfaced through the app, staying current as the store changes, and annotating.

``Worker.StateChanged`` does not bubble, so the app never sees failures of workers that run on
a screen; each screen forwards them to ``AgentReplayApp.report_worker_error``, the one place
that turns them into notifications.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from textual import work
from textual.dom import DOMNode
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from agent_replay.errors import AgentReplayError
from agent_replay.messages import StoreChanged

if TYPE_CHECKING:
    from agent_replay.app import AgentReplayApp
    from agent_replay.store.db import Store
    from agent_replay.store.shapes import TraceJSON


def agent_app(node: DOMNode) -> AgentReplayApp:
    """The running app, typed (its ``store``, ``clock``, ``open_trace``…), for modals and
    widgets; screens have ``BaseScreen.app``."""
    return cast("AgentReplayApp", node.app)


@contextmanager
def read_store(app: AgentReplayApp) -> Iterator[Store]:
    """The store, with the calling worker thread's connection open, for a screen's read.

    Every screen reads through here, so the app's first read, whichever screen makes it, comes
    after the change watcher's baseline (``AgentReplayApp.baseline_changes``, a no-op once
    taken): a commit made during or just after that read is then seen by the watcher's next
    check. Taken later, by that first check, the baseline hid it, and a screen that relies on
    the watcher to stay current (the trace list, a running trace's timeline, the dashboard,
    the evals) missed it until something else was written.

    Args:
        app: the app (passed, not looked up: a screen not pushed yet has none of its own).
    """
    app.baseline_changes()
    with app.store.db.connection_context():
        yield app.store


class PlainToasts:
    """``notify`` with markup off unless asked for: a toast shows what it is given, so an
    error, a trace id or a label carrying ``[/]`` can't raise ``MarkupError`` or restyle the
    toast (producer text is data). Mixed into every screen and modal of the app, before
    Textual's class; the app's own ``notify`` defaults the same way."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast (``markup=True`` only for text written here, never for outside text)."""
        agent_app(cast(DOMNode, self)).notify(
            message, title=title, severity=severity, timeout=timeout, markup=markup
        )


class BaseScreen(PlainToasts, Screen[None]):
    """A screen whose worker errors are reported by the app (a notification, never a crash),
    and that stays current: ``store_changed`` runs when the store changes while it is shown,
    or when it comes back into view after a change (``StoreChanged``)."""

    _seen_version = 0

    if TYPE_CHECKING:
        # Textual types ``app`` as a bare ``App``; on our screens it is always ours, so the
        # type says so (``store``, ``clock``, ``open_trace``… without casts). Typing only.
        app: AgentReplayApp

    @property
    def typing(self) -> bool:
        """Whether the screen itself is taking typed text (a prompt it types into without
        focusing it): Esc is then the prompt's, not the app's."""
        return False

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_worker_error(event.worker)

    def on_store_changed(self, message: StoreChanged) -> None:
        self._catch_up()

    def on_screen_resume(self) -> None:
        if self._seen_version != self.app.store_version:
            self._catch_up()

    def _catch_up(self) -> None:
        version = self.app.store_version
        if version != self._seen_version:
            self._seen_version = version
            self.store_changed()

    def store_changed(self) -> None:
        """Refresh what the screen shows, keeping the cursor (override; runs on the UI
        thread, so start a worker)."""

    def mark_updated(self) -> None:
        """Say in the footer when the view last read the store (the app's clock)."""
        from agent_replay.widgets.key_bar import KeyBar

        now = self.app.clock.now()
        self._seen_version = self.app.store_version
        for bar in self.query(KeyBar):
            bar.note = f"updated {now:%H:%M:%S}"

    # --- annotating (a) ---------------------------------------------------------------

    def ask_annotation(self, trace_id: str, step: int | None = None) -> None:
        """Ask for a label and a note for a trace (or one of its steps), then write them in a
        worker; ``annotated`` runs once they are written."""
        from agent_replay.screens.modals import AnnotateModal

        target = trace_id if step is None else f"step {step} of {trace_id}"

        def save(answer: tuple[str, str | None] | None) -> None:
            if answer is not None:
                self._write_annotation(trace_id, step, *answer)

        self.app.push_screen(AnnotateModal(target), save)

    @work(thread=True, exit_on_error=False, group="annotate", description="annotate")
    def _write_annotation(
        self, trace_id: str, step: int | None, label: str, note: str | None
    ) -> None:
        """Through the recorder (validated, redacted), as every writer."""
        from agent_replay.commands.annotate import default_author
        from agent_replay.services.recorder import TraceRecorder

        store = self.app.store
        with store.db.connection_context():
            TraceRecorder(store, clock=self.app.clock).annotate(
                trace_id, label=label, step_number=step, note=note, author=default_author()
            )
        self.app.call_from_thread(self.annotated, trace_id, step, label)

    def annotated(self, trace_id: str, step: int | None, label: str) -> None:
        """The annotation is written: say so (a screen that shows labels reloads too)."""
        where = trace_id if step is None else f"step {step} of {trace_id}"
        self.notify(f"{where}: {label}", title="Annotated", timeout=3)


class TraceScreen(BaseScreen):
    """A screen about one trace, loaded by id or unique prefix in a thread worker.

    The worker posts ``TraceLoaded`` (with whatever ``prepare_trace`` built off the UI thread)
    or ``TraceLoadFailed`` (unknown id, ambiguous prefix, store error); subclasses handle them.
    """

    @dataclass
    class TraceLoaded(Message):
        """The trace arrived from the worker."""

        trace: TraceJSON
        """The trace object (with ``steps``, ``evals`` and the resolved ``id``)."""
        prepared: Any = None
        """What ``prepare_trace`` returned for it."""
        complete: bool = True
        """``False`` for the first steps of a long trace (``load_trace(first_steps=N)``):
        the screen paints them and then loads the whole trace."""
        step_count: int | None = None
        """How many steps the whole trace has (set on a partial load)."""

    @dataclass
    class TraceLoadFailed(Message):
        """The trace could not be loaded."""

        error: str

    def __init__(self, trace_id: str) -> None:
        super().__init__()
        self.trace_id = trace_id
        """The trace shown: the id (or unique prefix) given, the full id once loaded."""

    def prepare_trace(self, trace: TraceJSON) -> Any:
        """Work on the loaded trace that should stay off the UI thread (runs in the worker)."""
        return None

    @work(thread=True, exclusive=True, exit_on_error=False, group="trace", description="trace")
    def load_trace(self, first_steps: int | None = None, around: int | None = None) -> None:
        """Load ``self.trace_id``; the result arrives as a message (``read_trace``). Cancels
        the screen's other loads (their results would be older).

        Args:
            first_steps: when the trace has more steps than this, read only the first ones
                (through step ``around`` too, when given) and post them as a partial
                ``TraceLoaded``: a 10,000-step trace paints its first screenful without
                waiting for the other steps. The screen then loads the whole trace
                (``load_whole_trace``).
            around: a step the partial load must include (the step to select first).
        """
        message = self.read_trace(self.app, first_steps, around)
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    @work(thread=True, exit_on_error=False, group="trace", description="whole trace")
    def load_whole_trace(self) -> None:
        """Load the whole of ``self.trace_id`` after a partial ``TraceLoaded``, beside the
        worker that posted it (which may still be returning: an exclusive load would cancel
        it). A later ``load_trace`` cancels this one."""
        message = self.read_trace(self.app)
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    def read_trace(
        self, app: AgentReplayApp, first_steps: int | None = None, around: int | None = None
    ) -> TraceLoaded | TraceLoadFailed:
        """Read ``self.trace_id`` from ``app``'s store (in a worker; ``load_trace`` says what
        ``first_steps`` and ``around`` do): the message to post, with what ``prepare_trace``
        built."""
        from agent_replay.store.queries import step_count
        from agent_replay.store.trace_detail import resolve_trace_id, step_span, trace_json

        try:
            with read_store(app) as store:
                trace_id = resolve_trace_id(store, self.trace_id)
                if first_steps is not None:
                    span = step_span(store, trace_id)
                    if span is not None:
                        last = max(span[0], around or 0) + first_steps - 1
                        if last < span[1]:
                            trace = trace_json(store, trace_id, to_step=last)
                            count = step_count(store, trace_id)
                            prepared = self.prepare_trace(trace)
                            return self.TraceLoaded(
                                trace, prepared, complete=False, step_count=count
                            )
                trace = trace_json(store, trace_id)
        except AgentReplayError as exc:
            return self.TraceLoadFailed(exc.message)
        return self.TraceLoaded(trace, self.prepare_trace(trace))
