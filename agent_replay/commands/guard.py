"""``agent-replay guard``: guardrail policies: add, list, remove, enable, disable, reset, test,
check.

Headless (never Textual or Rich); each subcommand imports the guard services when it runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import MAX_NUMBER, dir_option, json_option

EXIT_DENIED = 2


@click.group(name="guard")
def command() -> None:
    """Guardrail policies: flag or block dangerous steps, recorded or live.

    A policy is a pattern over one step plus an action. Every field given in the pattern
    must match (AND):

    \b
      step_type        the step's type is exactly this (tool_call, llm_call, ...)
      name_contains    the name contains this text (case-insensitive, NFKC-normalized)
      name_regex       RE2 finds this regex in the name (linear time; (?i) for case)
      input_contains   the input contains this text (case-insensitive, NFKC-normalized)
      output_contains  the output contains this text (idem)
      matches          "destructive": a destructive tool call as the safety-check eval
                       defines it (rm -rf, DROP TABLE, git push --force, curl | sh,
                       delete_* tools, ...)

    \b
    Actions, least to most strict: allow, warn, require_review, deny.
    When several enabled policies match one step:
      1. an allow overrides every matching policy of strictly lower priority (an
         exception must outrank what it excuses);
      2. of the rest, the strictest action wins;
      3. among those, the highest priority decides (then the name, A-Z).

    Live enforcement: register `agent-replay hook --enforce` for your harness's pre-tool
    event (see `agent-replay hook --help`). A guardrail, not a security boundary: use your
    harness's sandbox and permission settings as well.

    \b
    Exit codes: 0 ok; 1 runtime failure (guard test --exit-code: a step is denied);
    2 usage error or a refused policy (guard check: the step is denied).

    \b
    Examples:
      agent-replay guard add --name no-deletes --action deny \\
        --pattern '{"step_type": "tool_call", "name_regex": "(?i)delete|drop"}'
      agent-replay guard list
      agent-replay guard test trc_demo3 --exit-code
      echo '{"step_type": "tool_call", "name": "delete_user"}' | agent-replay guard check
    """


@command.command(name="add")
@click.option("--name", required=True, help="A unique name (shown as the reason of decisions).")
@click.option("--pattern", required=True, metavar="JSON", help="The pattern, a JSON object.")
@click.option(
    "--action",
    required=True,
    metavar="allow|warn|require_review|deny",
    help="What a match means.",
)
@click.option("--description", default=None, help="Why the policy exists (shown with decisions).")
@click.option(
    "--priority",
    type=click.IntRange(-MAX_NUMBER, MAX_NUMBER),
    default=0,
    show_default=True,
    help="Higher decides ties.",
)
@click.option(
    "--fail-open",
    is_flag=True,
    help="If the policy cannot be evaluated, skip it (default: deny and require_review "
    "policies then apply anyway).",
)
@click.option("--disabled", is_flag=True, help="Add it switched off.")
@dir_option
@json_option
def add(
    name: str,
    pattern: str,
    action: str,
    description: str | None,
    priority: int,
    fail_open: bool,
    disabled: bool,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Add a policy. A bad pattern, regex or action is refused with the reason (exit 2).

    \b
    Examples:
      agent-replay guard add --name block-rm --action deny \\
        --pattern '{"step_type": "tool_call", "input_contains": "rm -rf"}'
      agent-replay guard add --name review-prod --action require_review --priority 50 \\
        --pattern '{"input_contains": "production"}' --description "A person checks prod"
      agent-replay guard add --name allow-tmp --action allow --priority 200 \\
        --pattern '{"input_contains": "/tmp/"}'
    """
    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import emit_json, open_or_create, safe
    from agent_replay.services.guard.manage import add_policy

    with open_or_create(store_dir) as store:
        policy = add_policy(
            store,
            SystemClock(),
            name=name,
            pattern=pattern,
            action=action,
            description=description,
            priority=priority,
            fail_open=fail_open,
            enabled=not disabled,
        )
    if as_json:
        emit_json(policy.to_json())
    else:
        state = "" if policy.enabled else ", disabled"
        click.echo(
            f"added policy {policy.id} {safe(policy.name)!s} "
            f"({policy.action}, priority {policy.priority}{state})"
        )
    return 0


