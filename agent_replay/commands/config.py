"""``agent-replay config``: show and change the settings in ``<dir>/config.json``.

Subcommands ``list``, ``get``, ``set``, ``unset`` and ``test-ai``. API keys are masked in all
output; environment variables take priority over the file and ``list`` says which is in use.
Headless: no Textual, no Rich; ``test-ai`` imports one AI SDK, the others nothing heavy.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import json_option


def dir_option(function: Any) -> Any:
    """``--dir``: where config.json lives (the store directory; a database URL plays no part)."""
    return click.option(
        "--dir",
        "store_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Store directory holding config.json (default: $AGENT_REPLAY_DIR, else the "
        "nearest .agent-replay/).",
    )(function)


KEYS_HELP = """\b
Keys:
  ai.provider               anthropic, google or openai (unset: the first
                            with a key, in that order)
  ai.model                  model name (unset: claude-haiku-4-5-20251001,
                            gemini-2.5-flash-lite or gpt-5.4-nano)
  ai.api_keys.anthropic     overridden by ANTHROPIC_API_KEY
  ai.api_keys.google        overridden by GOOGLE_API_KEY, GEMINI_API_KEY
  ai.api_keys.openai        overridden by OPENAI_API_KEY
  ai.base_urls.PROVIDER     API endpoint (a gateway or compatible server)
  ai.max_tokens             most tokens an AI reply may use (1024)
  redact                    redact secrets before recording (true)"""


@click.group(name="config", invoke_without_command=True, epilog=KEYS_HELP)
@dir_option
@json_option
@click.pass_context
def command(ctx: click.Context, store_dir: Path | None, as_json: bool) -> int | None:
    """Show and change settings: the AI provider, its keys and model.

    Settings live in <dir>/config.json (mode 0600). API keys are always shown masked, and
    the environment variables ANTHROPIC_API_KEY, GOOGLE_API_KEY (or GEMINI_API_KEY) and
    OPENAI_API_KEY take priority over keys stored in the file. With no subcommand, lists
    the settings.

    \b
    Examples:
      agent-replay config list
      agent-replay config set ai.provider openai
      agent-replay config set ai.api_keys.openai -    (reads the key from stdin)
      agent-replay config get ai.model
      agent-replay config unset ai.model
      agent-replay config test-ai
    """
    ctx.ensure_object(dict)
    if store_dir is not None:
        ctx.obj["store_dir"] = store_dir
    if ctx.invoked_subcommand is None:
        return _list(store_dir, as_json)
    return None


def _store_dir(store_dir: Path | None) -> Path:
    from agent_replay.commands._common import resolve_store_dir

    if store_dir is None:
        ctx = click.get_current_context(silent=True)
        parent = ctx.parent if ctx is not None else None
        if parent is not None and parent.obj and parent.obj.get("store_dir"):
            store_dir = parent.obj["store_dir"]
    return resolve_store_dir(store_dir)


@command.command(name="list")
@dir_option
@json_option
def list_command(store_dir: Path | None, as_json: bool) -> int:
    """List every setting, its value in effect (keys masked) and where it comes from.

    \b
    Examples:
      agent-replay config list
      agent-replay config list --json
    """
    return _list(store_dir, as_json)


def _list(store_dir: Path | None, as_json: bool) -> int:
    from agent_replay.commands._common import emit_json, print_table, safe
    from agent_replay.config import KEYS, config_path, effective, load_config

    folder = _store_dir(store_dir)
    config = load_config(folder)
    values = [effective(config, key) for key in KEYS]
    ai = _ai_summary(config)
    if as_json:
        emit_json(
            {
                "path": str(config_path(folder)),
                "settings": [v.to_json() for v in values],
                "ai": ai,
            }
        )
        return 0
    rows = [[v.key, safe(v.shown()) or _unset_label(v.key), v.source] for v in values]
    print_table(["KEY", "VALUE", "SOURCE"], rows)
    click.echo("")
    if ai.get("provider"):
        click.echo(
            f"AI: {ai['label']} (key from {ai['key_source']}); check it with "
            "`agent-replay config test-ai`"
        )
    else:
        click.echo(f"AI: {ai['error']}")
    click.echo(f"file: {config_path(folder)}")
    return 0


def _unset_label(key: str) -> str:
    return {
        "ai.provider": "(auto)",
        "ai.model": "(provider's default)",
    }.get(key, "(unset)" if key.startswith("ai.api_keys.") else "(default)")


def _ai_summary(config: Any) -> dict[str, Any]:
    from agent_replay.errors import AgentReplayError
    from agent_replay.services.evals.providers import resolve_ai

    try:
        settings = resolve_ai(config)
    except AgentReplayError as exc:
        return {"provider": None, "model": None, "key_source": None, "error": exc.message}
    return {
        "provider": settings.provider,
        "model": settings.model,
        "key_source": settings.key_source,
        "label": settings.label,
    }


@command.command(name="get")
@click.argument("key")
@dir_option
@json_option
def get_command(key: str, store_dir: Path | None, as_json: bool) -> int:
    """Print the value in effect for KEY (API keys masked; nothing when unset). An unset
    ai.provider or ai.model prints the one the AI commands would use (source
    "default for <provider>"), when an API key decides it.

    \b
    Examples:
      agent-replay config get ai.model
      agent-replay config get ai.api_keys.openai --json
    """
    from dataclasses import replace

    from agent_replay.commands._common import emit_json, safe
    from agent_replay.config import effective, load_config

    config = load_config(_store_dir(store_dir))
    value = effective(config, key)
    if value.value is None and key in ("ai.provider", "ai.model"):
        ai = _ai_summary(config)
        if ai.get("provider"):
            chosen = ai["provider"] if key == "ai.provider" else ai["model"]
            value = replace(value, value=chosen, source=f"default for {ai['provider']}")
    if as_json:
        emit_json(value.to_json())
    elif value.value is not None:
        click.echo(safe(value.shown()))
    return 0


@command.command(name="set")
@click.argument("key")
@click.argument("value")
@dir_option
@json_option
def set_command(key: str, value: str, store_dir: Path | None, as_json: bool) -> int:
    """Set KEY to VALUE in config.json. A VALUE of - reads it from stdin (for API keys: it
    stays out of your shell history).

    \b
    Examples:
      agent-replay config set ai.provider google
      agent-replay config set ai.max_tokens 2048
      echo "$KEY" | agent-replay config set ai.api_keys.anthropic -
    """
    from agent_replay.config import key_info

    info = key_info(key)
    if value == "-":
        value = sys.stdin.readline().strip()
        if not value:
            from agent_replay.errors import UsageError

            raise UsageError(f"no value for {key} on stdin")
    return _write(key, value, store_dir, as_json, secret=info.secret)


@command.command(name="unset")
@click.argument("key")
@dir_option
@json_option
def unset_command(key: str, store_dir: Path | None, as_json: bool) -> int:
    """Remove KEY from config.json (it goes back to its default).

    \b
    Examples:
      agent-replay config unset ai.model
      agent-replay config unset ai.api_keys.openai
    """
    from agent_replay.config import key_info

    return _write(key, None, store_dir, as_json, secret=key_info(key).secret)


def _write(key: str, value: str | None, store_dir: Path | None, as_json: bool, secret: bool) -> int:
    from agent_replay.commands._common import emit_json, safe
    from agent_replay.config import (
        ENV_KEYS,
        effective,
        load_config,
        save_config,
        set_value,
    )

    folder = _store_dir(store_dir)
    config = set_value(load_config(folder), key, value)
    path = save_config(folder, config)
    now = effective(config, key)
    override = None
    if secret and now.source.startswith("$"):
        override = now.source
    elif secret and value is None:
        provider = key.rsplit(".", 1)[1]
        override = next((f"${n}" for n in ENV_KEYS[provider] if _env(n)), None)
    if as_json:
        emit_json({"ok": True, **now.to_json(), "path": str(path), "overridden_by": override})
        return 0
    if value is None:
        click.echo(f"unset {key}")
    else:
        from agent_replay.config import get_value, mask

        stored = get_value(config, key)
        shown = mask(stored) if secret else safe(now.shown())
        click.echo(f"set {key} = {shown}")
    if override:
        click.echo(f"note: {override} is set and takes priority over config.json", err=True)
    return 0


def _env(name: str) -> bool:
    import os

    return bool((os.environ.get(name) or "").strip())


@command.command(name="test-ai")
@click.option(
    "--provider",
    type=click.Choice(["anthropic", "google", "openai"]),
    help="Test this provider (default: the one eval --ai would use).",
)
@click.option("--model", metavar="NAME", help="Test this model.")
@dir_option
@json_option
def test_ai_command(
    provider: str | None, model: str | None, store_dir: Path | None, as_json: bool
) -> int:
    """Make one tiny AI call and report the provider, model, latency and cost.

    Exits 1 with the provider's message when the key is rejected or the API can't be
    reached.

    \b
    Examples:
      agent-replay config test-ai
      agent-replay config test-ai --provider google --json
    """
    import datetime as dt

    from agent_replay.commands._common import emit_json, safe, truncate
    from agent_replay.config import load_config
    from agent_replay.services.evals.ask import call_cost
    from agent_replay.services.evals.providers import Message, open_client, resolve_ai

    settings = resolve_ai(load_config(_store_dir(store_dir)), provider=provider, model=model)
    client = open_client(settings)
    try:
        reply = client.complete(
            'You are a connectivity check. Reply with the JSON object {"ok": true}.',
            [Message("user", 'Reply with the JSON object {"ok": true} and nothing else.')],
            max_tokens=64,
        )
    finally:
        client.close()
    tokens = (reply.input_tokens, reply.output_tokens)
    cost = call_cost(settings, reply, tokens, dt.datetime.now(dt.UTC))
    result = {
        "ok": True,
        "provider": settings.provider,
        "model": reply.model or settings.model,
        "key_source": settings.key_source,
        "latency_ms": round(reply.latency_ms, 1),
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cost_usd": cost,
        "reply": reply.text,
    }
    if as_json:
        emit_json(result)
        return 0
    click.echo(f"ok: {settings.label} answered in {reply.latency_ms:,.0f} ms")
    price = f"${cost:.6f}" if cost is not None else "price unknown"
    click.echo(
        f"    model {safe(result['model'])} · {reply.input_tokens} in / {reply.output_tokens} "
        f"out tokens · {price} · key from {settings.key_source}"
    )
    if reply.text.strip():
        click.echo(f"    reply: {truncate(safe(reply.text.strip()), 80)}")
    return 0
