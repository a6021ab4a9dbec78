"""The one import-hygiene probe of the suite: run agent-replay (or any code) in a fresh
interpreter, then report which banned top-level packages it left in ``sys.modules``.

Headless paths never import the TUI, nor an AI SDK they did not need; the hook's fast path
imports nothing but the stdlib (DESIGN.md, Layers). The import-linter contracts check the
imports as written (tests/meta/test_static.py); this checks what a real run really loaded,
function-level imports included. Each test says what it runs and what is banned; this module is
the one way of checking it. Imported as ``probe`` (``tests/`` is on ``sys.path``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

TUI = ("textual", "rich")
AI_SDKS = ("anthropic", "openai", "google.genai")
HOOK_HEAVY = ("click", "peewee", "pydantic", "orjson", *TUI, "anthropic", "openai", "google")
"""What the hook's fast path must never load: everything beyond the stdlib (RE2 aside)."""

_MARK = "\x00PROBE "
_SCRIPT = """\
import json, sys
banned = {banned!r}
code = None
try:
{body}
except SystemExit as exc:
    code = exc.code
loaded = sorted(
    m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in banned)
)
sys.stdout.flush()
sys.stderr.write({mark!r} + json.dumps({{"code": code, "loaded": loaded}}))
"""


@dataclass
class Probe:
    """What one probed run did."""

    code: Any
    """What the run returned: ``main()``'s exit code (or a ``SystemExit``'s)."""
    loaded: list[str]
    """The banned modules it imported (empty when it stayed clean)."""
    stdout: Any
    stderr: Any
    """The run's own output, the probe's report removed."""


def probe(
    body: str | None = None,
    *,
    argv: Sequence[str] | None = None,
    banned: Sequence[str] = TUI,
    store_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | bytes | IO[Any] | None = None,
    timeout: float = 120,
) -> Probe:
    """Run ``agent-replay ARGV`` (through the console script's entry point, so ``hook`` takes
    its fast path) or the Python ``body`` in a fresh interpreter, then list the banned modules
    it imported.

    Raises:
        AssertionError: the interpreter died before reporting (the traceback is the message).
    """
    if argv is not None:
        body = f"from agent_replay.entry import main\ncode = main({list(argv)!r})"
    assert body is not None, "give argv or a body"
    script = _SCRIPT.format(banned=tuple(banned), body=textwrap.indent(body, "    "), mark=_MARK)
    environ = dict(os.environ if env is None else env)
    if store_dir is not None:
        environ["AGENT_REPLAY_DIR"] = str(store_dir)
    binary = isinstance(stdin, bytes)
    feed = stdin if isinstance(stdin, str | bytes) else None
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=feed,
        stdin=None if feed is not None else (stdin or subprocess.DEVNULL),
        capture_output=True,
        text=not binary,
        env=environ,
        timeout=timeout,
        check=False,
    )
    mark: Any = _MARK.encode() if binary else _MARK
    err, found, report = done.stderr.rpartition(mark)
    assert found, f"the probed run died (exit {done.returncode}):\n{done.stderr}"
    result = json.loads(report)
    return Probe(result["code"], result["loaded"], done.stdout, err)
