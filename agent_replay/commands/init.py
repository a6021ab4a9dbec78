"""``agent-replay init``: create the store directory, database and config; idempotent."""

from __future__ import annotations

from pathlib import Path

import click

from agent_replay.commands._common import dir_option, emit_json, json_option


@click.command(name="init")
@dir_option
@json_option
def command(store_dir: Path | None, as_json: bool) -> int:
    """Create the store (.agent-replay/ with traces.db and config.json).

    Safe to run again: an existing store is migrated if needed and left as it is.
    Without --dir it creates ./.agent-replay (or uses $AGENT_REPLAY_DIR).

    \b
    Examples:
      agent-replay init
      agent-replay init --dir /tmp/traces
    """
    from agent_replay.config import ensure_config
    from agent_replay.paths import DIR_NAME, ENV_DIR, db_path
    from agent_replay.store.db import open_store

    if store_dir is None:
        # The root's --dir, else $AGENT_REPLAY_DIR, else here: init never walks up to a
        # parent's store (that is what it would otherwise find).
        import os

        root = click.get_current_context().find_root()
        store_dir = (root.obj or {}).get("store_dir")
        if store_dir is None:
            store_dir = Path(os.environ[ENV_DIR]) if os.environ.get(ENV_DIR) else Path(DIR_NAME)
    existed = db_path(store_dir).exists()
    with open_store(db_path(store_dir), create=True):
        pass
    config = ensure_config(store_dir)
    folder = store_dir.resolve()
    if as_json:
        emit_json({"ok": True, "dir": str(folder), "created": not existed, "config": str(config)})
    elif existed:
        click.echo(f"store already exists at {folder}")
    else:
        click.echo(f"created store at {folder}")
    return 0
