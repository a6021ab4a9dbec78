"""Linear-time regular expressions for ``name_regex``: RE2, never a backtracking engine.

A hook evaluates policies against text the agent (and whatever it read) chose, so a regex
must not be able to hang it: Python's ``re`` backtracks, and ``(a+)+$`` against a long run of
``a`` takes exponential time. RE2 (``google-re2``) matches in time linear in the input and
refuses constructs that need backtracking (backreferences, lookaround) when the pattern is
compiled, which is when ``guard add`` reports them. Imported lazily: it costs ~2 ms, paid only
by a hook whose policies have a ``name_regex``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Protocol


class RegexError(ValueError):
    """A pattern RE2 refuses, or RE2 is not installed."""


class LinearRegex(Protocol):
    """A compiled RE2 pattern."""

    def search(self, text: str) -> Any: ...


@lru_cache(maxsize=256)
def compile_linear(pattern: str) -> LinearRegex:
    """Compile ``pattern`` with RE2 (cached).

    Raises:
        RegexError: RE2 refuses the pattern (the message is RE2's), or is not installed.
    """
    try:
        import re2
    except ImportError:  # pragma: no cover - google-re2 is a dependency; kept for odd installs
        raise RegexError(
            "RE2 is not installed (pip install google-re2); name_regex needs a linear-time engine"
        ) from None
    options = re2.Options()
    options.log_errors = False  # RE2 would print its own copy of every refusal on stderr
    try:
        return re2.compile(pattern, options)  # type: ignore[no-any-return]
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RegexError(str(reason)) from None
    except (TypeError, ValueError) as exc:
        raise RegexError(str(exc)) from None


def search(pattern: str, text: str) -> bool:
    """Whether RE2 finds ``pattern`` anywhere in ``text``."""
    return compile_linear(pattern).search(text) is not None
