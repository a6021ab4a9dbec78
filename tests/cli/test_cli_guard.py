"""`agent-replay guard`: add (validated), list, remove, enable, disable, test, check; exit
codes and --json output."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_replay.store.db import Store

DELETE_POLICY = ("block-destructive-tools", "deny", "pol_demo_nodelete")


@pytest.fixture
def demo(cli: Any, store_dir: Path) -> Path:
    """The demo store: 5 traces and 3 policies (deny deletes, review prod, warn passwords)."""
    assert cli("demo").code == 0
    return store_dir


def add(cli: Any, name: str, action: str, pattern: Any, *extra: str) -> Any:
    text = pattern if isinstance(pattern, str) else json.dumps(pattern)
    return cli("guard", "add", "--name", name, "--action", action, "--pattern", text, *extra)


def policies(cli: Any) -> list[dict[str, Any]]:
    result = cli("guard", "list", "--json")
    assert result.code == 0, result.err
    return list(result.json())


# --- add -----------------------------------------------------------------------------------


def test_add_stores_a_validated_policy(cli: Any, store: Store) -> None:
    result = add(
        cli,
        "no-rm",
        "deny",
        {"input_contains": "rm -rf", "step_type": "tool_call"},
        "--priority",
        "7",
        "--description",
        "Never delete trees.",
        "--json",
    )
    assert result.code == 0, result.err
    added = result.json()
    assert added["id"].startswith("pol_")
    assert {k: added[k] for k in ("name", "action", "priority", "enabled", "fail_open")} == {
        "name": "no-rm",
        "action": "deny",
        "priority": 7,
        "enabled": True,
        "fail_open": False,
    }
    assert added["pattern"] == {"step_type": "tool_call", "input_contains": "rm -rf"}
    assert policies(cli) == [added]


@pytest.mark.parametrize(
    ("pattern", "action", "reason"),
    [
        ('{"nam_regex": "x"}', "deny", "unknown pattern key 'nam_regex'"),
        ('{"name_regex": "(?<=x)y"}', "deny", "name_regex '(?<=x)y' is not usable"),
        ('{"name_regex": "x"}', "block", "unknown action 'block'"),
        ("not json", "deny", "the pattern is not valid JSON"),
        ("{}", "warn", "the pattern is empty"),
    ],
    ids=["unknown-key", "bad-regex", "bad-action", "not-json", "empty"],
)
def test_add_refuses_with_the_reason_and_exit_2(
    cli: Any, store: Store, pattern: str, action: str, reason: str
) -> None:
    result = add(cli, "p", action, pattern)
    assert result.code == 2
    assert reason in result.err
    assert policies(cli) == []


def test_add_refuses_a_bad_pattern_under_json_with_an_error_object(cli: Any, store: Store) -> None:
    result = add(cli, "p", "deny", '{"oops": 1}', "--json")
    assert result.code == 2
    assert result.json()["ok"] is False and "unknown pattern key" in result.json()["error"]


def test_a_taken_name_is_refused(cli: Any, demo: Path) -> None:
    result = add(cli, "block-destructive-tools", "warn", {"name_contains": "x"})
    assert result.code == 2 and "exists already" in result.err


def test_add_can_fail_open_and_start_disabled(cli: Any, store: Store) -> None:
    result = add(cli, "p", "deny", {"name_contains": "x"}, "--fail-open", "--disabled", "--json")
    assert (result.json()["fail_open"], result.json()["enabled"]) == (True, False)


# --- list / remove / enable / disable ------------------------------------------------------


def test_list_shows_policies_highest_priority_first(cli: Any, demo: Path) -> None:
    names = [p["name"] for p in policies(cli)]
    assert names == [
        "block-destructive-tools",
        "review-production-tool-calls",
        "warn-password-in-output",
    ]
    text = cli("guard", "list").out
    assert text.splitlines()[0].split() == [
        "ID",
        "NAME",
        "ACTION",
        "PRIORITY",
        "ENABLED",
        "FAILS",
        "PATTERN",
    ]
    assert "pol_demo_nodelete" in text and '"matches": "destructive"' in text


def test_list_on_a_store_without_policies_says_so(cli: Any, store: Store) -> None:
    result = cli("guard", "list")
    assert (result.code, result.out) == (0, "")
    assert "no policies" in result.err


@pytest.mark.parametrize("ref", ["block-destructive-tools", "pol_demo_nodelete", "pol_demo_nod"])
def test_disable_and_enable_by_name_id_or_prefix(cli: Any, demo: Path, ref: str) -> None:
    assert cli("guard", "disable", ref).code == 0
    assert {p["name"]: p["enabled"] for p in policies(cli)}["block-destructive-tools"] is False
    result = cli("guard", "enable", ref, "--json")
    assert result.code == 0 and result.json()["enabled"] is True


def test_remove_deletes_the_policy(cli: Any, demo: Path) -> None:
    result = cli("guard", "remove", "review-production-tool-calls")
    assert result.code == 0 and "removed policy pol_demo_prodreview" in result.out
    assert len(policies(cli)) == 2


def test_an_unknown_or_ambiguous_policy_is_reported(cli: Any, demo: Path) -> None:
    missing = cli("guard", "remove", "nope")
    assert missing.code == 1 and "no policy 'nope'" in missing.err
    ambiguous = cli("guard", "disable", "pol_demo")
    assert ambiguous.code == 2 and "ambiguous" in ambiguous.err


# --- test ----------------------------------------------------------------------------------


def test_test_lists_each_matching_step_with_its_decision(cli: Any, demo: Path) -> None:
    result = cli("guard", "test", "trc_demo3", "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert (report["trace_id"], report["steps"], report["policies"]) == (
        "trc_demo3dangerous",
        8,
        3,
    )
    decided = {r["name"]: r["action"] for r in report["results"]}
    assert decided == {
        "list_users": "require_review",
        "delete_user": "deny",
        "drop_table": "deny",
    }
    assert report["denied"] is True
    delete = next(r for r in report["results"] if r["name"] == "delete_user")
    assert [m["policy"] for m in delete["matches"]] == [
        "block-destructive-tools",
        "review-production-tool-calls",
    ]


def test_test_text_output_and_exit_code(cli: Any, demo: Path) -> None:
    plain = cli("guard", "test", "trc_demo3dangerous")
    assert plain.code == 0
    assert plain.out.startswith("trc_demo3dangerous: 3 of 8 step(s) matched (3 enabled policies)")
    assert "delete_user" in plain.out and "block-destructive-tools" in plain.out
    assert cli("guard", "test", "trc_demo3dangerous", "--exit-code").code == 1
    assert cli("guard", "test", "trc_demo1ungrounded", "--exit-code").code == 0


def test_an_allow_exception_shows_as_excepted_and_clears_the_exit_code(
    cli: Any, demo: Path
) -> None:
    add(cli, "ops-may-delete", "allow", {"step_type": "tool_call"}, "--priority", "500")
    result = cli("guard", "test", "trc_demo3dangerous", "--exit-code")
    assert result.code == 0
    assert "block-destructive-tools (excepted)" in result.out


def test_disabled_policies_are_not_tested(cli: Any, demo: Path) -> None:
    cli("guard", "disable", "block-destructive-tools")
    assert cli("guard", "test", "trc_demo3dangerous", "--exit-code").code == 0


# --- check ---------------------------------------------------------------------------------


def check(store_dir: Path, step: Any, *args: str) -> subprocess.CompletedProcess[str]:
    text = step if isinstance(step, str) else json.dumps(step)
    return subprocess.run(
        [sys.executable, "-m", "agent_replay", "guard", "check", *args],
        input=text,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "AGENT_REPLAY_DIR": str(store_dir)},
        timeout=60,
        check=False,
    )


def test_check_denies_with_exit_2(demo: Path) -> None:
    done = check(demo, {"step_type": "tool_call", "name": "delete_user"})
    assert done.returncode == 2
    assert done.stdout.startswith('deny: policy "block-destructive-tools" (deny): Deny tool')


def test_check_prints_the_decision_as_json(demo: Path) -> None:
    step = {"step_type": "tool_call", "name": "get_weather", "input": {"env": "PRODUCTION"}}
    done = check(demo, step, "--json")
    assert done.returncode == 0
    decision = json.loads(done.stdout)
    assert (decision["action"], decision["policy"]) == (
        "require_review",
        "review-production-tool-calls",
    )


def test_check_allows_what_no_policy_matches(demo: Path) -> None:
    done = check(demo, {"step_type": "thought", "name": "plan"})
    assert (done.returncode, done.stdout) == (0, "allow: no policy matched\n")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no step on stdin"),
        ("[1]", "must be a JSON object"),
        ('{"name": "x"}', "needs a step_type"),
        ("{oops", "not valid JSON"),
    ],
)
def test_check_refuses_a_bad_step(demo: Path, text: str, reason: str) -> None:
    done = check(demo, text)
    assert done.returncode == 2 and reason in done.stderr


def test_check_fails_closed_on_a_corrupt_store(store_dir: Path) -> None:
    store_dir.mkdir(parents=True)
    (store_dir / "traces.db").write_bytes(b"not a database " * 200)
    done = check(store_dir, {"step_type": "tool_call", "name": "read_file"})
    assert done.returncode == 2 and "cannot read its guard policies" in done.stdout


def test_check_fails_closed_on_a_broken_policy_unless_it_fails_open(cli: Any, demo: Path) -> None:
    connection = sqlite3.connect(demo / "traces.db")
    with connection:
        connection.execute("UPDATE policies SET pattern = '{broken' WHERE id = 'pol_demo_nodelete'")
    connection.close()
    step = {"step_type": "thought", "name": "plan"}
    closed = check(demo, step, "--json")
    assert closed.returncode == 2
    assert json.loads(closed.stdout)["matches"][0]["error"].startswith("the pattern is not valid")
    connection = sqlite3.connect(demo / "traces.db")
    with connection:
        connection.execute("UPDATE policies SET fail_open = 1 WHERE id = 'pol_demo_nodelete'")
    connection.close()
    opened = check(demo, step)
    assert opened.returncode == 0 and "skipped" in opened.stderr
    listed = cli("guard", "list")
    assert "! the pattern is not valid JSON" in listed.out


def test_guard_help_documents_the_precedence_rule(cli: Any) -> None:
    text = cli("guard", "--help").out
    assert "strictest action wins" in text and "strictly lower priority" in text
    for sub in ("add", "list", "remove", "enable", "disable", "test", "check"):
        assert cli("guard", sub, "--help").code == 0
