"""`Runtime.interrupt()` in-process on the real CLI (one Ctrl-C: stop at the next message boundary, the
same session resumes in-process, not counted as a failed attempt), and the transcript an
interrupted slow tool leaves, loaded back through the pruning store (its
text replaced with a neutral note, the entry kept, history never cut)."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from flower import AgentSpec
from flower.catalogue.context import INTERRUPTED_NOTE
from flower.context.pruning import chain_problems
from tests.rig import message_requests, runtime, scripted, texts_of

pytestmark = pytest.mark.anyio

SPEC = AgentSpec("worker", allowed_tools=["Read", "Bash"])

SCENARIO = {
    "rules": [
        {
            "name": "kiwi",
            "when": {"last_user_contains": "also mention kiwi"},
            "reply": [{"text": "kiwi mentioned"}],
        },
        {
            "name": "after-sleep",
            "when": {"last_user_contains": "what happened"},
            "reply": [{"text": "it was stopped"}],
        },
        {
            "name": "slow",
            "when": {"last_user_contains": "tell me slowly"},
            "delay_s": 30,
            "reply": [{"text": "too late"}],
        },
        {
            "name": "sleep",
            "when": {"last_user_contains": "sleep a while", "last_is_tool_result": False},
            "reply": [
                {"tool_use": {"name": "Bash", "input": {"command": "sleep 20", "description": "wait"}}}
            ],
        },
    ]
}


async def test_interrupt_is_false_when_nothing_runs(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        try:
            assert rt.interrupt("hello") is False and rt.interrupting is False
        finally:
            rt.close()


async def test_interrupt_mid_response_with_an_added_word_continues_the_same_session(tmp_path):
    states: list[bool] = []

    async def ask() -> str:  # what a person types after Ctrl-C
        states.append(rt.interrupting)
        return "also mention kiwi"

    def on_event(kind, payload):
        if kind == "session":
            asyncio.get_running_loop().call_later(1.0, lambda: states.append(rt.interrupt(ask)))

    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        try:
            res = await rt.run(SPEC, "tell me slowly", on_event=on_event)
        finally:
            rt.close()
        reqs = message_requests(srv)
    assert states == [True, True]  # interrupt() accepted; still "interrupting" while asking
    assert rt.interrupting is False
    assert res.ok and res.text == "kiwi mentioned" and res.attempts == 1 and res.errors == []
    assert [r["rule"] for r in reqs] == ["slow", "kiwi"]
    assert reqs[1]["session"] == reqs[0]["session"] == res.session_id
    assert "tell me slowly" in texts_of(reqs[1])


async def test_an_interrupted_slow_tool_is_neutralised_when_the_session_is_loaded_again(tmp_path):
    def on_event(kind, payload):
        if kind == "tool":  # Bash `sleep 20` is about to run: stop it half a second in
            asyncio.get_running_loop().call_later(0.5, rt.interrupt, "what happened")

    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        try:
            first = await rt.run(SPEC, "sleep a while", on_event=on_event)
            # Shorter than the sleep alone: it was cut (a loaded machine takes seconds to start the CLI).
            assert first.ok and first.text == "it was stopped" and first.duration_s < 20
            key = {"project_key": rt.project_key, "session_id": first.session_id}
            raw = await rt.sqlite.load(key)
            # The CLI's own record of the stopped tool: the text that tells the model to stop.
            stopped = [e for e in raw if "doesn't want to proceed" in json.dumps(e)]
            assert stopped
            db = rt.run_dir / "sessions.db"
            digest = hashlib.sha256(db.read_bytes()).hexdigest()
            loaded = await rt.store.load(key)
            assert hashlib.sha256(db.read_bytes()).hexdigest() == digest  # SQLite untouched
            assert await rt.sqlite.load(key) == raw
            assert chain_problems(loaded) == []
            text = json.dumps(loaded, ensure_ascii=False)
            assert INTERRUPTED_NOTE in text and "doesn't want to proceed" not in text
            again = await rt.run(SPEC, "what happened", resume=first.session_id)
        finally:
            rt.close()
        last = message_requests(srv)[-1]
    assert again.ok and again.session_id == first.session_id
    assert INTERRUPTED_NOTE in texts_of(last) and "doesn't want to proceed" not in texts_of(last)
