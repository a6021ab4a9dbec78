"""``agent-replay redact``: a store written without redaction is scrubbed with today's rules,
the full-text index rebuilt and the space reclaimed, so the old text is gone from the file;
``push`` redacts what it copies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TOKEN = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
PASSWORD = "Hunter2Secret!"
KEY_ID = "AKIAABCDEFGHIJKLMNOP"
SECRETS = (TOKEN, PASSWORD, KEY_ID)
TRACE = {
    "agent_name": "old-build",
    "input": f"export GITHUB_TOKEN={TOKEN} then deploy 3f786850e387550fdab836ed7e6dc881de23001b",
    "steps": [
        {
            "step_number": 1,
            "step_type": "tool_call",
            "name": "sh",
            "input": {"cmd": f"curl -u bob:{PASSWORD} https://api.example.com"},
            "output": json.dumps({"aws": {"id": KEY_ID}, "note": "ordinary words"}),
        }
    ],
}


def on_disk(store_dir: Path) -> bytes:
    return b"".join(
        p.read_bytes() for p in store_dir.glob("traces.db*") if p.name.endswith(("db", "-wal"))
    )


def test_redact_scrubs_what_was_stored_and_reclaims_it(
    cli: Any, store_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "trace.json"
    source.write_text(json.dumps(TRACE))
    assert cli("ingest", source, "--no-redact").code == 0
    assert all(s.encode() in on_disk(store_dir) for s in SECRETS)

    dry = cli("redact", "--dry-run", "--json")
    assert dry.code == 0
    assert dry.json()["kinds"] == {"aws_access_key": 1, "curl_password": 1, "github_token": 1}
    assert all(s.encode() in on_disk(store_dir) for s in SECRETS)  # a dry run changes nothing

    done = cli("redact")
    assert done.code == 0 and "redacted 3 secret(s)" in done.out and "github_token" in done.out
    data = on_disk(store_dir)
    assert not any(s.encode() in data for s in SECRETS)
    assert b"3f786850e387550fdab836ed7e6dc881de23001b" in data and b"ordinary words" in data
    assert (
        "no traces match"
        in cli("search", "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5").err
        + (cli("search", "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5").out)
        or cli("search", "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", "--json").json() == []
    )
    (trace,) = json.loads(cli("export", "--format", "json").out)
    assert trace["input"].startswith("export GITHUB_TOKEN=[REDACTED:github_token] then")
    assert json.loads(trace["steps"][0]["output"])["aws"]["id"] == "[REDACTED:aws_access_key]"
    again = cli("redact", "--json")
    assert again.json()["secrets"] == 0  # redacting twice changes nothing


def test_push_redacts_what_it_copies(cli: Any, store_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "trace.json"
    source.write_text(json.dumps(TRACE))
    assert cli("ingest", source, "--no-redact").code == 0
    team = tmp_path / "team"
    assert cli("push", "--to", team).code == 0
    data = on_disk(team)
    assert b"old-build" in data and not any(s.encode() in data for s in SECRETS)
