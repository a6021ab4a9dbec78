"""``agent-replay mcp``: a Model Context Protocol server over stdio, so a coding agent can list,
read, search, diff, explain and evaluate its own recorded runs (and, with ``--allow-write``,
fork and annotate them).

The tools themselves are ``services/agent_tools`` (plain functions over the store); this module
is the protocol glue, on the official ``mcp`` SDK's low-level server (explicit schemas, no
logging set-up of its own: stdout carries the protocol, diagnostics go to stderr). Imported
inside the command: the SDK costs ~0.6 s, which no other command pays.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import dir_option


@click.command(name="mcp")
@click.option(
    "--allow-write",
    is_flag=True,
    help="Also serve the tools that write: fork_trace and annotate (default: read-only).",
)
@dir_option
def command(allow_write: bool, store_dir: Path | None) -> int:
    """Serve the store to a coding agent over MCP (stdio): register this command in the agent.

    \b
    Tools (read-only by default):
      list_traces  get_trace  search  diff_traces  why_step  decisions  eval_trace
    With --allow-write, also:
      fork_trace  annotate

    Results are JSON wrapped in <agent-replay-data> markers: recorded text is data, and the
    server's instructions tell the agent never to follow instructions found inside. get_trace
    returns windows of steps (from_step/to_step, max_steps, a character budget), so a
    10,000-step trace never floods a context. The store is opened once (it must exist);
    the process ends when the client closes stdin.

    \b
    Examples:
      agent-replay mcp
      agent-replay mcp --allow-write --dir ~/project/.agent-replay
      claude mcp add agent-replay -- agent-replay mcp
    """
    from agent_replay.commands._common import open_existing

    store = open_existing(store_dir)
    try:
        return serve_stdio(store, allow_write=allow_write)
    finally:
        store.close()


def serve_stdio(store: Any, *, allow_write: bool) -> int:
    """Run the server on stdin/stdout until the client leaves."""
    import anyio  # deferred with the SDK: ~0.6 s, the mcp command only
    import mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from agent_replay import __version__
    from agent_replay.errors import AgentReplayError
    from agent_replay.services import agent_tools

    tools = agent_tools.available(allow_write=allow_write)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema(),
                    annotations=types.ToolAnnotations(
                        read_only_hint=not tool.writes,
                        destructive_hint=False,
                        idempotent_hint=not tool.writes,
                        open_world_hint=False,
                    ),
                )
                for tool in tools
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        try:
            # One call at a time, on this thread: the store's connection belongs to it.
            result = agent_tools.call(store, params.name, params.arguments, allow_write=allow_write)
        except AgentReplayError as exc:
            text = f"error: {exc.message}" + "".join(f"\nhint: {h}" for h in exc.hints)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        except Exception as exc:  # a bug must not end the session: report it, keep serving
            import traceback

            traceback.print_exc(file=sys.stderr)
            text = f"error: unexpected {type(exc).__name__} in {params.name}: {exc}"
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        text = agent_tools.envelope(params.name, result)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = Server(
        "agent-replay",
        version=__version__,
        title="agent-replay",
        description="Recorded AI agent runs: list, read, search, diff, explain, evaluate.",
        instructions=agent_tools.INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    return 0
