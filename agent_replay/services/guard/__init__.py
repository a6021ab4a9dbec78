"""Guardrails: policies that flag or block dangerous steps, on recorded traces and live.

- ``policy``: the policy model, pattern validation (what ``guard add`` refuses and why).
- ``match``: what a pattern means for a step (AND of its fields, normalized text, RE2).
- ``decide``: several matching policies -> one action (the precedence rule).
- ``manage``: adding, listing, removing, enabling and testing policies in a store.
- ``verdict``: whether a recorded ``guard_check`` step blocked its action (for the app).

``hook --enforce`` (deciding a harness's proposed call live) and the ``guard_check`` step it
leaves live with the hook, in ``services/hook/`` (``enforce``, ``guard_check``); this package
never imports it. ``policy``, ``match``, ``decide`` and ``marker`` import only the stdlib (and
``re2`` when a policy has a ``name_regex``): the hook's enforce path runs them within the
hook's start-up budget. Nothing here imports Textual or Rich.
"""
