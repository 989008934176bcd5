"""Rewards are first-class (issue 35): where a verifier graded jobs, the mean reward stands
beside the pass rate in the table, the summary line, results.json, JUnit and report.html, with
the Harbor task's metadata, digest and network; a batch with no verifier shows no reward at all."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from flower_batch.jobmodel.grading import Reward
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.status import Status
from flower_batch.jobsfile import parse_jobs_text
from flower_batch.reports import BatchResults, comparison_table, html_report, junit_xml, summary_line

FIXTURES = Path(__file__).resolve().parents[2] / "batch_fixtures" / "harbor_tasks"
TEXT = """
[tasksets.tb]
harbor = "tasks"
include = ["regex-log", "install-*"]

[matrix]
variant = ["a", "b"]
"""
REWARDS = {"regex-log.a.r1": 0.75, "regex-log.b.r1": 1.0, "install-local-package.a.r1": 1.0}


@pytest.fixture
def graded(tmp_path: Path) -> BatchResults:
    shutil.copytree(FIXTURES, tmp_path / "tasks")
    jf = parse_jobs_text(TEXT, path=tmp_path / "jobs.toml")
    outcomes = {}
    for job in jf.jobs:
        value = REWARDS.get(job.id)
        status = Status.PASSED if value == 1.0 else Status.FAILED
        reward = Reward(value, {"checks_passed": 3.0}) if value is not None else None
        outcomes[job.id] = JobOutcome(
            job.id, status, duration_s=2.0, cost_usd=0.01, num_turns=3, reward=reward
        )
    return BatchResults(batch="tb", jobs=jf.jobs, outcomes=outcomes, descriptions=jf.descriptions)


def _table_text(results: BatchResults) -> str:
    console = Console(width=200, record=True)
    console.print(comparison_table(results))
    return console.export_text()


def test_the_table_and_the_summary_line_show_the_mean_reward(graded: BatchResults) -> None:
    text = _table_text(graded)
    assert "mean reward (verifier)" in text
    assert "reward 0.75" in text and "reward 1.00" in text
    assert "reward 1.00 (1/2 graded)" in text  # install-local-package: b wrote no reward
    assert "mean reward 0.92 (3/4 graded)" in summary_line(graded)


def test_results_json_keeps_each_reward_the_mean_and_the_harbor_task(graded: BatchResults) -> None:
    document = json.loads(json.dumps(graded.to_document()))
    assert document["summary"]["mean_reward"] == pytest.approx(2.75 / 3)
    assert document["summary"]["rewarded"] == 3
    job = next(j for j in document["jobs"] if j["id"] == "regex-log.a.r1")
    assert job["reward"] == 0.75
    assert job["outcome"]["reward"] == {"value": 0.75, "detail": {"checks_passed": 3.0}}
    harbor = job["harbor"]
    assert harbor["metadata"]["difficulty"] == "medium" and harbor["digest"].startswith("sha256:")
    assert (harbor["network_policy"], harbor["network_as_run"], harbor["pass_reward"]) == (
        "no-network",
        "gateway",
        1.0,
    )
    apt = next(j for j in document["jobs"] if j["id"] == "install-local-package.a.r1")
    assert (apt["harbor"]["network_policy"], apt["harbor"]["network_as_run"]) == ("public", "internet")


def test_junit_and_the_html_report_show_rewards_and_the_task(graded: BatchResults) -> None:
    junit = junit_xml(graded)
    assert 'name="mean_reward" value="0.88"' in junit  # regex-log's suite: (0.75 + 1.0) / 2
    assert "reward: 0.75 (passes at 1.00)" in junit
    html = html_report(graded)
    assert '<span class="badge reward" title="the verifier\'s reward">reward 0.75</span>' in html
    assert "difficulty medium · category data-processing · tags regex, logs" in html
    assert "network: asks public, ran internet" in html
    assert "the mean reward its verifier gave" in html


def test_a_batch_without_a_verifier_shows_no_reward(graded: BatchResults) -> None:
    plain = BatchResults(
        batch="plain",
        jobs=[replace(j, verifier=None, harbor=None) for j in graded.jobs],
        outcomes={k: replace(o, reward=None) for k, o in graded.outcomes.items()},
    )
    assert "reward" not in _table_text(plain)
    assert "reward" not in summary_line(plain)
    assert "reward" not in json.dumps(plain.to_document())
    assert "reward" not in junit_xml(plain)
    assert "the mean reward" not in html_report(plain) and 'class="badge reward"' not in html_report(plain)
