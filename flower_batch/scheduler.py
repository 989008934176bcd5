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

from .attempts import keep_previous_attempt
from .backend import Backend
from .errors import FlowerBatchError
from .gateway.budget import batch_spent
from .gateway.sidecar import GatewaySidecar
from .layout import Home
from .matrix import JobOutcome, JobRecord, JobSpec, Status, new_record, write_record
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
        if previous is None or not previous.finished:
            write_record(jd.record_path, _queued(job, batch, image_id, versions, previous))
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
                    path = home.job(batch, job.id).record_path
                    queued = _queued(job, batch, image_id, versions, previous)
                    if budget_usd is not None and batch_spent(home.batch_dir(batch)) >= budget_usd:
                        reason = f"not started: the batch budget (${budget_usd:.4f}) was spent"
                        keep_previous_attempt(home.job(batch, job.id), previous, queued.attempt)
                        done[job.id] = _finish(path, queued, job, Status.SKIPPED, reason, on_state)
                        return
                    try:
                        gw = await gateway_for(job)
                        ctx = JobContext(backend=backend, batch=batch, session=session.id, image_id=image_id,
                                         gateway=gw, versions=versions, on_state=on_state, search=list(search))
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


def _queued(job: JobSpec, batch: str, image_id: str, versions: dict[str, str], previous: JobRecord | None) -> JobRecord:
    attempt = previous.attempt + 1 if previous else 1
    return new_record(job, batch=batch, image_id=image_id, attempt=attempt, queued_at=now_iso(), versions=versions)


def _finish(path: Path, queued: JobRecord, job: JobSpec, status: Status, reason: str,
            on_state: StateHook | None) -> JobRecord:
    """The record of a job that ended without running: skipped (no budget left) or error (its
    setup failed)."""
    outcome = JobOutcome(job_id=job.id, status=status, gateway_mode=job.gateway.mode, reason=reason)
    record = queued.with_outcome(outcome, finished_at=now_iso())
    path.parent.mkdir(parents=True, exist_ok=True)
    write_record(path, record)
    if on_state:
        on_state(job.id, status.value)
    return record
