"""Run many jobs at once: at most N containers, one gateway per distinct scenario, a record per job.

Every job's record is written when it is queued, when it starts and when it ends (atomically), so
killing the orchestrator at any moment loses no finished job, and the next `matrix` run knows
exactly which jobs are unfinished. A job that is re-run keeps its previous finished record until it
actually starts: killed before that, the batch still has its earlier verdict (and the next run's
plan decides again, from the same inputs, whether it must run).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from flower.clock import now_iso
from flower_batch.backend.base import Backend
from flower_batch.errors import FlowerBatchError, home_full, no_space
from flower_batch.gateway.budget import batch_spent
from flower_batch.gateway.host.sidecar import GatewaySidecar, gateway_name
from flower_batch.gateway.host.supervisor import supervisors
from flower_batch.gateway.metering import read_meter
from flower_batch.jobmodel.budget import Budget
from flower_batch.jobmodel.classes import FailureClass
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import JobRecord, new_record, read_record, write_record
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Phase, State, Status
from flower_batch.labels import labels
from flower_batch.layout import JobDir
from flower_batch.running.attempts import keep_previous_attempt
from flower_batch.running.disk_ops import AS_ROOT, DiskOps, choose_disk_ops
from flower_batch.running.home_space import reserve_bytes, under_reserve
from flower_batch.running.job_disk import disk_problem
from flower_batch.running.jobs import starts_beside
from flower_batch.running.lease import Lease
from flower_batch.running.liveness import NEVER_STARTED_REASON
from flower_batch.running.plan import BatchPlan
from flower_batch.running.runner import JobContext, run_job
from flower_batch.workspace_scan import mark_home

StateHook = Callable[[str, State], None]


async def run_jobs(
    backend: Backend, plan: BatchPlan, on_state: StateHook | None = None
) -> dict[str, JobRecord]:
    """Run the plan's jobs (each with its previous record, if any); returns the new records by job id.

    The one path of every command that runs jobs: `matrix`, and `run`, `wake` and `repro` (a
    batch of one). The plan's `budget_usd` is the batch's: its gateways refuse requests once the
    batch's metered spend reaches it (running jobs end `budget`, persistent ones `paused`), and
    jobs not started by then end `skipped`. `wake`: the jobs to continue in their sessions
    (resume.py, or `wake`); one whose cap is still reached stays paused, its record untouched.

    In phases, under the orchestrator's lease: every job's record says 'queued'
    (`BatchRun.queue`); then, in one exit stack that stops the gateways and marks the jobs that
    never began, each job runs as its own task (`BatchRun.one`) on its gateway (`_Gateways`).
    """
    mark_home(plan.home.root)  # a workspace that holds this home leaves it out, wherever it is scanned
    with Lease(plan.home.root) as lease:
        run = BatchRun(backend, plan, lease.id, anyio.CapacityLimiter(max(1, plan.parallel)), on_state)
        run.disk_ops = choose_disk_ops(
            backend,
            image=plan.image.id,
            labels=labels(plan.batch, lease.id, "disk-helper"),
            name=f"{gateway_name(plan.batch, lease.id)}-disk",
            environ=plan.settings.environ,
        )
        if plan.jobs and disk_problem(backend) is None:  # every job has a disk (10g unless said)
            run.disk_ops.warm()
        run.queue()
        beside = await _starts_beside(backend, plan.image.id)
        async with contextlib.AsyncExitStack() as stack:
            # the helper of the jobs' disks, if one started: removed last, once every job let go
            stack.push_async_callback(anyio.to_thread.run_sync, run.disk_ops.close)
            # However this ends (Ctrl-C included), a job that never began says so.
            stack.callback(_mark_never_started, plan, run.started, run.done, on_state)
            supervise = await stack.enter_async_context(supervisors())  # restarts a gateway that dies
            async with anyio.create_task_group() as tg:
                gateways = _Gateways(run, stack, supervise, tg if beside else None)
                for job, previous in plan.jobs:
                    tg.start_soon(run.one, gateways, job, previous)
    return run.done


async def _starts_beside(backend: Backend, image_id: str) -> bool:
    """The batch's first jobs start while their gateway does (jobs.starts_beside), instead of
    after it serves."""
    if not backend.shares_unix_sockets:
        return False  # no need to ask the engine for the image
    try:
        return starts_beside(backend, await backend.image_info(image_id))
    except FlowerBatchError:  # no such image: each job's create says so, in its record
        return False


@dataclass
class BatchRun:
    """One `run_jobs` call: its plan, its lease, and what became of the jobs (`done`, `started`)."""

    backend: Backend
    plan: BatchPlan
    lease: str
    limiter: anyio.CapacityLimiter
    on_state: StateHook | None = None
    disk_ops: DiskOps = AS_ROOT  # the jobs' disks' root-only steps (disk_ops.py)
    done: dict[str, JobRecord] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)

    def context(self, gateway: GatewaySidecar) -> JobContext:
        """What the jobs of this run share: built here only, for `matrix` and `run` alike."""
        plan = self.plan
        return JobContext(
            backend=self.backend,
            batch=plan.batch,
            lease=self.lease,
            image=plan.image,
            gateway=gateway,
            bundle=plan.bundle,
            on_state=self.on_state,
            search=list(plan.search),
            flows_from=plan.flows_from,
            home=plan.home.root,
            environ=plan.settings.environ,
            oracle=plan.oracle,
            reserve=self.reserve,
            disk_ops=self.disk_ops,
        )

    def queued(self, job: JobSpec, previous: JobRecord | None) -> JobRecord:
        return _queued(job, self.plan, previous, self.lease)

    def queue(self) -> None:
        """Queued records name this lease: once it is gone, readers see them as never-started."""
        for job, previous in self.plan.jobs:
            jd = self.plan.home.job(self.plan.batch, job.id)
            jd.root.mkdir(parents=True, exist_ok=True)
            if job.id not in self.plan.wake and job.gateway.scenario is not None:
                # Kept with the job: a later wake or repro uses this copy.
                shutil.copyfile(job.gateway.scenario, jd.root / f"scenario{job.gateway.scenario.suffix}")
            if previous is None or not previous.finished:
                write_record(jd.record_path, self.queued(job, previous))
            if self.on_state:
                self.on_state(job.id, Status.QUEUED)

    async def one(self, gateways: _Gateways, job: JobSpec, previous: JobRecord | None) -> None:
        """One job, once a slot is free: skipped when the batch's budget is spent, else run on its
        gateway; a setup that fails ends that job `error` and the others go on."""
        async with self.limiter:
            self.started.add(job.id)
            jd = self.plan.home.job(self.plan.batch, job.id)
            queued = self.queued(job, previous)
            waking = job.id in self.plan.wake and previous is not None
            if waking and previous is not None and self._still_capped(job, jd):
                self.done[job.id] = previous  # paused it stays: its session waits for a higher cap
                if self.on_state:
                    self.on_state(job.id, previous.status)
                return
            if self._skipped(job, jd, queued, previous, waking=waking):
                return
            try:
                wait = waking and self.plan.wake_waits_for_gateway
                ctx = self.context(await gateways.for_job(job, waking=wait))
                words = self.plan.wake_words.get(job.id) if waking else None
                self.done[job.id] = await run_job(
                    ctx, job, jd, previous=previous, waking=waking, wake_words=words
                )
            except FlowerBatchError as exc:
                # One job's setup failed (its gateway did not start, its folder could not be
                # made): that job ends `error` with the reason; the others go on.
                reason = " ".join(str(exc).split()) or type(exc).__name__
                if waking and previous is not None:
                    # A paused job stays paused, its session where it was: said in its reason.
                    self.done[job.id] = _not_continued(jd.record_path, previous, reason, self.on_state)
                    return
                # Its record replaces the previous attempt's: that one is kept first.
                with contextlib.suppress(FlowerBatchError):
                    keep_previous_attempt(jd, previous, queued.attempt, self.disk_ops)
                self.done[job.id] = _finish(jd.record_path, queued, job, Status.ERROR, reason, self.on_state)
            except OSError as exc:
                if not no_space(exc):
                    raise
                # The home is full: this job's record says so (its room given up for it), the
                # others go on, and the command ends with one line.
                reason = str(home_full(exc))
                with contextlib.suppress(OSError):
                    self.done[job.id] = _finish(
                        jd.record_path,
                        queued,
                        job,
                        Status.ERROR,
                        reason,
                        self.on_state,
                        FailureClass.INFRASTRUCTURE,
                    )

    def _skipped(
        self, job: JobSpec, jd: JobDir, queued: JobRecord, previous: JobRecord | None, *, waking: bool
    ) -> bool:
        """A job not started: the batch's budget is spent, or the home's disk is under its reserve
        (a paused job then stays paused, its session untouched)."""
        if self._batch_budget_spent():
            reason = f"not started: the batch budget ({Budget(self.plan.budget_usd).describe()}) was spent"
            keep_previous_attempt(jd, previous, queued.attempt, self.disk_ops)
            self.done[job.id] = _finish(jd.record_path, queued, job, Status.SKIPPED, reason, self.on_state)
            return True
        full = under_reserve(self.plan.home.root, self.reserve)
        if full is None:
            return False
        if waking and previous is not None:
            self.done[job.id] = _not_continued(jd.record_path, previous, full, self.on_state)
            return True
        # No verdict, and not the job's doing: the same command again runs it.
        self.done[job.id] = _finish(
            jd.record_path, queued, job, Status.SKIPPED, full, self.on_state, FailureClass.INFRASTRUCTURE
        )
        return True

    @property
    def reserve(self) -> int:
        return reserve_bytes(self.plan.parallel, self.plan.reserve)

    def _batch_budget_spent(self) -> bool:
        batch = Budget(self.plan.budget_usd)
        return batch.cap is not None and batch.reached(batch_spent(self.plan.home.batch_dir(self.plan.batch)))

    def _still_capped(self, job: JobSpec, jd: JobDir) -> bool:
        """A paused job's cap is still reached: the batch's, or its own (meter over its wakes)."""
        if self._batch_budget_spent():
            return True
        meter = read_meter(jd.logs)
        return meter is not None and Budget(job.budget_usd).reached(meter.spent_usd)


class _Gateways:
    """One gateway per (mode, scenario), started when its first job needs it, stopped with the
    exit stack, and watched by the supervisor. With `beside` (the jobs' task group), a gateway
    starts in it while its first jobs' containers start (flower's relay waits for the socket);
    one that does not start stops them, and their records say why (GatewaySidecar.start_beside).
    A paused job's wake waits for it instead: a wake that cannot be set up leaves the job paused."""

    def __init__(
        self,
        run: BatchRun,
        stack: contextlib.AsyncExitStack,
        supervise: Callable[[GatewaySidecar], None],
        beside: TaskGroup | None = None,
    ) -> None:
        self._run = run
        self._stack = stack
        self._supervise = supervise
        self._beside = beside
        self._gateways: dict[tuple[str, str], GatewaySidecar] = {}
        self._lock = anyio.Lock()

    async def for_job(self, job: JobSpec, *, waking: bool = False) -> GatewaySidecar:
        gateway = await self._for_key(job)
        return await gateway.started() if (waking and self._beside is not None) else gateway

    async def _for_key(self, job: JobSpec) -> GatewaySidecar:
        key = (job.gateway.mode, str(job.gateway.scenario))
        run = self._run
        async with self._lock:
            if key not in self._gateways:
                plan = run.plan
                gw = GatewaySidecar(
                    run.backend,
                    batch=plan.batch,
                    lease=run.lease,
                    suffix=f"-g{len(self._gateways)}",
                    image_id=plan.image.id,
                    batch_dir=plan.home.batch_dir(plan.batch),
                    gateway=job.gateway,
                    batch_budget_usd=plan.budget_usd,
                    settings=plan.settings,
                )
                if self._beside is None:
                    self._gateways[key] = await self._stack.enter_async_context(gw)
                    self._supervise(gw)
                else:
                    self._stack.push_async_exit(gw)  # stopped with the batch, however it ends
                    self._gateways[key] = gw
                    self._beside.start_soon(gw.start_beside, self._supervise)
            return self._gateways[key]


