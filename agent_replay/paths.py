"""Where the store lives: ``--dir``, else ``AGENT_REPLAY_DIR``, else the nearest
``.agent-replay/`` walking up from the working directory, else ``./.agent-replay``."""

from __future__ import annotations

import os
from pathlib import Path

DIR_NAME = ".agent-replay"
DB_NAME = "traces.db"
CONFIG_NAME = "config.json"
ENV_DIR = "AGENT_REPLAY_DIR"
ENV_DB_URL = "AGENT_REPLAY_DB_URL"
"""A database URL (``postgresql://…``) every command, hook and app uses instead of the local
SQLite file; the local store directory then only spools hook payloads."""


def resolve_dir(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Path:
    """Return the store directory (which may not exist yet)."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DIR_NAME
        if candidate.is_dir():
            return candidate
    return here / DIR_NAME


def db_path(store_dir: Path) -> Path:
    """The SQLite file inside a store directory."""
    return store_dir / DB_NAME


def read_config_json(store_dir: Path) -> dict[str, object]:
    """``<dir>/config.json`` as a plain dict (stdlib; empty when missing or unreadable: the
    commands that validate it report a broken file)."""
    import json

    try:
        data = json.loads((store_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def redaction_on(store_dir: Path, no_redact: bool = False) -> bool:
    """Whether writers redact secrets: yes, unless ``--no-redact`` or the store's config says
    ``"redact": false`` (``agent-replay config set redact false``)."""
    return not no_redact and read_config_json(store_dir).get("redact") is not False


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) with mode 0700 for the leaf; existing dirs are left alone."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o700)


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with ``text``: a private (0600) temp file beside it,
    renamed over it, so a reader never sees half a file and no other user can read it."""
    import tempfile  # deferred: ~4 ms (shutil, random), and the hook's fast path never writes

    make_private_dir(path.parent)

    fd, temp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=path.suffix, dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def append_private(path: Path, text: str) -> None:
    """Append ``text`` to ``path``, created 0600 inside a 0700 directory (an existing file is
    tightened to 0600): logs can hold what a command saw."""
    make_private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8", errors="replace"))
    finally:
        os.close(fd)


def tighten_dir(path: Path) -> bool:
    """Make an existing directory 0700 (``init``); whether its mode had to change."""
    mode = path.stat().st_mode & 0o777
    if mode == 0o700:
        return False
    os.chmod(path, 0o700)
    return True
