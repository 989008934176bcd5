"""A batch's run (what `matrix` does once its plan is made): remove what a killed earlier run
left, then run the plan's jobs with a parallelism cap and re-run infrastructure failures.
Progress is reported through a callback of events; the command only prints them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from flower_batch.backend.base import Backend
from flower_batch.errors import FlowerBatchError, ImageMissing
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import State, still_going
from flower_batch.layout import Home
from flower_batch.running.infra_retry import run_with_infra_retries
from flower_batch.running.lease import find_leaks, remove_leaks
from flower_batch.running.plan import BatchPlan
from flower_batch.running.scheduler import run_jobs


@dataclass(frozen=True)
class JobState:
    """A job changed state; `cost_usd`: what its record says it spent, once it ended."""

    job_id: str
    state: State
    cost_usd: float | None = None


@dataclass(frozen=True)
class InfraRetry:
    """Infrastructure errors: these jobs run again (retry `n` of the plan's `infra_retries`)."""

    n: int
    job_ids: list[str]


BatchEvent = JobState | InfraRetry


async def reap_batch(engine: Backend, home: Home, batch: str) -> int:
    """Remove the containers, networks and gateways a killed earlier run of `batch` left (they may
    still be writing into the job folders this run is about to reset). Returns how many."""
    async with engine as backend:
        leaks, _ = await find_leaks(backend, home.root, batch=batch)
        await remove_leaks(backend, home.root, leaks)
        return len(leaks)


async def run_batch(
    engine: Backend, plan: BatchPlan, on_event: Callable[[BatchEvent], None]
) -> dict[str, JobRecord]:
    """Run the plan's jobs on `engine` (opened and closed here); every state change and retry is an
    event. Returns the last records."""
    async with engine as backend:
        return await run_plan(backend, plan, on_event)


async def run_plan(
    backend: Backend, plan: BatchPlan, on_event: Callable[[BatchEvent], None]
) -> dict[str, JobRecord]:
    """The one path that runs jobs, on an open backend: rounds of `run_jobs`, the infrastructure
    failures of one round run again in the next (plan.infra_retries)."""

    def on_state(job_id: str, state: State) -> None:
        cost = None
        if not still_going(state):
            try:
                cost = plan.home.job(plan.batch, job_id).record().cost_usd
            except (OSError, FlowerBatchError):
                pass
        on_event(JobState(job_id, state, cost))

    async def one_round(jobs: Sequence[tuple[JobSpec, JobRecord | None]]) -> dict[str, JobRecord]:
        return await run_jobs(backend, replace(plan, jobs=jobs), on_state)

    return await run_with_infra_retries(
        one_round,
        plan.jobs,
        retries=plan.infra_retries,
        on_retry=lambda n, ids: on_event(InfraRetry(n, ids)),
    )


async def run_one(backend: Backend, plan: BatchPlan, on_state: Callable[[str, State], None]) -> JobRecord:
    """A batch of one (`run`, `wake`, `repro`) on an open backend: the path of `matrix`, with its
    image checked first (one line if it is not in the engine, before any folder or gateway)."""
    ((job, _previous),) = plan.jobs
    try:
        await backend.image_info(plan.image.id)
    except ImageMissing as exc:
        raise FlowerBatchError(f"image {plan.image.short} is not in the Docker engine: {exc}") from exc

    def on_event(event: BatchEvent) -> None:
        if isinstance(event, JobState):
            on_state(event.job_id, event.state)

    return (await run_plan(backend, plan, on_event))[job.id]