def _queued(job: JobSpec, plan: BatchPlan, previous: JobRecord | None, lease: str) -> JobRecord:
    attempt = previous.attempt + 1 if previous else 1
    return new_record(
        job,
        batch=plan.batch,
        image_id=plan.image.id,
        attempt=attempt,
        queued_at=now_iso(),
        versions=dict(plan.image.versions),
        session=lease,
    )


def _mark_never_started(
    plan: BatchPlan, started: set[str], done: dict[str, JobRecord], on_state: StateHook | None
) -> None:
    """The orchestrator is stopping (Ctrl-C, an error): a job still queued never began. Its record
    says so (skipped, "never started: …"); a job that kept its earlier finished record keeps it."""
    for job, _previous in plan.jobs:
        if job.id in started or job.id in done:
            continue
        path = plan.home.job(plan.batch, job.id).record_path
        try:
            record = read_record(path)
        except (OSError, FlowerBatchError):
            continue
        if record.status is not Status.QUEUED:
            continue
        reason = f"{NEVER_STARTED_REASON}: the orchestrator was stopped before the job's turn"
        outcome = JobOutcome(
            job_id=job.id, status=Status.SKIPPED, gateway_mode=job.gateway.mode, reason=reason
        )
        try:
            write_record(path, record.with_outcome(outcome, finished_at=now_iso()))
        except OSError as exc:  # a full disk: left queued, which readers show as never-started
            if not no_space(exc):
                raise
            continue
        if on_state:
            on_state(job.id, Phase.NEVER_STARTED)


def _not_continued(path: Path, paused: JobRecord, why: str, on_state: StateHook | None) -> JobRecord:
    """A paused job whose wake could not be set up: still paused, the reason says why."""
    before = (paused.reason or "").split("; not continued: ")[0]
    record = replace(paused, reason=f"{before}; not continued: {why}")
    write_record(path, record)
    if on_state:
        on_state(record.job_id, record.status)
    return record


def _finish(
    path: Path,
    queued: JobRecord,
    job: JobSpec,
    status: Status,
    reason: str,
    on_state: StateHook | None,
    failure_class: FailureClass | None = None,
) -> JobRecord:
    """The record of a job that ended without running: skipped (no budget left, or no room on the
    home's disk) or error (its setup failed)."""
    outcome = JobOutcome(
        job_id=job.id,
        status=status,
        gateway_mode=job.gateway.mode,
        reason=reason,
        failure_class=failure_class.value if failure_class else None,
    )
    record = queued.with_outcome(outcome, finished_at=now_iso())
    path.parent.mkdir(parents=True, exist_ok=True)
    write_record(path, record)
    if on_state:
        on_state(job.id, status)
    return record
