"""The policies marker: a store remembers, outside its database file, that it had guardrails.

``hook --enforce`` reads the policies from ``traces.db``. If that file is deleted, truncated to
zero bytes, replaced by an empty store or cannot be read, the policies would silently vanish
and enforcement would allow everything. So every change to a local store's policies also writes
how many are enabled into ``<dir>/config.json`` (``"guard": {"enabled_policies": N}``); when the
marker says there were enabled policies and the database has none (or cannot be read),
``hook --enforce`` blocks with a reason until the database is restored or the user says the
policies are meant to be gone (``agent-replay guard reset``, which sets the marker to what the
store holds now).

Stdlib only (``hook --enforce`` reads the marker within the hook's start-up budget). The file
is rewritten atomically (a private temp file renamed over it), keeping every other setting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_replay.paths import CONFIG_NAME, write_private

SECTION = "guard"
KEY = "enabled_policies"


class MarkerError(Exception):
    """``config.json`` exists but cannot be read as a JSON object (enforcement fails closed)."""


def _load(store_dir: Path) -> dict[str, Any]:
    path = store_dir / CONFIG_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise MarkerError(f"cannot read {CONFIG_NAME}: {exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise MarkerError(f"{CONFIG_NAME} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise MarkerError(f"{CONFIG_NAME} does not hold a JSON object")
    return data


def remembered(store_dir: Path) -> int:
    """How many enabled policies the store last had (0: none, or never any).

    Raises:
        MarkerError: ``config.json`` is unreadable (the caller fails closed).
    """
    section = _load(store_dir).get(SECTION)
    if not isinstance(section, dict):
        return 0
    count = section.get(KEY)
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0


def remember(store_dir: Path, enabled: int) -> None:
    """Record that the store now has ``enabled`` enabled policies (nothing is written when the
    file already says so, or when there is no file and no policies)."""
    try:
        data = _load(store_dir)
    except MarkerError:
        return  # a broken config.json is reported by the commands that read it; never lose it
    section = data.get(SECTION)
    section = dict(section) if isinstance(section, dict) else {}
    if section.get(KEY, 0) == enabled:
        return
    section[KEY] = enabled
    data[SECTION] = section
    data.setdefault("version", 1)
    write_private(store_dir / CONFIG_NAME, json.dumps(data, indent=2) + "\n")
