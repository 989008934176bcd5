"""A job with hidden tests whose agent runs out of time is graded all the same, as Harbor grades a
trial after an agent timeout: here the agent writes the answer, then starts a command that
outlasts the job's timeout. The tests run in a fresh container on what it left, reward 1, and the
job passes, its reason saying the agent did not finish. (Below the threshold the timeout stands,
the reward in its reason: tests/flower_batch/running/test_rewards.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import Job, fb, runtime_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FLOWS = """
from flower import AgentSpec, Step, Workflow

WORKER = AgentSpec("worker", instructions="ROLE: worker.", allowed_tools=["Write", "Bash"],
                   permission_mode="bypassPermissions", max_turns=6)


def slow() -> Workflow:
    return Workflow([Step("solve", WORKER, "Write alpha, then make sure.")], name="slow")
"""
SCENARIO = """
description = "the answer written, then a command that outlasts the job"
[defaults]
usage = { input_tokens = 1000, output_tokens = 100 }
[[rules]]
name = "answer"
last_is_tool_result = false
last_user_contains = "Write alpha"
reply = [{ tool_use = { name = "Write", input = { file_path = "{cwd}/answer.txt", content = "alpha\\n" } } }]
[[rules]]
name = "make sure, slowly"
times = 1
last_is_tool_result = true
tool_result_contains = "answer.txt"
reply = [{ tool_use = { name = "Bash", input = { command = "cat answer.txt; tail -f /dev/null" } } }]
[[rules]]
name = "anything else"
reply = "Stopping here."
"""
TEST_SH = """#!/bin/bash
if grep -qx alpha answer.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def test_an_agent_that_runs_out_of_time_is_graded_on_what_it_left(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "ws").mkdir(parents=True)
    (project / "flows.py").write_text(FLOWS)
    (project / "scenario.toml").write_text(SCENARIO)
    (project / "tests").mkdir()
    (project / "tests" / "test.sh").write_text(TEST_SH)
    home = tmp_path / "home"
    ran = fb(
        "run", project / "ws", "-f", f"{project / 'flows.py'}:slow", "--image", runtime_image(),
        "--scenario", project / "scenario.toml", "--name", "late", "--timeout", "15s",
        "--tests", project / "tests",
        home=home, timeout=300, cwd=project,
    )  # fmt: skip
    record = Job(home, "adhoc", "late").record()
    assert ran.returncode == 0, ran.stdout + ran.stderr + json.dumps(record)[:3000]
    assert record["status"] == "passed" and record["reward"] == {"value": 1.0, "detail": {}}, record
    assert "reward 1 (a pass needs 1), though the agent did not finish" in record["reason"], record
    assert "stopped at the job's timeout" in record["reason"], record  # the agent's own verdict, named
