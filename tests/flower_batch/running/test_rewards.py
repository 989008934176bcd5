"""A verifier's reward read as hostile input, the verdict it gives at a threshold, and the oracle's
choice of jobs and its list of failures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flower_batch.errors import RewardUnreadable
from flower_batch.jobmodel.classes import FailureClass
from flower_batch.jobmodel.grading import Reward, Verifier
from flower_batch.jobmodel.harbor_task import HarborTask
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.running.causes import Verdict
from flower_batch.running.grading_verdict import graded_after_agent_failure, graded_verdict
from flower_batch.running.oracle import oracle_failures, oracle_jobs, oracle_scenario
from flower_batch.running.rewards import REWARD_LIMIT, read_reward
from flower_batch.running.verifier import Graded


@pytest.mark.parametrize(
    ("name", "body", "value", "detail"),
    [
        ("reward.txt", "0.75\n", 0.75, {}),
        ("reward.txt", " -2 ", -2.0, {}),
        ("reward.txt", "1e-3", 0.001, {}),
        ("reward.json", '{"reward": 0.5, "tests_passed": 3, "note": "kept out", "ok": true}', 0.5, {"tests_passed": 3.0}),
    ],
)  # fmt: skip
def test_a_number_is_taken(
    tmp_path: Path, name: str, body: str, value: float, detail: dict[str, float]
) -> None:
    (tmp_path / name).write_text(body)
    assert read_reward(tmp_path) == Reward(value, detail)


@pytest.mark.parametrize(
    ("name", "body", "says"),
    [
        ("reward.txt", "passed", "holds 'passed', not a number"),
        ("reward.txt", "nan", "not a number"),
        ("reward.txt", "inf", "not a number"),
        ("reward.txt", "1e999", "not a finite number"),
        ("reward.txt", "1_0", "not a number"),
        ("reward.txt", "", "not a number"),
        ("reward.txt", "1" * (10 << 20), "over the 4096"),
        ("reward.json", '{"reward": NaN}', "not JSON of finite numbers"),
        ("reward.json", '{"reward": 1, "x": Infinity}', "not JSON of finite numbers"),
        ("reward.json", '{"reward": 1, "x": 1e999}', "not a finite number"),
        ("reward.json", '{"score": 1}', 'no number "reward"'),
        ("reward.json", '{"reward": true}', 'no number "reward"'),
        ("reward.json", "[1]", 'no number "reward"'),
    ],
)
def test_anything_else_is_one_line(tmp_path: Path, name: str, body: str, says: str) -> None:
    (tmp_path / name).write_text(body)
    with pytest.raises(RewardUnreadable, match=None) as caught:
        read_reward(tmp_path)
    assert says in str(caught.value) and "\n" not in str(caught.value), caught.value


def test_no_reward_a_symlink_and_a_fifo_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RewardUnreadable, match="wrote no reward"):
        read_reward(tmp_path)
    (tmp_path / "secret").write_text("1")
    (tmp_path / "reward.txt").symlink_to(tmp_path / "secret")
    with pytest.raises(RewardUnreadable, match="is not read"):
        read_reward(tmp_path)
    (tmp_path / "reward.txt").unlink()
    os.mkfifo(tmp_path / "reward.txt")  # would hang a plain read
    with pytest.raises(RewardUnreadable, match="is not read"):
        read_reward(tmp_path)
    assert REWARD_LIMIT == 4096


def test_the_text_file_wins_over_the_json_as_harbor_reads_them(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text("0.25")
    (tmp_path / "reward.json").write_text('{"reward": 1}')
    assert read_reward(tmp_path).value == 0.25


def test_the_status_follows_the_threshold() -> None:
    half = Graded(reward=Reward(0.5))
    assert graded_verdict(half, None).status is Status.FAILED  # the default threshold is 1.0
    assert "below the 1 a pass needs" in (graded_verdict(half, None).reason or "")
    assert graded_verdict(half, 0.5).status is Status.PASSED
    assert graded_verdict(Graded(reward=Reward(-1)), -1).status is Status.PASSED
    broken = graded_verdict(Graded(error="/logs/verifier/reward.txt holds 'x', not a number"), 0.5)
    assert broken.status is Status.ERROR and broken.reason and "holds 'x'" in broken.reason


def test_an_agent_that_did_not_finish_passes_only_at_the_threshold() -> None:
    timed_out = Verdict(Status.TIMEOUT, "timed out after 15s", FailureClass.TIMEOUT)
    solved = graded_after_agent_failure(timed_out, Graded(reward=Reward(1.0)), None)
    assert solved.status is Status.PASSED and solved.failure_class is FailureClass.PASSED
    assert solved.reason == "reward 1 (a pass needs 1), though the agent did not finish: timed out after 15s"
    short = graded_after_agent_failure(timed_out, Graded(reward=Reward(0.5)), None)
    assert (short.status, short.failure_class) == (Status.TIMEOUT, FailureClass.TIMEOUT)
    assert short.reason == "timed out after 15s; graded all the same: reward 0.5, below the 1 a pass needs"
    failed = Verdict(Status.FAILED, "step solve failed", FailureClass.AGENT)
    broken = graded_after_agent_failure(failed, Graded(error="reward.txt holds 'x'"), 0.5)
    assert broken == Verdict(
        Status.FAILED, "step solve failed; graded all the same: reward.txt holds 'x'", FailureClass.AGENT
    )


def _spec(task: str, folder: Path, *, solved: bool, variant: str = "a", verifier: bool = True) -> JobSpec:
    return JobSpec(
        id=f"{task}-{variant}",
        task=task,
        variant=variant,
        repeat=1,
        matrix={},
        prompt="do it",
        workflow="flows:w",
        persistent=True,
        check="true",
        verifier=Verifier(folder / "tests", "sha256:t") if verifier else None,
        harbor=HarborTask(folder=folder, digest="sha256:d", name=task, has_solution=solved),
    )


def test_the_oracle_runs_one_job_per_task_with_a_solution(tmp_path: Path) -> None:
    specs = [
        _spec("good", tmp_path, solved=True),
        _spec("good", tmp_path, solved=True, variant="b"),
        _spec("nosol", tmp_path, solved=False),
        _spec("plain", tmp_path, solved=True, verifier=False),  # no hidden tests: nothing to check
    ]
    found = oracle_jobs(specs, oracle_scenario(tmp_path / "cache"))
    assert [j.id for j in found.jobs] == ["good"] and found.unsolvable == ("nosol",)
    (job,) = found.jobs
    assert job.workflow is None and job.check is None and not job.persistent and job.threshold == 1.0
    assert job.gateway.mode.value == "scripted" and job.secrets == ()  # no model, no key


def test_the_oracle_lists_each_task_not_solved(tmp_path: Path) -> None:
    spec = _spec("t", tmp_path, solved=True)

    def record(job: str, status: Status, reward: float | None, reason: str) -> JobRecord:
        return JobRecord(
            job_id=job, batch="b-oracle", inputs_hash="h", image_id="i", status=status, spec=spec,
            reason=reason, reward=None if reward is None else Reward(reward),
        )  # fmt: skip

    records = [
        record("solved", Status.PASSED, 1.0, "reward 1 (a pass needs 1)"),
        record("half", Status.FAILED, 0.5, "reward 0.5, below the 1 a pass needs"),
        record("broke", Status.FAILED, None, "the workflow exited 2"),
    ]
    assert oracle_failures(records) == [
        "half: reward 0.5, below the 1 a pass needs",
        "broke: failed: the workflow exited 2",
    ]
