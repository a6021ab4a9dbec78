"""Services: plain functions and classes over a ``Store`` (ingest, record, analysis, export,
demo, ...). Synchronous and UI-agnostic; never import Textual or Rich."""
