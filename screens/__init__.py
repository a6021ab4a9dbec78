"""Textual screens, installed as ``agent_replay.screens`` (never as a top-level package).

Each screen lives in its own module with its ``.tcss`` beside it. Only the TUI imports these.
"""
