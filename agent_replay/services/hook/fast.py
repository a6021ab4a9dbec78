"""``agent-replay hook``'s fast path: read the arguments, then capture or enforce.

``agent_replay.entry`` calls ``run`` before click, peewee or pydantic is imported. Capture
queues the payload (``inbox``) and returns; ``--enforce`` hands the invocation to ``enforce``,
imported only then (the policy modules are not needed to capture). Anything unusual (help, a
typo, ``--sync``, a store to migrate) returns ``None``: the full CLI (``commands/hook.py``).

Above both ``inbox`` and ``enforce``: enforce queues through the inbox, so the entry point
lives here rather than in the inbox, which would import enforce back.

Must import nothing beyond the stdlib: a test checks ``sys.modules`` after a real hook run.
"""

from __future__ import annotations

import io
import sys
from typing import Any

from agent_replay.paths import redaction_on, resolve_dir
from agent_replay.services.hook.inbox import ensure_drainer, log_error, queue, spool


def parse_args(argv: list[str]) -> dict[str, Any] | None:
    """The hook's options, or ``None`` when the arguments need the full CLI (help, errors).

    ``--enforce`` (and ``--plain``) hand the invocation to ``enforce``."""
    options: dict[str, Any] = {
        "dialect": "auto",
        "no_input": False,
        "redact": True,
        "dir": None,
        "sync": False,
        "enforce": False,
        "plain": False,
        "db_url": None,
    }
    args = iter(argv)
    for arg in args:
        if arg == "--no-input":
            options["no_input"] = True
        elif arg == "--no-redact":
            options["redact"] = False
        elif arg == "--sync":
            options["sync"] = True
        elif arg in ("--enforce", "--plain"):
            options[arg[2:]] = True
        elif arg in ("--dir", "--dialect", "--db-url"):
            value = next(args, None)
            if value is None:
                return None
            options[arg[2:].replace("-", "_")] = value
        elif arg.startswith(("--dir=", "--dialect=", "--db-url=")):
            key, _, value = arg[2:].partition("=")
            options[key.replace("-", "_")] = value
        else:
            return None  # --help or a typo
    # harness.HARNESSES, spelled out: capture needs nothing else of that module
    if options["dialect"] not in ("auto", "claude", "codex", "gemini"):
        return None
    if options["plain"] and not options["enforce"]:
        return None  # --plain only means something with --enforce: the full CLI says so
    return options


def run(argv: list[str], stdin: Any = None, *, exiting: bool = False) -> int | None:
    """Capture one hook invocation. Returns 0, or ``None`` to defer to the full CLI.

    Capture mode always exits 0 and prints nothing: a broken recorder must never break the
    user's agent. Failures go to the log under the store directory. ``exiting``: the process
    ends right after, without closing the store's connection (see ``queue``).
    """
    options = parse_args(argv)
    if options is None:
        return None
    spool(options)
    if options.pop("enforce"):
        # Deciding the call is the answer the harness waits for; deferred: capture alone
        # needs none of the policy modules.
        from agent_replay.services.hook.enforce import run_fast

        return run_fast(options, stdin)
    del options["plain"]
    try:
        store_dir = resolve_dir(options.pop("dir"))
    except OSError:  # e.g. the working directory was deleted under the harness
        return 0
    options["redact"] = redaction_on(store_dir, not options["redact"])
    stream = stdin if stdin is not None else sys.stdin.buffer
    try:
        raw = stream.read()
        payload = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if not payload.strip():
            log_error(store_dir, "empty payload on stdin; nothing recorded")
            return 0
        if options["sync"] or not queue(store_dir, payload, options, close=not exiting):
            # --sync, or a store to migrate first: the full path, which reads the payload we
            # already took from stdin.
            sys.stdin = io.TextIOWrapper(io.BytesIO(payload.encode("utf-8")), encoding="utf-8")
            return None
        ensure_drainer(store_dir)
    except Exception as exc:  # noqa: BLE001 - capture must never fail the harness
        log_error(store_dir, f"{type(exc).__name__}: {exc}")
    return 0
