"""Migration 0006's full-text search index, and its upkeep on SQLite.

SQLite: contentless FTS5 tables fed from a queue that triggers fill (``sqlite_search_index``),
folded into the index by ``catch_up_search_index`` before a search reads it, and rebuilt by
``rebuild_search_index`` after a ``VACUUM``. PostgreSQL: a generated ``tsvector`` column with a
GIN index per table (``postgres_search_index``); the database keeps it.

SQL text, not the query builder: this is shipped migration DDL (frozen: the statements are
the ones migration 0006 has always run, and the upkeep reads the tables that DDL made, FTS5's
special ``INSERT`` commands included), which the query builder does not express. Moved here
from ``store/migrations`` as they were; ``migrations`` runs them and re-exports the upkeep.
"""

from __future__ import annotations

from peewee import Database

# --- 0006: the search index ------------------------------------------------------------------
#
# What is searchable: a step's name (weighted up), and its input, output and error; a trace's
# agent name and session id (weighted up), and its input, output and error. Payloads are stored
# as JSON text, so a JSON escape would glue its letter to the next word ("line1\nline2" has the
# word "nline2"): escapes are blanked before tokenizing, by the same expression on both backends.


def _searchable(*columns: str) -> str:
    joined = " || ' ' || ".join(f"COALESCE({c}, '')" for c in columns)
    return (
        f"replace(replace(replace(replace({joined}, '\\\\', ' '), '\\n', ' '), '\\t', ' '), "
        "'\\r', ' ')"
    )


_FTS_TOKENIZER = "unicode61 remove_diacritics 2"
_PG_BODY_CHARS = 100_000  # a tsvector holds at most 1 MB: index the head of huge payloads
_PG_PUNCTUATION = "[!-/:-@\\[-`{-~]+"  # ASCII punctuation: split words as FTS5's unicode61 does
_SEARCH_SOURCES = {
    # fts table: (content table, name expression, body columns, columns whose update reindexes)
    "steps_fts": ("steps", "name", ("input", "output", "error"), "name, input, output, error"),
    "traces_fts": (
        "traces",
        "agent_name || ' ' || COALESCE(session_id, '')",
        ("input", "output", "error"),
        "agent_name, session_id, input, output, error",
    ),
}


def _row_values(row: str, name: str, body: tuple[str, ...]) -> str:
    """``name, body`` of the indexed text of ``row`` (``new``, ``old`` or a table alias)."""
    named = name.replace("agent_name", f"{row}.agent_name").replace(
        "session_id", f"{row}.session_id"
    )
    if named == "name":
        named = f"COALESCE({row}.name, '')"
    return f"{named}, {_searchable(*(f'{row}.{c}' for c in body))}"


def sqlite_search_index(db: Database) -> None:
    """Contentless FTS5 tables keyed by the row's rowid, and a queue of the rows to re-index.

    Contentless: the text is not stored twice; snippets are cut from the rows themselves
    (``store/search``). Indexing costs ~30 µs a step, several times the insert itself, so
    writers only queue: the triggers note a changed row in ``search_queue`` (its old indexed
    text with it, the first time it changes since the index was last caught up: a contentless
    table deletes by replaying what it indexed), and ``catch_up_search_index`` folds the queue
    into the index in one set-based pass before any search reads it. Hooks and ``record``
    keep their write rates; the first search after a large ingest pays for the indexing.
    """
    db.execute_sql(
        """CREATE TABLE search_queue (
            kind TEXT NOT NULL,
            ref INTEGER NOT NULL,
            old_name TEXT,
            old_body TEXT,
            PRIMARY KEY (kind, ref)
        ) WITHOUT ROWID"""
    )
    for fts, (table, name, body, watched) in _SEARCH_SOURCES.items():
        db.execute_sql(
            f"CREATE VIRTUAL TABLE {fts} USING fts5(name, body, content='', "
            f"tokenize='{_FTS_TOKENIZER}')"
        )
        kind = fts[0]  # s(teps), t(races)
        queued = f"EXISTS (SELECT 1 FROM search_queue WHERE kind = '{kind}' AND ref = old.rowid)"
        db.execute_sql(
            f"CREATE TRIGGER {fts}_insert AFTER INSERT ON {table} BEGIN "
            f"INSERT OR IGNORE INTO search_queue (kind, ref) VALUES ('{kind}', new.rowid); END"
        )
        keep_old = (
            f"BEGIN INSERT INTO search_queue (kind, ref, old_name, old_body) "
            f"VALUES ('{kind}', old.rowid, {_row_values('old', name, body)}); END"
        )
        db.execute_sql(
            f"CREATE TRIGGER {fts}_update AFTER UPDATE OF {watched} ON {table} "
            f"WHEN NOT {queued} {keep_old}"
        )
        db.execute_sql(
            f"CREATE TRIGGER {fts}_delete AFTER DELETE ON {table} WHEN NOT {queued} {keep_old}"
        )
    rebuild_search_index(db)


