"""Run many jobs at once: at most N containers, one gateway per distinct scenario, a record per job.

Every job's record is written when it is queued, when it starts and when it ends (atomically), so
killing the orchestrator at any moment loses no finished job, and the next `matrix` run knows
exactly which jobs are unfinished. A job that is re-run keeps its previous finished record until it
actually starts: killed before that, the batch still has its earlier verdict (and the next run's
plan decides again, from the same inputs, whether it must run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio

from flower.clock import now_iso
from flower_batch.backend.base import Backend
from flower_batch.errors import FlowerBatchError
from flower_batch.gateway.budget import batch_spent
from flower_batch.gateway.host.sidecar import GatewaySettings, GatewaySidecar
from flower_batch.gateway.host.supervisor import supervisors
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import JobRecord, new_record, read_record, write_record
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.layout import Home
from flower_batch.running.attempts import keep_previous_attempt
from flower_batch.running.lease import Lease
from flower_batch.running.liveness import NEVER_STARTED_REASON
from flower_batch.running.runner import JobContext, run_job

StateHook = Callable[[str, str], None]


# long: not split yet (issue 19 item 4): the lease, the gateways per key and each job's task share one exit stack
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
    settings: GatewaySettings | None = None,
) -> dict[str, JobRecord]:
    """Run `jobs` (each with its previous record, if any); returns the new records by job id.

    `budget_usd` is the batch's: its gateways refuse requests once the batch's metered spend
    reaches it (running jobs end `budget`), and jobs not started by then end `skipped`.
    `settings`: the host's environment and the gateways' limits, read where the process started.
    """
    settings = GatewaySettings() if settings is None else settings
    done: dict[str, JobRecord] = {}
    limiter = anyio.CapacityLimiter(max(1, parallel))
    with Lease(home.root) as lease:
        # Queued records name this lease: once it is gone, readers see them as never-started.
        for job, previous in jobs:
            jd = home.job(batch, job.id)
            jd.root.mkdir(parents=True, exist_ok=True)
            if previous is None or not previous.finished:
                write_record(jd.record_path, _queued(job, batch, image_id, versions, previous, lease.id))
            if on_state:
                on_state(job.id, "queued")
        started: set[str] = set()
        async with contextlib.AsyncExitStack() as stack:
            # However this ends (Ctrl-C included), a job that never began says so.
            stack.callback(_mark_never_started, home, batch, jobs, started, done, on_state)
            supervise = await stack.enter_async_context(supervisors())  # restarts a gateway that dies
            gateways: dict[tuple[str, str], GatewaySidecar] = {}
            gateway_lock = anyio.Lock()

            async def gateway_for(job: JobSpec) -> GatewaySidecar:
                key = (job.gateway.mode, str(job.gateway.scenario))
                async with gateway_lock:
                    if key not in gateways:
                        gw = GatewaySidecar(
                            backend,
                            batch=batch,
                            lease=lease.id,
                            suffix=f"-g{len(gateways)}",
                            image_id=image_id,
                            batch_dir=home.batch_dir(batch),
                            gateway=job.gateway,
                            batch_budget_usd=budget_usd,
                            settings=settings,
                        )
                        gateways[key] = await stack.enter_async_context(gw)
                        supervise(gw)
                    return gateways[key]

            async def one(job: JobSpec, previous: JobRecord | None) -> None:
                async with limiter:
                    started.add(job.id)
                    path = home.job(batch, job.id).record_path
                    queued = _queued(job, batch, image_id, versions, previous, lease.id)
                    if budget_usd is not None and batch_spent(home.batch_dir(batch)) >= budget_usd:
                        reason = f"not started: the batch budget (${budget_usd:.4f}) was spent"
                        keep_previous_attempt(home.job(batch, job.id), previous, queued.attempt)
                        done[job.id] = _finish(path, queued, job, Status.SKIPPED, reason, on_state)
                        return
                    try:
                        gw = await gateway_for(job)
                        ctx = JobContext(
                            backend=backend,
                            batch=batch,
                            lease=lease.id,
                            image_id=image_id,
                            gateway=gw,
                            versions=versions,
                            on_state=on_state,
                            search=list(search),
                            environ=settings.environ,
                        )
                        done[job.id] = await run_job(ctx, job, home.job(batch, job.id), previous=previous)
                    except FlowerBatchError as exc:
                        # One job's setup failed (its gateway did not start, its folder could not be
                        # made): that job ends `error` with the reason; the others go on.
                        reason = " ".join(str(exc).split()) or type(exc).__name__
                        # Its record replaces the previous attempt's: that one is kept first.
                        with contextlib.suppress(FlowerBatchError):
                            keep_previous_attempt(home.job(batch, job.id), previous, queued.attempt)
                        done[job.id] = _finish(path, queued, job, Status.ERROR, reason, on_state)

            async with anyio.create_task_group() as tg:
                for job, previous in jobs:
                    tg.start_soon(one, job, previous)
    return done


def _queued(
    job: JobSpec, batch: str, image_id: str, versions: dict[str, str], previous: JobRecord | None, lease: str
) -> JobRecord:
    attempt = previous.attempt + 1 if previous else 1
    return new_record(
        job,
        batch=batch,
        image_id=image_id,
        attempt=attempt,
        queued_at=now_iso(),
        versions=versions,
        session=lease,
    )


def _mark_never_started(
    home: Home,
    batch: str,
    jobs: Sequence[tuple[JobSpec, JobRecord | None]],
    started: set[str],
    done: dict[str, JobRecord],
    on_state: StateHook | None,
) -> None:
    """The orchestrator is stopping (Ctrl-C, an error): a job still queued never began. Its record
    says so (skipped, "never started: …"); a job that kept its earlier finished record keeps it."""
    for job, _previous in jobs:
        if job.id in started or job.id in done:
            continue
        path = home.job(batch, job.id).record_path
        try:
            record = read_record(path)
        except (OSError, FlowerBatchError):
            continue
        if record.status != "queued":
            continue
        reason = f"{NEVER_STARTED_REASON}: the orchestrator was stopped before the job's turn"
        outcome = JobOutcome(
            job_id=job.id, status=Status.SKIPPED, gateway_mode=job.gateway.mode, reason=reason
        )
        write_record(path, record.with_outcome(outcome, finished_at=now_iso()))
        if on_state:
            on_state(job.id, "never-started")


def _finish(
    path: Path, queued: JobRecord, job: JobSpec, status: Status, reason: str, on_state: StateHook | None
) -> JobRecord:
    """The record of a job that ended without running: skipped (no budget left) or error (its
    setup failed)."""
    outcome = JobOutcome(job_id=job.id, status=status, gateway_mode=job.gateway.mode, reason=reason)
    record = queued.with_outcome(outcome, finished_at=now_iso())
    path.parent.mkdir(parents=True, exist_ok=True)
    write_record(path, record)
    if on_state:
        on_state(job.id, status.value)
    return record
