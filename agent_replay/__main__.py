"""``python -m agent_replay``: the same entry point as the ``agent-replay`` script."""

from agent_replay.entry import main

raise SystemExit(main())
