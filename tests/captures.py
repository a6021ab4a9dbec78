"""Where the real captures live: ``tests/fixtures/``, a byte-identical copy of the project's
shared fixtures (Claude Code, Codex CLI, Gemini CLI and OpenTelemetry exports; see its README).

Tests read them from here and nowhere else: a fresh clone has nothing beside it, so no test may
skip or fail for want of a file outside the checkout (``test_self_contained`` enforces it).
Imported as ``captures`` (``tests/`` is on ``sys.path`` through the root conftest).
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HARNESS = FIXTURES / "harness"
OTLP = FIXTURES / "otlp"
