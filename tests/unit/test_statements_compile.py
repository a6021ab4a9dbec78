"""Every statement a module builds once (``store/statements.Statement`` at module level)
compiles on both backends: a statement is built on its first run, so one that can't be (a
constant, a SET list out of order) would otherwise fail only on the path that first runs it."""

from __future__ import annotations

import importlib
import pkgutil

import agent_replay
from agent_replay.store.db import Store
from agent_replay.store.statements import Statement


def module_statements() -> list[tuple[str, Statement]]:
    found: list[tuple[str, Statement]] = []
    for info in pkgutil.walk_packages(agent_replay.__path__, "agent_replay."):
        if not info.name.startswith(("agent_replay.services", "agent_replay.store")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, Statement):
                found.append((f"{info.name}.{name}", value))
    return found


def test_every_module_statement_compiles(store: Store) -> None:
    statements = module_statements()
    assert len(statements) > 20  # the recorder's, the hook's, the OTLP writer's, ...
    for name, statement in statements:
        try:
            assert statement.sql(store)
        except Exception as exc:  # noqa: BLE001 - name the statement that fails
            raise AssertionError(f"{name}: {exc}") from exc
