"""Headless subcommands, one module each, exposing a click ``command``.

Each imports services inside its callback; none imports Textual or Rich.
"""
