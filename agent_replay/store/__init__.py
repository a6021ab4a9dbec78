"""The store: peewee models, connection and pragmas, migrations, and queries returning domain
objects. Depends on ``agent_replay.trace`` only; never on services, the CLI or Textual.

peewee imports every database driver it finds when it is first imported (psycopg2 brings ssl
with it), which a local SQLite store never needs: ``_LazyDrivers`` keeps those imports out of
peewee's own start-up, and ``store.db`` hands peewee psycopg2 when a PostgreSQL store is opened
(``enable_psycopg2``). Importing psycopg2 anywhere else works as usual.
"""

from __future__ import annotations

import sys

# typing.TYPE_CHECKING, without importing typing: it stays off list's start-up (issue 17)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_DRIVERS = frozenset({"psycopg2", "psycopg2cffi", "psycopg", "pymysql", "MySQLdb"})


class _LazyDrivers:
    """Fails the driver imports peewee tries while its module is still initializing (a
    meta-path finder; no ``importlib.abc`` base, which the hook's fast path would import)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.partition(".")[0] not in _DRIVERS:
            return None
        peewee = sys.modules.get("peewee")
        if peewee is not None and not hasattr(peewee, "__version__"):  # set after its imports
            raise ImportError(f"{name}: imported when a PostgreSQL store is opened")
        return None


if not any(isinstance(finder, _LazyDrivers) for finder in sys.meta_path):
    sys.meta_path.insert(0, _LazyDrivers())
