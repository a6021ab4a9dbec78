"""The harness hook: ``agent-replay hook`` (and ``--enforce``), from stdin to steps.

Placeholder docstring (filled in by the restructuring commit)."""
