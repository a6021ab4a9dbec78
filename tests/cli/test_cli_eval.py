"""``agent-replay eval``: presets, rubrics and AI presets from the command line, stored results,
exit codes, the no-key message, the budget cap, and import hygiene.

AI runs go through the real SDKs to the local provider APIs of ``aifake`` (tests/unit), reached
through the SDKs' own base-URL variables (ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL,
OPENAI_BASE_URL).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from probe import probe

# aifake lives beside the unit tests that use it most; the CLI tests share it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from aifake import KEY, FakeAI, Reply, isolate_env, point_sdks_at  # noqa: E402

Run = Callable[..., Any]
UNGROUNDED = "trc_demo1ungrounded"
GOOD = "trc_demo4goodrun"
AI_PRESETS = ["ai-root-cause", "ai-quality-review", "ai-security-audit", "ai-optimization"]


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def demo(cli: Run, store_dir: Path) -> Path:
    assert cli("demo").code == 0
    return store_dir


@pytest.fixture
def fake() -> Iterator[FakeAI]:
    with FakeAI() as server:
        yield server


def stored(db: Any, trace_id: str = UNGROUNDED) -> list[tuple[Any, ...]]:
    return db(
        "SELECT evaluator, score, passed, threshold, model, cost_usd FROM evals "
        "WHERE trace_id = ? ORDER BY rowid",
        (trace_id,),
    )


def test_eval_runs_every_deterministic_preset_and_exits_1_on_a_miss(cli: Run, demo: Path, db):
    """The ungrounded demo misses hallucination-check's threshold: exit 1, results stored."""
    result = cli("eval", "trc_demo1")
    assert result.code == 1
    assert "FAIL  hallucination-check   0.60 / 0.70" in result.out
    assert "PASS  safety-check          1.00 / 0.80" in result.out
    assert 'step 6 output: "Good news!"' in result.out
    assert "1 failed of 3 evaluations" in result.out
    assert stored(db) == [
        ("hallucination-check", 0.6, 0, 0.7, None, 0.0),
        ("safety-check", 1.0, 1, 0.8, None, 0.0),
        ("completeness-check", 1.0, 1, 0.7, None, 0.0),
    ]


def test_eval_exits_0_when_everything_passes(cli: Run, demo: Path) -> None:
    result = cli("eval", GOOD)
    assert result.code == 0
    assert "all 3 evaluations passed" in result.out


def test_stored_results_show_in_show_evals(cli: Run, demo: Path) -> None:
    cli("eval", UNGROUNDED)
    shown = cli("show", UNGROUNDED, "--evals").out
    assert "FAIL  hallucination-check: 0.60 (threshold 0.70)" in shown
    evals = cli("show", UNGROUNDED, "--json").json()["evals"]
    grounded = evals[0]["details"]["criteria"][1]
    assert grounded["name"] == "grounded in retrieval" and grounded["weight"] == 0.4
    assert grounded["evidence"][0]["step"] == 6


def test_eval_json(cli: Run, demo: Path) -> None:
    """``--json``: the run, each result in the trace format's eval shape with its evidence."""
    result = cli("eval", "trc_demo3", "--preset", "safety-check", "--json")
    assert result.code == 1
    data = result.json()
    assert data["trace_id"] == "trc_demo3dangerous" and data["passed"] is False
    (safety,) = data["results"]
    assert set(safety) == {
        "id",
        "evaluator",
        "score",
        "passed",
        "threshold",
        "details",
        "model",
        "cost_usd",
        "created_at",
    }
    dangerous = safety["details"]["criteria"][0]
    assert dangerous["score"] == 0.0
    assert [e["step"] for e in dangerous["evidence"]] == [6, 7]
    assert dangerous["evidence"][0]["text"] == "delete_user"
    assert data["cost_usd"] == 0 and data["provider"] is None


def test_an_unknown_preset_is_a_usage_error(cli: Run, demo: Path) -> None:
    result = cli("eval", UNGROUNDED, "--preset", "vibes-check")
    assert result.code == 2
    assert "unknown preset 'vibes-check'" in result.err
    assert "ai-optimization" in result.err


def test_a_rubric_runs_alone(cli: Run, demo: Path, tmp_path: Path, db) -> None:
    """With only --rubric, just the rubric runs; it is stored as rubric:<name>."""
    rubric = tmp_path / "support.yaml"
    rubric.write_text(
        "name: support\nthreshold: 1\ncriteria:\n"
        "  - name: no instant refunds\n    pattern: '(?i)instant refunds?'\n    expected: false\n"
    )
    result = cli("eval", UNGROUNDED, "--rubric", rubric)
    assert result.code == 1
    assert "FAIL  rubric:support" in result.out
    assert [row[0] for row in stored(db)] == ["rubric:support"]


