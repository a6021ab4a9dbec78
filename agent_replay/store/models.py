"""Peewee models of the current schema, used for queries.

The tables themselves are created by the frozen DDL in ``migrations.py`` (a shipped migration is
never edited); a test checks that these models and the migrated schema agree. Models are not
bound to a database: queries are bound to a ``Store``'s database explicitly, so two stores can be
open in one process.

JSON payload columns (``input``, ``output``, ``metadata``, ...) hold the JSON encoding of the
value, so a string stays a string and every value round-trips exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from peewee import (
    BigIntegerField,
    CompositeKey,
    Field,
    FloatField,
    IntegerField,
    Model,
    TextField,
)

from agent_replay.store.mapping import (
    ANNOTATION_COLUMNS,
    DECISION_COLUMNS,
    EVAL_COLUMNS,
    SNAPSHOT_COLUMNS,
    STEP_COLUMNS,
    TAG_COLUMNS,
    TRACE_COLUMNS,
)


class BaseModel(Model):
    class Meta:
        legacy_table_names = False


class TraceRow(BaseModel):
    """A trace. ``started_at_ms`` is the ordering key: the start, else the ingest time."""

    id = TextField(primary_key=True)
    agent_name = TextField()
    agent_version = TextField(null=True)
    trigger = TextField(null=True)
    status = TextField()
    input = TextField(null=True)
    output = TextField(null=True)
    input_hash = TextField(null=True)
    started_at = TextField(null=True)
    started_at_ms = BigIntegerField()
    ended_at = TextField(null=True)
    total_duration_ms = FloatField(null=True)
    total_tokens = BigIntegerField(null=True)
    total_cost_usd = FloatField(null=True)
    error = TextField(null=True)
    session_id = TextField(null=True)
    metadata = TextField(null=True)
    parent_trace_id = TextField(null=True)
    forked_from_step = IntegerField(null=True)
    otel_trace_id = TextField(null=True)
    source_format = TextField(null=True)
    step_count = IntegerField(default=0)
    created_at_ms = BigIntegerField()
    producer_trace_id = TextField(null=True)

    class Meta:
        table_name = "traces"


class StepRow(BaseModel):
    """A step. ``call_id`` is the producer's id for a tool call, to pair its result later."""

    id = TextField(primary_key=True)
    trace_id = TextField()
    step_number = IntegerField()
    step_type = TextField()
    name = TextField(null=True)
    input = TextField(null=True)
    output = TextField(null=True)
    error = TextField(null=True)
    started_at = TextField(null=True)
    started_at_ms = BigIntegerField(null=True)
    ended_at = TextField(null=True)
    duration_ms = FloatField(null=True)
    tokens_used = BigIntegerField(null=True)
    model = TextField(null=True)
    parent_step = IntegerField(null=True)
    caused_by_step = IntegerField(null=True)
    metadata = TextField(null=True)
    call_id = TextField(null=True)
    is_open = IntegerField(default=0)
    cost_usd = FloatField(null=True)

    class Meta:
        table_name = "steps"


class DecisionRow(BaseModel):
    step_id = TextField(primary_key=True)
    trace_id = TextField()
    options = TextField()
    chosen = TextField()
    rationale = TextField(null=True)
    confidence = FloatField(null=True)
    decided_by = TextField()

    class Meta:
        table_name = "decisions"


class SnapshotRow(BaseModel):
    step_id = TextField(primary_key=True)
    trace_id = TextField()
    context_window = TextField(null=True)
    environment = TextField(null=True)
    tool_state = TextField(null=True)

    class Meta:
        table_name = "snapshots"


class EvalRow(BaseModel):
    id = TextField(primary_key=True)
    trace_id = TextField()
    evaluator = TextField()
    score = FloatField()
    passed = IntegerField()
    threshold = FloatField(null=True)
    details = TextField(null=True)
    model = TextField(null=True)
    cost_usd = FloatField(null=True)
    created_at = TextField(null=True)
    created_at_ms = BigIntegerField(null=True)

    class Meta:
        table_name = "evals"


class AnnotationRow(BaseModel):
    """A person's label (note, score) on a trace or one of its steps."""

    id = TextField(primary_key=True)
    trace_id = TextField()
    step_number = IntegerField(null=True)
    label = TextField()
    note = TextField(null=True)
    score = FloatField(null=True)
    author = TextField(null=True)
    created_at = TextField(null=True)
    created_at_ms = BigIntegerField(null=True)

    class Meta:
        table_name = "annotations"


class TagRow(BaseModel):
    trace_id = TextField()
    tag = TextField()
    position = IntegerField()

    class Meta:
        table_name = "tags"
        primary_key = CompositeKey("trace_id", "tag")


class PolicyRow(BaseModel):
    id = TextField(primary_key=True)
    name = TextField(unique=True)
    description = TextField(null=True)
    pattern = TextField()
    action = TextField()
    priority = IntegerField(default=0)
    enabled = IntegerField(default=1)
    created_at = TextField()
    fail_open = IntegerField(default=0)

    class Meta:
        table_name = "policies"


