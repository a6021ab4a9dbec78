"""The schema version this build writes, in a stdlib-only module: the hook's fast path checks
a store's ``PRAGMA user_version`` against it without importing peewee or the migrations."""

SCHEMA_VERSION = 13
"""The number of migrations in ``migrations.MIGRATIONS`` (a test keeps them equal)."""

EARLY_INBOX = "hook_inbox_early"
"""The table the hook's fast path queues into when it creates a store (stdlib only, no
migrations run): migration 0013 moves its rows into ``hook_inbox``, in order, in the same
transaction as the rest of the new store's schema, and drops it."""

EARLY_INBOX_DDL = (
    f"CREATE TABLE IF NOT EXISTS {EARLY_INBOX} (id INTEGER PRIMARY KEY, "
    "received_ms BIGINT NOT NULL, payload TEXT NOT NULL, options TEXT NOT NULL)"
)
"""The early inbox: ``hook_inbox``'s columns (migration 0003)."""
