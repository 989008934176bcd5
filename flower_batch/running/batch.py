"""A batch's run (what `matrix` does once its plan is made): remove what a killed earlier run
left, then run the plan's jobs with a parallelism cap and re-run infrastructure failures.
Progress is reported through a callback of events; the command only prints them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flower_batch.backend.base import Backend
from flower_batch.errors import FlowerBatchError
from flower_batch.gateway.host.sidecar import GatewaySettings
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import State, still_going
from flower_batch.layout import Home
from flower_batch.running.infra_retry import run_with_infra_retries
from flower_batch.running.lease import find_leaks, remove_leaks
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


@dataclass(frozen=True)
class BatchPlan:
    """What to run: the jobs (each with its previous record), on which image, how."""

    home: Home
    batch: str
    jobs: Sequence[tuple[JobSpec, JobRecord | None]]
    image_id: str
    versions: dict[str, str]
    parallel: int
    infra_retries: int
    search: Sequence[Path] = ()
    budget_usd: float | None = None
    settings: GatewaySettings = field(default_factory=GatewaySettings)
    wake: frozenset[str] = frozenset()  # paused jobs continued in their sessions (resume.py)


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
    """Run the plan's jobs; every state change and retry is an event. Returns the last records."""

    def on_state(job_id: str, state: State) -> None:
        cost = None
        if not still_going(state):
            try:
                cost = plan.home.job(plan.batch, job_id).record().cost_usd
            except (OSError, FlowerBatchError):
                pass
        on_event(JobState(job_id, state, cost))

    async with engine as backend:

        async def one_round(jobs: Sequence[tuple[JobSpec, JobRecord | None]]) -> dict[str, JobRecord]:
            return await run_jobs(
                backend,
                plan.home,
                plan.batch,
                jobs,
                image_id=plan.image_id,
                versions=plan.versions,
                parallel=plan.parallel,
                on_state=on_state,
                search=plan.search,
                budget_usd=plan.budget_usd,
                settings=plan.settings,
                wake=plan.wake,
            )

        return await run_with_infra_retries(
            one_round,
            plan.jobs,
            retries=plan.infra_retries,
            on_retry=lambda n, ids: on_event(InfraRetry(n, ids)),
        )
