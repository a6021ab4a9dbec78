"""Each harness's hook events -> steps: ``claude`` (Claude Code; Codex CLI shares its event
names), ``codex`` (Codex CLI's failures), ``gemini`` (Gemini CLI)."""
