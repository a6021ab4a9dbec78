"""Files that can hold what agents did are private: logs, exports, bundles and spool files are
created 0600 inside a 0700 directory, and ``init`` tightens an existing store directory."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_tightens_an_existing_store_directory(tmp_path: Path, cli: Any) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    result = cli("init", "--dir", str(folder))
    assert result.code == 0 and "tightened" in result.err
    assert mode(folder) == 0o700
    assert mode(folder / "traces.db") == 0o600 and mode(folder / "config.json") == 0o600


def test_logs_exports_and_bundles_are_private(store_dir: Path, cli: Any, tmp_path: Path) -> None:
    os.umask(0o022)
    env = {**os.environ, "AGENT_REPLAY_DIR": str(store_dir), "AGENT_REPLAY_HOOK_NO_SPAWN": "1"}
    assert cli("demo").code == 0
    # An empty payload is logged by the hook's fast path.
    subprocess.run([sys.executable, "-m", "agent_replay", "hook"], input=b" ", env=env, check=True)
    log = store_dir / "logs" / "agent-replay.log"
    assert mode(log) == 0o600 and mode(log.parent) == 0o700
    for fmt, name in (("jsonl", "all.jsonl"), ("json", "all.json"), ("bundle", "all.bundle")):
        out = tmp_path / name
        assert cli("export", "--format", fmt, "--output", str(out)).code == 0
        assert mode(out) == 0o600, name
    json.loads((tmp_path / "all.json").read_text())
    assert mode(store_dir) == 0o700 and mode(store_dir / "traces.db") == 0o600
