"""Replay mode: serve a trace's recorded responses again, then go live (or fail), and record
the re-run as a fork of the trace.

``load_plan`` reads the recorded exchanges of a trace (its steps that carry a
``metadata.proxy`` response and request hash). ``Replayer`` decides each incoming request, on
the event loop and without the store:

- a request whose hash matches a recorded exchange of the prefix (steps ≤ ``--until-step``)
  not served yet is answered with that exchange's bytes (the earliest such one: identical
  requests are served in recorded order), or with ``--override N``'s response for step N;
- the first request that matches nothing in the prefix — past step N, or a request that
  differs from the recording — ends the replay: from then on every request goes live
  (``--then live``) or is answered 409 (``--then fail``), with ``x-should-retry: false`` so
  the SDKs give up at once.

``ForkSink`` (in the writer thread) writes the re-run as a fork of the trace, built with
``services.fork.build_fork`` and written through ``ingest``: the recorded steps before the
point where the re-run departs from the recording (the first override, live or refused
request), the served ones marked ``metadata.replay = {"served": true, "trace", "step"}``,
then every later exchange of the re-run as a step of its own. ``forked_from_step`` is that
departure point, so ``agent-replay diff TRACE FORK`` shows what changed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_replay.clock import Clock
from agent_replay.errors import UsageError
from agent_replay.services.proxy.answers import override_chunks
from agent_replay.services.proxy.apis import ParsedRequest, Route
from agent_replay.services.proxy.recording import (
    Exchange,
    ServedMark,
    exchange_step,
    stored_chunks,
    trace_cost,
)
from agent_replay.services.recorder import TraceRecorder
from agent_replay.store.db import Store

Then = Literal["live", "fail"]


@dataclass(frozen=True)
class Recorded:
    """One recorded exchange a replay can serve."""

    step_number: int
    hash: str
    kind: str
    status: int
    headers: dict[str, str]
    chunks: list[bytes]


@dataclass(frozen=True)
class Override:
    """``--override N=…``: the response served at step N instead of the recorded one."""

    step_number: int
    value: Any
    source: str
    """Where it came from (``@file.json`` or ``inline``)."""


@dataclass
class ReplayPlan:
    """What a replay serves."""

    trace: Mapping[str, Any]
    """The recorded trace (``trace_json``)."""
    exchanges: list[Recorded]
    until_step: int | None
    then: Then
    overrides: dict[int, Override] = field(default_factory=dict)

    @property
    def trace_id(self) -> str:
        return str(self.trace["id"])

    @property
    def prefix(self) -> list[Recorded]:
        """The exchanges the replay serves (steps ≤ ``until_step``)."""
        if self.until_step is None:
            return list(self.exchanges)
        return [e for e in self.exchanges if e.step_number <= self.until_step]


def recorded_exchanges(trace: Mapping[str, Any]) -> list[Recorded]:
    """The steps of a trace that a replay can serve, in step order."""
    out = []
    for step in trace.get("steps") or []:
        proxy = (step.get("metadata") or {}).get("proxy")
        if not isinstance(proxy, dict) or step.get("step_type") != "llm_call":
            continue
        status, digest = proxy.get("status"), proxy.get("request_hash")
        if (
            not isinstance(status, int)
            or not isinstance(digest, str)
            or "response_body" not in proxy
        ):
            continue
        headers = proxy.get("response_headers")
        out.append(
            Recorded(
                step_number=int(step["step_number"]),
                hash=digest,
                kind=str((step.get("metadata") or {}).get("api") or ""),
                status=status,
                headers={str(k): str(v) for k, v in headers.items()}
                if isinstance(headers, dict)
                else {},
                chunks=stored_chunks(proxy),
            )
        )
    return out


def parse_override(text: str) -> tuple[int, Any, str]:
    """Read ``--override N=@file.json`` (or ``N=<JSON>``).

    Raises:
        UsageError: not ``N=…``, an unreadable file or invalid JSON.
    """
    from agent_replay.trace.io import loads

    number, sep, value = text.partition("=")
    if not sep or not number.strip().isdigit() or int(number) < 1:
        raise UsageError(
            f"--override {text!r}: expected STEP=@file.json (or STEP=<JSON>)",
            hints=["--override 4=@reply.json  (the response step 4 gets instead of its recording)"],
        )
    source = "inline"
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            value = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--override {number}: cannot read {path}: {exc}") from None
        source = f"@{path.name}"
    try:
        return int(number), loads(value), source
    except ValueError as exc:
        raise UsageError(f"--override {number}: not valid JSON: {exc}") from None


def load_plan(
    store: Store,
    trace_ref: str,
    *,
    until_step: int | None,
    then: Then,
    overrides: Sequence[str] = (),
) -> ReplayPlan:
    """Read what ``--replay TRACE`` serves.

    Raises:
        NotFoundError, AmbiguousIdError: ``trace_ref`` names no single trace.
        UsageError: the trace has no recorded exchanges, or an override names a step that is
            not one (or lies after ``--until-step``).
    """
    from agent_replay.store.trace_detail import resolve_trace_id, trace_json

    trace = trace_json(store, resolve_trace_id(store, trace_ref))
    exchanges = recorded_exchanges(trace)
    if not exchanges:
        raise UsageError(
            f"trace {trace['id']} has no exchanges recorded by the proxy to replay",
            hints=["record a session through `agent-replay proxy` first, then replay that trace"],
        )
    if until_step is not None and until_step < 0:
        raise UsageError("--until-step must be 0 or more")
    numbers = [e.step_number for e in exchanges]
    plan = ReplayPlan(trace, exchanges, until_step, then)
    for text in overrides:
        number, value, source = parse_override(text)
        if number not in numbers:
            raise UsageError(
                f"--override {number}: step {number} of {trace['id']} is not a recorded model call",
                hints=[f"recorded model calls: steps {', '.join(map(str, numbers))}"],
            )
        if until_step is not None and number > until_step:
            raise UsageError(
                f"--override {number} lies after --until-step {until_step}: "
                "it would never be served",
                hints=[f"use --until-step {number} (or more) with it"],
            )
        plan.overrides[number] = Override(number, value, source)
    return plan


# --- deciding requests (event loop) -------------------------------------------------------------


@dataclass(frozen=True)
class Serve:
    """Answer from the recording."""

    recorded: Recorded
    chunks: list[bytes]
    override: str | None = None


@dataclass(frozen=True)
class Live:
    """Forward to the upstream."""


@dataclass(frozen=True)
class Refuse:
    """Answer 409 (``--then fail``)."""

    message: str


Decision = Serve | Live | Refuse


class Replayer:
    """The replay's state: which recorded exchanges were served, and whether it ended."""

    def __init__(self, plan: ReplayPlan) -> None:
        self.plan = plan
        self.pending = plan.prefix
        self.ended: str | None = None
        """Why the replay ended (``None`` while it serves)."""
        self.served = 0

    def decide(self, route: Route, request: ParsedRequest | None) -> Decision:
        """What to do with a model request (see the module doc)."""
        if self.ended is None and request is not None:
            for index, recorded in enumerate(self.pending):
                if recorded.hash == request.hash and recorded.kind in ("", route.kind):
                    del self.pending[index]
                    self.served += 1
                    return self._serve(route, request, recorded)
            self.ended = self._why(request)
        elif self.ended is None:
            self.ended = "the re-run sent a request the proxy could not read"
        if self.plan.then == "live":
            return Live()
        return Refuse(self._refusal())

    def _serve(self, route: Route, request: ParsedRequest, recorded: Recorded) -> Serve:
        override = self.plan.overrides.get(recorded.step_number)
        if override is None:
            return Serve(recorded, recorded.chunks)
        try:
            chunks = override_chunks(route, override.value, request.stream, request.model)
        except ValueError as exc:
            # Checked here, not at start: the shape depends on the API the step used.
            self.ended = f"--override {override.step_number} is not a valid response: {exc}"
            raise UsageError(self.ended) from None
        return Serve(recorded, chunks, override.source)

    def _why(self, request: ParsedRequest) -> str:
        until = self.plan.until_step
        later = [e for e in self.plan.exchanges if until is not None and e.step_number > until]
        if any(e.hash == request.hash for e in later) or (until is not None and not self.pending):
            return f"the replay of {self.plan.trace_id} ended after step {until} (--until-step)"
        if not self.pending:
            return f"the re-run went past the last recorded model call of {self.plan.trace_id}"
        return (
            f"the request differs from the recording of {self.plan.trace_id}: the next recorded "
            f"model call is step {self.pending[0].step_number}"
        )

    def _refusal(self) -> str:
        return (
            f"agent-replay proxy: {self.ended}; --then fail answers every later request with "
            "this error. Hint: replay with --then live to continue against the real model, "
            "or raise --until-step."
        )


