"""A turn the CLI begins itself never ends a step (flower.runtime.turns), on the real CLI.

A session resumed after its process was killed while a background agent ran gets the CLI's
notice that the agent "didn't finish", as a turn of its own with a result of its own. That
result used to end the woken step at once, with no answer (a flaky CI run of the terminal test
showed it: the step ended "ok, 0 turns" while its request was still at the model).
"""

from __future__ import annotations

import asyncio

import pytest
from claude_agent_sdk import ResultMessage

from flower import AgentSpec
from flower.runtime.turns import answers
from tests.rig import message_requests, runtime, scripted

SCENARIO = {
    "rules": [
        {"name": "helper", "when": {"last_user_contains": "HELPER-TASK"}, "delay_s": 60, "reply": "done"},
        {
            "name": "launch",
            "when": {"last_user_contains": "start the job", "last_is_tool_result": False},
            "reply": [
                {"text": "launching"},
                {
                    "tool_use": {
                        "name": "Agent",
                        "input": {
                            "description": "slow helper",
                            "subagent_type": "general-purpose",
                            "prompt": "HELPER-TASK",
                            "run_in_background": True,
                        },
                    }
                },
            ],
        },
        {
            "name": "launched",
            "when": {"last_is_tool_result": True, "last_user_contains": "Async agent"},
            "reply": "launched it",
        },
        {"name": "woken", "when": {"last_user_contains": "go on slowly"}, "delay_s": 3, "reply": "CONTINUED"},
    ]
}
SPEC = AgentSpec("main", allowed_tools=["Agent", "Read"])


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_wake_after_a_kill_mid_background_agent_waits_for_its_own_answer(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)

        async def kill_once_launched() -> None:
            while not any(r.get("rule") == "launched" for r in srv.requests):
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the helper is still at the model (60 s)
            rt.rescue("killed-by-signal")  # what SIGTERM does: the CLI dies with its helper

        killer = asyncio.ensure_future(kill_once_launched())
        try:
            first = await rt.run(SPEC, "start the job")
        finally:
            killer.cancel()
            rt.close()
        assert first.session_id

        rt = runtime(tmp_path, srv)
        try:
            woken = await rt.run(SPEC, "go on slowly", resume=first.session_id)
        finally:
            rt.close()
        rules = [r.get("rule") for r in message_requests(srv)]
    assert woken.ok and woken.text == "CONTINUED" and woken.num_turns >= 1, (woken, rules)
    assert rules.count("woken") == 1


def _result(**kw) -> ResultMessage:
    base = dict(subtype="success", duration_ms=1, duration_api_ms=1, is_error=False, num_turns=1)
    return ResultMessage(**base, session_id="s", **kw)


def test_a_result_is_ours_when_it_lists_our_uuid_or_else_when_no_one_else_began_it():
    assert answers(_result(user_message_uuid="u1", user_message_uuids=["u1"]), "u1")
    # A prompt taken in by a turn the CLI began: listed, so ours.
    assert answers(_result(user_message_uuids=["u0", "u1"], origin={"kind": "task-notification"}), "u1")
    assert not answers(_result(user_message_uuid="u0", user_message_uuids=["u0"]), "u1")
    # No uuid at all: the CLI's own turn says so by its origin; anything else is taken as ours.
    assert not answers(_result(origin={"kind": "task-notification"}), "u1")
    assert answers(_result(), "u1")
    assert answers(_result(origin={"kind": "human"}, user_message_uuids=[]), "u1")
