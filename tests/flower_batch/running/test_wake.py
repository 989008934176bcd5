"""`wake`'s plan (running/wake.py): the record's checks in the order a person fixes them, the
spec changed as asked, and the batch of one that continues the job. No Docker."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from flower_batch.errors import BudgetError, FlowerBatchError
from flower_batch.gateway.host.sidecar import GatewaySettings
from flower_batch.gateway.metering import JobMeter
from flower_batch.jobmodel.budget import Budget
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import new_record
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.layout import Home
from flower_batch.running.wake import WakeAsked, plan_wake


def _paused(
    tmp_path: Path, *, persistent: bool = True, budget: float | None = 0.001, spend_tokens: int = 400
):
    home = Home(tmp_path / "home")
    jd = home.job("b", "j")
    jd.root.mkdir(parents=True)
    scenario = jd.root / "scenario.toml"
    scenario.write_text('[[rules]]\nreply = "hi"\n')
    spec = JobSpec(
        id="j", task="t", variant="v", repeat=1, matrix={}, prompt="p", persistent=persistent,
        budget_usd=budget, gateway=GatewaySpec(mode="scripted", scenario=tmp_path / "gone.toml"),
    )  # fmt: skip
    outcome = JobOutcome(job_id="j", status=Status.PAUSED, gateway_mode="scripted")
    record = new_record(spec, batch="b", image_id="sha256:img").with_outcome(outcome)
    meter = JobMeter(jd.logs, "j", "anthropic")
    meter.update(meter.new_exchange(), "claude-sonnet-4-5", {"input_tokens": spend_tokens}, final=True)
    return home, jd, record


def test_a_wake_with_more_budget_continues_the_same_job_on_its_scenario_copy(tmp_path: Path) -> None:
    home, jd, record = _paused(tmp_path)
    wake = plan_wake(home, jd, record, WakeAsked(budget_usd="+0.01", words="go on"), GatewaySettings())
    ((spec, previous),) = wake.plan.jobs
    assert previous is record and wake.plan.wake == {"j"} and wake.plan.wake_words == {"j": "go on"}
    assert not wake.plan.wake_waits_for_gateway  # `wake` starts beside its gateway, as a cold run
    assert spec.gateway.scenario == jd.root / "scenario.toml"  # the job's copy, not the gone source
    assert wake.cap == Budget(0.011) and spec.budget_usd == pytest.approx(0.011)
    assert wake.budget_line == "budget: $0.0012 spent, cap $0.0010 -> $0.0110"
    assert (wake.plan.image, wake.plan.batch) == (record.image, "b") and record.image.id == "sha256:img"


def test_a_new_timeout_is_checked_by_the_fields_validator(tmp_path: Path) -> None:
    home, jd, record = _paused(tmp_path)
    asked = WakeAsked(budget_usd="1", timeout="90s")
    assert plan_wake(home, jd, record, asked, GatewaySettings()).plan.jobs[0][0].timeout_s == 90
    with pytest.raises(FlowerBatchError, match="--timeout 'soon'"):
        plan_wake(home, jd, record, replace(asked, timeout="soon"), GatewaySettings())


def test_each_refusal_is_one_line_in_the_order_a_person_fixes_it(tmp_path: Path) -> None:
    home, jd, record = _paused(tmp_path, persistent=False)
    with pytest.raises(FlowerBatchError, match="was not started with --persistent"):
        plan_wake(home, jd, record, WakeAsked(), GatewaySettings())
    home, jd, record = _paused(tmp_path / "2")
    (jd.root / "scenario.toml").unlink()
    with pytest.raises(FlowerBatchError, match="its scenario copy is missing; pass --scenario FILE"):
        plan_wake(home, jd, record, WakeAsked(budget_usd="1"), GatewaySettings())
    home, jd, record = _paused(tmp_path / "3")
    with pytest.raises(BudgetError, match=r"job j is at its budget \(spent \$0.0012 of \$0.0010\)"):
        plan_wake(home, jd, record, WakeAsked(), GatewaySettings())
    with pytest.raises(BudgetError, match=r"--budget-usd 0.001: job j has spent \$0.0012 already"):
        plan_wake(home, jd, record, WakeAsked(budget_usd="0.001"), GatewaySettings())


def test_a_larger_disk_is_checked_by_the_fields_validator(tmp_path: Path) -> None:
    home, jd, record = _paused(tmp_path)
    asked = WakeAsked(budget_usd="1", disk="20g")
    assert plan_wake(home, jd, record, asked, GatewaySettings()).plan.jobs[0][0].disk_bytes == 20 * 1024**3
    assert (
        plan_wake(home, jd, record, replace(asked, disk=None), GatewaySettings()).plan.jobs[0][0].disk is None
    )
    with pytest.raises(FlowerBatchError, match="--disk 'lots'"):
        plan_wake(home, jd, record, replace(asked, disk="lots"), GatewaySettings())
    with pytest.raises(FlowerBatchError, match="at least"):
        plan_wake(home, jd, record, replace(asked, disk="1m"), GatewaySettings())
