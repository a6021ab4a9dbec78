"""The schema version this build writes, in a stdlib-only module: the hook's fast path checks
a store's ``PRAGMA user_version`` against it without importing peewee or the migrations."""

SCHEMA_VERSION = 12
"""The number of migrations in ``migrations.MIGRATIONS`` (a test keeps them equal)."""
