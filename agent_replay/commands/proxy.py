"""``agent-replay proxy``: the recording and replaying model proxy.

Headless: the services (and aiohttp) are imported inside the callback; never Textual or Rich.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from agent_replay.commands._common import NATURAL, dir_option


@click.command(name="proxy")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8787,
    show_default=True,
    help="TCP port (0 picks a free one and prints it).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but loopback exposes the proxy (no auth).",
)
@click.option(
    "--trace-per",
    "trace_per",
    default="session",
    show_default=True,
    metavar="session|process|fixed:ID",
    help="Group exchanges into traces by the agent's session (session header, the harness's "
    "session id, else the client process), by client process, or all into trace ID.",
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="NAME=URL",
    help="Where a provider's requests go (anthropic, openai, gemini; default: the real APIs). "
    "Repeatable.",
)
@click.option(
    "--replay",
    "replay_trace",
    metavar="TRACE",
    default=None,
    help="Serve the recorded responses of TRACE (id or unique prefix) instead of asking the model.",
)
@click.option(
    "--until-step",
    type=NATURAL,
    default=None,
    help="With --replay: serve recorded responses for steps up to N only (default: all).",
)
@click.option(
    "--then",
    "then",
    type=click.Choice(["live", "fail"]),
    default="live",
    show_default=True,
    help="With --replay: after step N (or the first request that differs from the recording) "
    "forward to the real model (live) or answer 409 (fail).",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="N=@FILE",
    help="With --replay: answer step N with this response instead of the recorded one "
    '(the API\'s own response JSON, or {"text": ..., "tool_calls": [...]}). Repeatable.',
)
@click.option("--no-redact", is_flag=True, help="Keep secrets in the recorded text.")
@dir_option
def command(
    port: int,
    host: str,
    trace_per: str,
    upstreams: tuple[str, ...],
    replay_trace: str | None,
    until_step: int | None,
    then: str,
    overrides: tuple[str, ...],
    no_redact: bool,
    store_dir: Path | None,
) -> int:
    """Record (and replay) every model call an agent makes, as a local HTTP proxy.

    Point the agent's model base URL at the proxy: every Anthropic Messages, OpenAI Chat
    Completions / Responses and Gemini generateContent / streamGenerateContent exchange is
    forwarded as it is (streams chunk by chunk) and recorded as an llm_call step: model,
    request messages and tools, reply and tool calls, tokens, cost, latency, and the raw
    response kept for replay. API keys and auth headers are never stored. Other endpoints
    are forwarded and not recorded.

    With --replay TRACE the recorded responses are served again, byte for byte, matched by a
    hash of each request (model, messages, tools), in order; after --until-step N, or at the
    first request that differs from the recording, requests go to the real model (--then
    live) or get a 409 (--then fail). The re-run is recorded as a fork of TRACE at the point
    it departed from the recording: `agent-replay diff TRACE FORK` shows what changed.

    Runs until Ctrl-C (or SIGTERM), then writes everything received and ends the traces it
    opened. Exits 0, 1 if something could not be recorded, 2 on a usage error.

    \b
    Point a harness at it:
      Claude Code, anthropic SDK:  export ANTHROPIC_BASE_URL=http://127.0.0.1:8787
      openai SDK, Codex (provider base_url):  export OPENAI_BASE_URL=http://127.0.0.1:8787/v1
      Gemini CLI, google-genai:  export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8787
    A session header groups any agent's calls: X-Agent-Replay-Session: NAME.

    \b
    Examples:
      agent-replay proxy
      agent-replay proxy --port 0 --upstream anthropic=http://127.0.0.1:9000
      agent-replay proxy --replay trc_abc --until-step 3 --then fail
      agent-replay proxy --replay trc_abc --until-step 5 --override 5=@reply.json
    """
    from agent_replay.commands._common import open_or_create, redaction, resolve_store_dir
    from agent_replay.errors import UsageError
    from agent_replay.services.proxy.recording import end_orphans
    from agent_replay.services.proxy.replay import load_plan
    from agent_replay.services.proxy.server import (
        ProxyConfig,
        ProxyServer,
        parse_upstreams,
        warm_up,
    )
    from agent_replay.services.proxy.session import Grouping

    def say(line: str) -> None:
        click.echo(line, err=True)
        sys.stderr.flush()

    try:
        grouping = Grouping.parse(trace_per)
        upstream_map = parse_upstreams(upstreams)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if replay_trace is None and (until_step is not None or overrides or then != "live"):
        raise UsageError("--until-step, --then and --override need --replay TRACE")
    folder = resolve_store_dir(store_dir)
    store = open_or_create(folder)
    plan = None
    if replay_trace is not None:
        plan = load_plan(
            store,
            replay_trace,
            until_step=until_step,
            then="fail" if then == "fail" else "live",
            overrides=list(overrides),
        )
    ended = end_orphans(store, redact=redaction(no_redact, store_dir))
    if ended:
        say(f"ended {len(ended)} trace(s) left running by a proxy that exited: {', '.join(ended)}")
    warm_up()
    # The writer thread (validation, redaction, SQL: pure Python) shares the GIL with the event
    # loop; at the default 5 ms switch interval a chunk arriving mid-write waits up to 5 ms.
    sys.setswitchinterval(0.0005)
    config = ProxyConfig(
        host=host,
        port=port,
        upstreams=upstream_map,
        grouping=grouping,
        redact=redaction(no_redact, store_dir),
        replay=plan,
    )
    errors: list[str] = []

    def on_error(line: str) -> None:
        errors.append(line)
        say(f"proxy: {line} (details in {folder / 'logs' / 'agent-replay.log'})")

    server = ProxyServer(store, config, on_error=on_error)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except ValueError:  # not the main thread (embedded use)
            break
    try:
        try:
            url = server.start_in_thread()
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                hints=["pick another port with --port (0 picks a free one)"],
            ) from None
        if host not in ("127.0.0.1", "localhost", "::1"):
            say(
                f"warning: listening on {host}, not loopback: anyone who can reach this port "
                "can call the models with the keys your agents send through it"
            )
        say(f"agent-replay proxy: listening on {url}")
        for name, target in upstream_map.items():
            say(f"  {name:<9} -> {target}")
        if plan is not None:
            until = (
                f"steps up to {plan.until_step}"
                if plan.until_step is not None
                else "every recorded step"
            )
            say(
                f"  replaying {plan.trace_id}: {len(plan.prefix)} recorded model call(s) "
                f"({until}), "
                f"then {then}"
            )
        say(f"  recording into {store.label}; Ctrl-C to stop")
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        say("stopping: writing everything received...")
        server.stop_thread()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    s = server.stats
    summary = (
        f"stopped: {s.requests} request(s), {s.recorded} recorded, {s.passed} passed through"
        + (
            f", {s.served} served from {plan.trace_id}, {s.live} live, {s.refused} refused"
            if plan
            else ""
        )
        + (f"; {s.upstream_errors} upstream error(s)" if s.upstream_errors else "")
    )
    say(summary)
    if server.fork_id:
        say(
            f"re-run recorded as fork {server.fork_id} (`agent-replay diff "
            f"{plan.trace_id if plan else ''} {server.fork_id}` shows what changed)"
        )
    for trace_id in server.ended:
        say(f"trace {trace_id} ended")
    return 1 if errors or server.writer.failures else 0
