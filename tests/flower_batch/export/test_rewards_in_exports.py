"""A graded job's reward in the exports (issue 35): the Inspect score's value is the reward (its
pass beside it), the cell's mean reward a metric; in ATIF, where Harbor keeps it (a trial's
`verifier_result.rewards`), with the Harbor task's facts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from flower_batch.export.atif import job_atif
from flower_batch.export.inspect_log import CellJob, eval_log
from tests.batch_fixtures.harbor_records import BATCH, harbor_home


def test_inspect_scores_are_the_rewards(tmp_path: Path) -> None:
    home, records = harbor_home(tmp_path)
    cells = {}
    for job_id, record in records.items():
        jd = home.job(BATCH, job_id)
        cells[record.spec.variant] = eval_log(
            BATCH, "regex-log", record.spec.variant, [CellJob(record, job_atif(jd, record))], 0
        )
    (sample,) = cells["a"]["samples"]
    score = sample["scores"]["flower_batch"]
    assert score["value"] == 0.75 and score["answer"] == "failed"
    assert score["metadata"]["passed"] is False and score["metadata"]["pass_reward"] == 1.0
    assert score["metadata"]["reward_detail"] == {"checks_passed": 3.0}
    assert sample["metadata"]["harbor"]["digest"].startswith("sha256:")
    metrics = cells["a"]["results"]["scores"][0]["metrics"]
    assert metrics["accuracy"]["value"] == 0.0 and metrics["mean"]["value"] == 0.75
    assert cells["b"]["reductions"][0]["samples"][0]["value"] == 1.0
    assert cells["b"]["samples"][0]["scores"]["flower_batch"]["value"] == 1.0


def test_atif_keeps_the_reward_where_harbor_does(tmp_path: Path) -> None:
    home, records = harbor_home(tmp_path)
    record = records["regex-log.a.r1"]
    trajectory = job_atif(home.job(BATCH, record.job_id), record)
    assert trajectory["extra"]["verifier_result"] == {"rewards": {"reward": 0.75, "checks_passed": 3.0}}
    assert trajectory["final_metrics"]["extra"]["reward"] == 0.75
    harbor = trajectory["extra"]["flower_batch"]["harbor"]
    assert harbor["metadata"]["difficulty"] == "medium" and harbor["network_as_run"] == "gateway"


def test_a_job_without_a_verifier_has_no_reward_in_its_exports(tmp_path: Path) -> None:
    home, records = harbor_home(tmp_path)
    record = records["regex-log.a.r1"]
    plain = replace(record, reward=None, spec=replace(record.spec, verifier=None, harbor=None))
    trajectory = job_atif(home.job(BATCH, plain.job_id), plain)
    assert (
        "verifier_result" not in trajectory["extra"] and "reward" not in trajectory["final_metrics"]["extra"]
    )
    log = eval_log(BATCH, "regex-log", "a", [CellJob(plain, trajectory)], 0)
    assert log["samples"][0]["scores"]["flower_batch"]["value"] == "I"
    assert "mean" not in log["results"]["scores"][0]["metrics"]


@pytest.mark.slow
def test_a_graded_trajectory_passes_harbor_s_own_validator(tmp_path: Path) -> None:
    from tests.flower_batch.export.harbor_check import validate

    home, records = harbor_home(tmp_path)
    record = records["regex-log.a.r1"]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(job_atif(home.job(BATCH, record.job_id), record)))
    assert validate([path]) == {str(path): []}


@pytest.mark.slow
def test_inspect_reads_a_graded_log_back_with_the_reward_as_the_score(tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log  # here: importing it costs a worker ~4 s of CPU

    home, records = harbor_home(tmp_path)
    record = records["regex-log.a.r1"]
    log = eval_log(
        BATCH, "regex-log", "a", [CellJob(record, job_atif(home.job(BATCH, record.job_id), record))], 0
    )
    path = tmp_path / "regex-log-a.json"
    path.write_text(json.dumps(log))
    read = read_eval_log(str(path))
    assert read.samples is not None and read.samples[0].scores is not None
    assert read.samples[0].scores["flower_batch"].value == 0.75
    assert read.results is not None and read.results.scores[0].metrics["mean"].value == 0.75
