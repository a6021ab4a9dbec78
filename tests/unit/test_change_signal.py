"""``ChangeSignal``: the app's once-a-second "did the store change?" asked from a worker thread
while the app may be quitting and closing it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agent_replay.services.guard.manage import add_policy, remove_policy, set_enabled
from agent_replay.services.ingest import ingest_trace
from agent_replay.store.changes import ChangeSignal
from agent_replay.store.db import Store


def test_a_commit_elsewhere_is_seen_once(store: Store, make_trace: Any) -> None:
    signal = ChangeSignal(store)
    assert signal.changed() is False  # the baseline
    assert signal.changed() is False
    ingest_trace(store, make_trace(2))  # on the store's own connection, not the signal's
    assert signal.changed() is True
    assert signal.changed() is False
    signal.close()


def test_closing_while_another_thread_polls_waits_for_it_and_then_says_nothing(
    store: Store,
) -> None:
    """Quitting the app closes the signal while its worker may be inside a poll: the close
    waits for that poll, and later polls answer False instead of touching a closed
    connection (closing SQLite under a running statement crashed the process)."""
    signal = ChangeSignal(store)
    errors: list[BaseException] = []
    polled = threading.Event()

    def poll() -> None:
        try:
            for _ in range(2000):
                signal.changed()
                polled.set()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    worker = threading.Thread(target=poll)
    worker.start()
    polled.wait(5)
    signal.close()
    worker.join(30)
    assert errors == []
    assert signal.changed() is False


@pytest.mark.both_backends
def test_a_guard_policy_added_changed_or_removed_elsewhere_is_seen(
    store: Store, clock: Any
) -> None:
    """The policies screen refreshes on this signal: each kind of policy change moves it on
    both backends (on PostgreSQL, a change to no other table than ``policies``)."""
    signal = ChangeSignal(store)
    assert signal.changed() is False  # the baseline
    with store.db.connection_context():
        add_policy(store, clock, name="no-rm", pattern={"name_contains": "rm"}, action="deny")
    assert signal.changed() is True
    with store.db.connection_context():
        set_enabled(store, "no-rm", False)
    assert signal.changed() is True
    assert signal.changed() is False
    with store.db.connection_context():
        remove_policy(store, "no-rm")
    assert signal.changed() is True
    signal.close()
