"""No production module builds SQL strings, except the ones listed here, each with its reason.

Issue 19 makes the Peewee models the store: reads and writes go through Peewee's query builder,
so one query runs unchanged on SQLite and PostgreSQL. The SQL text left is in ``KEEP``, each
module with its reason: the migrations' frozen DDL, the full-text search backends, the stdlib-
only fast paths (the hook's, and list/show's, which must not pay for importing peewee) and
SQLite's maintenance commands. ``CONVERT`` listed the modules still to move to the query
builder while that was under way; it is empty and may only stay so. A new module with SQL text
fails here (use the query builder, or argue for a ``KEEP`` entry in review); a listed module
that no longer has any fails too, so its entry is deleted the day it is converted.

What counts as SQL: a string literal (or an f-string's text) that starts with a statement
keyword (``SELECT``, ``INSERT``, ``PRAGMA``, ..., or is one alone: ``VACUUM``) or holds an
upper-case clause (`` WHERE ``, `` ORDER BY ``, ``ON CONFLICT``, ...). Docstrings and other
bare string statements are prose, not SQL, and are skipped. A cheap AST scan: no import of
the package.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("agent_replay", "screens", "widgets")

KEEP: dict[str, str] = {
    "agent_replay/store/migration_ddl.py": "frozen DDL of the shipped migrations: the schema's "
    "history must not move when store/models.py changes (and CREATE SCHEMA, which the query "
    "builder has no form for)",
    "agent_replay/store/search_index.py": "migration 0006's frozen search-index DDL and its FTS5 "
    "upkeep (the FTS5 'delete' commands), which the query builder does not express",
    "agent_replay/store/search.py": "the full-text search backends (FTS5 MATCH, PostgreSQL "
    "tsvector ranking), which the query builder does not express",
    "agent_replay/store/trace_search.py": "the PostgreSQL ranking query of the full-text "
    "search (ts_rank over the hits), which the query builder does not express",
    "agent_replay/services/hook/inbox.py": "the hook's fast path: stdlib sqlite3 only "
    "(no peewee), inside the hook's start-up budget",
    "agent_replay/services/hook/enforce.py": "hook --enforce's fast path: the policy read with "
    "stdlib sqlite3 only (no peewee); guard.manage reads the same columns with the query builder",
    "agent_replay/store/schema.py": "the early inbox's frozen DDL, shared by the hook's stdlib "
    "fast path (a new store) and migration 0013",
    "agent_replay/commands/fast_read.py": "list/show's fast path (issue 17): stdlib sqlite3 only "
    "(no peewee); its one statement reads the schema version (PRAGMA user_version)",
    "agent_replay/store/queries.py": "the trace list and a trace's detail, which list/show's "
    "fast path runs over a stdlib sqlite3 connection (no peewee, issue 17); the full CLI and "
    "the TUI run the same readers",
    "agent_replay/store/trace_detail.py": "a trace's detail (the trace, its steps, evals and "
    "annotations), which show's fast path runs over a stdlib sqlite3 connection (no peewee, "
    "issue 17); the full CLI and the TUI run the same readers",
    "agent_replay/store/core.py": "SqliteReader, the fast path's peewee-free connection: its "
    "one statement makes it read-only (PRAGMA query_only)",
    "agent_replay/services/redact_store.py": "SQLite's VACUUM, which rewrites the file so the "
    "redacted text is gone from it: the query builder has no form for it",
    "agent_replay/store/writers.py": "dead_writers, which list/show's fast path (issue 17) runs "
    "on its stdlib sqlite3 connection (no peewee); the rest is the query builder",
    "agent_replay/store/retention.py": "VACUUM and SQLite's incremental_vacuum run to its end: "
    "maintenance commands the query builder has no form for; the rest is the query builder",
}
"""Modules that keep SQL text for good (the exceptions issue 19 names)."""

_TODO = "to be moved to Peewee's query builder (issue 19)"
CONVERT: dict[str, str] = {}
"""Today's modules that still build SQL by hand: the list may only shrink."""

_STATEMENT = re.compile(
    r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|PRAGMA|BEGIN|WITH|REPLACE|"
    r"VACUUM|ANALYZE|SAVEPOINT|RELEASE|ROLLBACK|COMMIT|REINDEX|ATTACH|DETACH|EXPLAIN|TRUNCATE|"
    r"SET|LOCK|LISTEN|NOTIFY)\b([ (\n]|$)"
)
_CLAUSE = re.compile(
    r"(^|[\s(])(FROM|WHERE|ORDER BY|GROUP BY|JOIN|ON CONFLICT|VALUES|SET|LIMIT|RETURNING|"
    r"HAVING|UNION|AND|OR)\s"
)


def looks_like_sql(text: str) -> bool:
    """Whether a string literal's text is SQL (or a piece of a statement being built)."""
    return bool(_STATEMENT.search(text) or _CLAUSE.search(text))


def literal_texts(source: str) -> Iterator[str]:
    """The text of every string literal in a module that is not prose: docstrings and other
    bare string statements are skipped; an f-string yields its literal parts joined with
    ``{}`` where its fields are."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else ():
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                skip.add(id(statement.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                skip.add(id(value))
                parts.append(value.value if isinstance(value, ast.Constant) else "{}")
            yield "".join(str(part) for part in parts)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in skip:
                yield node.value


@functools.cache  # parsed once for the module's tests
def modules_with_sql() -> frozenset[str]:
    """The production modules (repository-relative paths) holding SQL text."""
    found: set[str] = set()
    for top in PRODUCTION:
        for path in sorted((ROOT / top).rglob("*.py")):
            if any(looks_like_sql(text) for text in literal_texts(path.read_text("utf-8"))):
                found.add(path.relative_to(ROOT).as_posix())
    return frozenset(found)


def test_no_module_outside_the_list_builds_sql() -> None:
    """New SQL text goes through the query builder, not into a new module."""
    unlisted = sorted(modules_with_sql() - KEEP.keys() - CONVERT.keys())
    assert not unlisted, (
        "these production modules build SQL strings: use Peewee's query builder "
        f"(store/models.py), or argue for an entry in KEEP: {unlisted}"
    )


def test_the_list_has_no_module_that_stopped_building_sql() -> None:
    """A converted (or moved) module leaves the list, so the list only shrinks."""
    stale = sorted((KEEP.keys() | CONVERT.keys()) - modules_with_sql())
    assert not stale, f"these no longer hold SQL text (or moved): remove them here: {stale}"
    assert not KEEP.keys() & CONVERT.keys()


def test_the_scan_tells_sql_from_prose() -> None:
    """Statements, clauses and f-strings count; docstrings and English messages don't."""
    source = '''
"""SELECT in a module docstring is prose."""
def f(table, where):
    """DELETE FROM in a docstring is prose too."""
    a = f"SELECT id FROM {table}"
    b = " WHERE enabled <> 0"
    c = "a policy named {name!r} exists already"
    d = "select the trace to delete from the list"
    e = "INSERT OR IGNORE INTO tags VALUES (?, ?)"
    g = "VACUUM"
    h = "Vacuum the store"
'''
    texts = list(literal_texts(source))
    expected = [True, True, False, False, True, True, False]
    assert [looks_like_sql(text) for text in texts] == expected
