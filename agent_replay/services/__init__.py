"""Services: plain functions and classes over a ``Store`` (ingest, record, analysis, export,
demo, ...). Synchronous and UI-agnostic; never import Textual or Rich."""

# The store package first: it keeps peewee from importing the PostgreSQL driver (and ssl, tens
# of ms) at its own start-up (``store._LazyDrivers``), and a service module importing ``peewee``
# directly (``fn``, ``JOIN``) sorts that import before its ``agent_replay.store`` ones.
import agent_replay.store  # noqa: F401
