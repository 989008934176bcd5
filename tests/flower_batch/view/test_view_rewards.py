"""The viewer and a graded job (issue 35): the job list carries each job's reward (none for a
job without a verifier), and the page shows it beside the status and in the job's details with
its Harbor task (folder, digest, metadata, network asked and run)."""

from __future__ import annotations

from pathlib import Path

from flower_batch.view.index import RecordIndex
from flower_batch.view.page import APP_JS
from tests.batch_fixtures.harbor_records import BATCH, harbor_home


def test_the_job_list_carries_each_reward(tmp_path: Path) -> None:
    home, _ = harbor_home(tmp_path)
    rows, _ = RecordIndex(home.root).rows(BATCH)
    rewards = {row["id"]: row["reward"] for row in rows}
    assert rewards == {
        "regex-log.a.r1": {"value": 0.75, "detail": {"checks_passed": 3.0}},
        "regex-log.b.r1": {"value": 1.0, "detail": {"checks_passed": 4.0}},
    }


def test_the_page_shows_the_reward_and_the_harbor_task_only_when_there_is_one() -> None:
    assert "rewardNote(j.reward)" in APP_JS and "if (!reward || typeof reward.value !== 'number')" in APP_JS
    assert "concat(harborRows(r, spec))" in APP_JS
    assert "'asks ' + h.network_policy + ', ran '" in APP_JS
