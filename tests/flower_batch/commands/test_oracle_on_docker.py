"""`matrix --oracle` on a tiny set of Harbor-style tasks (until the Harbor folder reader lands, a
stand-in gives each task of a plain jobs.toml its tests/ as hidden tests and its folder as the
Harbor task): each task's solution/solve.sh runs in the task's image, in its WORKDIR (/app, which
starts as a copy of the files the Dockerfile put there), with no model; its hidden tests grade it.
The task whose solve.sh is wrong is listed and the exit code is 1; a task with no solution is said
and not run; the results are a batch of their own, at $0, with no API key though the tasks ask for
the anthropic model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import REPO, Job, command_env, remove_leftovers
from tests.batch_fixtures.task_images import DEBIAN13, ensure

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# The stand-in for r35a's [tasksets] reader: every task of the file is tasks/<name>/ in Harbor's shape.
AS_HARBOR = """
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, {repo!r})
import flower_batch.commands.matrix as matrix
from flower_batch.jobmodel.grading import Verifier
from flower_batch.jobmodel.harbor_task import HarborTask
from flower_batch.jobmodel.hashing import tree_hash

TASKS = Path({tasks!r})
load = matrix.load_jobs_file


def harbor(spec):
    folder = TASKS / spec.task
    solved = (folder / "solution" / "solve.sh").is_file()
    task = HarborTask(folder=folder, digest=tree_hash(folder), name=spec.task, has_solution=solved)
    return replace(spec, verifier=Verifier(folder / "tests", tree_hash(folder / "tests")), harbor=task)


matrix.load_jobs_file = lambda *a, **k: (lambda jf: replace(jf, jobs=tuple(map(harbor, jf.jobs))))(load(*a, **k))
from flower_batch.cli import main

main()
"""
DOCKERFILE = f"FROM {DEBIAN13}\nWORKDIR /app\nCOPY question.txt /app/question.txt\n"
TEST_SH = """#!/bin/bash
if [ "$(cat /app/answer.txt 2>/dev/null)" = "$(cat /app/question.txt)-answered" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
SOLVES = {
    "good": 'echo "$(cat question.txt)-answered" > answer.txt\n',
    "bad": "echo wrong > answer.txt\n",
}
JOBS = """
[batch]
name = "orc"

[defaults]
build = "env"
workdir = "image"
prompt = "answer the question"
gateway = { mode = "anthropic" }  # the oracle asks no model: no key needed

[tasks.good]
[tasks.bad]
[tasks.nosolution]

[matrix]
variant = [{ name = "a" }, { name = "b", args = { v = "b" } }]
"""


def test_the_oracle_lists_the_task_whose_solution_is_wrong(tmp_path: Path) -> None:
    ensure(DEBIAN13)
    project = tmp_path / "p"
    (project / "env").mkdir(parents=True)
    (project / "env" / "Dockerfile").write_text(DOCKERFILE)
    (project / "env" / "question.txt").write_text("q7\n")
    (project / "jobs.toml").write_text(JOBS)
    for task in ("good", "bad", "nosolution"):
        (project / "tasks" / task / "tests").mkdir(parents=True)
        (project / "tasks" / task / "tests" / "test.sh").write_text(TEST_SH)
        if task in SOLVES:
            (project / "tasks" / task / "solution").mkdir()
            (project / "tasks" / task / "solution" / "solve.sh").write_text(SOLVES[task])
    script = tmp_path / "as_harbor.py"
    script.write_text(AS_HARBOR.format(repo=str(REPO), tasks=str(project / "tasks")))
    home = tmp_path / "home"
    without_key = {k: v for k, v in command_env().items() if not k.startswith("ANTHROPIC_")}
    try:
        ran = subprocess.run(
            [sys.executable, str(script), "matrix", str(project / "jobs.toml"), "--oracle", "--home", str(home)],
            capture_output=True, text=True, timeout=600, cwd=project, env=without_key,
        )  # fmt: skip
        assert ran.returncode == 1, ran.stdout + ran.stderr
        assert "oracle: nosolution: no solution/solve.sh, not checked" in ran.stderr
        failed = [line for line in ran.stderr.splitlines() if line.startswith("oracle failed:")]
        assert failed == ["oracle failed: bad: reward 0, below the 1 a pass needs"], ran.stderr
        assert "oracle: 1 of 2 task(s) solved" in ran.stderr
        jobs = sorted(p.parent.name for p in (home / "orc-oracle").glob("*/record.json"))
        assert jobs == ["bad", "good"], "one job per task with a solution, whatever the variants"
        good = Job(home, "orc-oracle", "good").record()
        assert good["status"] == "passed" and good["reward"]["value"] == 1
        assert good["cost_usd"] in (None, 0) and good["num_turns"] == 0, "no model was asked"
        # /app started as the image's files: the solution read question.txt there
        assert (home / "orc-oracle" / "good" / "workspace" / "question.txt").read_text() == "q7\n"
        assert not (home / "orc").exists(), "the oracle's results are a batch of their own"
    finally:
        remove_leftovers(home, "orc-oracle")
