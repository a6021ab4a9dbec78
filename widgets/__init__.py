"""Reusable Textual widgets, installed as ``agent_replay.widgets`` (never top-level)."""
