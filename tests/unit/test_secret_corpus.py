"""Secrets never reach the disk: a corpus of realistic secrets of every kind the redaction
covers, each embedded in prose, in JSON held in a string, after a newline, inside a URL and as
an env assignment, is sent once through every capture path (hook, hook spooling for an
unreachable team store, record, run's events file, ingest, import of a Claude Code transcript
and a Codex rollout, OTLP over JSON and protobuf, fork --modify-input). Then the database,
its WAL and SHM, the logs and every export are read byte by byte: no secret is anywhere,
while the non-secrets beside them (git SHAs, UUIDs, base64 image data, words) are intact.

One store, each path run once over the whole corpus (not once per secret)."""

from __future__ import annotations

import io
import json
import os
import random
import string
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from captures import HARNESS
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from otelkit import PROTOBUF, Payload, post_all, receiving, span, traces_payload

from agent_replay.store.db import ensure_database, open_store

pytestmark = pytest.mark.sqlite_only

_RNG = random.Random(14)
_ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def upper(n: int) -> str:
    return rand(n, string.ascii_uppercase + string.digits)


B64 = string.ascii_letters + string.digits + "+/"


def aws_secret() -> str:
    while True:
        value = rand(40, B64)
        if value.count("/") <= 2 and not value.startswith("/") and any(c.isdigit() for c in value):
            if any(c.isupper() for c in value) and any(c.islower() for c in value):
                return value


def _jwt() -> str:
    return f"eyJhbGciOiJIUzI1NiJ9.eyJ{rand(40)}.{rand(43, _ALNUM + '-_')}"


def _pem(kind: str) -> str:
    body = "\n".join(rand(64, B64) for _ in range(4))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


TOKENS: list[str] = [
    "sk-ant-api03-" + rand(80, _ALNUM + "-_") + "AA",
    "sk-ant-admin01-" + rand(60, _ALNUM + "-_"),
    "sk-proj-" + rand(100, _ALNUM + "-_"),
    "sk-svcacct-" + rand(60, _ALNUM + "-_"),
    "sk-" + rand(48),
    "AIza" + rand(35, _ALNUM + "-_"),
    "AIza" + rand(35, _ALNUM + "-_"),
    "AKIA" + upper(16),
    "ASIA" + upper(16),
    aws_secret(),
    aws_secret(),
    rand(86, B64) + "==",  # an Azure storage account key
    "ghp_" + rand(36),
    "gho_" + rand(36),
    "ghs_" + rand(36),
    "ghu_" + rand(36),
    "github_pat_" + rand(22) + "_" + rand(59),
    "glpat-" + rand(20, _ALNUM + "-_"),
    "gldt-" + rand(20),
    "xoxb-" + "-".join([rand(12, string.digits), rand(13, string.digits), rand(24)]),
    "xoxp-" + "-".join([rand(12, string.digits), rand(12, string.digits), rand(32)]),
    "sk_live_" + rand(24),
    "rk_test_" + rand(24),
    "whsec_" + rand(32),
    "npm_" + rand(36),
    "npm_" + rand(36),
    "pypi-AgEIcHlwaS5vcmc" + rand(70, _ALNUM + "-_"),
    "hf_" + rand(34),
    "hf_" + rand(34),
    _jwt(),
    _jwt(),
]
"""Standalone tokens: found by their shape wherever they appear."""