# --- writing the re-run (writer thread) ----------------------------------------------------------


class ForkSink:
    """Writes the re-run as a fork of the recorded trace (see the module doc).

    Used only from the writer thread, in the order exchanges finished.
    """

    def __init__(
        self, store: Store, plan: ReplayPlan, *, redact: bool, clock: Clock | None = None
    ) -> None:
        self.store = store
        self.plan = plan
        self.clock = clock
        self.rec = TraceRecorder(store, lenient=True, redact=redact, clock=clock)
        self.fork_id: str | None = None
        self.served: list[int] = []
        self.recorded_numbers = sorted(e.step_number for e in plan.exchanges)
        self.reason: str | None = None

    def record(self, ex: Exchange, *, departs: bool, reason: str | None = None) -> None:
        """Record one exchange of the re-run. ``departs``: it is not a plain served copy (an
        override, a live or refused request), so the fork begins here."""
        if self.fork_id is None and not departs:
            assert ex.served is not None
            self.served.append(ex.served.step_number)
            return
        step = exchange_step(ex)
        if self.fork_id is None:
            number = self._write_fork(reason or "the re-run departed from the recording")
            step["step_number"] = number
        assert self.fork_id is not None
        self.rec.step(self.fork_id, step)

    def finish(self) -> str | None:
        """End the fork (writing it now if the re-run never departed from the recording);
        returns its id, or ``None`` when nothing was replayed."""
        if self.fork_id is None:
            if not self.served:
                return None
            self._write_fork("the re-run stayed within the recording")
        assert self.fork_id is not None
        self.rec.end_trace(
            self.fork_id, status="forked", total_cost_usd=trace_cost(self.store, self.fork_id)
        )
        return self.fork_id

    def _departure(self) -> int:
        last = max(self.served, default=0)
        later = [n for n in self.recorded_numbers if n > last]
        if later:
            return later[0]
        steps = [int(s["step_number"]) for s in self.plan.trace.get("steps") or []]
        return max(steps, default=0) + 1

    def _write_fork(self, reason: str) -> int:
        """Write the fork up to the departure point; returns the departure step number."""
        from agent_replay.services.fork import build_fork
        from agent_replay.services.ingest import ingest_trace

        parent = self.plan.trace
        at = self._departure()
        steps = [int(s["step_number"]) for s in parent.get("steps") or []]
        keep = [n for n in steps if n < at]
        fork = build_fork(
            parent,
            max(keep) if keep else min(steps),
            None,
            tags=["replay"],
            clock=self.clock,
            step_ran=bool(keep),  # every kept step was served or recorded as it was
        )
        fork["steps"] = [s for s in fork["steps"] if s["step_number"] < at]
        served = set(self.served)
        for step in fork["steps"]:
            if step["step_number"] in served:
                meta = step.setdefault("metadata", {})
                meta["replay"] = {
                    "served": True,
                    "trace": self.plan.trace_id,
                    "step": step["step_number"],
                }
        fork["forked_from_step"] = at
        fork["metadata"]["fork"]["from_step"] = at
        fork["metadata"]["replay"] = {
            "of": self.plan.trace_id,
            "until_step": self.plan.until_step,
            "then": self.plan.then,
            "overrides": {str(n): o.source for n, o in self.plan.overrides.items()},
            "diverged_at": at,
            "reason": reason,
        }
        fork.pop("ended_at", None)
        written = ingest_trace(self.store, copy.deepcopy(fork), clock=self.clock)
        self.fork_id = written.id
        self.reason = reason
        return at


def served_mark(plan: ReplayPlan, decision: Serve) -> ServedMark:
    """The ``metadata.replay`` mark of a served exchange."""
    return ServedMark(plan.trace_id, decision.recorded.step_number, decision.override)
