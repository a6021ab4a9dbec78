"""Guardrails: policies that flag or block dangerous steps, on recorded traces and live.

- ``policy``: the policy model, pattern validation (what ``guard add`` refuses and why).
- ``match``: what a pattern means for a step (AND of its fields, normalized text, RE2).
- ``decide``: several matching policies -> one action (the precedence rule).
- ``enforce``: ``hook --enforce``: evaluate a harness's pre-tool payload and answer in its
  dialect (Claude Code, Codex CLI, Gemini CLI, or a plain exit code).
- ``manage``: adding, listing, removing, enabling and testing policies in a store.
- ``record``: the drainer's side of enforcement: the ``guard_check`` step of a decision.
- ``verdict``: whether a recorded ``guard_check`` step blocked its action (for the app).

``policy``, ``match``, ``decide`` and ``enforce`` import only the stdlib (and ``re2`` when a
policy has a ``name_regex``): the hook's enforce path runs them within the hook's start-up
budget. Nothing here imports Textual or Rich.
"""
