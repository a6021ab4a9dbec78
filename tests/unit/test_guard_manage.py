"""Guard policies in a store (``guard.manage``), on both backends: add, find by id, name or
prefix, enable, disable, remove, count, and the demo's ready-made rows."""

from __future__ import annotations

from typing import Any

import pytest

from agent_replay.errors import NotFoundError, UsageError
from agent_replay.services.guard.manage import (
    add_policy,
    enabled_count,
    find_policy,
    insert_new_policies,
    list_policies,
    remove_policy,
    set_enabled,
)
from agent_replay.services.guard.policy import POLICY_COLUMNS
from agent_replay.store.db import Store

ROW = ("pol_Fixed1", "fixed", None, '{"step_type": "tool_call"}', "warn", 3, 1, 0, "2026-01-01Z")


def add(store: Store, clock: Any, name: str, action: str = "deny", **kw: Any) -> Any:
    return add_policy(store, clock, name=name, action=action, pattern={"name_contains": name}, **kw)


def test_policies_list_highest_priority_first_then_by_name(store: Store, clock: Any) -> None:
    add(store, clock, "b-low")
    add(store, clock, "c-high", priority=5)
    add(store, clock, "a-low", "warn", enabled=False)
    assert [p.name for p in list_policies(store)] == ["c-high", "a-low", "b-low"]
    assert [p.name for p in list_policies(store, enabled_only=True)] == ["c-high", "b-low"]
    assert enabled_count(store) == 2


def test_a_stored_policy_reads_back_as_it_was_added(store: Store, clock: Any) -> None:
    added = add(store, clock, "exact", "require_review", priority=2, fail_open=True,
                description="  Review it.  ")  # fmt: skip
    assert added.description == "Review it."
    assert [p.to_json() for p in list_policies(store)] == [added.to_json()]


def test_a_policy_is_found_by_id_name_or_unique_prefix(store: Store, clock: Any) -> None:
    policy = add(store, clock, "one")
    add(store, clock, "two")
    for ref in (policy.id, "one", policy.id[:-2]):
        assert find_policy(store, ref).to_json() == policy.to_json()


def test_an_id_prefix_is_matched_as_text(store: Store, clock: Any) -> None:
    """No LIKE wildcards, and case counts, on both backends."""
    insert_new_policies(store, [ROW], POLICY_COLUMNS)
    assert find_policy(store, "pol_Fix").id == "pol_Fixed1"
    for ref in ("pol_fix", "pol_F_xed", "pol_%ixed"):
        with pytest.raises(NotFoundError):
            find_policy(store, ref)


def test_an_ambiguous_prefix_names_the_candidates(store: Store, clock: Any) -> None:
    insert_new_policies(store, [ROW, ("pol_Fixed2", "other", *ROW[2:])], POLICY_COLUMNS)
    with pytest.raises(UsageError, match="pol_Fixed1, pol_Fixed2"):
        find_policy(store, "pol_Fixed")


def test_a_taken_name_is_refused(store: Store, clock: Any) -> None:
    policy = add(store, clock, "taken")
    with pytest.raises(UsageError, match=f"exists already \\({policy.id}\\)"):
        add(store, clock, "taken")


def test_disable_enable_and_remove(store: Store, clock: Any) -> None:
    policy = add(store, clock, "toggled")
    assert set_enabled(store, "toggled", False).enabled is False
    assert enabled_count(store) == 0
    assert set_enabled(store, policy.id, True).enabled is True
    assert remove_policy(store, "toggled").id == policy.id
    assert list_policies(store) == []


def test_ready_made_rows_skip_ids_and_names_already_stored(store: Store, clock: Any) -> None:
    add(store, clock, "other")
    fresh = ("pol_Fresh", "fresh", *ROW[2:])
    assert insert_new_policies(store, [ROW, fresh], POLICY_COLUMNS) == ["fixed", "fresh"]
    clash = ("pol_New", "other", *ROW[2:])
    assert insert_new_policies(store, [ROW, clash], POLICY_COLUMNS) == []
    assert {p.name for p in list_policies(store)} == {"other", "fixed", "fresh"}
    assert find_policy(store, "fixed").priority == 3