def catch_up_search_index(db: Database, limit: int | None = None) -> int:
    """Fold ``search_queue`` into the FTS5 tables (SQLite; run inside a write transaction):
    remove what each queued row had indexed, index what it holds now. Returns the rows
    re-indexed (0, after one cheap read, when the index is current). ``limit``: fold at most
    that many queued rows (a bounded step of upkeep inside a writer's own transaction: see
    ``services/ingest``); the rest stay queued."""
    if db.execute_sql("SELECT 1 FROM search_queue LIMIT 1").fetchone() is None:
        return 0
    picked = ""
    if limit is not None:
        db.execute_sql(
            "CREATE TEMP TABLE IF NOT EXISTS search_pick "
            "(kind TEXT NOT NULL, ref INTEGER NOT NULL, PRIMARY KEY (kind, ref)) WITHOUT ROWID"
        )
        db.execute_sql("DELETE FROM temp.search_pick")
        db.execute_sql(
            "INSERT INTO temp.search_pick SELECT kind, ref FROM search_queue LIMIT ?",
            (max(0, int(limit)),),
        )
        picked = " AND (q.kind, q.ref) IN (SELECT kind, ref FROM temp.search_pick)"
    done = 0
    for fts, (table, name, body, _) in _SEARCH_SOURCES.items():
        kind = fts[0]
        db.execute_sql(
            f"INSERT INTO {fts} ({fts}, rowid, name, body) "
            f"SELECT 'delete', q.ref, q.old_name, q.old_body FROM search_queue q "
            f"WHERE q.kind = '{kind}' AND q.old_body IS NOT NULL{picked}"
        )
        cursor = db.execute_sql(
            f"INSERT INTO {fts} (rowid, name, body) "
            f"SELECT r.rowid, {_row_values('r', name, body)} FROM search_queue q "
            f"JOIN {table} r ON r.rowid = q.ref WHERE q.kind = '{kind}'{picked}"
        )
        done += max(0, int(cursor.rowcount or 0))
    if limit is None:
        db.execute_sql("DELETE FROM search_queue")
    else:
        db.execute_sql(
            "DELETE FROM search_queue WHERE (kind, ref) IN (SELECT kind, ref FROM temp.search_pick)"
        )
        db.execute_sql("DELETE FROM temp.search_pick")
    return done


def rebuild_search_index(db: Database) -> None:
    """Re-index every row (SQLite): after the migration, and after a ``VACUUM``, which may
    renumber the rowids the index is keyed by (the queue is then moot: emptied)."""
    for fts, (table, name, body, _) in _SEARCH_SOURCES.items():
        db.execute_sql(f"INSERT INTO {fts} ({fts}) VALUES ('delete-all')")
        db.execute_sql(
            f"INSERT INTO {fts} (rowid, name, body) "
            f"SELECT r.rowid, {_row_values('r', name, body)} FROM {table} r"
        )
    db.execute_sql("DELETE FROM search_queue")


def postgres_search_index(db: Database) -> None:
    """A stored, generated ``tsvector`` per row with a GIN index (the database keeps it)."""
    for table, name, body, _ in _SEARCH_SOURCES.values():
        head = f"left({_searchable(*body)}, {_PG_BODY_CHARS})"
        db.execute_sql(
            f"ALTER TABLE {table} ADD COLUMN search_vec tsvector GENERATED ALWAYS AS ("
            f"setweight(to_tsvector('simple', regexp_replace(COALESCE({name}, ''), "
            f"'{_PG_PUNCTUATION}', ' ', 'g')), 'A') || "
            f"setweight(to_tsvector('simple', regexp_replace({head}, "
            f"'{_PG_PUNCTUATION}', ' ', 'g')), 'D')) STORED"
        )
        db.execute_sql(f"CREATE INDEX {table}_search ON {table} USING GIN (search_vec)")