class HookInboxRow(BaseModel):
    """A raw hook payload waiting for the drainer."""

    id = BigIntegerField(primary_key=True)
    received_ms = BigIntegerField()
    payload = TextField()
    options = TextField()

    class Meta:
        table_name = "hook_inbox"


class OtelSpanRow(BaseModel):
    """A raw OTLP span as received (normalized JSON), staged for the receiver's trace builder."""

    otel_trace_id = TextField()
    span_id = TextField()
    group_key = TextField()
    received_ms = BigIntegerField()
    data = TextField()

    class Meta:
        table_name = "otel_spans"
        primary_key = CompositeKey("otel_trace_id", "span_id")


class OtelLogRow(BaseModel):
    """A recognized OTLP log record (harness or GenAI event), keyed by a digest of its content."""

    record_key = TextField(primary_key=True)
    otel_trace_id = TextField(null=True)
    session_key = TextField(null=True)
    group_key = TextField(null=True)
    received_ms = BigIntegerField()
    data = TextField()

    class Meta:
        table_name = "otel_logs"


class PushDigestRow(BaseModel):
    """The digest of a trace's rows as last pushed here (``push`` skips an unchanged trace)."""

    trace_id = TextField(primary_key=True)
    digest = TextField()
    pushed_ms = BigIntegerField()

    class Meta:
        table_name = "push_digests"


class HookReceiptRow(BaseModel):
    """A spooled hook payload applied here (by its spool key), so it is applied only once."""

    spool_key = TextField(primary_key=True)
    delivered_ms = BigIntegerField()

    class Meta:
        table_name = "hook_receipts"


class HookFollowRow(BaseModel):
    """Where the hook's drainer is in a hook trace's session file: offsets and importer state
    (``services/capture/transcript_follow``)."""

    trace_id = TextField(primary_key=True)
    path = TextField()
    state = TextField()
    updated_ms = BigIntegerField()
    error = TextField(null=True)

    class Meta:
        table_name = "hook_follow"


class OtelResponseRow(BaseModel):
    """The OTLP trace (and step) that counts the tokens of an LLM response id."""

    response_id = TextField(primary_key=True)
    trace_id = TextField()
    step_number = IntegerField()

    class Meta:
        table_name = "otel_responses"


class WriterRow(BaseModel):
    """The live process recording a running trace (``store/writers``): host, pid, start token."""

    trace_id = TextField(primary_key=True)
    kind = TextField()
    host = TextField()
    pid = BigIntegerField()
    token = TextField()
    registered_ms = BigIntegerField()

    class Meta:
        table_name = "writers"


ALL_MODELS: tuple[type[BaseModel], ...] = (
    WriterRow,
    TraceRow,
    StepRow,
    DecisionRow,
    SnapshotRow,
    EvalRow,
    TagRow,
    PolicyRow,
    HookInboxRow,
    OtelSpanRow,
    OtelLogRow,
    PushDigestRow,
    HookReceiptRow,
    AnnotationRow,
    HookFollowRow,
    OtelResponseRow,
)


def fields_of(model: type[Model], columns: Sequence[str]) -> tuple[Field, ...]:
    """The fields of ``model`` for these column names, in their order."""
    return tuple(model._meta.columns[column] for column in columns)


# The fields in the column order of ``store/mapping``'s row tuples, so a row built there is
# written as it is (``store/writes.insert_rows``). Module-level tuples: the writers find their
# compiled statement by the tuple's identity.
TRACE_FIELDS = fields_of(TraceRow, TRACE_COLUMNS)
STEP_FIELDS = fields_of(StepRow, STEP_COLUMNS)
DECISION_FIELDS = fields_of(DecisionRow, DECISION_COLUMNS)
SNAPSHOT_FIELDS = fields_of(SnapshotRow, SNAPSHOT_COLUMNS)
EVAL_FIELDS = fields_of(EvalRow, EVAL_COLUMNS)
TAG_FIELDS = fields_of(TagRow, TAG_COLUMNS)
ANNOTATION_FIELDS = fields_of(AnnotationRow, ANNOTATION_COLUMNS)
WRITER_FIELDS = fields_of(WriterRow, ("trace_id", "kind", "host", "pid", "token", "registered_ms"))

SEARCH_TABLES: frozenset[str] = frozenset({"steps_fts", "traces_fts", "search_queue"})
"""SQLite's search index: the FTS5 tables (FTS5 adds shadow tables named after them) and the
queue of rows to re-index, kept by triggers and ``store/search``; no models."""
BACKEND_COLUMNS: frozenset[str] = frozenset({"search_vec", "seq"})
"""PostgreSQL-only columns: the generated search vector and the live view's arrival sequence
(SQLite has the FTS tables and the rowid). Not in the models: they are never written."""
