"""``R`` in the step timeline: on a model call the proxy recorded, it copies (and shows) the
command that re-runs the session from there; elsewhere it says why it can't."""

from __future__ import annotations

from typing import Any

from tuikit import SIZE, settle

from agent_replay.services.ingest import ingest_trace
from agent_replay.store.db import Store

TRACE = "trc_proxyrecorded"


def _recorded(step_number: int) -> dict[str, Any]:
    return {
        "step_number": step_number,
        "step_type": "llm_call",
        "name": "claude-3-5-haiku-20241022",
        "input": {"messages": [{"role": "user", "content": "hi"}]},
        "output": {"text": "hello"},
        "metadata": {
            "provider": "anthropic",
            "api": "messages",
            "proxy": {
                "status": 200,
                "request_hash": "ab" * 32,
                "response_body": "{}",
                "chunk_sizes": [2],
            },
        },
    }


def _seed(store: Store) -> None:
    steps = [
        _recorded(1),
        {
            "step_number": 2,
            "step_type": "tool_call",
            "name": "get_weather",
            "input": {"city": "Paris"},
        },
        _recorded(3),
        {"step_number": 4, "step_type": "llm_call", "name": "imported", "output": "no raw body"},
    ]
    ingest_trace(store, {"id": TRACE, "agent_name": "agent", "status": "completed", "steps": steps})


async def _press_r_at(app: Any, pilot: Any, step: int) -> list[str]:
    await settle(pilot)
    app.screen.query_one("#step-timeline").select_step(step)
    await pilot.pause()
    before = len(app._notifications)
    await pilot.press("R")
    await pilot.pause()
    return [n.message for n in list(app._notifications)[before:]]


async def test_r_on_a_recorded_model_call_copies_the_rerun_command(tmp_path, tui) -> None:
    from agent_replay.store.db import ensure_database

    store = ensure_database(tmp_path / "store")
    _seed(store)
    app = tui(store, initial_trace=TRACE)
    async with app.run_test(size=SIZE) as pilot:
        shown = await _press_r_at(app, pilot, 3)
    expected = f"agent-replay proxy --replay {TRACE} --until-step 2 --dir {tmp_path / 'store'}"
    assert app.clipboard == expected
    assert any(expected in message for message in shown)
    store.close()


async def test_r_elsewhere_says_why_and_copies_nothing(tmp_path, tui) -> None:
    from agent_replay.store.db import ensure_database

    store = ensure_database(tmp_path / "store")
    _seed(store)
    app = tui(store, initial_trace=TRACE)
    async with app.run_test(size=SIZE) as pilot:
        on_tool = await _press_r_at(app, pilot, 2)
        on_imported = await _press_r_at(app, pilot, 4)
    assert app.clipboard == ""
    assert any("re-runs start at a model call" in m for m in on_tool)
    assert any("not recorded through `agent-replay proxy`" in m for m in on_imported)
    store.close()
