"""The limits on the real CLI against the scripted model: the agent reads its time and budget
left at the start of a session, the notices reach its context (checked in the requests the
model received), they can be switched off, and at the deadline the turn is interrupted, the
session writes its notes in the wrap-up window, the step ends `timeout`, and the same session
continues later from the notes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from flower import AgentSpec, Step, Workflow
from flower.runtime.limits import Limits
from flower.scripted import ParsedRequest
from tests.rig import message_requests, runtime, scripted, texts_of

SPEC = AgentSpec("w", allowed_tools=["Bash"], permission_mode="bypassPermissions", max_turns=10)
NOTES = """## 现在在做什么
在等 sleep 跑完。

## 下一步
再跑一次 echo NEXT-STEP。
"""


# Waits until 60% of the time is used, read from the variables flower itself was given (the
# CLI's tools inherit them): past 50% however slowly the process started.
UNTIL_60 = (
    'python3 -c \'import os, time; d = float(os.environ["FLOWER_DEADLINE"]); '
    't = float(os.environ["FLOWER_TIME_LIMIT"]); time.sleep(max(0, d - 0.4 * t - time.time()))\''
)


def until_60(limits: Limits) -> tuple[AgentSpec, dict[str, Any]]:
    """A spec whose tools see the limits' variables, and rules whose tool waits for 60%."""
    env = {"FLOWER_DEADLINE": str(limits.deadline), "FLOWER_TIME_LIMIT": str(limits.time_limit_s)}
    rules = sleeper(0)
    rules["rules"][2]["reply"][0]["tool_use"]["input"]["command"] = UNTIL_60
    return replace(SPEC, env=env), rules


def wait(seconds: int) -> str:
    """A command that takes `seconds` (the CLI refuses a standalone long `sleep`)."""
    return f"python3 -c 'import time; time.sleep({seconds})' && echo waited-{seconds}"


def sleeper(seconds: int) -> dict[str, Any]:
    return {
        "rules": [
            {"name": "notes", "when": {"last_user_contains": "时间到了"}, "reply": [{"text": NOTES}]},
            {
                "name": "woken",
                "when": {"last_user_contains": "WAKE-WORDS"},
                "reply": [{"text": "carried on"}],
            },
            {
                "name": "work",
                "when": {"last_user_contains": "TASK-LIMITS", "last_is_tool_result": False},
                "reply": [{"tool_use": {"name": "Bash", "input": {"command": wait(seconds)}}}],
            },
            {"name": "done", "reply": [{"text": "done"}]},
        ]
    }


def test_the_opening_and_a_time_notice_reach_the_agent(tmp_path: Path) -> None:
    # 10% of the time is used as the step starts; the tool call waits past 50%.
    limits = Limits(deadline=time.time() + 45, time_limit_s=50, budget_usd=5.0)
    spec, rules = until_60(limits)
    with scripted(tmp_path, rules) as srv:
        rt = runtime(tmp_path, srv, limits=limits)
        try:
            result = anyio.run(lambda: rt.run(spec, "TASK-LIMITS: wait a little"))
        finally:
            rt.close()
        assert result.ok, result.error
        requests = message_requests(srv)
        assert not srv.unmatched
    opening = texts_of(requests[0])
    assert "剩余时间" in opening and "剩余预算 $5.00" in opening and "TASK-LIMITS" in opening
    # A system reminder: not the workflow's prompt, so a replay's prompt comparison ignores it.
    first = ParsedRequest("POST", "/v1/messages", "", "messages", {}, body=requests[0]["body"])
    assert first.last_user_text.strip() == "TASK-LIMITS: wait a little"
    after_tool = texts_of(requests[-1])
    assert "时间已用 50%" in after_tool  # the PostToolUse hook's additional context
    assert "时间已用" not in opening


