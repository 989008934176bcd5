"""The Harbor task folders of tests/batch_fixtures/harbor_tasks as a task set, on the engine.

First `matrix --oracle` on all five, with no API key though the file asks for the anthropic model: each task's solution/solve.sh runs in the task's own image (built
from its environment/Dockerfile), in its WORKDIR, with no model; the hidden tests grade it. The
install-local-package task installs a Debian package with apt as uid 0 (its task.toml allows the
internet and asks for root). fix-permissions, whose solve.sh is wrong, is named, and the exit code
says so; a task without a solution is said and not run.

Then four of them with the scripted model, in the images the oracle built (each built once): the agent's Bash finds no /tests and no /solution, writes a regex that passes 3 of regex-log's
4 checks, and the reward.json's 0.75 lands in the record; the table and the report show the reward
beside the pass.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import FLOWER_BATCH, Job, command_env, fb, leftovers, remove_leftovers
from tests.batch_fixtures.task_images import DEBIAN13, ensure

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIXTURES = Path(__file__).resolve().parents[2] / "batch_fixtures" / "harbor_tasks"

FLOWS = """
from flower import AgentSpec, Step, Workflow

WORKER = AgentSpec("worker", instructions="ROLE: worker.", allowed_tools=["Bash"],
                   permission_mode="bypassPermissions", max_turns=6)


def look() -> Workflow:
    return Workflow([Step("look", WORKER, "Do the task.")], name="look")
"""
# The agent: what it can see, and for regex-log a pattern without the IPv4 look-ahead (3 of 4 checks).
BASH = (
    '{ ls -d /tests /solution 2>&1; echo "pwd=$(pwd)"; } > seen.txt; '
    'if grep -q regex.txt "$FLOWER_BATCH_INSTRUCTION"; then '
    "echo '\\b\\d{4}-(0[1-9]|1[0-2])-\\d{2}\\b' > regex.txt; fi; echo done"
)
SCENARIO = f"""
description = "Harbor tasks: look around, answer regex-log partly"
[defaults]
usage = {{ input_tokens = 1000, output_tokens = 100 }}
[[rules]]
name = "work"
last_is_tool_result = false
reply = [{{ tool_use = {{ name = "Bash", input = {{ command = {json.dumps(BASH)} }} }} }}]
[[rules]]
name = "done"
last_is_tool_result = true
reply = "Done."
"""
JOBS = """
[batch]
name = "tb"

[defaults]
workflow = "flows:look"
gateway = { mode = "%s" }

[tasksets.tb]
harbor = "tasks"
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure(DEBIAN13)
    root = tmp_path_factory.mktemp("harbor")
    shutil.copytree(FIXTURES, root / "tasks", ignore=shutil.ignore_patterns("README.md"))
    # a sixth task with no solution: the oracle says so and does not run it
    shutil.copytree(root / "tasks" / "log-summary-date-ranges", root / "tasks" / "no-solution")
    shutil.rmtree(root / "tasks" / "no-solution" / "solution")
    (root / "flows.py").write_text(FLOWS)
    (root / "scenario.toml").write_text(SCENARIO)
    # the oracle asks no model: the file's anthropic mode needs no key for it
    (root / "jobs.toml").write_text(JOBS % "anthropic")
    (root / "scripted.toml").write_text(JOBS % 'scripted", scenario = "scenario.toml')
    return root


def test_harbor_tasks_oracle_then_a_graded_matrix(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    try:
        without_key = {k: v for k, v in command_env().items() if not k.startswith("ANTHROPIC_")}
        oracle = subprocess.run(
            [str(FLOWER_BATCH), "matrix", "jobs.toml", "--oracle", "-j", "3", "--home", str(home)],
            capture_output=True, text=True, timeout=900, cwd=project, env=without_key,
        )  # fmt: skip
        assert oracle.returncode == 1, oracle.stdout + oracle.stderr
        failed = [line for line in oracle.stderr.splitlines() if line.startswith("oracle failed:")]
        assert len(failed) == 1 and failed[0].startswith("oracle failed: fix-permissions:"), oracle.stderr
        assert "oracle: no-solution: no solution/solve.sh, not checked" in oracle.stderr
        assert "oracle: 4 of 5 task(s) solved" in oracle.stderr, oracle.stderr
        apt = Job(home, "tb-oracle", "install-local-package").record()
        assert apt["status"] == "passed" and apt["reward"]["value"] == 1, apt
        assert apt["spec"]["user"] == "root" and apt["spec"]["network"] == "internet"

        tasks = ("-i", "regex-log", "-i", "log-summary-*", "-i", "fix-*", "-i", "modernize-*")
        ran = fb("matrix", project / "scripted.toml", *tasks, "-j", "4", home=home, timeout=900, cwd=project)
        assert ran.returncode == 1, ran.stdout + ran.stderr  # the agent solves nothing whole
        records = {p.parent.name: json.loads(p.read_text()) for p in (home / "tb").glob("*/record.json")}
        assert len(records) == 4, sorted(records)
        for name, record in records.items():
            seen = (home / "tb" / name / "workspace" / "seen.txt").read_text()
            assert "'/tests': No such file" in seen and "'/solution': No such file" in seen, (name, seen)
            assert "pwd=/app" in seen, seen
            assert record["spec"]["harbor"]["digest"] and record["reward"] is not None, (name, record)
        (partial,) = [r for n, r in records.items() if n.startswith("regex-log")]
        assert partial["reward"] == {"value": 0.75, "detail": {"checks_passed": 3.0}}, partial
        assert partial["status"] == "failed" and "below the 1" in partial["reason"]
        assert "reward" in ran.stdout and "0.75" in ran.stdout, ran.stdout  # the table
        report = next((home / "tb").rglob("report.html")).read_text()
        assert "0.75" in report and "reward" in report.lower()
        results = json.loads(next((home / "tb").rglob("results.json")).read_text())
        assert any("reward" in json.dumps(entry) for entry in results["jobs"])
        # each environment was built once, for the oracle; the matrix ran in the same images
        oracle_images = {
            p.parent.name: json.loads(p.read_text())["spec"]["task_image"]["id"]
            for p in (home / "tb-oracle").glob("*/record.json")
        }
        for name, record in records.items():
            assert record["spec"]["task_image"]["id"] == oracle_images[record["spec"]["task"]], name
        assert not leftovers(home, "tb"), leftovers(home, "tb").describe()
        assert not leftovers(home, "tb-oracle"), leftovers(home, "tb-oracle").describe()
    finally:
        fb("gc", "--images", "--batch", "tb-oracle", home=home, timeout=300)
        fb("gc", "--images", "--batch", "tb", home=home, timeout=300)
        remove_leftovers(home, "tb")
        remove_leftovers(home, "tb-oracle")
