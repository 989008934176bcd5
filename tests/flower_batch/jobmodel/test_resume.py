"""inputs_hash, record.json and resume planning (keep / run / --retry-failed / --fresh)."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from flower_batch.errors import RecordError
from flower_batch.jobmodel.outcome import JobOutcome, StepSummary
from flower_batch.jobmodel.record import (
    JobRecord,
    load_records,
    new_record,
    read_record,
    record_path,
    write_record,
)
from flower_batch.jobmodel.resume import Action, plan_resume
from flower_batch.jobmodel.status import Status
from flower_batch.jobsfile import load_jobs_file

IMAGE = "sha256:" + "1" * 64
JOBS = """
[defaults]
workflow = "examples.workflows:${{ matrix.variant }}"
secrets = ["GITHUB_TOKEN"]
[tasks.a]
workspace = "tasks/a"
prompt = "do a"
[tasks.b]
workspace = "tasks/b"
prompt = "do b"
[matrix]
variant = ["careful", "quick"]
"""


def make_project(root: Path, text: str = JOBS) -> Path:
    for name in ("a", "b"):
        (root / "tasks" / name).mkdir(parents=True, exist_ok=True)
        (root / "tasks" / name / "README.md").write_text(f"task {name}\n")
    (root / "jobs.toml").write_text(textwrap.dedent(text))
    return root / "jobs.toml"


def hashes(path: Path, image: str = IMAGE) -> dict[str, str]:
    return {job.id: job.inputs_hash(image) for job in load_jobs_file(path).jobs}


def finished(job, status: str, image: str = IMAGE, **fields) -> JobRecord:
    return new_record(job, batch="demo", image_id=image, status=status, **fields)


# --- inputs_hash -------------------------------------------------------------------------


def test_hash_is_stable_and_independent_of_location(tmp_path):
    path = make_project(tmp_path / "one")
    before = hashes(path)
    assert before == hashes(path)
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    assert hashes(tmp_path / "two" / "jobs.toml") == before


def test_prompt_change_rehashes_only_that_tasks_jobs(tmp_path):
    path = make_project(tmp_path)
    before = hashes(path)
    path.write_text(path.read_text().replace('prompt = "do a"', 'prompt = "do a, carefully"'))
    after = hashes(path)
    assert {j for j in before if before[j] != after[j]} == {"a.careful.r1", "a.quick.r1"}


@pytest.mark.parametrize("change", ["edit", "add", "chmod", "rename"])
def test_workspace_content_changes_rehash(tmp_path, change):
    path = make_project(tmp_path)
    before = hashes(path)
    readme = tmp_path / "tasks/b/README.md"
    if change == "edit":
        readme.write_text("task b, edited\n")
    elif change == "add":
        (tmp_path / "tasks/b/sub").mkdir()
    elif change == "chmod":
        os.chmod(readme, 0o755)
    else:
        readme.rename(tmp_path / "tasks/b/READ.md")
    after = hashes(path)
    assert {j for j in before if before[j] != after[j]} == {"b.careful.r1", "b.quick.r1"}


def test_image_id_and_limits_are_part_of_the_hash(tmp_path):
    path = make_project(tmp_path)
    before = hashes(path)
    assert all(before[j] != h for j, h in hashes(path, "sha256:" + "2" * 64).items())
    path.write_text(path.read_text().replace("[tasks.a]", '[tasks.a]\ntimeout = "2m"'))
    changed = hashes(path)
    assert changed["a.quick.r1"] != before["a.quick.r1"] and changed["b.quick.r1"] == before["b.quick.r1"]


# --- record.json -------------------------------------------------------------------------


def test_record_round_trip_and_atomic_write(tmp_path):
    job = load_jobs_file(make_project(tmp_path)).jobs[0]
    outcome = JobOutcome(
        job.id,
        Status.FAILED,
        workflow_ok=True,
        check_exit=1,
        cost_usd=0.25,
        num_turns=7,
        duration_s=31.5,
        steps=(StepSummary("work", True, 0.25, 7, 30.0),),
        gateway_mode="scripted",
        reason="check exited 1",
        check_output="x" * 20000,
    )
    record = finished(job, "running", started_at="2026-01-01T00:00:00Z").with_outcome(
        outcome, finished_at="2026-01-01T00:00:31Z", exit_code=0
    )
    target = record_path(tmp_path / "batch", job.id)
    write_record(target, record)
    assert target == tmp_path / "batch" / job.id / "record.json"
    assert [p.name for p in target.parent.iterdir()] == ["record.json"]  # no temp file left behind
    loaded = read_record(target)
    assert loaded.check_output == "x" * 8000  # tail kept, bounded
    assert loaded == JobRecord.from_dict(json.loads(target.read_text()))
    assert loaded.outcome(log_tail="tail").log_tail == "tail"
    assert loaded.outcome().status is Status.FAILED and loaded.outcome().cost_usd == 0.25
    data = json.loads(target.read_text())
    assert data["format"] == "flower-batch/job-record@1"
    assert data["spec"]["secrets"] == ["GITHUB_TOKEN"] and "env" in data["spec"]


def test_record_never_holds_secret_values(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_VERY_SECRET_VALUE")
    job = load_jobs_file(make_project(tmp_path)).jobs[0]
    write_record(record_path(tmp_path, job.id), finished(job, "passed"))
    assert "ghp_VERY_SECRET_VALUE" not in record_path(tmp_path, job.id).read_text()


def test_bad_records_are_reported_not_raised(tmp_path):
    (tmp_path / "truncated").mkdir()
    (tmp_path / "truncated" / "record.json").write_text('{"job_id": "trunc')
    (tmp_path / "weird").mkdir()
    (tmp_path / "weird" / "record.json").write_text(
        '{"job_id": "weird", "batch": "b", "inputs_hash": "h", "image_id": "i", "status": "done"}'
    )
    records = load_records(tmp_path)
    assert set(records) == {"truncated", "weird"}
    assert all(isinstance(r, RecordError) for r in records.values())
    assert "unknown status 'done'" in str(records["weird"])
    assert load_records(tmp_path, ["absent"]) == {}


# --- plan_resume -------------------------------------------------------------------------


@pytest.fixture
def jobs(tmp_path):
    return load_jobs_file(make_project(tmp_path)).jobs


def by_id(plan):
    return {d.job_id: (d.action.value, d.reason) for d in plan.decisions}


def test_first_run_runs_everything(jobs):
    plan = plan_resume(jobs, IMAGE, {})
    assert [d.action for d in plan.decisions] == [Action.RUN] * 4
    assert {d.reason for d in plan.decisions} == {"new"} and plan.summary() == "0 kept, 4 to run"


def test_default_resume_keeps_verdicts_and_reruns_the_rest(jobs):
    a_careful, a_quick, b_careful, b_quick = jobs
    records = {
        a_careful.id: finished(a_careful, "passed"),
        a_quick.id: finished(a_quick, "failed", reason="check exited 1"),
        b_careful.id: finished(b_careful, "running"),
        b_quick.id: finished(b_quick, "error", reason="container failed to start"),
        "c.old.r1": finished(a_careful, "passed"),
    }
    plan = plan_resume(jobs, IMAGE, records)
    assert by_id(plan) == {
        "a.careful.r1": ("keep", "passed with the same inputs"),
        "a.quick.r1": ("keep", "failed with the same inputs"),
        "b.careful.r1": ("run", "unfinished (was running when the last run stopped)"),
        "b.quick.r1": ("run", "was error: container failed to start"),
    }
    assert plan.orphans == ("c.old.r1",)
    assert [d.job_id for d in plan.to_run] == ["b.careful.r1", "b.quick.r1"]
    assert plan.to_run[0].attempt == 2


@pytest.mark.parametrize(
    "status, action",
    [
        ("passed", "keep"),
        ("failed", "run"),
        ("timeout", "run"),
        ("budget", "run"),
        ("error", "run"),
        ("skipped", "run"),
    ],
)
def test_retry_failed(jobs, status, action):
    plan = plan_resume(jobs[:1], IMAGE, {jobs[0].id: finished(jobs[0], status)}, retry_failed=True)
    assert plan.decisions[0].action.value == action


@pytest.mark.parametrize("status", ["passed", "failed", "timeout", "budget"])
def test_verdicts_are_kept_by_default(jobs, status):
    assert (
        plan_resume(jobs[:1], IMAGE, {jobs[0].id: finished(jobs[0], status)}).decisions[0].action
        is Action.KEEP
    )


def test_fresh_runs_everything_even_passed(jobs):
    records = {j.id: finished(j, "passed") for j in jobs}
    plan = plan_resume(jobs, IMAGE, records, fresh=True, retry_failed=True)
    assert {d.reason for d in plan.decisions} == {"--fresh"}


def test_changed_inputs_rerun_with_a_reason(tmp_path):
    path = make_project(tmp_path)
    old = load_jobs_file(path).jobs
    records = {j.id: finished(j, "passed") for j in old}
    path.write_text(path.read_text().replace('prompt = "do b"', 'prompt = "do b!"'))
    (tmp_path / "tasks/a/new.txt").write_text("new file")
    plan = plan_resume(load_jobs_file(path).jobs, IMAGE, records)
    assert by_id(plan) == {
        "a.careful.r1": ("run", "inputs changed: workspace files"),
        "a.quick.r1": ("run", "inputs changed: workspace files"),
        "b.careful.r1": ("run", "inputs changed: prompt"),
        "b.quick.r1": ("run", "inputs changed: prompt"),
    }
    new_image = "sha256:" + "9" * 64
    plan = plan_resume(old, new_image, records)
    assert plan.decisions[0].reason == "image changed (111111111111 -> 999999999999)"


def test_unreadable_record_reruns(jobs):
    plan = plan_resume(jobs[:1], IMAGE, {jobs[0].id: RecordError("x/record.json: Expecting value")})
    assert plan.decisions[0].action is Action.RUN
    assert plan.decisions[0].reason == "record unreadable (x/record.json: Expecting value); running again"


def test_plan_from_records_on_disk(tmp_path, jobs):
    batch = tmp_path / "volumes" / "demo"
    for job in jobs[:2]:
        write_record(record_path(batch, job.id), finished(job, "passed"))
    plan = plan_resume(jobs, IMAGE, load_records(batch, [j.id for j in jobs]))
    assert [d.action.value for d in plan.decisions] == ["keep", "keep", "run", "run"]
