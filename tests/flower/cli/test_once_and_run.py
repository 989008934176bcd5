"""The `flower` command itself, as a user runs it: a real subprocess, the real CLI, the scripted model."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.rig import message_requests, scripted, texts_of

SCENARIO = {
    "rules": [
        {
            "name": "hello",
            "when": {"last_user_contains": "say hello"},
            "reply": [{"text": "hello from the script"}],
        },
        {
            "name": "again",
            "when": {"last_user_contains": "what did you say"},
            "reply": [{"text": "I said hello"}],
        },
        {"name": "boom", "when": {"last_user_contains": "explode"}, "error": 401},
    ]
}


def flower(tmp_path, srv, *args, cwd=None):
    env = {**os.environ, **srv.env(tmp_path / "cfg")}
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "flower", "-w", str(ws), "-r", str(tmp_path / "runs"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or tmp_path,
        timeout=120,
    )


def test_once_then_resume_and_fork(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        first = flower(tmp_path, srv, "once", "say hello")
        assert first.returncode == 0, first.stderr
        assert "hello from the script" in first.stdout
        assert "offline scripted model" in first.stderr
        assert "manifest" in first.stderr and "total cost $" in first.stderr
        rows = json.loads((tmp_path / "runs" / "manifest.json").read_text())
        sid = rows[0]["session_id"]
        again = flower(tmp_path, srv, "once", "what did you say", "--resume", sid)
        assert again.returncode == 0, again.stderr
        assert "I said hello" in again.stdout
        assert "say hello" in texts_of(message_requests(srv)[-1])
        forked = flower(tmp_path, srv, "once", "what did you say", "--resume", sid, "--fork")
        assert forked.returncode == 0, forked.stderr
    rows = json.loads((tmp_path / "runs" / "manifest.json").read_text())
    assert [r["session_id"] == sid for r in rows] == [True, True, False]
    assert len({r["run"] for r in rows}) == 3  # three processes, three run ids, no row lost


def test_once_failure_exits_1_with_the_error(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        out = flower(tmp_path, srv, "once", "explode")
    assert out.returncode == 1
    assert "Invalid API key" in out.stderr
    assert "Traceback" not in out.stderr


def test_bad_usage_is_one_line_exit_2(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        out = flower(tmp_path, srv, "once", "hi", "--fork")
        assert out.returncode == 2 and "--fork needs --resume" in out.stderr
        out = flower(tmp_path, srv, "run", "nowhere.py:flow")
        assert out.returncode == 2 and "does not exist" in out.stderr and "Traceback" not in out.stderr


BRACKETS = {
    "rules": [
        {
            "name": "glob",
            "when": {"last_user_contains": "brackets please", "last_is_tool_result": False},
            "reply": [
                {"text": "looking in [/tmp] [bold]now"},
                {"tool_use": {"name": "Glob", "input": {"pattern": "[/a-z]*[/]"}}},
            ],
        },
        {
            "name": "done",
            "when": {"last_is_tool_result": True},
            "reply": [{"text": "done [/tmp] ok [bold]x[/bold]"}],
        },
    ]
}


def test_brackets_in_model_text_and_tool_input_are_shown_verbatim(tmp_path):
    with scripted(tmp_path, BRACKETS) as srv:
        out = flower(tmp_path, srv, "-v", "once", "brackets please")
    assert out.returncode == 0, out.stderr
    assert "done [/tmp] ok [bold]x[/bold]" in out.stdout  # not read as markup, not a crash
    assert "[/a-z]*[/]" in out.stderr and "Traceback" not in out.stderr


def test_a_raising_gate_is_one_line_naming_the_step_and_its_row_is_kept(tmp_path):
    flows = tmp_path / "flows.py"
    flows.write_text(
        "from flower import AgentSpec, Step, Workflow\n"
        "def main():\n"
        "    return Workflow([Step('a', AgentSpec('w'), 'say hello', gate=lambda r, ctx: ctx['nokey'])])\n"
    )
    with scripted(tmp_path, SCENARIO) as srv:
        out = flower(tmp_path, srv, "run", f"{flows}:main")
    assert out.returncode == 2, out.stderr
    assert "step 'a': its gate raised KeyError" in out.stderr and "Traceback" not in out.stderr
    rows = json.loads((tmp_path / "runs" / "manifest.json").read_text())
    assert [r["step"] for r in rows] == ["a"] and rows[0]["ok"]


def test_once_refuses_an_unknown_permission_mode(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        out = flower(tmp_path, srv, "once", "hi", "-p", "bogus")
    assert out.returncode == 2 and "-p 'bogus': use one of" in out.stderr
    assert not (tmp_path / "runs" / "manifest.json").exists()


def test_once_b_is_the_one_budget_option_told_to_the_agent(tmp_path):
    # upstream's `once -b` and `--budget-usd` are one option: the agent is told the budget
    with scripted(tmp_path, SCENARIO) as srv:
        out = flower(tmp_path, srv, "once", "say hello", "-b", "3")
        bad = flower(tmp_path, srv, "once", "say hello", "-b", "0")
        told = texts_of(message_requests(srv)[0])
    assert out.returncode == 0, out.stderr
    assert "$3.00" in told and "say hello" in told
    assert bad.returncode == 2 and "--budget-usd=0.0: give USD" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
