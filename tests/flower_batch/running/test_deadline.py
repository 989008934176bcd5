"""What a job's flower is told of its limits and how long the runner waits (running/deadline.py),
and how flower's own graceful end at the deadline becomes the job's `timeout`."""

from __future__ import annotations

from dataclasses import replace

from flower import exitinfo
from flower.result import StepResult
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.running.deadline import MARGIN_S, hard_timeout_s, limits_env, wrap_up_s

JOB = JobSpec(id="j1", task="t", variant="v", repeat=1, matrix={}, prompt="p", timeout_s=600.0)


def test_flower_is_told_the_deadline_the_allowance_and_the_wrap_up() -> None:
    env = limits_env(JOB, now=1000.0, spent_usd=None)
    assert env == {"FLOWER_DEADLINE": "1600.000", "FLOWER_TIME_LIMIT": "600", "FLOWER_WRAP_UP": "60"}


def test_a_budget_and_the_metered_spend_are_passed_on() -> None:
    env = limits_env(replace(JOB, budget_usd=0.5), now=0.0, spent_usd=0.123456789)
    assert env["FLOWER_BUDGET_USD"] == "0.5" and env["FLOWER_SPENT_USD"] == "0.123457"


def test_the_runner_waits_past_the_deadline_by_the_wrap_up_and_a_margin() -> None:
    assert hard_timeout_s(JOB) == 600 + 60 + MARGIN_S
    short = replace(JOB, env={"FLOWER_WRAP_UP": "15"})
    assert wrap_up_s(short) == 15 and hard_timeout_s(short) == 600 + 15 + MARGIN_S
    assert limits_env(short, now=0.0, spent_usd=0.0)["FLOWER_WRAP_UP"] == "15"
    for bad in ("soon", "-3"):  # the default for both: the runner and flower agree
        odd = replace(JOB, env={"FLOWER_WRAP_UP": bad})
        assert wrap_up_s(odd) == 60 and limits_env(odd, now=0.0, spent_usd=0.0)["FLOWER_WRAP_UP"] == "60"


def test_a_step_ended_by_the_deadline_is_exit_class_timeout() -> None:
    result = StepResult(step="do", ok=False, error="timeout: the deadline passed; notes in /w/收尾-do.md")
    got = exitinfo.step_failure({"_failed_at": "do", "_results": {"do": result}})
    assert got == ("timeout", "step do: timeout: the deadline passed; notes in /w/收尾-do.md", "do")
