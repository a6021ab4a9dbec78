"""The one exception hierarchy. Services raise only these for expected failures; the CLI maps
them to exit codes in one place (``cli.main``). Must not import anything heavy."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class AgentReplayError(Exception):
    """Base of every expected failure.

    Args:
        message: what went wrong, naming the input and where.
        hints: short suggestions printed after the message (and in ``--json`` errors).
    """

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, hints: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hints = list(hints or [])

    def hints_for(self, command: str) -> list[str]:
        """The hints to show when ``command`` (``eval``, ``config test-ai``…) failed so."""
        return self.hints


class UsageError(AgentReplayError):
    """The command was called wrongly: a bad option value, an ambiguous id prefix."""

    exit_code = EXIT_USAGE


class TraceFormatError(AgentReplayError):
    """A trace is not valid. ``problems`` lists every problem found, each with its path."""

    def __init__(self, problems: list[tuple[str, str]], *, label: str = "trace") -> None:
        self.problems = problems
        lines = [f"{path}: {msg}" if path else msg for path, msg in problems]
        super().__init__(f"invalid {label}: " + "; ".join(lines))


class StoreError(AgentReplayError):
    """The store can't be opened, is newer than this build, or a write failed."""


class NotFoundError(AgentReplayError):
    """A trace or step named by the user does not exist."""


class AmbiguousIdError(UsageError):
    """An id prefix matches more than one trace."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        self.candidates = candidates
        shown = ", ".join(candidates[:5])
        super().__init__(
            f"id prefix {prefix!r} is ambiguous: it matches {shown}"
            + (" and more" if len(candidates) > 5 else ""),
            hints=["give more characters of the id"],
        )