def test_switched_off_the_agent_is_told_nothing(tmp_path: Path) -> None:
    limits = Limits(deadline=time.time() + 52, time_limit_s=100, notices=False, thresholds=())
    with scripted(tmp_path, sleeper(3)) as srv:
        rt = runtime(tmp_path, srv, limits=limits)
        try:
            result = anyio.run(lambda: rt.run(SPEC, "TASK-LIMITS: wait a little"))
        finally:
            rt.close()
        assert result.ok, result.error
        seen = "\n".join(texts_of(r) + str(r["body"].get("system")) for r in message_requests(srv))
    assert "剩余时间" not in seen and "已用" not in seen and "[flower]" not in seen


def test_a_budget_share_crossed_in_one_step_is_told_at_the_next(tmp_path: Path) -> None:
    rules = {"rules": [{"name": "any", "reply": [{"text": "ok"}]}]}
    with scripted(tmp_path, rules) as srv:
        # One request of the scripted model costs about $0.00014 at list prices: 70% of this.
        rt = runtime(tmp_path, srv, limits=Limits(budget_usd=0.0002))
        wf = Workflow([Step("one", SPEC, "STEP-ONE"), Step("two", SPEC, "STEP-TWO")], continuous=False)
        try:
            anyio.run(lambda: wf.run(rt))
        finally:
            rt.close()
        requests = message_requests(srv)
    assert "剩余预算 $0.0002" in texts_of(requests[0])
    second = texts_of(requests[-1])
    assert "STEP-TWO" in second and "预算已用 50%" in second, second[:400]


# The 60 s tool call must have started before the deadline, also on a loaded machine, where
# the CLI takes seconds to start.
DEADLINE_S = 15


def test_at_the_deadline_the_agent_writes_notes_and_the_session_goes_on_later(tmp_path: Path) -> None:
    with scripted(tmp_path, sleeper(60)) as srv:
        rt = runtime(
            tmp_path, srv, limits=Limits(deadline=time.time() + DEADLINE_S, time_limit_s=60, wrap_up_s=30)
        )
        events: list[str] = []
        try:
            started = time.time()
            result = anyio.run(
                lambda: rt.run(SPEC, "TASK-LIMITS: a long job", on_event=lambda k, p: events.append(k))
            )
            took = time.time() - started
        finally:
            rt.close()
        assert not result.ok and result.error is not None and result.error.startswith("timeout")
        assert took < 50, f"the 60 s tool call was interrupted at the deadline, not waited for ({took:.0f} s)"
        notes = tmp_path / "ws" / ".flower" / "notes" / "收尾-w.md"
        assert notes.is_file() and "再跑一次 echo NEXT-STEP" in notes.read_text(encoding="utf-8")
        assert str(notes) in result.error and "time-up" in events
        asked = [r for r in message_requests(srv) if r["rule"] == "notes"]
        assert len(asked) == 1 and "waited-60" in str(asked[0]["body"]["messages"])  # the same session
        # The next run (a wake) continues the same session and is pointed at the notes.
        rt2 = runtime(tmp_path, srv, limits=Limits(deadline=time.time() + 600, time_limit_s=600))
        try:
            woken = anyio.run(lambda: rt2.run(SPEC, "WAKE-WORDS", resume=result.session_id))
        finally:
            rt2.close()
        assert woken.ok, woken.error
        wake_request = message_requests(srv)[-1]
        assert woken.session_id == result.session_id
        assert str(notes) in texts_of(wake_request) and "waited-60" in str(wake_request["body"]["messages"])
        assert not srv.unmatched
    rows = (tmp_path / "runs" / "manifest.json").read_text(encoding="utf-8")
    assert '"error": "timeout: the deadline passed' in rows


