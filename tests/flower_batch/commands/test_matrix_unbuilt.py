"""`matrix` when one task's image does not build (issue 35): one line for that task, its jobs end
`error` (infrastructure) with the build's line as their reason, every other task goes on, and the
next run builds it again (a job with no verdict runs again).

The real command on a fake backend: the other task's jobs already have finished records with the
current inputs (kept, nothing is started), and the environments step reports the failed build as
resolve_environments does with keep_going (test_unbuilt_tasks.py checks that part)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flower_batch.cli import app
from flower_batch.commands import environments as environments_cmd
from flower_batch.commands import matrix as matrix_cmd
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import new_record, read_record, write_record
from flower_batch.jobmodel.status import Status
from flower_batch.jobsfile import load_jobs_file
from flower_batch.layout import Home
from flower_batch.running.task_images import Environments
from tests.fake_backend import FakeBackend

REPO = Path(__file__).resolve().parents[3]
IMAGE_ID = "sha256:" + "c" * 64
LINE = "jobs.toml: task bad: the build of envs/bad failed at step 2/2 (RUN false): exit 1 (log: /x.log)"
JOBS = """
[batch]
name = "unbuilt"
[defaults]
prompt = "do it"
gateway = { mode = "scripted", scenario = "demo.toml" }
[tasks.good]
workspace = "ws"
[tasks.bad]
workspace = "ws"
build = "envs/bad"
[matrix]
variant = ["a", "b"]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "envs" / "bad").mkdir(parents=True)
    (tmp_path / "envs" / "bad" / "Dockerfile").write_text("FROM scratch\nRUN false\n")
    shutil.copyfile(REPO / "examples" / "scenarios" / "demo.toml", tmp_path / "demo.toml")
    (tmp_path / "jobs.toml").write_text(JOBS)
    home = Home(tmp_path / "home")
    for job in load_jobs_file(tmp_path / "jobs.toml").jobs:
        if job.task == "good":
            outcome = JobOutcome(job.id, Status.PASSED, workflow_ok=True, gateway_mode="scripted")
            record = new_record(job, batch="unbuilt", image_id=IMAGE_ID).with_outcome(outcome)
            write_record(home.job("unbuilt", job.id).record_path, record)

    def pinned(jobs, runtime, **kwargs):  # type: ignore[no-untyped-def]
        assert kwargs["keep_going"] is True
        bad = {j.id: LINE for j in jobs if j.task == "bad"}
        return Environments([j for j in jobs if j.id not in bad], None, bad)

    monkeypatch.setattr(environments_cmd, "pinned_image", lambda ref: PinnedImage(IMAGE_ID, {}))
    monkeypatch.setattr(matrix_cmd, "pin_environments", pinned)
    monkeypatch.setattr(matrix_cmd, "backend_for", lambda home, flag=None, recorded=None: FakeBackend())
    return tmp_path


def test_one_line_for_the_task_and_its_jobs_end_error_the_rest_goes_on(project: Path) -> None:
    result = CliRunner().invoke(app, ["matrix", str(project / "jobs.toml"), "--home", str(project / "home")])
    assert result.output.count(f"{LINE}; its jobs are not run (the other tasks are)") == 1, result.output
    assert result.exit_code == 3, result.output  # infrastructure errors remained
    home = Home(project / "home")
    for job_id in ("bad.a.r1", "bad.b.r1"):
        record = read_record(home.job("unbuilt", job_id).record_path)
        assert (record.status, record.reason, record.failure_class and record.failure_class.value) == (
            Status.ERROR,
            LINE,
            "infrastructure",
        )
    results = json.loads((home.batch_dir("unbuilt") / "report" / "results.json").read_text())
    assert {j["id"]: j["status"] for j in results["jobs"]} == {
        "good.a.r1": "passed",
        "good.b.r1": "passed",
        "bad.a.r1": "error",
        "bad.b.r1": "error",
    }
    again = CliRunner().invoke(
        app, ["matrix", str(project / "jobs.toml"), "--home", str(project / "home"), "--dry-run"]
    )
    assert "2 kept, 2 to run" in again.output, again.output  # the next run builds it again
