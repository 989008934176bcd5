"""`matrix` on Harbor task sets (issue 35): each bad input is one line and nothing is written
(no batch folder, no home), and a generated set of 500 tasks is planned and listed by --dry-run."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flower_batch.cli import app
from tests.batch_fixtures.harbor_set import write_taskset

FIXTURES = Path(__file__).resolve().parents[2] / "batch_fixtures" / "harbor_tasks"
JOBS = """
[defaults]
gateway = { mode = "scripted", scenario = "scenario.json" }

[tasksets.tb]
harbor = "tasks"
"""


def _break_instruction(tasks: Path) -> None:
    (tasks / "regex-log" / "instruction.md").unlink()


def _break_toml(tasks: Path) -> None:
    (tasks / "regex-log" / "task.toml").write_text("version = \n")


def _unknown_schema(tasks: Path) -> None:
    toml = tasks / "regex-log" / "task.toml"
    toml.write_text(toml.read_text().replace('version = "1.1"', 'version = "9.0"'))


CASES = [
    ("no-instruction", _break_instruction, [], "regex-log/instruction.md: not found"),
    ("toml-does-not-parse", _break_toml, [], "regex-log/task.toml: not valid TOML"),
    ("unknown-schema", _unknown_schema, [], 'schema_version "9.0" is not one flower-batch reads'),
    ("harbor-path-missing", None, [], '"elsewhere" not found'),
    ("glob-selects-nothing", None, ["-i", "nope-*"], '-i "nope-*" selects no task'),
]


@pytest.mark.parametrize(("case", "edit", "args", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_nothing_is_written(case, edit, args, expected, tmp_path: Path) -> None:
    tasks = Path(shutil.copytree(FIXTURES, tmp_path / "tasks"))
    if edit:
        edit(tasks)
    text = JOBS.replace('"tasks"', '"elsewhere"') if case == "harbor-path-missing" else JOBS
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(textwrap.dedent(text))
    (tmp_path / "scenario.json").write_text('{"rules": [{"reply": [{"text": "done"}]}]}')
    home = tmp_path / "home"
    result = CliRunner().invoke(app, ["matrix", str(jobs), "--home", str(home), *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], lines
    assert not home.exists()


@pytest.mark.docker
@pytest.mark.slow
def test_a_generated_set_of_500_tasks_is_planned_and_every_job_listed(tmp_path: Path) -> None:
    jobs = write_taskset(tmp_path, 500)
    home = tmp_path / "home"
    result = CliRunner().invoke(app, ["matrix", str(jobs), "--dry-run", "--home", str(home)])
    assert result.exit_code == 0, result.output
    listed = [line for line in result.output.splitlines() if line.startswith("run ")]
    assert len(listed) == 500
    assert listed[0].split()[1] == "task-0001.r1" and listed[-1].split()[1] == "task-0500.r1"
    assert not (home / "batches" / "harbor-set").exists()  # a plan writes no batch
