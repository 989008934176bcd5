"""Run many jobs at once: at most N containers, one gateway per distinct scenario, a record per job.

Every job's record is written when it is queued, when it starts and when it ends (atomically), so
killing the orchestrator at any moment loses no finished job, and the next `matrix` run knows
exactly which jobs are unfinished.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio

from .backend import Backend
from .gateway.budget import batch_spent
from .gateway.sidecar import GatewaySidecar
from .layout import Home
from .matrix import JobOutcome, JobRecord, JobSpec, Status, new_record, read_record, write_record
from .runner import JobContext, now_iso, run_job
from .session import Session

StateHook = Callable[[str, str], None]


async def run_jobs(
    backend: Backend,
    home: Home,
    batch: str,
    jobs: Sequence[tuple[JobSpec, JobRecord | None]],
    *,
    image_id: str,
    versions: dict[str, str],
    parallel: int,
    on_state: StateHook | None = None,
    search: Sequence[Path] = (),
    budget_usd: float | None = None,
) -> dict[str, JobRecord]:
    """Run `jobs` (each with its previous record, if any); returns the new records by job id.

    `budget_usd` is the batch's: its gateways refuse requests once the batch's metered spend
    reaches it (running jobs end `budget`), and jobs not started by then end `skipped`.
    """
    for job, previous in jobs:
        jd = home.job(batch, job.id)
        jd.root.mkdir(parents=True, exist_ok=True)
        attempt = previous.attempt + 1 if previous else 1
        write_record(jd.record_path, new_record(job, batch=batch, image_id=image_id, attempt=attempt,
                                                queued_at=now_iso(), versions=versions))
        if on_state:
            on_state(job.id, "queued")
    done: dict[str, JobRecord] = {}
    limiter = anyio.CapacityLimiter(max(1, parallel))
    with Session(home.root) as session:
        async with contextlib.AsyncExitStack() as stack:
            gateways: dict[tuple[str, str], GatewaySidecar] = {}
            gateway_lock = anyio.Lock()

            async def gateway_for(job: JobSpec) -> GatewaySidecar:
                key = (job.gateway.mode, str(job.gateway.scenario))
                async with gateway_lock:
                    if key not in gateways:
                        gw = GatewaySidecar(
                            backend, batch=batch, session=session.id, suffix=f"-g{len(gateways)}", image_id=image_id,
                            batch_dir=home.batch_dir(batch), scenario=job.gateway.scenario, mode=job.gateway.mode,
                            batch_budget_usd=budget_usd,
                        )
                        gateways[key] = await stack.enter_async_context(gw)
                    return gateways[key]

            async def one(job: JobSpec, previous: JobRecord | None) -> None:
                async with limiter:
                    if budget_usd is not None and batch_spent(home.batch_dir(batch)) >= budget_usd:
                        done[job.id] = _skip(home.job(batch, job.id).record_path, job, budget_usd)
                        if on_state:
                            on_state(job.id, Status.SKIPPED.value)
                        return
                    gw = await gateway_for(job)
                    ctx = JobContext(backend=backend, batch=batch, session=session.id, image_id=image_id,
                                     gateway=gw, versions=versions, on_state=on_state, search=list(search))
                    done[job.id] = await run_job(ctx, job, home.job(batch, job.id), previous=previous)

            async with anyio.create_task_group() as tg:
                for job, previous in jobs:
                    tg.start_soon(one, job, previous)
    return done


def _skip(path: Path, job: JobSpec, budget_usd: float) -> JobRecord:
    """The record of a job the batch budget left no money for."""
    reason = f"not started: the batch budget (${budget_usd:.4f}) was spent"
    outcome = JobOutcome(job_id=job.id, status=Status.SKIPPED, gateway_mode=job.gateway.mode, reason=reason)
    record = read_record(path).with_outcome(outcome, finished_at=now_iso())
    write_record(path, record)
    return record
