"""Exchanges -> steps: the proxy's writer thread, on the one write path (``TraceRecorder``).

The event loop never touches the store: it hands each finished exchange (request bytes,
response chunks, timings) to ``Writer``, one thread that reads the reply, prices it, finds
or opens the session's trace and records one step — an ``llm_call`` (model, request, reply
with its tool calls, tokens, cost, latency, and the raw response kept for replay), or an
``error`` step for a request the proxy could not read. Redaction happens in the recorder, as on
every capture path; credential headers and query parameters never reach it (``server`` keeps
only an allow-list of headers).

What a recorded step holds (``metadata``): ``provider``, ``api``, ``usage`` (as the provider
sent it), ``cost_usd`` (genai-prices), ``stop_reason``, ``latency_ms`` (``first_byte`` and
``total``) and ``proxy``: ``path``, ``status``, ``stream``, ``request_hash`` (what replay
matches on), ``request_headers``/``response_headers`` (allow-listed), ``response_body`` (the
bytes as text) and ``chunk_sizes`` (the byte size of each chunk as it arrived, so a replay
sends the same chunks).

Traces this proxy opens end when it stops (``completed``); a trace opened by a proxy that died
is ended ``timeout`` by the next one. A trace the hook opened for the same session is joined
and left to the hook to end.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_replay.clock import Clock, SystemClock
from agent_replay.services.hook.harness import DIALECTS
from agent_replay.services.proxy.apis import PRICE_PROVIDERS, ParsedRequest, Route, first_prompt
from agent_replay.services.proxy.replies import Reply, read_reply
from agent_replay.services.proxy.session import SessionKey
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store
from agent_replay.store.mapping import dec_meta
from agent_replay.store.models import StepRow, TraceRow
from agent_replay.trace.base import canonical_time

log = logging.getLogger("agent_replay.proxy")

PROXY_FORMAT = "proxy"
"""``source_format`` of traces the proxy opens for a session that is not a harness's."""
HARNESS_FORMATS = {key: d.formats for key, d in DIALECTS.items() if d.proxy_format}
"""Per hook dialect: the hook's ``source_format`` and the proxy's for the same sessions."""
OWN_FORMATS = (PROXY_FORMAT, *(formats[1] for formats in HARNESS_FORMATS.values()))


@dataclass
class ServedMark:
    """How a replayed exchange was answered."""

    trace_id: str
    """The recorded trace."""
    step_number: int
    """The recorded step whose response was served."""
    override: str | None = None
    """The ``--override`` source when the response was replaced."""


@dataclass
class Exchange:
    """One request and its response, as the proxy saw them."""

    route: Route
    session: SessionKey
    raw_request: bytes
    request: ParsedRequest | None
    parse_error: str | None = None
    request_headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    started_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    duration_ms: float | None = None
    first_byte_ms: float | None = None
    error: str | None = None
    """A failure of the exchange itself (upstream unreachable, client gone, replay refused)."""
    served: ServedMark | None = None

    @property
    def stream(self) -> bool:
        return self.request.stream if self.request is not None else False


def body_fields(chunks: list[bytes]) -> dict[str, Any]:
    """The response bytes as stored: text plus the chunk sizes (base64 when not UTF-8)."""
    data = b"".join(chunks)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {
            "response_body": base64.b64encode(data).decode("ascii"),
            "body_encoding": "base64",
            "chunk_sizes": [len(c) for c in chunks],
        }
    return {"response_body": text, "chunk_sizes": [len(c) for c in chunks]}


def stored_chunks(proxy_meta: dict[str, Any]) -> list[bytes]:
    """The response chunks a step recorded (``body_fields`` read back). When the text no
    longer has the recorded size (redaction replaced a secret), it is sent as one chunk."""
    body = proxy_meta.get("response_body")
    if not isinstance(body, str):
        return []
    if proxy_meta.get("body_encoding") == "base64":
        data = base64.b64decode(body)
    else:
        data = body.encode("utf-8")
    sizes = proxy_meta.get("chunk_sizes")
    if not isinstance(sizes, list) or sum(s for s in sizes if isinstance(s, int)) != len(data):
        return [data] if data else []
    out, at = [], 0
    for size in sizes:
        out.append(data[at : at + size])
        at += size
    return out


