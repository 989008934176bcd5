"""Resilience on the real CLI (probe the host, classify the error, back off, resume the same
session with a resume prompt that carries no error details): a real outage (the scripted server stops listening),
a bad key, a budget stop. Timings are injected small; the split with the CLI's own retries is
the production one (`Resilience.cli_env()`: CLAUDE_CODE_MAX_RETRIES=2)."""

from __future__ import annotations

import json
import time

import pytest

from flower import AgentSpec, Step, Workflow
from flower.catalogue.runtime import RESUME_PROMPT
from flower.runtime.engine import Runtime
from flower.runtime.resilience import Resilience
from tests.rig import message_requests, scripted, texts_of

pytestmark = pytest.mark.anyio

SPEC = AgentSpec("worker", instructions="ROLE=worker", allowed_tools=["Read"])
FAST = dict(base_delay=0.05, max_delay=0.2, probe_interval=0.2, probe_timeout=0.5, max_offline_wait=120.0)


def outage_scenario(seconds: float) -> dict:
    return {
        "rules": [
            {
                "name": "resumed",
                "when": {"last_user_contains": RESUME_PROMPT[:12]},
                "reply": [{"text": "back: the note says banana"}],
            },
            {
                "name": "read",
                "when": {"last_user_contains": "read the note", "last_is_tool_result": False},
                "reply": [
                    {"text": "Reading."},
                    {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}},
                ],
            },
            # The server goes away (listener closed, connections reset) for `seconds`.
            {"name": "outage", "when": {"last_is_tool_result": True}, "times": 1, "outage_s": seconds},
            {"name": "answer", "when": {"last_is_tool_result": True}, "reply": [{"text": "noted"}]},
        ]
    }


def live_runtime(tmp_path, srv, **policy) -> Runtime:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "note.txt").write_text("the fruit is banana\n")
    # max_retries=None: no test override, so the runtime's own CLI retry setting applies.
    env = srv.env(tmp_path / "cfg", max_retries=None)
    return Runtime(
        workspace=ws, run_dir=tmp_path / "runs", env=env, resilience=Resilience(**{**FAST, **policy})
    )


@pytest.mark.parametrize("seconds", [4.0, pytest.param(20.0, marks=pytest.mark.slow)], ids=["4s", "20s"])
async def test_an_outage_mid_step_is_waited_out_and_the_same_session_resumes(tmp_path, seconds):
    events: list[tuple[str, dict]] = []
    with scripted(tmp_path, outage_scenario(seconds)) as srv:
        rt = live_runtime(tmp_path, srv)
        started = time.monotonic()
        try:
            ctx = await Workflow([Step("work", SPEC, "read the note")]).run(
                rt, on_event=lambda kind, payload: events.append((kind, payload))
            )
        finally:
            rt.close()
        elapsed = time.monotonic() - started
        reqs = message_requests(srv)
    res = ctx["_results"]["work"]
    assert res.ok, res.errors
    assert res.text == "back: the note says banana"
    assert res.attempts == 2 and res.resumed is True and len(res.errors) == 1
    assert "connect" in res.errors[0].lower() or "ECONN" in res.errors[0]
    kinds = [k for k, _ in events]
    assert "offline" in kinds and kinds.count("retry") == 1  # it waited by probing, then went on
    outage = next(r for r in reqs if r["rule"] == "outage")
    back = next(r for r in reqs if r["rule"] == "resumed")
    # One session throughout; the resumed request has the whole history and no synthetic error.
    assert {r["session"] for r in reqs} == {res.session_id}
    seen = texts_of(back)
    assert "read the note" in seen and "the fruit is banana" in seen
    assert "API Error" not in seen and "Connection" not in seen
    recovery = back["time"] - outage["time"]
    print(
        f"\noutage {seconds:.0f} s: resumed request {recovery:.1f} s after the outage began; step {elapsed:.1f} s"
    )
    # Waited out (not before the server was back), and resumed once it was: well before the
    # 120 s max_offline_wait, with room for a CLI start on a loaded machine (37 s seen at load 20).
    assert seconds <= recovery < seconds + 45
    row = json.loads(rt.manifest_path.read_text())[0]
    assert row["attempts"] == 2 and row["resumed"] is True and row["ok"] is True
    assert ctx["_lineage"].steps["work"] == res.session_id


async def test_a_401_stops_at_once_without_waiting(tmp_path):
    scenario = {"rules": [{"name": "denied", "error": 401}]}
    with scripted(tmp_path, scenario) as srv:
        rt = live_runtime(tmp_path, srv, base_delay=30.0, probe_interval=30.0)
        started = time.monotonic()
        try:
            res = await rt.run(SPEC, "hello")
        finally:
            rt.close()
        elapsed = time.monotonic() - started
        n = len(message_requests(srv))
    assert not res.ok and res.attempts == 1 and len(res.errors) == 1
    assert "Invalid API key" in (res.error or "")
    # flower did not retry (a 30 s backoff would show); the CLI's own 2 quick retries did run.
    assert n == 3, n
    assert elapsed < 20
    print(f"\n401: stopped after {elapsed:.1f} s, {n} HTTP requests (1 + the CLI's 2 retries), 1 attempt")


async def test_a_budget_stop_is_fatal_and_not_retried(tmp_path):
    spec = AgentSpec("worker", allowed_tools=["Read"], max_budget_usd=0.000001)
    scenario = {
        "rules": [
            {
                "name": "costly",
                "usage": {"input_tokens": 50_000, "output_tokens": 5_000},
                "reply": [{"text": "expensive"}],
            }
        ]
    }
    with scripted(tmp_path, scenario) as srv:
        rt = live_runtime(tmp_path, srv, base_delay=30.0)
        try:
            res = await rt.run(spec, "hello")
        finally:
            rt.close()
        n = len(message_requests(srv))
    assert not res.ok and res.attempts == 1 and n == 1
    assert "budget" in (res.error or "").lower()


async def test_server_errors_are_retried_by_resuming_the_session(tmp_path):
    scenario = {
        "rules": [
            {
                "name": "resumed",
                "when": {"last_user_contains": RESUME_PROMPT[:12]},
                "reply": [{"text": "fine now"}],
            },
            {
                "name": "read",
                "when": {"last_user_contains": "read the note", "last_is_tool_result": False},
                "reply": [{"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}}],
            },
            {"name": "overloaded", "when": {"last_is_tool_result": True}, "error": 529},
        ]
    }
    with scripted(tmp_path, scenario) as srv:
        rt = live_runtime(tmp_path, srv)
        try:
            res = await rt.run(SPEC, "read the note")
        finally:
            rt.close()
        reqs = message_requests(srv)
    assert res.ok and res.text == "fine now" and res.attempts == 2 and res.resumed
    assert [r["rule"] for r in reqs].count("overloaded") == 3  # the CLI's 2 quick retries, then flower
    assert {r["session"] for r in reqs} == {res.session_id}
