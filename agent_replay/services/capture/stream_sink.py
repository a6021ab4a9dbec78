"""What every harness stream mapper shares: ``StreamSink`` (one trace per stream, native
events out, assistant text held until it is known to be a thought or the final output) and
reading a shell tool's failure from its text (``shell_failure``). The formats themselves are
``stream_codex``, ``stream_gemini`` and ``stream_claude``; ``streams`` picks one.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import orjson

from agent_replay.services.capture import vocabulary
from agent_replay.services.capture.events import EventEngine
from agent_replay.services.capture.pump import LineSink

# A failed shell command's text: "Exit code 1" / "Exit Code: 1" (Claude, Gemini's full format).
_EXIT_CODE = re.compile(r"(?im)^\s*exit code:?\s*(-?\d+)\s*$")
SHELL_TOOLS = frozenset({"run_shell_command", "shell", "bash", "Bash", "exec_command"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
ERROR_TEXT_LIMIT = 2000


def total_tokens(*values: Any) -> int | None:
    known = [v for v in values if type(v) is int and v >= 0]
    return sum(known) if known else None


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:ERROR_TEXT_LIMIT]
    return text.strip()[:ERROR_TEXT_LIMIT]


def shell_failure(command: Any, output: Any) -> str | None:
    """The failure a shell tool's output shows although the harness reported success.

    Gemini CLI's ``run_shell_command`` reports ``status: "success"`` for a command that exits
    non-zero. The failure is read from the text: an ``Exit Code: N`` line with N != 0, or a
    first line that is the command's (or its shell's) own diagnostic, ``cat: x: No such file
    or directory``. ``None`` when nothing says it failed.
    """
    if not isinstance(output, str) or not output.strip():
        return None
    match = _EXIT_CODE.search(output)
    if match is not None:
        code = int(match.group(1))
        return f"exit code {code}" if code else None
    program = None
    if isinstance(command, str) and command.strip():
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        if words:
            program = words[0].rsplit("/", 1)[-1]
    first = first_line(output)
    prefixes = [f"{shell}: " for shell in _SHELLS]
    if program:
        prefixes.append(f"{program}: ")
    if any(first.startswith(prefix) for prefix in prefixes):
        return first
    return None


class StreamSink(LineSink):
    """The shared machinery: one trace per stream, native events out, assistant text held until
    it is known to be a thought or the final output.

    Args:
        engine: where the native events go.
        agent_name: the traces' agent name (default: the harness's, ``DEFAULT_AGENT``).
    """

    FORMAT = ""
    DEFAULT_AGENT = ""
    # Event types known and deliberately not recorded (no warning).
    IGNORED: frozenset[str] = frozenset()

    def __init__(self, engine: EventEngine, *, agent_name: str | None = None) -> None:
        self.engine = engine
        self.agent_name = agent_name or self.DEFAULT_AGENT
        self.where = ""
        # The current line's own time, and the latest one seen (harnesses that stamp lines).
        self.timestamp: str | None = None
        self.last_timestamp: str | None = None
        self.trace_key: str | None = None
        self.trace_fields: dict[str, Any] = {}
        self.ended = False
        self.events = 0
        # Held assistant text: parts, first/last timestamps, model, link fields.
        self._text: list[str] = []
        self._text_started: str | None = None
        self._text_ended: str | None = None
        self._text_links: dict[str, Any] = {}
        self.last_output: str | None = None

    # --- lines ----------------------------------------------------------------------------

    def feed_line(self, line: bytes, where: str) -> None:
        if not line.strip():
            return
        engine = self.engine
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            engine.malformed(where, f"not valid JSON ({exc})")
            return
        if not isinstance(event, dict):
            engine.malformed(where, f"not a JSON object (got {type(event).__name__})")
            return
        kind = event.get("type")
        if not isinstance(kind, str) or not kind:
            engine.malformed(where, "no event type")
            return
        self.events += 1
        self.where = where
        stamp = event.get("timestamp")
        self.timestamp = stamp if isinstance(stamp, str) else None
        if self.timestamp is not None:
            self.last_timestamp = self.timestamp
        handler = getattr(self, "on_" + kind.replace(".", "_").replace("-", "_"), None)
        if handler is not None:
            try:
                handler(event)
            except Exception as exc:  # noqa: BLE001 - one odd event never costs the stream
                engine.reject(where, kind, f"could not be mapped ({type(exc).__name__}: {exc})")
        elif kind not in self.IGNORED:
            engine.skip(f"unknown {self.FORMAT} event type {kind!r}", where)

    def finish(self, *, leave_open: bool = False) -> None:
        self.close()
        self.engine.report.events = self.events
        self.engine.finish(leave_open=leave_open)

    def close(self) -> None:
        """The stream ended: write what is held (subclasses end the trace if they can)."""
        self.flush_text("thought")

    # --- native events --------------------------------------------------------------------

    def emit(self, kind: str, **fields: Any) -> Any:
        """Send one native event for this stream's trace; returns the engine's result."""
        self.ensure_trace()
        event = {"v": 1, "type": kind, "trace_id": self.trace_key}
        event.update({k: v for k, v in fields.items() if v is not None})
        return self.engine.handle(event, self.where)

    def ensure_trace(self, **fields: Any) -> None:
        """Start the stream's trace (once), with what is known about it so far."""
        if self.trace_key is not None:
            return
        self.trace_fields.update({k: v for k, v in fields.items() if v is not None})
        self.trace_fields.setdefault("started_at", self.timestamp)
        key = self.trace_fields.pop("trace_id", None) or f"{self.FORMAT}-stream"
        self.trace_key = str(key)
        event = {
            "v": 1,
            "type": "trace_start",
            "trace_id": self.trace_key,
            "agent_name": self.agent_name,
            **{k: v for k, v in self.trace_fields.items() if v is not None},
        }
        self.engine.handle(event, self.where)

    def end_trace(self, **fields: Any) -> None:
        """End the stream's trace (once)."""
        if self.ended:
            return
        self.emit("trace_end", **fields)
        self.ended = True

    # --- held assistant text --------------------------------------------------------------

    def hold_text(self, text: str, timestamp: str | None = None, **links: Any) -> None:
        """Add a chunk of assistant text to the message being held."""
        if not self._text:
            self._text_started = timestamp
            self._text_links = links
        self._text.append(text)
        self._text_ended = timestamp

    def flush_text(self, step_type: str) -> int | None:
        """Write the held text as one ``thought`` or ``output`` step; returns its number."""
        if not self._text:
            return None
        text = "".join(self._text)
        started, ended, links = self._text_started, self._text_ended, self._text_links
        self._text, self._text_started, self._text_ended, self._text_links = [], None, None, {}
        if not text.strip():
            return None
        if step_type == "output":
            self.last_output = text
        return self.emit(  # type: ignore[no-any-return]
            "step",
            step_type=step_type,
            name=vocabulary.ANSWER_STEP if step_type == "output" else "message",
            output=text,
            started_at=started,
            ended_at=ended if ended != started else None,
            **links,
        )
