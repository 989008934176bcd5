"""Finished records of Harbor jobs with rewards, for the tests of what shows them (show, the
exports, the viewer, the comparison): tests/batch_fixtures/harbor_tasks' regex-log in two
variants, graded 0.75 (failed: the pass is at 1.0) and 1.0 (passed)."""

from __future__ import annotations

import shutil
from pathlib import Path

from flower_batch.jobmodel.grading import Reward
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import JobRecord, new_record, write_record
from flower_batch.jobmodel.status import Status
from flower_batch.jobsfile import load_jobs_file
from flower_batch.layout import Home

FIXTURES = Path(__file__).resolve().parent / "harbor_tasks"
IMAGE_ID = "sha256:" + "d" * 64
BATCH = "tb"
JOBS = """
[batch]
name = "tb"

[tasksets.tb]
harbor = "tasks/regex-log"

[matrix]
variant = ["a", "b"]
"""
REWARDS = {"a": 0.75, "b": 1.0}


def harbor_home(root: Path) -> tuple[Home, dict[str, JobRecord]]:
    """A home under `root` holding batch "tb": its jobs file beside it, each job finished."""
    shutil.copytree(FIXTURES / "regex-log", root / "tasks" / "regex-log")
    (root / "jobs.toml").write_text(JOBS)
    home = Home(root / "home")
    records = {}
    for job in load_jobs_file(root / "jobs.toml").jobs:
        value = REWARDS[job.variant]
        status = Status.PASSED if value >= 1.0 else Status.FAILED
        outcome = JobOutcome(
            job.id,
            status,
            workflow_ok=True,
            cost_usd=0.01,
            num_turns=3,
            duration_s=5.0,
            gateway_mode="scripted",
            reason=None if status is Status.PASSED else "reward 0.75 below 1.0",
            reward=Reward(value, {"checks_passed": 4.0 * value}),
        )
        record = new_record(job, batch=BATCH, image_id=IMAGE_ID).with_outcome(
            outcome, finished_at="2026-12-05T03:30:00+00:00"
        )
        write_record(home.job(BATCH, job.id).record_path, record)
        records[job.id] = record
    return home, records
