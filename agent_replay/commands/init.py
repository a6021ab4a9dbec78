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

    Safe to run again: an existing store is migrated if needed and left as it is (its
    directory is tightened to mode 0700, with a note).
    Without --dir it creates ./.agent-replay (or uses $AGENT_REPLAY_DIR). With --db-url
    (or $AGENT_REPLAY_DB_URL) it creates the team store there: its schema and tables.

    \b
    Examples:
      agent-replay init
      agent-replay init --dir /tmp/traces
      agent-replay --db-url postgresql://me@db.internal/agents?schema=team init
    """
    from agent_replay.commands._common import resolve_db_url
    from agent_replay.config import ensure_config
    from agent_replay.paths import DIR_NAME, ENV_DIR, db_path, tighten_dir
    from agent_replay.store.db import open_store

    url = resolve_db_url()
    if url is not None:
        return _init_team_store(url, as_json)
    if store_dir is None:
        # The root's --dir, else $AGENT_REPLAY_DIR, else here: init never walks up to a
        # parent's store (that is what it would otherwise find).
        import os

        root = click.get_current_context().find_root()
        store_dir = (root.obj or {}).get("store_dir")
        if store_dir is None:
            store_dir = Path(os.environ[ENV_DIR]) if os.environ.get(ENV_DIR) else Path(DIR_NAME)
    existed = db_path(store_dir).exists()
    tightened = Path(store_dir).is_dir() and tighten_dir(Path(store_dir))
    if tightened and not as_json:
        click.echo(f"note: tightened {store_dir} to mode 0700 (only you can read it)", err=True)
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


def _init_team_store(url: str, as_json: bool) -> int:
    """Create (or migrate) the PostgreSQL store at ``url``."""
    from agent_replay.errors import StoreError
    from agent_replay.store.db import mask_url, open_store

    try:
        open_store(url, create=False, migrate=False).close()
        existed = True
    except StoreError as exc:
        if not exc.message.startswith("no agent-replay store"):
            raise
        existed = False
    open_store(url, create=True).close()
    label = mask_url(url)
    if as_json:
        emit_json({"ok": True, "db_url": label, "created": not existed})
    elif existed:
        click.echo(f"team store already exists at {label}")
    else:
        click.echo(f"created team store at {label}")
    return 0