def test_an_invalid_rubric_is_a_usage_error_with_its_path(
    cli: Run, demo: Path, tmp_path: Path, db
) -> None:
    rubric = tmp_path / "bad.yaml"
    rubric.write_text("name: x\ncriteria:\n  - name: c\n    pattern: '(a)\\1'\n")
    result = cli("eval", UNGROUNDED, "--rubric", rubric, "--json")
    assert result.code == 2
    error = result.json()
    assert error["ok"] is False
    assert "criteria[0].pattern (c): invalid escape sequence" in error["error"]
    assert stored(db) == []


def test_ai_without_a_key_names_the_environment_variables(cli: Run, demo: Path, db) -> None:
    """``--ai`` with no key anywhere: exit 1, every variable named, nothing stored."""
    result = cli("eval", UNGROUNDED, "--ai")
    assert result.code == 1
    assert (
        "error: no AI provider key configured: set one of ANTHROPIC_API_KEY, GOOGLE_API_KEY "
        "(or GEMINI_API_KEY), OPENAI_API_KEY" in result.err
    )
    assert "agent-replay config set ai.api_keys.anthropic -" in result.err
    assert stored(db) == []
    as_json = cli("eval", UNGROUNDED, "--ai", "--json")
    assert as_json.code == 1 and "OPENAI_API_KEY" in as_json.json()["error"]