@command.command(name="list")
@dir_option
@json_option
def list_(store_dir: Path | None, as_json: bool) -> int:
    """List the policies, highest priority first.

    \b
    Examples:
      agent-replay guard list
      agent-replay guard list --json
    """
    from agent_replay.commands._common import (
        Painter,
        emit_json,
        open_existing,
        print_table,
        safe,
        truncate,
        use_color,
    )
    from agent_replay.services.guard.manage import list_policies

    with open_existing(store_dir) as store:
        policies = list_policies(store)
    if as_json:
        emit_json([p.to_json() for p in policies])
        return 0
    if not policies:
        click.echo("no policies (add one with `agent-replay guard add`)", err=True)
        return 0
    paint = Painter(use_color())
    colors = {"deny": "red", "require_review": "yellow", "warn": "magenta", "allow": "green"}
    rows = []
    for p in policies:
        pattern = (p.raw_pattern or "") if p.problem else _pattern_text(p.pattern)
        rows.append(
            [
                p.id,
                truncate(safe(p.name), 32),
                paint(p.action, colors.get(p.action)),
                str(p.priority),
                "yes" if p.enabled else paint("no", "dim"),
                "open" if p.fail_open else "closed",
                truncate(safe(pattern), 60)
                + (paint("  ! " + p.problem, "red") if p.problem else ""),
            ]
        )
    print_table(
        ["ID", "NAME", "ACTION", "PRIORITY", "ENABLED", "FAILS", "PATTERN"], rows, right={3}
    )
    return 0


@command.command(name="remove")
@click.argument("ref", metavar="ID|NAME")
@dir_option
@json_option
def remove(ref: str, store_dir: Path | None, as_json: bool) -> int:
    """Remove a policy (by id, name or unique id prefix).

    \b
    Examples:
      agent-replay guard remove block-rm
      agent-replay guard remove pol_abc
    """
    from agent_replay.commands._common import emit_json, open_existing, safe
    from agent_replay.services.guard.manage import remove_policy

    with open_existing(store_dir) as store:
        policy = remove_policy(store, ref)
    if as_json:
        emit_json(policy.to_json())
    else:
        click.echo(f"removed policy {policy.id} {safe(policy.name)}")
    return 0


def _toggle(ref: str, enabled: bool, store_dir: Path | None, as_json: bool) -> int:
    from agent_replay.commands._common import emit_json, open_existing, safe
    from agent_replay.services.guard.manage import set_enabled

    with open_existing(store_dir) as store:
        policy = set_enabled(store, ref, enabled)
    if as_json:
        emit_json(policy.to_json())
    else:
        state = "enabled" if enabled else "disabled"
        click.echo(f"{state} policy {policy.id} {safe(policy.name)}")
    return 0


@command.command(name="enable")
@click.argument("ref", metavar="ID|NAME")
@dir_option
@json_option
def enable(ref: str, store_dir: Path | None, as_json: bool) -> int:
    """Switch a policy on (it applies to `guard test`, `guard check` and `hook --enforce`).

    \b
    Example:
      agent-replay guard enable block-rm
    """
    return _toggle(ref, True, store_dir, as_json)


@command.command(name="disable")
@click.argument("ref", metavar="ID|NAME")
@dir_option
@json_option
def disable(ref: str, store_dir: Path | None, as_json: bool) -> int:
    """Switch a policy off without removing it.

    \b
    Example:
      agent-replay guard disable block-rm
    """
    return _toggle(ref, False, store_dir, as_json)


@command.command(name="reset")
@dir_option
@json_option
def reset(store_dir: Path | None, as_json: bool) -> int:
    """Accept that the store's policies are gone (or restored): reset the policies marker.

    Every policy change is remembered in config.json beside the database, so that if
    traces.db is deleted, emptied or replaced, `hook --enforce` blocks every tool call
    ("the guard policies vanished") instead of silently allowing everything. Restore the
    database to get the policies back, or run `guard reset` to accept what the store
    holds now (nothing, for a missing or empty database).

    \b
    Example:
      agent-replay guard reset
    """
    from agent_replay.commands._common import emit_json, resolve_store_dir
    from agent_replay.services.guard.manage import reset_marker

    before, now = reset_marker(resolve_store_dir(store_dir))
    if as_json:
        emit_json({"remembered": before, "enabled_policies": now})
    else:
        click.echo(
            f"policies marker reset: {before} enabled remembered, {now} enabled in the store "
            "now; hook --enforce decides against the store's policies again"
        )
    return 0


