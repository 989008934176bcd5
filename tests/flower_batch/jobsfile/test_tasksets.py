"""`[tasksets.NAME]` in jobs.toml (issue 35): Harbor task folders as tasks of the matrix, the
section's fields over the folder's, `-i`/`-x` on any jobs file, and one line per mistake."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from flower_batch.errors import MatrixFileError
from flower_batch.jobsfile import load_jobs_file, parse_jobs_text

FIXTURES = Path(__file__).resolve().parents[2] / "batch_fixtures" / "harbor_tasks"

TEXT = """
[defaults]
timeout = "5m"
model = "m"

[tasks.inline]
prompt = "an inline task"

[tasksets.tb]
harbor = "harbor_tasks"
exclude = ["install-*"]
cpus = 2
pass_reward = 0.75

[matrix]
variant = ["a", "b"]
"""


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES, tmp_path / "harbor_tasks")
    return tmp_path


def _parse(tmp_path: Path, text: str = TEXT, **narrow: list[str]):
    return parse_jobs_text(textwrap.dedent(text), path=tmp_path / "jobs.toml", **narrow)


def test_the_task_folders_are_tasks_of_the_matrix(tasks_dir: Path) -> None:
    jf = _parse(tasks_dir)
    assert jf.tasks == (
        "inline",
        "fix-permissions",
        "log-summary-date-ranges",
        "modernize-python-script",
        "regex-log",
    )
    assert len(jf.jobs) == 10 and jf.variants == ("a", "b")
    job = jf.job("regex-log.a.r1")
    folder = tasks_dir / "harbor_tasks" / "regex-log"
    assert job.prompt == (folder / "instruction.md").read_text()
    assert job.timeout_s == 600.0  # the folder's [agent] timeout_sec beats [defaults]
    assert job.cpus == 2.0  # the section beats the folder
    assert job.memory_bytes == 1024 * 1024 * 1024
    assert job.disk_bytes == 2048 * 1024**2  # [environment] storage_mb: the job's own disk
    assert jf.job("fix-permissions.a.r1").disk_bytes == 10 * 1024**3  # none asked: the default
    assert job.model == "m"
    assert job.build is not None and job.build.folder == folder / "environment"
    assert (job.root, job.user, job.workdir, job.network) == ("writable", "sandbox", "image", "gateway")
    assert job.verifier is not None and job.verifier.pass_reward == 0.75
    assert job.harbor is not None and job.harbor.name == "regex-log"
    assert jf.descriptions["regex-log"].startswith("A regular expression")
    inline = jf.job("inline.a.r1")
    assert (inline.timeout_s, inline.verifier, inline.harbor, inline.root) == (300.0, None, None, "read-only")


def test_the_record_keeps_the_harbor_fields_and_the_digest_enters_the_inputs_hash(tasks_dir: Path) -> None:
    job = _parse(tasks_dir).job("fix-permissions.a.r1")
    from flower_batch.jobmodel.spec import JobSpec

    assert JobSpec.from_dict(job.to_dict()) == job
    before = job.inputs_hash("sha256:img")
    (tasks_dir / "harbor_tasks" / "fix-permissions" / "solution" / "solve.sh").write_text("#!/bin/bash\n")
    assert _parse(tasks_dir).job("fix-permissions.a.r1").inputs_hash("sha256:img") != before


def test_an_instruction_is_taken_as_written(tasks_dir: Path) -> None:
    (tasks_dir / "harbor_tasks" / "regex-log" / "instruction.md").write_text("Write ${{ matrix.x }} as is.\n")
    assert _parse(tasks_dir).job("regex-log.a.r1").prompt == "Write ${{ matrix.x }} as is.\n"


def test_the_section_overrides_the_folder_network_and_timeout(tasks_dir: Path) -> None:
    text = TEXT.replace(
        'exclude = ["install-*"]', 'include = ["install-*"]\ntimeout = "2m"\nnetwork = "gateway"'
    )
    job = _parse(tasks_dir, text).job("install-local-package.a.r1")
    assert (job.timeout_s, job.network, job.user) == (120.0, "gateway", "root")
    assert job.harbor is not None and job.harbor.network_policy == "public"  # as asked, beside as run


def test_matrix_i_and_x_narrow_any_jobs_file(tasks_dir: Path) -> None:
    text = TEXT + '\n[[jobs]]\nname = "solo"\ntask = "inline"\n'
    jf = _parse(tasks_dir, text, include=["fix-*", "inline", "regex-*"], exclude=["regex-*"])
    assert jf.tasks == ("inline", "fix-permissions")
    jf = _parse(tasks_dir, text, exclude=["inline"])
    assert "inline" not in jf.tasks and not any(j.task == "inline" for j in jf.jobs)


def test_an_axis_naming_a_task_left_out_by_i_is_passed_over(tasks_dir: Path) -> None:
    text = TEXT.replace('variant = ["a", "b"]', 'task = ["inline", "regex-log"]\nvariant = ["a"]')
    jf = _parse(tasks_dir, text, include=["regex-*"])
    assert [j.id for j in jf.jobs] == ["regex-log.a.r1"]


BAD = [
    (
        "harbor-missing",
        TEXT.replace('"harbor_tasks"', '"nowhere"'),
        'tasksets.tb.harbor: "nowhere" not found',
    ),
    (
        "include-selects-nothing",
        TEXT.replace('exclude = ["install-*"]', 'include = ["nope-*"]'),
        '"nope-*" selects no task',
    ),
    ("exclude-selects-nothing", TEXT.replace('"install-*"', '"nope-*"'), '"nope-*" selects no task'),
    ("unknown-key", TEXT.replace("cpus = 2", "cpu = 2"), "tasksets.tb.cpu: unknown key"),
    ("bad-pass-reward", TEXT.replace("0.75", '"high"'), "tasksets.tb.pass_reward: expected "),
    ("no-harbor", TEXT.replace('harbor = "harbor_tasks"', ""), "has no harbor"),
    (
        "name-twice",
        TEXT.replace("[tasks.inline]", "[tasks.regex-log]"),
        'task "regex-log" is also a [tasks.regex-log]',
    ),
    (
        "in-two-sets",
        TEXT + '\n[tasksets.again]\nharbor = "harbor_tasks/regex-log"\n',
        'tasksets.again.harbor: task "regex-log" is also in [tasksets.tb]; select it in one',
    ),
]


@pytest.mark.parametrize(("case", "text", "expected"), BAD, ids=[b[0] for b in BAD])
def test_a_mistake_in_a_taskset_is_one_line(case: str, text: str, expected: str, tasks_dir: Path) -> None:
    with pytest.raises(MatrixFileError) as caught:
        _parse(tasks_dir, text)
    lines = str(caught.value).splitlines()
    assert len(lines) == 1 and expected in lines[0], lines


def test_a_bad_task_folder_is_one_line_naming_its_file(tasks_dir: Path) -> None:
    (tasks_dir / "harbor_tasks" / "regex-log" / "instruction.md").unlink()
    with pytest.raises(MatrixFileError) as caught:
        _parse(tasks_dir)
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"{tasks_dir / 'jobs.toml'}:10: tasksets.tb.harbor: ")
    assert line.endswith("regex-log/instruction.md: not found; a Harbor task's prompt is its instruction.md")


def test_a_command_line_glob_that_selects_nothing_is_one_line(tasks_dir: Path) -> None:
    (tasks_dir / "jobs.toml").write_text(textwrap.dedent(TEXT))
    with pytest.raises(MatrixFileError) as caught:
        load_jobs_file(tasks_dir / "jobs.toml", include=["nope*"])
    assert (
        str(caught.value)
        == f'{tasks_dir / "jobs.toml"}: -i "nope*" selects no task (5 in the file); fix the glob'
    )


def test_a_file_of_task_sets_only_needs_no_tasks_section(tasks_dir: Path) -> None:
    text = '[tasksets.one]\nharbor = "harbor_tasks/regex-log"\n'
    assert [j.id for j in _parse(tasks_dir, text).jobs] == ["regex-log.r1"]
