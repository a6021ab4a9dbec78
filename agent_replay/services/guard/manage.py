"""Guard policies in a store: add, list, find, remove, enable, disable, and test a trace.

What ``agent-replay guard`` and the app's policies screen call. Validation is
``policy.validate_*`` (the same ``guard add`` and the form apply); a refused policy raises
``UsageError`` with the reason (exit 2). Policies are plain rows of the ``policies`` table;
the hook reads them with the stdlib (``enforce.load_policies``): this module reads them through
Peewee's query builder, and both select ``policy.POLICY_COLUMNS`` for ``policy.policy_from_row``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peewee import Field, Select, fn

from agent_replay.clock import Clock
from agent_replay.errors import NotFoundError, StoreError, UsageError
from agent_replay.services.guard.decide import Evaluation, evaluate
from agent_replay.services.guard.match import StepText
from agent_replay.services.guard.policy import (
    POLICY_COLUMNS,
    Policy,
    PolicyError,
    policy_from_row,
    validate_action,
    validate_name,
    validate_pattern,
)
from agent_replay.store import ids
from agent_replay.store.db import Store
from agent_replay.store.models import PolicyRow
from agent_replay.trace.base import canonical_time
from agent_replay.trace.io import dumps


def _fields(columns: Sequence[str]) -> list[Field]:
    """``policies`` columns as the model's fields."""
    return [PolicyRow._meta.fields[name] for name in columns]


_FIELDS = _fields(POLICY_COLUMNS)
"""The columns ``policy_from_row`` reads (the hook's stdlib read selects the same)."""


def _policies() -> Select:
    """Policies as ``policy_from_row`` reads them."""
    return PolicyRow.select(*_FIELDS)


def _read(store: Store, query: Select) -> list[tuple[Any, ...]]:
    return list(query.tuples().execute(store.db))


def list_policies(store: Store, *, enabled_only: bool = False) -> list[Policy]:
    """Every policy (or the enabled ones), highest priority first, then by name (as
    ``enforce.ENABLED_POLICIES`` orders them)."""
    query = _policies().order_by(PolicyRow.priority.desc(), PolicyRow.name)
    if enabled_only:
        query = query.where(PolicyRow.enabled != 0)
    return [policy_from_row(row) for row in _read(store, query)]


def find_policy(store: Store, ref: str) -> Policy:
    """A policy by id, by name, or by a unique id prefix.

    Raises:
        NotFoundError: nothing matches.
        UsageError: the prefix matches several policies.
    """
    rows = _read(store, _policies().where((PolicyRow.id == ref) | (PolicyRow.name == ref)))
    if not rows and ref.startswith(f"{ids.POLICY}_"):
        # A prefix compared as text, not LIKE: case-sensitive on both backends, no wildcards.
        prefix = fn.SUBSTR(PolicyRow.id, 1, len(ref)) == ref
        rows = _read(store, _policies().where(prefix))
        if len(rows) > 1:
            names = ", ".join(sorted(r[0] for r in rows)[:5])
            raise UsageError(f"policy id prefix {ref!r} is ambiguous: it matches {names}")
    if not rows:
        raise NotFoundError(
            f"no policy {ref!r}", hints=["`agent-replay guard list` shows every policy"]
        )
    if len(rows) > 1:  # an id equal to another policy's name: the id wins
        rows = [r for r in rows if r[0] == ref]
    return policy_from_row(rows[0])


def add_policy(
    store: Store,
    clock: Clock,
    *,
    name: str,
    pattern: Any,
    action: str,
    description: str | None = None,
    priority: int = 0,
    fail_open: bool = False,
    enabled: bool = True,
) -> Policy:
    """Validate and store a new policy.

    Args:
        pattern: a JSON object (dict) or its JSON text.

    Raises:
        UsageError: the name, pattern or action is refused (the reason says why), or the name
            is taken.
    """
    from agent_replay.services.guard.policy import parse_pattern

    try:
        name = validate_name(name)
        parsed = parse_pattern(pattern) if isinstance(pattern, str) else validate_pattern(pattern)
        action = validate_action(action)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise UsageError(f"the priority must be a whole number (got {priority!r})")
    description = description.strip() if description and description.strip() else None
    policy = Policy(
        id=ids.new_id(ids.POLICY),
        name=name,
        pattern=parsed,
        action=action,
        priority=priority,
        description=description,
        enabled=enabled,
        fail_open=fail_open,
        created_at=canonical_time(clock.now()),
    )
    with store.write():
        taken = PolicyRow.select(PolicyRow.id).where(PolicyRow.name == name).scalar(store.db)
        if taken is not None:
            raise UsageError(
                f"a policy named {name!r} exists already ({taken})",
                hints=["pick another --name, or `agent-replay guard remove` the old one"],
            )
        PolicyRow.insert_many([_row(policy)], fields=_FIELDS).execute(store.db)
    remember_policies(store)
    return policy


def insert_new_policies(
    store: Store, rows: Sequence[tuple[Any, ...]], columns: Sequence[str]
) -> list[str]:
    """Insert ready-made policy rows (fixed ids, like the demo's) whose id and name the store
    does not hold yet; returns the names inserted. The caller refreshes the marker.

    Args:
        rows: ``policies`` rows in ``columns`` order, ``id`` and ``name`` first.
    """
    with store.write():
        taken = _read(store, PolicyRow.select(PolicyRow.id, PolicyRow.name))
        ids_taken = {row[0] for row in taken}
        names = {row[1] for row in taken}
        fresh = [row for row in rows if row[0] not in ids_taken and row[1] not in names]
        if fresh:
            PolicyRow.insert_many(fresh, fields=_fields(columns)).execute(store.db)
    return [str(row[1]) for row in fresh]