@command.command(name="test")
@click.argument("trace_id", metavar="TRACE")
@click.option("--exit-code", is_flag=True, help="Exit 1 when some step's decision is deny.")
@dir_option
@json_option
def test(trace_id: str, exit_code: bool, store_dir: Path | None, as_json: bool) -> int:
    """Check every step of a recorded trace against every enabled policy.

    Lists the steps some policy matches, each with its decision (the precedence rule of
    `agent-replay guard --help`) and every policy that matched ("excepted" when an allow
    of higher priority overrode it).

    \b
    Examples:
      agent-replay guard test trc_demo3dangerous
      agent-replay guard test trc_demo3 --exit-code     (a CI gate: exit 1 on a deny)
      agent-replay guard test trc_demo3 --json
    """
    from agent_replay.commands._common import (
        Painter,
        emit_json,
        open_existing,
        print_table,
        safe,
        truncate,
        use_color,
    )
    from agent_replay.services.guard.manage import run_trace_test

    with open_existing(store_dir) as store:
        result = run_trace_test(store, trace_id)
    for warning in result.warnings:
        click.echo(f"warning: {safe(warning)}", err=True)
    code = 1 if exit_code and result.denied else 0
    if as_json:
        emit_json(result.to_json())
        return code
    click.echo(
        f"{result.trace_id}: {len(result.results)} of {result.steps} step(s) matched "
        f"({result.policies} enabled policies)"
    )
    if not result.results:
        return code
    paint = Painter(use_color())
    colors = {"deny": "red", "require_review": "yellow", "warn": "magenta", "allow": "green"}
    rows = []
    for item in result.results:
        step, evaluation = item.step, item.evaluation
        matched = ", ".join(
            safe(m.policy.name) + (" (excepted)" if m.overridden else "")
            for m in evaluation.matches
        )
        rows.append(
            [
                str(step["step_number"]),
                str(step["step_type"]),
                truncate(safe(step.get("name") or "-"), 28),
                paint(evaluation.action, colors.get(evaluation.action)),
                matched,
            ]
        )
    click.echo()
    print_table(["STEP", "TYPE", "NAME", "DECISION", "POLICIES"], rows, right={0})
    return code


@command.command(name="check")
@dir_option
@json_option
def check(store_dir: Path | None, as_json: bool) -> int:
    """Decide one step, given as a JSON object on stdin; exit 2 when it is denied.

    The step needs a step_type and may have name, input and output (other fields of the
    trace format are ignored). The decision is printed (with --json, as an object: action,
    policy, reason, matches). A store whose policies cannot be read denies (fail closed).

    \b
    Examples:
      echo '{"step_type": "tool_call", "name": "delete_user"}' | agent-replay guard check
      agent-replay guard check --json < step.json
    """
    from agent_replay.commands._common import emit_json, resolve_store_dir, safe
    from agent_replay.errors import UsageError
    from agent_replay.paths import db_path
    from agent_replay.services.guard.match import StepText
    from agent_replay.services.hook.enforce import evaluate_file
    from agent_replay.trace.base import STEP_TYPES

    text = sys.stdin.read()
    step = _parse_step(text, STEP_TYPES, UsageError)
    db_file = db_path(resolve_store_dir(store_dir))
    if db_file.exists():
        _migrate(db_file)
    evaluation = evaluate_file(db_file, StepText.from_step(step))
    for warning in evaluation.warnings:
        click.echo(f"warning: {safe(warning)}", err=True)
    code = EXIT_DENIED if evaluation.action == "deny" else 0
    if as_json:
        emit_json(evaluation.to_json())
        return code
    click.echo(f"{evaluation.action}: {safe(evaluation.reason)}")
    for match in evaluation.matches:
        notes = []
        if match.overridden:
            notes.append("excepted")
        if match.error:
            notes.append("could not be evaluated: " + match.error)
        note = f"  ({'; '.join(notes)})" if notes else ""
        click.echo(
            f"  matched {safe(match.policy.name)} ({match.policy.action}, priority "
            f"{match.policy.priority}){safe(note)}"
        )
    return code


def _parse_step(text: str, step_types: tuple[str, ...], error: type[Exception]) -> dict[str, Any]:
    import json

    if not text.strip():
        raise error(
            "no step on stdin: give one JSON object, e.g. "
            '{"step_type": "tool_call", "name": "delete_user"}'
        )
    try:
        step = json.loads(text)
    except ValueError as exc:
        raise error(f"the step on stdin is not valid JSON: {exc}") from None
    if not isinstance(step, dict):
        raise error("the step on stdin must be a JSON object")
    if step.get("step_type") not in step_types:
        raise error(
            f"the step needs a step_type, one of {', '.join(step_types)} "
            f"(got {step.get('step_type')!r})"
        )
    name = step.get("name")
    if name is not None and not isinstance(name, str):
        raise error("the step's name must be text")
    return step


def _migrate(db_file: Path) -> None:
    """Bring an older store up to date before reading its policies (a store that cannot
    be opened is left to ``evaluate_file``, which fails closed)."""
    from agent_replay.errors import StoreError
    from agent_replay.store.db import open_store

    try:
        open_store(db_file, create=False).close()
    except StoreError:
        pass


def _pattern_text(pattern: dict[str, str]) -> str:
    import json

    return json.dumps(pattern, ensure_ascii=False)