def test_notes_without_their_sections_are_kept_under_notes_the_runtime_writes(tmp_path: Path) -> None:
    rules = sleeper(60)
    rules["rules"][0]["reply"] = [{"text": "I was waiting for the command. NO-SECTIONS."}]
    with scripted(tmp_path, rules) as srv:
        rt = runtime(
            tmp_path, srv, limits=Limits(deadline=time.time() + DEADLINE_S, time_limit_s=60, wrap_up_s=30)
        )
        try:
            result = anyio.run(lambda: rt.run(SPEC, "TASK-LIMITS: a long job"))
        finally:
            rt.close()
    assert result.error is not None and result.error.startswith("timeout: the deadline passed; notes in")
    notes = (tmp_path / "ws" / ".flower" / "notes" / "收尾-w.md").read_text(encoding="utf-8")
    assert notes.startswith("# 收尾笔记: w (运行时代写)") and "NO-SECTIONS" in notes and "## 下一步" in notes
    assert "waited-60" in notes and "上下文" not in notes.split("## 现场")[0]  # notes, not a handoff


def test_past_the_deadline_no_session_starts(tmp_path: Path) -> None:
    with scripted(tmp_path, sleeper(1)) as srv:
        rt = runtime(tmp_path, srv, limits=Limits(deadline=time.time() - 1, time_limit_s=60))
        try:
            result = anyio.run(lambda: rt.run(SPEC, "TASK-LIMITS"))
        finally:
            rt.close()
        assert message_requests(srv) == []
    assert not result.ok and result.error == "timeout: the deadline passed" and result.session_id == ""


FLOW = """
from flower import AgentSpec, Step, Workflow

def main():
    spec = AgentSpec("w", allowed_tools=["Bash"], permission_mode="bypassPermissions", max_turns=10)
    return Workflow([Step("s", spec, "TASK-LIMITS: wait.")], name="limits")
"""


def flower_run(tmp_path: Path, srv, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    full = {k: v for k, v in os.environ.items() if not k.startswith("FLOWER_")}
    full.update(srv.env(tmp_path / "cfg"), **env)
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "flow.py").write_text(FLOW)
    cmd = [sys.executable, "-m", "flower", "-w", str(tmp_path / "ws"), "-r", str(tmp_path / "runs")]
    return subprocess.run(
        [*cmd, "run", f"{tmp_path / 'flow.py'}:main", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=tmp_path,
        timeout=180,
    )


def test_flower_run_takes_the_limits_from_the_environment_and_the_options(tmp_path: Path) -> None:
    deadline = str(time.time() + 45)  # a slow start (a loaded machine) still has 60% to reach
    rules = sleeper(0)
    rules["rules"][2]["reply"][0]["tool_use"]["input"]["command"] = UNTIL_60
    with scripted(tmp_path, rules) as srv:
        out = flower_run(
            tmp_path,
            srv,
            env={"FLOWER_DEADLINE": deadline, "FLOWER_TIME_LIMIT": "50", "FLOWER_BUDGET_USD": "3"},
        )
        assert out.returncode == 0, out.stderr
        requests = message_requests(srv)
        assert "剩余预算 $3.00" in texts_of(requests[0]) and "时间已用 50%" in texts_of(requests[-1])
    with scripted(tmp_path / "off", sleeper(3)) as srv:
        (tmp_path / "off").mkdir(exist_ok=True)
        out = flower_run(
            tmp_path / "off",
            srv,
            "--notices",
            "off",
            env={"FLOWER_DEADLINE": str(time.time() + 52), "FLOWER_TIME_LIMIT": "100"},
        )
        assert out.returncode == 0, out.stderr
        assert not any("[flower]" in texts_of(r) for r in message_requests(srv))


def test_a_bad_limit_is_one_line_exit_2(tmp_path: Path) -> None:
    with scripted(tmp_path, sleeper(1)) as srv:
        out = flower_run(tmp_path, srv, "--budget-usd", "-3", env={})
        env_bad = flower_run(tmp_path, srv, env={"FLOWER_NOTICES": "lots"})
    assert out.returncode == 2 and "--budget-usd=-3.0: give USD" in out.stderr, out.stderr
    assert env_bad.returncode == 2 and "FLOWER_NOTICES='lots'" in env_bad.stderr
    assert "Traceback" not in out.stderr + env_bad.stderr
