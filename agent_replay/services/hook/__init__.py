"""The harness hook: ``agent-replay hook`` (and ``--enforce``), from stdin to steps.

A harness (Claude Code, Codex CLI, Gemini CLI) runs the hook before and after every tool
call, so the path splits in two: a stdlib-only fast path that queues the payload (and, under
``--enforce``, decides the call) in a few milliseconds, and a detached drainer that records
the queued payloads through ``TraceRecorder``, the one write path.

The fast path (stdlib only; an import-linter contract and a ``sys.modules`` test hold it):

- ``fast``: the entry point ``agent_replay.entry`` calls: the arguments, then capture or
  enforce (``None``: the full CLI, ``commands/hook.py``);
- ``enforce``: decide a pre-tool payload against the guard policies, answer in the harness's
  dialect, queue it with the decision;
- ``inbox``: queue a payload in the store's ``hook_inbox``, wake or start the drainer, log;
- ``harness``: which harness a payload comes from (the one ``detect``), each harness's trace
  names (``DIALECTS``). A leaf: everything here may import it.

The drainer's side:

- ``drain``: the drainer process and ``drain``/``drain_with_lock`` (``hook --sync``, ``push``,
  tests): the inbox in arrival order, team-store delivery;
- ``capture``: one payload -> steps: its dialect detected, the session file followed
  (``capture.transcript_follow``), the dialect's mapping applied;
- ``dialects``: ``claude``, ``codex``, ``gemini``: each harness's events -> steps;
- ``session``: ``Hook``, the payload being recorded and the helpers the dialects map onto;
- ``guard_check``: a decision queued by ``enforce`` -> its ``guard_check`` step.

Imports point one way (``pyproject.toml``'s import-linter contracts): ``fast`` -> ``enforce``
-> ``inbox``; ``capture`` -> ``dialects`` -> the follower -> ``session`` -> ``harness``.
"""
