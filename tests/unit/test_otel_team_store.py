"""The OTLP receiver writing into the ``store`` fixture's store, so on PostgreSQL too: every
fixture payload lands, a redelivery adds nothing, and the traces built are the ones a local
SQLite store builds from the same requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from otelkit import Client, all_payloads, count, post_all, traces

from agent_replay.services.otel.server import OtelReceiver
from agent_replay.store.db import Store, ensure_database


def receive(target: Any) -> None:
    receiver = OtelReceiver(target, port=0)
    host, port = receiver.start()
    client = Client(host, port)
    try:
        payloads = all_payloads()
        post_all(client, receiver, payloads)
        post_all(client, receiver, payloads)  # redelivered: keys decide, nothing is added
        assert receiver.writer.stats.write_errors == 0
    finally:
        client.close()
        receiver.stop()


def comparable(store: Store) -> list[Any]:
    out = []
    for trace in traces(store):
        trace.pop("id")  # derived from the group: equal anyway, but keep the diff readable
        trace.pop("evals")
        for step in trace["steps"]:
            step.pop("id")
        out.append(trace)
    return sorted(out, key=lambda t: (t["started_at"] or "", t["agent_name"]))


def test_every_payload_lands_in_the_store_as_locally(store: Store, tmp_path: Path) -> None:
    receive(store.target if store.url else store.path)
    assert count(store, "otel_spans") > 0 and count(store, "traces") > 0
    reference = ensure_database(tmp_path / "reference")
    try:
        receive(reference.path)
        assert comparable(store) == comparable(reference)
    finally:
        reference.close()