PASSWORDS = [rand(14) + "!" for _ in range(8)]
CONTEXTUAL: list[tuple[str, str]] = [
    (PASSWORDS[0], f"postgresql://app:{PASSWORDS[0]}@db.internal:5432/prod"),
    (PASSWORDS[1], f"curl -u admin:{PASSWORDS[1]} https://api.example.com/v1/items"),
    (PASSWORDS[2], f"mysql -h db -u root -p{PASSWORDS[2]} shop"),
    (PASSWORDS[3], f"DATABASE_PASSWORD={PASSWORDS[3]}"),
    (PASSWORDS[4], f"export DB_PASS={PASSWORDS[4]}"),
    (PASSWORDS[5], f"Server=sql1;Database=app;User Id=sa;Password={PASSWORDS[5]};"),
    ("dXNlcjpw" + rand(24), "Authorization: Basic dXNlcjpw@"),
    ("ya29." + rand(60, _ALNUM + "-_"), "Authorization: Bearer ya29.@"),
    (PASSWORDS[6], f"MY_API_KEY={PASSWORDS[6]}"),
    (
        PASSWORDS[7],
        f"[default]\naws_access_key_id = AKIA{upper(16)}\naws_secret_access_key = {PASSWORDS[7]}",
    ),
    (_pem("RSA ").split("\n")[2], "@PEM1"),
    (_pem("").split("\n")[3], "@PEM2"),
]
"""Secrets that are secrets because of where they stand (``@`` marks where the secret goes
when it is not already in the text)."""


def _contextual() -> list[tuple[str, str]]:
    out = []
    for secret, text in CONTEXTUAL:
        if text == "@PEM1":
            text = _pem("RSA ")
            secret = text.split("\n")[2]
        elif text == "@PEM2":
            body = _pem("")
            secret = body.split("\n")[3]
            text = json.dumps(
                {
                    "type": "service_account",
                    "project_id": "demo-1",
                    "private_key_id": rand(40),
                    "private_key": body,
                    "client_email": "bot@demo-1.iam.gserviceaccount.com",
                }
            )
        elif "@" in text and not text.startswith(("postgresql", "curl")):
            text = text.replace("dXNlcjpw@", secret).replace("ya29.@", secret)
        out.append((secret, text))
    return out


CONTEXT = _contextual()
SECRETS = TOKENS + [secret for secret, _ in CONTEXT]

NON_SECRETS = [
    "3f786850e387550fdab836ed7e6dc881de23001b",
    "9b2c1d0e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c",
    "123e4567-e89b-12d3-a456-426614174000",
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" + "A" * 200 + "ElFTkSuQmCC",
    "the monkey business of ordinary words",
    "password_hash",
    "tokens_used",
]


EMBEDDINGS: dict[str, Callable[[str], str]] = {
    "prose": lambda s: f"The deploy used {s} and then finished.",
    "json": lambda s: json.dumps({"config": {"note": f"value {s} here", "n": 1}}),
    "newline": lambda s: f"first line of output\n{s}\nlast line",
    "url": lambda s: f"https://hooks.example.com/callback?token={s}&retry=1",
    "env": lambda s: f"export SERVICE_TOKEN={s}",
}


def corpus_texts() -> list[str]:
    """Every secret in every embedding (contextual ones in those that keep their context)."""
    texts = [embed(token) for token in TOKENS for embed in EMBEDDINGS.values()]
    for _, text in CONTEXT:
        texts += [EMBEDDINGS["prose"](text), EMBEDDINGS["json"](text), EMBEDDINGS["newline"](text)]
    return texts + NON_SECRETS


def corpus_blob() -> str:
    return "\n".join(corpus_texts())


def corpus_value() -> dict[str, Any]:
    """The corpus as a JSON value: a list of texts, and the JSON-in-a-string form."""
    return {"texts": corpus_texts(), "as_json": json.dumps({"texts": corpus_texts()})}


# --- running the capture paths ---------------------------------------------------------------