def remove_policy(store: Store, ref: str) -> Policy:
    """Delete a policy (by id, name or unique id prefix); returns what was removed."""
    with store.write():
        policy = find_policy(store, ref)
        PolicyRow.delete().where(PolicyRow.id == policy.id).execute(store.db)
    remember_policies(store)
    return policy


def set_enabled(store: Store, ref: str, enabled: bool) -> Policy:
    """Enable or disable a policy; returns it as it is now."""
    with store.write():
        policy = find_policy(store, ref)
        PolicyRow.update(enabled=int(enabled)).where(PolicyRow.id == policy.id).execute(store.db)
    remember_policies(store)
    return find_policy(store, policy.id)


def enabled_count(store: Store) -> int:
    """How many policies are enabled."""
    return int(PolicyRow.select().where(PolicyRow.enabled != 0).count(store.db))


def remember_policies(store: Store) -> int:
    """Write the policies marker of a local store (``marker``): how many policies are enabled
    now, in ``config.json`` beside the database, so ``hook --enforce`` notices if they vanish.
    A PostgreSQL store or one without a file has no marker. Returns the count."""
    count = enabled_count(store)
    if store.is_sqlite and store.path is not None:
        from agent_replay.services.guard.marker import remember

        remember(store.path.parent, count)
    return count


def reset_marker(store_dir: Path) -> tuple[int, int]:
    """``guard reset``: accept the policies the local store holds now (none when its database
    is missing or empty), so ``hook --enforce`` stops refusing calls because policies
    vanished. Returns (enabled policies remembered before, enabled policies now).

    Raises:
        StoreError: the database exists but cannot be opened (restore or move it first).
    """
    from agent_replay.paths import DB_NAME
    from agent_replay.services.guard.marker import MarkerError, remember, remembered
    from agent_replay.store.db import open_store

    try:
        before = remembered(store_dir)
    except MarkerError as exc:
        raise StoreError(str(exc), hints=["fix or remove config.json"]) from None
    db_file = store_dir / DB_NAME
    if not db_file.exists() or db_file.stat().st_size == 0:
        remember(store_dir, 0)
        return before, 0
    try:
        store = open_store(db_file, create=False)
    except StoreError as exc:
        raise StoreError(
            f"{exc.message} (guard reset cannot accept a database it cannot read)",
            hints=["restore traces.db from a backup, or move it aside and run guard reset again"],
        ) from None
    with store:
        return before, remember_policies(store)


@dataclass(frozen=True)
class StepResult:
    """One step of a tested trace that a policy matched."""

    step: Mapping[str, Any]
    """The step object (the trace format's)."""
    evaluation: Evaluation

    def to_json(self) -> dict[str, Any]:
        """As ``guard test --json`` prints it."""
        return {
            "step_number": self.step["step_number"],
            "step_type": self.step["step_type"],
            "name": self.step.get("name"),
            **self.evaluation.to_json(),
        }


@dataclass(frozen=True)
class TraceTest:
    """Every step of a trace against every enabled policy."""

    trace_id: str
    steps: int
    """How many steps the trace has."""
    results: list[StepResult]
    """The steps some policy matched, in step order."""
    policies: int
    """How many enabled policies were applied."""
    warnings: tuple[str, ...] = ()

    @property
    def denied(self) -> bool:
        """Some step's decision is ``deny`` (``guard test --exit-code`` exits 1)."""
        return any(r.evaluation.action == "deny" for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "steps": self.steps,
            "policies": self.policies,
            "matched_steps": len(self.results),
            "denied": self.denied,
            "results": [r.to_json() for r in self.results],
            **({"warnings": list(self.warnings)} if self.warnings else {}),
        }


def match_steps(policies: Iterable[Policy], steps: Iterable[Mapping[str, Any]]) -> list[StepResult]:
    """The steps (step objects) some enabled policy matches, with each step's decision."""
    chosen = [p for p in policies if p.enabled]
    results = []
    for step in steps:
        evaluation = evaluate(chosen, StepText.from_step(step))
        if evaluation.matched:
            results.append(StepResult(step, evaluation))
    return results


def run_trace_test(store: Store, trace_id: str) -> TraceTest:
    """Every step of trace ``trace_id`` (an id or unique prefix) against the enabled
    policies."""
    from agent_replay.store.trace_detail import resolve_trace_id, step_dicts

    full_id = resolve_trace_id(store, trace_id)
    steps = step_dicts(store, full_id)
    policies = list_policies(store, enabled_only=True)
    warnings: dict[str, None] = {}
    results = []
    for step in steps:
        evaluation = evaluate(policies, StepText.from_step(step))
        warnings.update(dict.fromkeys(evaluation.warnings))
        if evaluation.matched:
            results.append(StepResult(step, evaluation))
    return TraceTest(full_id, len(steps), results, len(policies), tuple(warnings))


def _row(policy: Policy) -> tuple[Any, ...]:
    return (
        policy.id,
        policy.name,
        policy.description,
        dumps(policy.pattern),
        policy.action,
        policy.priority,
        int(policy.enabled),
        int(policy.fail_open),
        policy.created_at,
    )