def price(provider: str, reply: Reply, model: str | None, when: dt.datetime) -> float | None:
    """The cost of a reply in USD (genai-prices), or ``None`` when its model has no price."""
    if model is None or (reply.input_tokens is None and reply.output_tokens is None):
        return None
    from genai_prices import Usage, calc_price  # deferred: ~0.5 s (warmed up at start)

    cache_read = reply.cache_read_tokens or 0
    cache_write = reply.cache_write_tokens or 0
    total_input = reply.input_tokens or 0
    if provider == "anthropic":  # Anthropic's input_tokens leave the cached tokens out
        total_input += cache_read + cache_write
    try:
        result = calc_price(
            Usage(
                input_tokens=total_input,
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
                output_tokens=reply.output_tokens or 0,
            ),
            model,
            provider_id=PRICE_PROVIDERS.get(provider, provider),  # type: ignore[call-overload]
            genai_request_timestamp=when,
        )
    except (LookupError, ValueError):
        return None
    return round(float(result.total_price), 9)


def exchange_step(ex: Exchange) -> dict[str, Any]:
    """The step object an exchange becomes (see the module doc)."""
    ended = ex.started_at + dt.timedelta(milliseconds=ex.duration_ms or 0)
    proxy: dict[str, Any] = {
        "path": ex.route.shown_path,
        "status": ex.status,
        "stream": ex.stream,
        "request_headers": ex.request_headers,
        "response_headers": ex.response_headers,
        **body_fields(ex.chunks),
    }
    metadata: dict[str, Any] = {"provider": ex.route.provider, "api": ex.route.kind}
    latency = {
        k: round(v, 3)
        for k, v in (("first_byte", ex.first_byte_ms), ("total", ex.duration_ms))
        if v is not None
    }
    if latency:
        metadata["latency_ms"] = latency
    step: dict[str, Any] = {
        "started_at": canonical_time(ex.started_at),
        "ended_at": canonical_time(ended),
        "duration_ms": round(ex.duration_ms, 3) if ex.duration_ms is not None else None,
        "metadata": metadata,
    }
    if ex.request is None:
        step.update(
            step_type="error",
            name="unparseable request",
            input=ex.raw_request.decode("utf-8", "replace"),
            error=ex.parse_error or "the proxy could not read this request",
        )
        metadata["proxy"] = proxy
        return step
    proxy["request_hash"] = ex.request.hash
    metadata["proxy"] = proxy
    body = b"".join(ex.chunks)
    reply = read_reply(ex.route.kind, ex.status or 0, body, ex.stream) if ex.status else Reply()
    model = reply.model or ex.request.model
    step.update(
        step_type="llm_call",
        name=model or ex.route.provider,
        model=model,
        input=ex.request.body,
        output=reply.output(),
        error=ex.error or reply.error,
        tokens_used=reply.tokens_used,
    )
    if reply.usage:
        metadata["usage"] = reply.usage
    if reply.stop_reason:
        metadata["stop_reason"] = reply.stop_reason
    if reply.response_id:
        metadata["response_id"] = reply.response_id
    cost = price(ex.route.provider, reply, model, ex.started_at)
    if cost is not None:
        metadata["cost_usd"] = cost
    if ex.served is not None:
        mark: dict[str, Any] = {
            "served": True,
            "trace": ex.served.trace_id,
            "step": ex.served.step_number,
        }
        if ex.served.override is not None:
            mark["override"] = ex.served.override
        metadata["replay"] = mark
    return step


