"""The ``agent-replay`` entry point: a lazy click group and ``main(argv) -> int``.

Exceptions are mapped to exit codes here and nowhere else:
0 success (also "no matches"); 1 runtime failure; 2 usage error; 130 interrupted.
Under ``--json`` a failure also prints ``{"ok": false, "error": ..., "hints": [...]}`` on stdout.
Unexpected errors print one line; the traceback goes to ``<dir>/logs/agent-replay.log``.

No top-level import of Textual, Rich or the services: each subcommand imports what it needs when
it runs, and the TUI is imported only inside the no-argument branch.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from agent_replay import __version__
from agent_replay.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, AgentReplayError

# name -> (module, one-line help). The help is here so `agent-replay --help` imports nothing.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("agent_replay.commands.init", "Create the store (.agent-replay/) here."),
    "ingest": ("agent_replay.commands.ingest", "Load traces from a JSON or JSONL file."),
    "import": (
        "agent_replay.commands.import_",
        "Import Claude Code, Codex, Gemini CLI session files.",
    ),
    "list": ("agent_replay.commands.list_", "List traces, newest first."),
    "show": ("agent_replay.commands.show", "Show a trace: header and step timeline."),
    "why": ("agent_replay.commands.why", "Explain why a step happened (its causal chain)."),
    "decisions": ("agent_replay.commands.decisions", "List a trace's decision points."),
    "annotate": ("agent_replay.commands.annotate", "Label a run or a step (good, wrong-tool, …)."),
    "annotations": ("agent_replay.commands.annotations", "List a trace's annotations."),
    "replay": ("agent_replay.commands.replay", "Play a trace back step by step, in real time."),
    "export": (
        "agent_replay.commands.export",
        "Export traces: JSON, JSONL, golden set, bundle, HTML page.",
    ),
    "diff": ("agent_replay.commands.diff", "Compare two traces step by step (aligned by content)."),
    "fork": ("agent_replay.commands.fork", "Fork a trace at a step, optionally editing its input."),
    "check": ("agent_replay.commands.check", "Check runs against a golden dataset (CI gate)."),
    "eval": (
        "agent_replay.commands.eval",
        "Evaluate traces: deterministic presets, rubrics, AI review.",
    ),
    "config": (
        "agent_replay.commands.config",
        "Show and change settings (AI provider, keys, model).",
    ),
    "record": ("agent_replay.commands.record", "Record a live JSONL event stream from stdin."),
    "run": ("agent_replay.commands.run", "Run a command and record it as a trace."),
    "demo": ("agent_replay.commands.demo", "Load 5 sample traces and 3 guard policies."),
    "guard": ("agent_replay.commands.guard", "Guardrail policies: add, list, test, check."),
    "hook": (
        "agent_replay.commands.hook",
        "Record a Claude Code / Codex / Gemini CLI hook payload.",
    ),
    "setup": ("agent_replay.commands.setup", "Register the hooks with Claude/Codex/Gemini CLI."),
    "doctor": ("agent_replay.commands.doctor", "Check that capture works; say how to fix it."),
    "otel": ("agent_replay.commands.otel", "Receive OpenTelemetry (OTLP/HTTP) traces and logs."),
    "proxy": (
        "agent_replay.commands.proxy",
        "Record and replay an agent's model calls (a local API proxy).",
    ),
    "tui": ("agent_replay.commands.tui", "Open the full-screen app (optionally on a trace)."),
    "open": ("agent_replay.commands.open_", "Browse a bundle file in the app, read-only."),
    "web": ("agent_replay.commands.web", "Serve the app in a browser (textual-serve)."),
    "dashboard": ("agent_replay.commands.dashboard", "Open the app on the dashboard."),
    "watch": ("agent_replay.commands.watch", "Watch running traces live as steps arrive."),
    "push": ("agent_replay.commands.push", "Copy local traces to a team (PostgreSQL) store."),
    "search": ("agent_replay.commands.search", "Search traces and steps by text, ranked."),
    "mcp": ("agent_replay.commands.mcp", "Serve the store to coding agents over MCP (stdio)."),
    "delete": ("agent_replay.commands.delete", "Delete traces with everything attached."),
    "prune": ("agent_replay.commands.prune", "Delete traces older than a given age."),
    "redact": ("agent_replay.commands.redact", "Redact secrets already stored; reclaim the space."),
}

EPILOG = """\b
Exit codes: 0 success (also "no matches"), 1 runtime failure,
2 usage error, 130 interrupted.
Run `agent-replay COMMAND --help` for a command's options and examples."""


class LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand runs (or shows its help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command: click.Command = module.command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _remember_db_url(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--db-url`` on the root: every subcommand opens that store (see _common)."""
    if value is not None:
        from agent_replay.commands._common import remember_db_url

        remember_db_url(ctx, param, value)


@click.group(
    cls=LazyGroup,
    invoke_without_command=True,
    epilog=EPILOG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--dir",
    "store_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store directory (default: $AGENT_REPLAY_DIR, else the nearest .agent-replay/).",
)
@click.option(
    "--db-url",
    metavar="URL",
    default=None,
    expose_value=False,
    callback=_remember_db_url,
    help="Use the PostgreSQL store at URL (postgresql://USER@HOST:PORT/DB[?schema=NAME]) "
    "instead of the local one (default: $AGENT_REPLAY_DB_URL).",
)
@click.version_option(__version__, prog_name="agent-replay")
@click.pass_context
def root(ctx: click.Context, store_dir: Path | None) -> None:
    """agent-replay: time-travel debugging for AI agents.

    Records every step of an agent run into one local SQLite file, and lets you
    replay, inspect, compare, fork, evaluate and guard those runs.

    \b
    Examples:
      agent-replay                      open the app
      agent-replay demo                 load sample traces
      agent-replay list --status failed
      agent-replay show trc_abc --tree
    """
    ctx.ensure_object(dict)
    ctx.obj["store_dir"] = store_dir
    if ctx.invoked_subcommand is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            click.echo(ctx.get_help())
            ctx.exit(EXIT_USAGE)
        from agent_replay.commands.tui import run_app

        ctx.exit(run_app(store_dir))


def _wants_json(argv: Sequence[str]) -> bool:
    for arg in argv:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def _log_traceback(argv: Sequence[str]) -> Path | None:
    """Append the current traceback to ``<dir>/logs/agent-replay.log``; return its path."""
    import traceback

    try:
        from agent_replay.paths import append_private, resolve_dir

        store_dir = None
        if "--dir" in argv:
            index = list(argv).index("--dir")
            if index + 1 < len(argv):
                store_dir = argv[index + 1]
        folder = resolve_dir(store_dir) / "logs"
        if not folder.parent.is_dir():
            return None
        from agent_replay.services.redact import redact_text

        path = folder / "agent-replay.log"
        entry = f"--- agent-replay {' '.join(argv)}\n{traceback.format_exc()}\n"
        append_private(path, redact_text(entry))
        return path
    except OSError:
        return None


def _command_of(args: list[str]) -> str:
    """The command the arguments run (``eval``, ``config test-ai``), for command-aware hints."""
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--dir", "--db-url"):
            skip = True
        elif arg == "--":
            break
        elif not arg.startswith("-"):
            words.append(arg)
            if len(words) == 2 or words[0] != "config":
                break
    return " ".join(words)


def _fail(message: str, hints: list[str], code: int, as_json: bool) -> int:
    if as_json:
        from agent_replay.commands._common import emit_json

        emit_json({"ok": False, "error": message, "hints": hints})
    click.echo(f"error: {message}", err=True)
    for hint in hints:
        click.echo(f"  hint: {hint}", err=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (the console script's entry point)."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(args)
    try:
        # make_context + invoke rather than root.main(): click's main turns a closed stdout
        # into sys.exit(1); here every outcome maps to an exit code in one place.
        with root.make_context("agent-replay", args) as ctx:
            result: Any = root.invoke(ctx)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        hints = []
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hints.append(f"see `{exc.ctx.command_path} --help`")
        return _fail(exc.format_message(), hints, EXIT_USAGE, as_json)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `agent-replay list | head`: the reader left; not an error worth a traceback.
        # Point stdout at /dev/null so the interpreter's final flush doesn't fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except AgentReplayError as exc:
        return _fail(exc.message, exc.hints_for(_command_of(args)), exc.exit_code, as_json)
    except Exception as exc:  # the last resort: one line, traceback to the log
        log = _log_traceback(args)
        hints = [f"details in {log}"] if log else []
        return _fail(f"unexpected {type(exc).__name__}: {exc}", hints, EXIT_FAILURE, as_json)
    return int(result or 0)
