"""A persistent job continued (`wake`): its record checked, its spec changed as asked (another
scenario, a new timeout, a new cap or +N, a larger disk), and the batch of one that continues it. Pure but for
reading the job's meter and its scenario copy; every refusal is one FlowerBatchError line."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from flower_batch.errors import FlowerBatchError
from flower_batch.gateway.host.sidecar import GatewaySettings
from flower_batch.gateway.metering import read_meter
from flower_batch.jobmodel import fields
from flower_batch.jobmodel.budget import Budget
from flower_batch.jobmodel.record import JobRecord
from flower_batch.layout import Home, JobDir
from flower_batch.running.jobs import job_scenario, option_value
from flower_batch.running.plan import BatchPlan


@dataclass(frozen=True)
class WakeAsked:
    """What `wake` was given beyond the job: each None keeps what the record says."""

    scenario: Path | None = None
    timeout: str | None = None
    budget_usd: str | None = None
    words: str | None = None
    disk: str | None = None


@dataclass(frozen=True)
class Wake:
    """The batch of one that continues the job, and its budget before and after (for people)."""

    plan: BatchPlan
    spent_usd: float
    cap_before: Budget
    cap: Budget

    @property
    def budget_line(self) -> str:
        return (
            f"budget: ${self.spent_usd:.4f} spent, cap {self.cap_before.describe()} -> {self.cap.describe()}"
        )


def plan_wake(home: Home, jd: JobDir, record: JobRecord, asked: WakeAsked, settings: GatewaySettings) -> Wake:
    """The wake of `record`'s job, checked in the order a person fixes things. Raises
    FlowerBatchError (BudgetError for a cap already spent)."""
    if not record.persistent:
        raise FlowerBatchError(
            f"job {jd.job} was not started with --persistent, so it has no conversation to continue"
        )
    spec = record.spec
    chosen = asked.scenario.resolve() if asked.scenario else job_scenario(jd)
    if spec.gateway.mode.rules.gateways_file and (chosen is None or not chosen.is_file()):
        raise FlowerBatchError(f"job {jd.job}: its scenario copy is missing; pass --scenario FILE")
    spec = replace(spec, gateway=replace(spec.gateway, scenario=chosen))
    if asked.timeout:
        timeout_s = option_value("--timeout", repr(asked.timeout), fields.duration(asked.timeout))
        spec = replace(spec, timeout_s=timeout_s)
    if asked.disk:  # a job that ended at its disk's limit continues on a larger one
        spec = replace(spec, disk=option_value("--disk", repr(asked.disk), fields.disk(asked.disk)))
    meter = read_meter(jd.logs)
    spent = meter.spent_usd if meter else 0.0
    given = asked.budget_usd
    change = None if given is None else option_value("--budget-usd", given, fields.budget_cap(given))
    before = Budget(spec.budget_usd)
    cap = before.for_wake(spent, change, job=jd.job, given=given or "")
    spec = replace(spec, budget_usd=cap.cap)
    plan = BatchPlan(
        home,
        jd.batch,
        ((spec, record),),
        record.image,
        settings=settings,
        wake=frozenset({spec.id}),
        wake_words={spec.id: asked.words} if asked.words else {},
        wake_waits_for_gateway=False,  # as fast to its first request as a cold run
    )
    return Wake(plan, spent, before, cap)