class Writer:
    """One thread that runs store work in submission order (``submit``), off the event loop.

    A job that fails is logged and counted (``failures``); the thread goes on.
    """

    def __init__(self, store: Store, *, on_error: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.failures = 0
        self.on_error = on_error
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="proxy-writer", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Queue ``job`` (run in the writer thread, after every job queued before it)."""
        self._jobs.put(job)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every job queued so far has run."""
        done = threading.Event()
        self.submit(done.set)
        return done.wait(timeout)

    def close(self, timeout: float = 60.0) -> None:
        """Run what is queued, then stop the thread."""
        self._jobs.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        self.store.db.connect(reuse_if_open=True)
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                try:
                    job()
                except Exception as exc:  # noqa: BLE001 - one bad exchange never stops recording
                    self.failures += 1
                    log.exception("proxy: recording failed")
                    if self.on_error is not None:
                        self.on_error(f"could not record an exchange: {exc}")
        finally:
            self.store.close()


class SessionTraces:
    """Finds or opens the trace of each session, and ends the ones it opened.

    Used only from the writer thread.
    """

    def __init__(self, store: Store, *, redact: bool, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.rec = TraceRecorder(store, lenient=True, redact=redact, clock=self.clock)
        self.traces: dict[str, str] = {}
        self.owned: list[str] = []
        """Traces this proxy opened (or reopened): ended when it stops."""

    def record(self, ex: Exchange) -> int:
        """Record an exchange in its session's trace; returns the step number."""
        trace_id = self.trace_for(ex)
        return self.rec.step(trace_id, exchange_step(ex))

    def trace_for(self, ex: Exchange) -> str:
        """The trace of the exchange's session, opened on first sight (in one write
        transaction with the look-up, so a hook opening the same session's trace at the same
        moment can't make two)."""
        key = ex.session
        found = self.traces.get(key.key)
        if found is not None:
            return found
        with self.store.write():
            trace_id = self._find(key)
            if trace_id is None:
                trace_id = self._open(key, ex)
            self.traces[key.key] = trace_id
        return trace_id

    def _find(self, key: SessionKey) -> str | None:
        if key.fixed_trace is not None:
            from agent_replay.errors import NotFoundError
            from agent_replay.store.trace_detail import resolve_trace_id

            try:
                return self._join(resolve_trace_id(self.store, key.fixed_trace), hook=False)
            except NotFoundError:
                return None
        if key.session_id is None:
            return None
        formats = HARNESS_FORMATS[key.dialect] if key.dialect else (PROXY_FORMAT,)
        row = (
            TraceRow.select(TraceRow.id, TraceRow.source_format)
            .where((TraceRow.session_id == key.session_id) & TraceRow.source_format.in_(formats))
            .order_by(TraceRow.started_at_ms.desc(), TraceRow.created_at_ms.desc())
            .tuples()
            .first(self.store.db)
        )
        if row is None:
            return None
        return self._join(row[0], hook=row[1] not in OWN_FORMATS)

    def _join(self, trace_id: str, *, hook: bool) -> str:
        """Record into an existing trace; one that had ended is reopened (unless the hook
        owns it: the hook reopens and ends its own)."""
        if not hook:
            status = _trace_status(self.store, trace_id)
            if status is not None and status not in ("running", "forked"):
                self.rec.reopen_trace(trace_id)
            self.owned.append(trace_id)
        return trace_id

    def _open(self, key: SessionKey, ex: Exchange) -> str:
        fmt = HARNESS_FORMATS[key.dialect][1] if key.dialect else PROXY_FORMAT
        prompt = None
        if ex.request is not None and key.dialect is None:
            prompt = first_prompt(ex.route.kind, ex.request.body)
        trace_id = self.rec.start_trace(
            key.agent_name,
            trace_id=key.fixed_trace
            if key.fixed_trace and key.fixed_trace.startswith("trc_")
            else None,
            input=prompt,
            session_id=key.session_id if key.fixed_trace is None else None,
            metadata={"proxy": {"pid": os.getpid(), "host": os.uname().nodename, "group": key.key}},
            source_format=fmt,
            started_at=canonical_time(ex.started_at),
        )
        self.owned.append(trace_id)
        return trace_id

    def finish(self) -> list[str]:
        """End the traces this proxy opened that are still running (``completed``, with the
        cost of their steps); returns their ids."""
        ended = []
        for trace_id in dict.fromkeys(self.owned):
            if _trace_status(self.store, trace_id) != "running":
                continue
            self.rec.end_trace(
                trace_id, status="completed", total_cost_usd=trace_cost(self.store, trace_id)
            )
            ended.append(trace_id)
        return ended


def _trace_status(store: Store, trace_id: str) -> str | None:
    """A trace's status (``None``: no such trace)."""
    status = TraceRow.select(TraceRow.status).where(TraceRow.id == trace_id).scalar(store.db)
    return None if status is None else str(status)


def trace_cost(store: Store, trace_id: str) -> float | None:
    """The sum of the steps' recorded ``metadata.cost_usd`` (``None`` when none has one)."""
    total, known = 0.0, False
    metas = StepRow.select(StepRow.metadata).where(StepRow.trace_id == trace_id).tuples()
    for (meta,) in metas.execute(store.db):
        cost = dec_meta(meta).get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
            total, known = total + float(cost), True
    return round(total, 9) if known else None


def end_orphans(store: Store, *, redact: bool, clock: Clock | None = None) -> list[str]:
    """End (``timeout``) the running traces a proxy on this host opened and that proxy is gone."""
    rows = list(
        TraceRow.select(TraceRow.id, TraceRow.metadata)
        .where((TraceRow.status == "running") & TraceRow.source_format.in_(OWN_FORMATS))
        .tuples()
        .execute(store.db)
    )
    host = os.uname().nodename
    rec = TraceRecorder(store, lenient=True, redact=redact, clock=clock)
    ended = []
    for trace_id, meta in rows:
        info = dec_meta(meta).get("proxy") or {}
        pid = info.get("pid")
        if (
            not isinstance(pid, int)
            or info.get("host") != host
            or pid == os.getpid()
            or _alive(pid)
        ):
            continue
        rec.end_trace(
            trace_id,
            status="timeout",
            error="the proxy recording this trace exited without ending it",
            total_cost_usd=trace_cost(store, trace_id),
        )
        ended.append(trace_id)
    return ended


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
