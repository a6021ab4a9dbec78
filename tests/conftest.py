"""Shared fixtures: an isolated store directory per test, a migrated store (SQLite, and
PostgreSQL when a server is given), a fixed clock and a factory of valid trace objects.

The store and service suites (``tests/unit``, and tests marked ``both_backends``) run every
test that uses the ``store`` fixture twice: on a SQLite file and on a PostgreSQL server, each
test in a schema of its own (so xdist workers never meet). The server comes from ``--pg URL``
or ``AGENT_REPLAY_TEST_PG``; without one (or when it can't be reached) the PostgreSQL variants
skip with the reason, except under ``CI=true``, where they fail. A PostgreSQL variant also sets
``AGENT_REPLAY_DB_URL``, so commands, hooks and subprocesses in the test use the same store.
Tests marked ``sqlite_only`` (pragmas, files, rowid plans) run on SQLite only.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_replay.clock import FixedClock
from agent_replay.store.db import Store, ensure_database, mask_url

PG_ENV = "AGENT_REPLAY_TEST_PG"
BOTH_DIRS = ("tests/unit/",)
"""Where every test using ``store`` runs on both backends (elsewhere: ``both_backends``)."""
SQLITE_ONLY_MODULES: frozenset[str] = frozenset({"test_guard_enforce.py"})
"""Modules of ``tests/unit`` that stay on SQLite as a whole: ``hook --enforce`` decides in the
stdlib fast path, against the local SQLite file."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--pg",
        default=None,
        metavar="URL",
        help=f"PostgreSQL server for the PostgreSQL variants of the store tests (else ${PG_ENV})",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: runs on the SQLite store only")
    config.addinivalue_line(
        "markers", "both_backends: runs on SQLite and PostgreSQL (outside tests/unit too)"
    )
    config.addinivalue_line(
        "markers", "fresh_pg_schema: the PostgreSQL variant gets a new, empty schema"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    node = metafunc.definition
    path = str(node.path).replace(os.sep, "/")
    both = node.get_closest_marker("both_backends") is not None or (
        any(f"/{d}" in path for d in BOTH_DIRS) and node.path.name not in SQLITE_ONLY_MODULES
    )
    if node.get_closest_marker("sqlite_only") is not None or not both:
        return  # the backend fixture's default: SQLite, test ids unchanged
    metafunc.parametrize("backend", ["sqlite", "postgresql"], indirect=True)


_PG_STATE: dict[str, str | None] = {}
_PG_SKIP = "PostgreSQL variant:"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """The one skip policy: a test skips only for a missing external service (PostgreSQL),
    with the reason, and under ``CI=true`` nothing skips. Any other skip is turned into a
    failure naming it, so a missing fixture can never hide a test.

    PostgreSQL skips are reported at one place, so ``-ra`` folds them into a single line with
    the reason instead of one line per test."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    if _PG_SKIP in reason and not _in_ci():
        where = os.path.relpath(__file__, item.config.rootpath)
        report.longrepr = (where, pg_server.__code__.co_firstlineno, reason)
        return
    report.outcome = "failed"
    why = "under CI=true nothing skips" if _in_ci() else "tests skip only for PostgreSQL"
    report.longrepr = f"skipped ({why}): {reason}"


def pg_server(config: pytest.Config) -> str:
    """The PostgreSQL server URL, checked once per process; skips (fails under CI=true)."""
    if "url" not in _PG_STATE:
        url = (config.getoption("--pg") or os.environ.get(PG_ENV) or "").strip() or None
        reason = None
        if url is None:
            reason = (
                f"{_PG_SKIP} no server given (set {PG_ENV}=postgresql://USER@HOST:PORT/DB "
                "or pass --pg URL)"
            )
        else:
            try:
                import psycopg2

                psycopg2.connect(url, connect_timeout=5).close()
            except Exception as exc:  # noqa: BLE001 - any failure is the skip reason
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                reason = f"{_PG_SKIP} the server at {mask_url(url)} is not reachable: {first}"
        _PG_STATE["url"] = url
        _PG_STATE["reason"] = reason
    reason = _PG_STATE["reason"]
    if reason is not None:
        if _in_ci():
            pytest.fail(f"{reason} (required under CI=true)", pytrace=False)
        pytest.skip(reason)
    url = _PG_STATE["url"]
    assert url is not None
    return url


def _admin(url: str, sql: str) -> None:
    import psycopg2

    conn = psycopg2.connect(url, connect_timeout=5)
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute("SET lock_timeout = '20s'")
            cursor.execute(sql)
    finally:
        conn.close()


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgresql`` (parametrized where both run; else SQLite)."""
    return str(getattr(request, "param", "sqlite"))


class _ReusedSchema:
    """One migrated PostgreSQL schema per worker, reset between tests instead of rebuilt.

    Creating and migrating a schema costs ~80 DDL statements (0.3-1.5 s of server time), and
    dropping it another 0.1-0.9 s: per PostgreSQL variant that was a third of the suite. The
    reset (a few ms) deletes every row, children before parents, puts back the rows the
    migrations wrote and the sequences as they were, after checking the catalog against the
    figures taken right after migrating: a schema a test changed (a column, an index, a
    trigger, a function) is dropped and a fresh one built, so no test sees another's
    leftovers. Tests marked ``fresh_pg_schema`` (first-open migrations) get a new, empty
    schema of their own instead.
    """

    CATALOG = """
        SELECT (SELECT count(*) || ':' || coalesce(sum(a.atttypid::int8 * 31 + a.attnum
                       + a.attnotnull::int), 0) || ':' || coalesce(max(c.oid::int8), 0)
                  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND NOT a.attisdropped
                 WHERE c.relnamespace = %(s)s::regnamespace)
            || '/' || (SELECT count(*) || ':' || coalesce(max(t.oid::int8), 0)
                  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                 WHERE c.relnamespace = %(s)s::regnamespace)
            || '/' || (SELECT count(*) || ':' || coalesce(max(oid::int8), 0)
                  FROM pg_proc WHERE pronamespace = %(s)s::regnamespace)
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self.schema = ""
        self.catalog = ""
        self.reset_sql = ""

    def url(self, schema: str) -> str:
        return f"{self.server}{'&' if '?' in self.server else '?'}schema={schema}"

    def _connect(self) -> Any:
        import psycopg2

        conn = psycopg2.connect(self.server, connect_timeout=5)
        conn.autocommit = True
        return conn

    def _build(self) -> None:
        self.schema = f"t_{uuid.uuid4().hex[:16]}"
        ensure_database(self.url(self.schema)).close()
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                self.reset_sql = self._reset_sql(cur)
                cur.execute(self.CATALOG, {"s": self.schema})
                self.catalog = str(cur.fetchone()[0])
        finally:
            conn.close()

    def _reset_sql(self, cur: Any) -> str:
        """One batch: delete every row (twice, for rows a delete trigger queued), then put back
        the migrations' own rows and every sequence's position."""
        s = self.schema
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (s,))
        tables = sorted(row[0] for row in cur.fetchall())
        cur.execute(
            "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint "
            "WHERE contype = 'f' AND connamespace = %s::regnamespace",
            (s,),
        )
        parents: dict[str, set[str]] = {t: set() for t in tables}
        for child, parent in cur.fetchall():
            child, parent = child.rsplit(".", 1)[-1], parent.rsplit(".", 1)[-1]
            if child in parents and child != parent:
                parents[child].add(parent)
        order: list[str] = []  # children first: a table goes once nothing left refers to it
        while len(order) < len(tables):
            free = [
                t
                for t in tables
                if t not in order
                and not any(t in parents[c] for c in tables if c not in order and c != t)
            ]
            assert free, f"foreign keys form a cycle in {tables}"
            order.extend(free)
        deletes = "".join(f'DELETE FROM "{s}"."{t}"; ' for t in order)
        parts = ["BEGIN; ", deletes, deletes]
        for table in tables:
            cur.execute(f'SELECT * FROM "{s}"."{table}"')
            rows = cur.fetchall()
            if rows:
                names = ", ".join(f'"{col.name}"' for col in cur.description)
                for row in rows:
                    values = cur.mogrify(", ".join(["%s"] * len(row)), row).decode()
                    parts.append(f'INSERT INTO "{s}"."{table}" ({names}) VALUES ({values}); ')
        cur.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
            "AND c.relkind = 'S'",
            (s,),
        )
        for (sequence,) in cur.fetchall():
            cur.execute(f'SELECT last_value, is_called FROM "{s}"."{sequence}"')
            last, called = cur.fetchone()
            parts.append(
                cur.mogrify(
                    "SELECT setval(%s, %s, %s); ", (f'"{s}"."{sequence}"', last, called)
                ).decode()
            )
        parts.append("COMMIT")
        return "".join(parts)

    def _reset(self) -> bool:
        """Back to the state right after migrating; ``False`` when the schema was changed."""
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET lock_timeout = '5s'")
                cur.execute(self.CATALOG, {"s": self.schema})
                if str(cur.fetchone()[0]) != self.catalog:
                    return False
                cur.execute(self.reset_sql)
                return True
        except Exception:  # noqa: BLE001 - a lock or a broken schema: build a fresh one
            return False
        finally:
            conn.close()

    def acquire(self) -> str:
        if not self.schema or not self._reset():
            self.drop()
            self._build()
        return self.url(self.schema)

    def drop(self) -> None:
        if self.schema:
            try:
                _admin(self.server, f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            except Exception:  # noqa: BLE001 - a leftover schema is harmless
                pass
            self.schema = ""


_REUSED: dict[str, _ReusedSchema] = {}


@pytest.fixture(scope="session", autouse=True)
def _drop_reused_schema() -> Iterator[None]:
    yield
    for reused in _REUSED.values():
        reused.drop()


@pytest.fixture
def store_url(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str | None]:
    """The PostgreSQL store's URL, or ``None`` on SQLite: this worker's migrated schema, reset
    to its just-migrated state (``_ReusedSchema``), or with ``fresh_pg_schema`` a new, empty
    schema dropped afterwards.

    Also sets ``AGENT_REPLAY_DB_URL`` to it, so everything the test runs uses that store.
    """
    if backend != "postgresql":
        yield None
        return
    server = pg_server(request.config)
    if request.node.get_closest_marker("fresh_pg_schema") is None:
        reused = _REUSED.setdefault(server, _ReusedSchema(server))
        url = reused.acquire()
        monkeypatch.setenv("AGENT_REPLAY_DB_URL", url)
        yield url
        return
    schema = f"t_{uuid.uuid4().hex[:16]}"
    url = f"{server}{'&' if '?' in server else '?'}schema={schema}"
    monkeypatch.setenv("AGENT_REPLAY_DB_URL", url)
    try:
        yield url
    finally:
        try:
            _admin(server, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        except Exception:  # noqa: BLE001 - a leftover schema is harmless; never fail teardown
            pass


FIXED_NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)

MakeTrace = Callable[..., dict[str, Any]]


@pytest.fixture(autouse=True)
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own store directory, through ``AGENT_REPLAY_DIR``."""
    path = tmp_path / ".agent-replay"
    monkeypatch.setenv("AGENT_REPLAY_DIR", str(path))
    return path


_SQLITE_TEMPLATE: dict[str, Path] = {}


@pytest.fixture
def store(
    store_dir: Path, store_url: str | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """A freshly created and migrated store: in ``store_dir``, or a PostgreSQL schema.

    On SQLite the directory is a copy of one this worker created and migrated through
    ``ensure_database`` (files and modes as it left them): 4 ms instead of 60-100 ms of
    migrations per test."""
    if store_url is None and not store_dir.exists():
        if "dir" not in _SQLITE_TEMPLATE:
            template = tmp_path_factory.mktemp("store-template") / ".agent-replay"
            ensure_database(template).close()
            _SQLITE_TEMPLATE["dir"] = template
        shutil.copytree(_SQLITE_TEMPLATE["dir"], store_dir)
    db = ensure_database(store_url or store_dir)
    yield db
    db.close()


@pytest.fixture
def clock() -> FixedClock:
    """A clock pinned to 2026-06-01 12:00 UTC."""
    return FixedClock(FIXED_NOW)


def _iso(base: dt.datetime, seconds: float) -> str:
    instant = base + dt.timedelta(seconds=seconds)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


_STEP_TYPES = ("thought", "tool_call", "llm_call", "retrieval", "output")


@pytest.fixture
def make_trace() -> MakeTrace:
    """A factory of valid trace objects (the format's JSON) with ``steps`` steps.

    ``make_trace(3, id="trc_x", status="failed")``: keyword arguments override trace fields.
    Steps are one second apart from ``started_at``; each uses 10 tokens and lasts 500 ms.
    """

    def factory(steps: int = 3, **fields: Any) -> dict[str, Any]:
        start = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)
        trace: dict[str, Any] = {
            "agent_name": "test-agent",
            "status": "completed",
            "input": {"question": "what is 2 + 2?"},
            "output": "4",
            "started_at": _iso(start, 0),
            "ended_at": _iso(start, steps + 1),
            "tags": ["unit"],
            "steps": [
                {
                    "step_number": n,
                    "step_type": _STEP_TYPES[(n - 1) % len(_STEP_TYPES)],
                    "name": f"step-{n}",
                    "input": {"n": n},
                    "output": f"result {n}",
                    "started_at": _iso(start, n),
                    "ended_at": _iso(start, n + 0.5),
                    "tokens_used": 10,
                    **({"caused_by_step": n - 1} if n > 1 else {}),
                }
                for n in range(1, steps + 1)
            ],
        }
        trace.update(fields)
        return trace

    return factory