def agent_replay(
    store_dir: Path, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The real CLI in a subprocess (the hook: what the harness runs)."""
    full_env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir), **(env or {})}
    full_env.pop("AGENT_REPLAY_DB_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "agent_replay", *args],
        input=stdin,
        capture_output=True,
        env=full_env,
        timeout=120,
        check=False,
    )


def in_process(store_dir: Path, *args: str, stdin: bytes = b"") -> tuple[int, str]:
    """``main(args)`` in this process with ``stdin`` (cheaper than a process for the commands
    whose process behaviour does not matter here); returns the exit code and stdout."""
    import contextlib

    from agent_replay.cli import main

    out = io.StringIO()
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out):
            code = main(["--dir", str(store_dir), *args])
    finally:
        sys.stdin = saved
    return code, out.getvalue()


def run_every_path(store_dir: Path, work: Path) -> list[Path]:
    """Send the corpus through every capture path; return the export files written."""
    blob = corpus_blob()
    value = corpus_value()
    quiet = {"AGENT_REPLAY_HOOK_NO_SPAWN": "1"}
    ensure_database(store_dir).close()

    # hook: a pre-tool and a post-tool payload carrying the corpus, recorded at once (--sync).
    pre = {
        "session_id": "corpus-hook",
        "transcript_path": "/home/dev/.claude/projects/p/corpus-hook.jsonl",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": blob},
        "tool_use_id": "toolu_corpus1",
    }
    post = {**pre, "hook_event_name": "PostToolUse", "tool_response": value}
    for payload in (pre, post):
        done = agent_replay(store_dir, "hook", "--sync", stdin=json.dumps(payload).encode())
        assert done.returncode == 0, done.stderr
    # hook for an unreachable team store: the payload waits in the local spool.
    spooled = {**post, "session_id": "corpus-spool"}
    done = agent_replay(
        store_dir,
        "hook",
        "--db-url",
        "postgresql://nobody@127.0.0.1:9/none",
        stdin=json.dumps(spooled).encode(),
        env=quiet,
    )
    assert done.returncode == 0, done.stderr

    # record: native events on stdin.
    events = [
        {"v": 1, "type": "trace_start", "trace_id": "rec", "agent_name": "corpus", "input": blob},
        {
            "v": 1,
            "type": "step",
            "trace_id": "rec",
            "step_type": "tool_call",
            "name": "sh",
            "input": value,
            "output": blob,
        },
        {"v": 1, "type": "trace_end", "trace_id": "rec", "output": value["as_json"]},
    ]
    lines = "".join(json.dumps(e) + "\n" for e in events).encode()
    assert in_process(store_dir, "record", stdin=lines)[0] == 0

    # run: the child appends the same events to the file run hands over.
    script = work / "child.py"
    script.write_text(
        "import os, sys\n"
        "with open(os.environ['AGENT_REPLAY_EVENTS'], 'a') as out:\n"
        "    out.write(sys.stdin.read())\n"
    )
    run_events = lines.replace(b'"rec"', b'"run"')
    done = agent_replay(store_dir, "run", "--", sys.executable, str(script), stdin=run_events)
    assert done.returncode == 0, done.stderr  # a process: the child reads run's stdin

    # ingest: a whole trace.
    trace = {
        "agent_name": "ingested",
        "input": value,
        "output": blob,
        "steps": [
            {
                "step_number": 1,
                "step_type": "tool_call",
                "name": "env",
                "input": {"cmd": blob},
                "output": value["as_json"],
            },
        ],
    }
    (work / "trace.json").write_text(json.dumps(trace))
    code, out = in_process(store_dir, "ingest", str(work / "trace.json"), "--json")
    assert code == 0, out
    ingested = json.loads(out)["ingested"][0]

    # import: a Claude Code transcript and a Codex rollout whose prompt is the corpus.
    prompt = "List the files in this directory"
    escaped = json.dumps(blob)[1:-1]
    claude = next((HARNESS / "claude-code/plain/transcript").rglob("*.jsonl"))
    codex = next((HARNESS / "codex/plain/rollout").rglob("rollout-*.jsonl"))
    for source, name in ((claude, claude.name), (codex, codex.name)):
        text = source.read_text(encoding="utf-8")
        assert prompt in text
        (work / name).write_text(text.replace(prompt, escaped), encoding="utf-8")
        assert in_process(store_dir, "import", str(work / name))[0] == 0

    # otel: JSON and protobuf spans whose attributes hold the corpus (as text and as JSON text).
    post_otlp(store_dir, blob, value["as_json"])

    # fork --modify-input: the ingested (clean) trace forked with the corpus as its input.
    (work / "edit.json").write_text(json.dumps({"task": value}))
    edit = f"@{work / 'edit.json'}"
    assert (
        in_process(store_dir, "fork", ingested, "--from-step", "1", "--modify-input", edit)[0] == 0
    )

    exports = []
    for fmt, name in (("jsonl", "all.jsonl"), ("json", "all.json"), ("bundle", "all.bundle")):
        out = work / name
        assert in_process(store_dir, "export", "--format", fmt, "--output", str(out))[0] == 0
        exports.append(out)
    return exports


def post_otlp(store_dir: Path, blob: str, as_json: str) -> None:
    messages = json.dumps([{"role": "user", "content": blob}])
    json_payload = traces_payload(
        span(
            "c0ffee",
            "1",
            "chat gpt-5",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": messages,
                "gen_ai.output.messages": as_json,
                "note": blob,
            },
        )
    )
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    proto_span = scope.spans.add()
    proto_span.trace_id = bytes.fromhex("ab" * 16)
    proto_span.span_id = bytes.fromhex("cd" * 8)
    proto_span.name = "chat claude"
    proto_span.start_time_unix_nano = 1_780_000_000_000_000_000
    proto_span.end_time_unix_nano = 1_780_000_001_000_000_000
    for key, text in (("gen_ai.input.messages", messages), ("note", blob), ("out", as_json)):
        proto_span.attributes.append(KeyValue(key=key))
        proto_span.attributes[-1].value.string_value = text
    proto = Payload("corpus", "/v1/traces", request.SerializeToString(), {"Content-Type": PROTOBUF})
    with receiving(store_dir) as (receiver, client, _):
        post_all(client, receiver, [json_payload, proto])


def test_no_secret_reaches_the_disk_on_any_capture_path(store_dir: Path, tmp_path: Path) -> None:
    assert len(SECRETS) >= 40
    work = tmp_path / "work"
    work.mkdir()
    exports = run_every_path(store_dir, work)
    files = [store_dir / f"traces.db{suffix}" for suffix in ("", "-wal", "-shm")]
    files += sorted((store_dir / "logs").glob("*")) if (store_dir / "logs").exists() else []
    files += exports
    assert all(f.exists() for f in [files[0], *exports])
    found = {}
    for file in files:
        if not file.exists():
            continue
        data = file.read_bytes()
        for secret in SECRETS:
            if secret.encode() in data or json.dumps(secret)[1:-1].encode() in data:
                found.setdefault(secret[:16], []).append(file.name)
    assert found == {}
    jsonl = exports[0].read_text(encoding="utf-8")
    for kept in NON_SECRETS:
        assert kept in jsonl, kept
    sessions = [json.loads(line).get("agent_name") for line in jsonl.splitlines()]
    assert len(sessions) >= 7  # hook, record, run, ingest, two imports, otel, fork


def test_no_secret_reaches_a_new_store_through_the_hooks_first_queue(tmp_path: Path) -> None:
    """The first hook into a new store queues without migrating it (the early inbox, read by
    migration 0013): the corpus is redacted before that queue too, and stays so once the
    drainer has recorded it."""
    from agent_replay.services.hook.drain import drain_with_lock

    store_dir = tmp_path / "new-store"
    payload = {
        "session_id": "corpus-first",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": corpus_blob()},
        "tool_response": corpus_value(),
        "tool_use_id": "toolu_first",
    }
    done = agent_replay(
        store_dir,
        "hook",
        stdin=json.dumps(payload).encode(),
        env={"AGENT_REPLAY_HOOK_NO_SPAWN": "1"},
    )
    assert done.returncode == 0, done.stderr

    def leaked() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for file in sorted(store_dir.glob("traces.db*")):
            data = file.read_bytes()
            for secret in SECRETS:
                if secret.encode() in data or json.dumps(secret)[1:-1].encode() in data:
                    found.setdefault(secret[:16], []).append(file.name)
        return found

    assert (store_dir / "traces.db").exists()
    assert leaked() == {}
    drain_with_lock(store_dir)
    with open_store(store_dir) as store:
        (count,) = store.db.execute_sql("SELECT COUNT(*) FROM steps").fetchone()
    assert count == 1  # recorded, not dropped
    assert leaked() == {}