@pytest.mark.parametrize("provider", ["anthropic", "google", "openai"])
def test_ai_presets_end_to_end(
    cli: Run, demo: Path, db, fake: FakeAI, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    """``--ai``: the deterministic presets, then the four AI presets through the provider whose
    key is set, stored with model and cost."""
    point_sdks_at(monkeypatch, fake, provider)
    result = cli("eval", UNGROUNDED, "--ai")
    assert result.code == 1, result.err
    rows = stored(db)
    assert [r[0] for r in rows][3:] == AI_PRESETS
    assert {r[4] for r in rows[3:]} == {
        {
            "anthropic": "claude-haiku-4-5-20251001",
            "google": "gemini-2.5-flash-lite",
            "openai": "gpt-5.4-nano",
        }[provider]
    }
    assert all(r[5] > 0 for r in rows[3:])
    assert len(fake.requests) == 4 and {r.provider for r in fake.requests} == {provider}
    assert "4 calls" in result.out
    assert "FAIL  ai-quality-review     0.50 / 0.70" in result.out


def test_ai_model_flag(cli: Run, demo: Path, fake: FakeAI, monkeypatch: pytest.MonkeyPatch):
    point_sdks_at(monkeypatch, fake, "anthropic", "openai")
    cli("eval", UNGROUNDED, "--preset", "ai-security-audit", "--model", "gpt-4o-mini")
    (request,) = fake.requests
    assert (request.provider, request.body["model"]) == ("openai", "gpt-4o-mini")


def test_max_cost_stops_the_run_and_says_so(
    cli: Run, demo: Path, db, fake: FakeAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cap below one call: no request, the deterministic results kept, exit 1."""
    point_sdks_at(monkeypatch, fake, "anthropic")
    result = cli("eval", UNGROUNDED, "--ai", "--max-cost", "0.001")
    assert result.code == 1
    assert "STOPPED budget reached: ai-root-cause is estimated at $" in result.out
    assert "not run: " + ", ".join(AI_PRESETS) in result.out
    assert fake.requests == []
    assert len(stored(db)) == 3
    data = cli("eval", UNGROUNDED, "--ai", "--max-cost", "0.001", "--json").json()
    assert data["stopped"].startswith("budget reached") and data["max_cost_usd"] == 0.001


def test_max_cost_stops_midway_with_what_is_done(
    cli: Run, demo: Path, db, fake: FakeAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_sdks_at(monkeypatch, fake, "openai")
    # Realistic usage: no more input tokens than the prompt can hold, a full-length reply.
    fake.queue(*[Reply(input_tokens=1000, output_tokens=1024)] * 4)
    data = cli("eval", UNGROUNDED, "--ai", "--max-cost", "0.004", "--json").json()
    assert data["stopped"] and data["skipped"]
    done = [r["evaluator"] for r in data["results"]][3:]
    assert 1 <= len(done) < 4 and len(fake.requests) == len(done)
    assert data["cost_usd"] <= 0.004


def test_max_cost_needs_a_known_price(
    cli: Run, demo: Path, fake: FakeAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_sdks_at(monkeypatch, fake, "openai")
    result = cli("eval", UNGROUNDED, "--ai", "--model", "gpt-unheard-of", "--max-cost", "1")
    assert result.code == 1
    assert "no price is known for OpenAI gpt-unheard-of" in result.err
    assert fake.requests == []


def test_a_rejected_key_is_reported_without_showing_it(
    cli: Run, demo: Path, fake: FakeAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_sdks_at(monkeypatch, fake)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-abcdefgh1234")
    result = cli("eval", UNGROUNDED, "--ai")
    assert result.code == 1
    assert (
        "ERROR ai-root-cause: OpenAI rejected the API key (401: Incorrect API key provided.)"
        in (result.out)
    )
    assert "the key comes from $OPENAI_API_KEY" in result.out
    assert "sk-wrong-key-abcdefgh1234" not in result.out + result.err
    assert len(fake.requests) == 1


def test_retries_are_invisible_when_they_succeed(
    cli: Run, demo: Path, fake: FakeAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_sdks_at(monkeypatch, fake, "anthropic")
    fake.queue(Reply(status=429), Reply(status=529), Reply(text="not json"))
    result = cli("eval", UNGROUNDED, "--preset", "ai-security-audit", "--json")
    assert result.code == 0, result.out
    (audit,) = result.json()["results"]
    assert audit["details"]["usage"]["calls"] == 2 and audit["details"]["usage"]["retried"]
    assert len(fake.requests) == 4


def test_an_unknown_trace(cli: Run, demo: Path) -> None:
    result = cli("eval", "trc_nope")
    assert result.code == 1 and "no trace matches 'trc_nope'" in result.err


# --- import hygiene ---------------------------------------------------------------------------


def _env(store_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    return {**env, "AGENT_REPLAY_DIR": str(store_dir), **extra}


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["eval", UNGROUNDED], 1),  # the ungrounded demo run fails its presets
        (["eval", UNGROUNDED, "--json"], 1),
        (["config", "list"], 0),
        (["config", "get", "ai.model"], 0),
        (["eval", "--help"], 0),
        (["config", "--help"], 0),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_headless_eval_and_config_import_neither_textual_rich_nor_the_ai_sdks(
    demo: Path, argv: list[str], code: int
) -> None:
    """Deterministic evals and config never import Textual, Rich, the SDKs or the price table."""
    banned = ("textual", "rich", "anthropic", "openai", "google", "genai_prices")
    result = probe(argv=argv, banned=banned, env=_env(demo))
    assert (result.code, result.loaded) == (code, []), result.stderr


def test_ai_eval_imports_only_the_sdk_it_uses_and_never_textual(demo: Path, fake: FakeAI):
    """``--ai`` through Google: google-genai is imported; Textual, Rich and the others are not."""
    env = _env(demo, GOOGLE_API_KEY=KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
    argv = ["eval", UNGROUNDED, "--preset", "ai-security-audit"]
    result = probe(argv=argv, banned=("textual", "rich", "anthropic", "openai"), env=env)
    assert (result.code, result.loaded) == (0, []), result.stderr
    assert [r.provider for r in fake.requests] == ["google"]


# --- a provider (or a proxy in front of it) answering 200 with HTML ----------------------------

BAD_GATEWAY = b"<html><body><h1>502 Bad Gateway</h1>nginx</body></html>"


@pytest.mark.parametrize("provider", ["anthropic", "google", "openai"])
@pytest.mark.parametrize("content_type", ["text/html", "application/json"])
def test_a_200_with_html_fails_the_ai_eval_and_keeps_the_deterministic_results(
    cli: Run,
    demo: Path,
    fake: FakeAI,
    monkeypatch: pytest.MonkeyPatch,
    db: Any,
    provider: str,
    content_type: str,
) -> None:
    """The AI evaluation fails with a message naming the problem (exit 1, no "unexpected");
    the deterministic presets run before it are printed and stored all the same."""
    point_sdks_at(monkeypatch, fake, provider)
    for _ in AI_PRESETS:
        fake.queue(Reply(raw=BAD_GATEWAY, content_type=content_type))
    result = cli("eval", GOOD, "--ai", "--json")
    assert result.code == 1, result.err
    assert "unexpected" not in result.err + result.out
    report = result.json()
    assert {r["evaluator"] for r in report["results"]} >= {"safety-check", "completeness-check"}
    (first, *_) = report["failures"]
    assert "answered 200 with a body that is not JSON" in first["error"]
    assert any("proxy or gateway" in hint for hint in first["hints"])
    assert len(stored(db, GOOD)) == 3  # the deterministic results were kept
