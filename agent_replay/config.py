"""User configuration, stored as ``<dir>/config.json`` (mode 0600).

Environment variables (``ANTHROPIC_API_KEY``, ``GOOGLE_API_KEY``/``GEMINI_API_KEY``,
``OPENAI_API_KEY``) take priority over the file for provider keys.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent_replay.paths import CONFIG_NAME, make_private_dir

DEFAULT_CONFIG: dict[str, object] = {"version": 1, "redact": True}


def ensure_config(store_dir: Path) -> Path:
    """Write the default config file if there is none; return its path."""
    make_private_dir(store_dir)
    path = store_dir / CONFIG_NAME
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(DEFAULT_CONFIG, handle, indent=2)
            handle.write("\n")
    return path
