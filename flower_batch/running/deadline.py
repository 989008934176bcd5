"""What a job's flower is told of its limits, and how long the orchestrator waits for it.

flower ends a job gracefully at its timeout (flower.runtime.limits): at the deadline it
interrupts the turn and gives the agent a wrap-up window to write its notes, then exits with
the step recorded `timeout`. So the orchestrator tells flower the deadline (`timeout` from
now), the budget (`budget_usd`) and what the gateway has metered for the job so far (a wake
goes on from it), and waits past the deadline by the wrap-up window and a margin before its
own SIGTERM, grace period and kill.

The wrap-up window is the job's `FLOWER_WRAP_UP` (its `env`), else flower's default.
"""

from __future__ import annotations

from flower.runtime.limit_env import (
    BUDGET_USD_ENV,
    DEADLINE_ENV,
    SPENT_USD_ENV,
    TIME_LIMIT_ENV,
    WRAP_UP_ENV,
)
from flower.runtime.limits import DEFAULT_WRAP_UP_S
from flower_batch.jobmodel.spec import JobSpec

# flower's work after the wrap-up window: stopping a turn that will not stop (its HARD_STOP_S,
# 10 s), saving the notes and the manifest, exiting.
MARGIN_S = 20.0


def wrap_up_s(job: JobSpec) -> float:
    """The job's wrap-up window; a value that is not seconds >= 0 counts as the default (and
    flower is given the default too, so the two agree)."""
    raw = job.env.get(WRAP_UP_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_WRAP_UP_S
    except ValueError:
        return DEFAULT_WRAP_UP_S
    return value if value >= 0 else DEFAULT_WRAP_UP_S


def hard_timeout_s(job: JobSpec) -> float:
    """How long the container may run before the orchestrator's SIGTERM."""
    return job.timeout_s + wrap_up_s(job) + MARGIN_S


def limits_env(job: JobSpec, *, now: float, spent_usd: float | None) -> dict[str, str]:
    """The variables flower reads its limits from (their names: flower.runtime.limit_env)."""
    env = {
        DEADLINE_ENV: f"{now + job.timeout_s:.3f}",
        TIME_LIMIT_ENV: f"{job.timeout_s:g}",
        WRAP_UP_ENV: f"{wrap_up_s(job):g}",
    }
    if job.budget_usd is not None:
        env[BUDGET_USD_ENV] = f"{job.budget_usd:g}"
    if spent_usd:
        env[SPENT_USD_ENV] = f"{spent_usd:.6f}"
    return env
