"""Run one job in its container: prepare its folder, start flower, enforce the timeout, run the
check, and write the record. Used by `run`, `wake` and `matrix` alike.
"""

from __future__ import annotations

import logging
import shlex
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from flower.clock import now_iso
from flower.exitinfo import one_line
from flower_batch.backend.base import Backend, ContainerSpec, Mount
from flower_batch.backend.confinement import DEFAULT_PIDS, Confinement, hand_over, tmp_mount
from flower_batch.errors import FlowerBatchError, ImageMissing, NameConflict, WorkspaceUnusable
from flower_batch.export.trajectory_file import write_trajectory
from flower_batch.gateway.budget import batch_spent
from flower_batch.gateway.host.health import describe_health
from flower_batch.gateway.host.sidecar import GatewaySidecar
from flower_batch.gateway.host.usage import GatewayOutcome, MeterMark, gateway_outcome, meter_mark
from flower_batch.gateway.job_sockets import socket_key
from flower_batch.gateway.recording import stage_recording
from flower_batch.jobmodel.classes import FailureClass
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.outcome import JobOutcome, decide_status, steps_from_manifest
from flower_batch.jobmodel.pausing import Spend, history_entry, pause_reason
from flower_batch.jobmodel.record import JobRecord, write_record
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Phase, State, Status
from flower_batch.jobmodel.units import format_memory
from flower_batch.labels import labels
from flower_batch.layout import FLOWS, RUNS, WORKSPACE, JobDir
from flower_batch.running import job_disk
from flower_batch.running.attempts import keep_previous_attempt
from flower_batch.running.bundle import BUNDLE_PATH, FLOWER, TOOLS_PATH
from flower_batch.running.causes import Ending, Verdict, continuity_of, explain, flower_exit, new_stamp
from flower_batch.running.deadline import hard_timeout_s, limits_env
from flower_batch.running.disk_ops import AS_ROOT, DiskOps
from flower_batch.running.grading_verdict import graded_after_agent_failure, graded_verdict
from flower_batch.running.home_space import RESERVE_POLL_S, under_reserve
from flower_batch.running.job_disk import DiskUse, JobDisk, disk_problem
from flower_batch.running.job_root import JobRoot, resolve_root
from flower_batch.running.joblog import capped_text, save_capped
from flower_batch.running.oracle import ORACLE_COMMAND, SOLUTION_PATH, solution_folder, stage_solution
from flower_batch.running.root_watch import RootOver, watch_root
from flower_batch.running.state_image import drop_state, keep_state
from flower_batch.running.targets import container_target, stage_workflow
from flower_batch.running.verifier import COMMAND as VERIFY_COMMAND
from flower_batch.running.verifier import Graded, run_verifier
from flower_batch.running.verifier import mounts as verifier_mounts
from flower_batch.running.verifier import staged as stage_tests
from flower_batch.running.workdir_seed import seed_from_image
from flower_batch.running.workspace_copy import copy_workspace
from flower_batch.untrusted_files import copy_tree, remove_tree
from flower_batch.workspace_scan import rules_for

log = logging.getLogger(__name__)
INSTRUCTION_FILE = "instruction.md"
"""In the job's runs (/runs/instruction.md, FLOWER_BATCH_INSTRUCTION): a graded task's prompt."""
GRACE_S = 10.0
LOG_TAIL = 4000


@dataclass
class JobContext:
    """What every job of one orchestrator lease shares."""

    backend: Backend
    batch: str
    lease: str  # the orchestrator's (running/lease.py)
    image: PinnedImage
    gateway: GatewaySidecar
    bundle: str | None = None
    """The runtime bundle's volume, mounted at /opt/flower in a job whose task has its own image
    (running/bundle.py); None when every job runs in the runtime image, or on a cluster, where
    the task image's layered copy holds flower (running/layered.py)."""
    on_state: Callable[[str, State], None] | None = None  # (job id, state)
    search: list[Path] = field(default_factory=list)  # where workflow modules are looked up
    flows_from: Path | None = None  # repro: the original job's copy of its workflow code
    home: Path | None = None  # left out of every workspace copy (the default ./volumes under `run .`)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The host's environment as the process started with it: where the jobs' secrets' values
    are read (never os.environ here)."""
    oracle: bool = False
    """`matrix --oracle`: each job runs its Harbor task's solution/solve.sh, not a workflow (oracle.py)."""
    reserve: int | None = None
    """Bytes kept free on the home's disk (running/home_space.py): a running persistent job is
    paused when the home falls under them; None: not watched."""
    disk_ops: DiskOps = AS_ROOT
    """How the root-only steps of a job's own disk are done: as root, or by the run's helper
    container (running/disk_ops.py)."""


def flower_command(
    job: JobSpec, *, wake_words: str | None = None, waking: bool = False, workdir: str = WORKSPACE
) -> list[str]:
    """The `flower` command line the container runs, its workspace at `workdir` (job_root.py)."""
    base = [FLOWER, "-w", workdir, "-r", RUNS]
    if job.workflow is None:
        # The starter flow: the job's prompt is the task. A wake continues it: words given on wake
        # go under 需求.md's 唤醒时追加, become the work step's prompt and re-derive 目标.md; a wake
        # without words changes none of these.
        words = wake_words if waking else job.prompt
        return [*base, "go", "--timeout", "0", *([words] if words else [])]
    cmd = [*base, "run", container_target(job.workflow)]
    if not job.persistent:
        cmd.append("--fresh")
    if job.prompt:
        cmd += ["--prompt", wake_words if (waking and wake_words) else job.prompt]
    for key, value in sorted(job.args.items()):
        cmd += ["--set", f"{key}={value}"]
    return cmd


def prepare(
    jd: JobDir,
    job: JobSpec,
    *,
    fresh: bool,
    search: Sequence[Path] = (),
    flows_from: Path | None = None,
    home: Path | None = None,
    stop: threading.Event | None = None,
) -> None:
    """A fresh copy of the task's workspace and the workflow code, unless waking. Blocking: the
    runner calls it in a worker thread, `stop` set when the command stops."""
    if fresh:
        for d in (jd.workspace, jd.runs, jd.logs, jd.flows):
            remove_tree(d)  # the job made it: any depth, no symlink followed
    jd.make()
    if fresh and job.workspace is not None:
        rules = rules_for(job.workspace, job.exclude, leave_out=() if home is None else (home,))
        copied = copy_workspace(
            job.workspace, jd.workspace, rules, limit_bytes=job.workspace_limit, stop=stop
        )
        if copied.skipped:  # FIFOs, sockets, devices, symlinks out of it: named, never copied
            log.warning("job %s: not copied from its workspace: %s", job.id, copied.skipped_line())
    if fresh and flows_from is not None:  # repro: the earlier job's copy, which it could write
        copy_tree(flows_from, jd.flows)
    elif fresh and job.workflow is not None:
        stage_workflow(job.workflow, jd.flows, search)
    if fresh and job.gateway.mode.rules.replays and job.gateway.recording is not None:
        stage_recording(job.gateway.recording, jd.root)  # what the replay gateway serves this job
    if fresh and _has_instruction(job):  # a task's instruction, as a file too (docs/jobs-toml.md)
        (jd.runs / INSTRUCTION_FILE).write_text(job.prompt)


def _has_instruction(job: JobSpec) -> bool:
    """A graded task (hidden tests, a Harbor folder) has an instruction the workflow may read as a file."""
    return bool(job.prompt) and (job.verifier is not None or job.harbor is not None)


async def prepare_off_the_loop(
    jd: JobDir,
    job: JobSpec,
    *,
    fresh: bool,
    search: Sequence[Path] = (),
    flows_from: Path | None = None,
    home: Path | None = None,
) -> None:
    """`prepare` in a worker thread: Ctrl-C and SIGTERM are answered at once (the thread is left
    to end on its own), and the copy stops at its next chunk."""
    stop = threading.Event()
    try:
        await anyio.to_thread.run_sync(
            lambda: prepare(jd, job, fresh=fresh, search=search, flows_from=flows_from, home=home, stop=stop),
            abandon_on_cancel=True,
        )
    finally:
        stop.set()


async def run_job(
    ctx: JobContext,
    job: JobSpec,
    jd: JobDir,
    *,
    wake_words: str | None = None,
    waking: bool = False,
    previous: JobRecord | None = None,
) -> JobRecord:
    """Prepare, run, check and record one job; every end, but Ctrl-C's, is a finished record."""
    attempt = start_attempt(ctx, job, jd, waking=waking, previous=previous)

    def command(workdir: str) -> list[str]:
        if ctx.oracle:
            return list(ORACLE_COMMAND)
        return flower_command(job, wake_words=wake_words, waking=waking, workdir=workdir)

    ran = Ran()
    try:
        await run_container(attempt, command, fresh=not waking, ran=ran)
        checked = await check_if_due(attempt, ran)
        graded = await grade_if_due(attempt, ran, checked)  # on the job's own disk, still attached
    finally:
        with anyio.CancelScope(shield=True):
            await _detach_disk(attempt, ran)
    record = finish_record(attempt, ran, checked, graded)
    # The trajectory before the record that says the job ended: an orchestrator killed in between
    # leaves a job that runs again, never a finished one without its trajectory.json.
    await anyio.to_thread.run_sync(_write_trajectory, jd, record)
    write_record(jd.record_path, record)
    _state(ctx, job.id, record.status)
    return record


_warned: set[str] = set()


async def _attach_disk(ctx: JobContext, job: JobSpec, jd: JobDir) -> JobDisk | None:
    """The job's own disk of `disk` bytes, or None (with one warning per process) where this
    machine cannot make one."""
    problem = disk_problem(ctx.backend) or await anyio.to_thread.run_sync(ctx.disk_ops.problem)
    if problem is not None:
        if problem not in _warned:
            _warned.add(problem)
            log.warning("jobs run without a disk limit of their own: %s", problem)
        return None
    name = f"{ctx.gateway.name}-disk-{socket_key(job.id)[:12]}"
    return await job_disk.attach(
        ctx.backend,
        jd=jd,
        size=job.disk_bytes,
        batch=ctx.batch,
        lease=ctx.lease,
        name=name,
        ops=ctx.disk_ops,
    )


async def _detach_disk(attempt: Attempt, ran: Ran) -> None:
    """The job's disk measured, its folders copied back to the host, and released."""
    if ran.disk is None:
        return
    disk, ran.disk = ran.disk, None
    try:
        ran.disk_use = await job_disk.detach(attempt.ctx.backend, disk, attempt.jd)
    except OSError as exc:
        ran.error = ran.error or one_line(str(exc))


def _write_trajectory(jd: JobDir, record: JobRecord) -> None:
    """`<job>/trajectory.json` (ATIF), derived from runs/. What the job's files did not let be
    read is said inside it; a file that cannot be written at all costs the job nothing (its
    verdict is recorded): a warning, and `flower-batch export` says why when asked again."""
    try:
        write_trajectory(jd, record)
    except (OSError, ValueError) as exc:
        log.warning("job %s/%s: trajectory.json not written: %s", jd.batch, jd.job, exc)


@dataclass(frozen=True)
class Attempt:
    """What the phases of one attempt share, from its first record on."""

    ctx: JobContext
    job: JobSpec
    jd: JobDir
    record: JobRecord  # as first written: status 'running'
    stamp: str  # tells this container's runs/.exit.json from an earlier one's
    gateway_mark: int  # the gateway's deaths from here on are this job's too
    started: float  # time.monotonic()
    meter: MeterMark = MeterMark()  # the job's meter before this attempt (a wake continues it)
    base_image: str = ""  # what its container runs: its image, or on a wake its kept state (state_image.py)
    previous_state: str | None = None  # the state image an earlier attempt kept

    @property
    def image(self) -> str:
        return self.base_image or _image_of(self.ctx, self.job)

    def duration_s(self) -> float:
        return round(time.monotonic() - self.started, 2)


@dataclass
class Ran:
    """What happened to the job's container; filled in as it happens, so Ctrl-C knows what to stop."""

    exit_code: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    container: str | None = None
    node: str | None = None  # which machine ran it (a cluster node); None on a local engine
    error: str | None = None  # why the run could not start or finish, one line
    inspected: bool = False  # its end was inspected (oom, node): once is enough
    input_failed: bool = False  # its workspace could not be prepared: the job's input, not infrastructure
    root: JobRoot = field(default_factory=JobRoot)  # where its workspace is, its root, its uid
    state_image: str | None = None  # a writable root's container, committed when it ended
    over: RootOver = field(default_factory=RootOver)  # set when the watchdog stopped it
    disk: JobDisk | None = None  # the job's own disk while it is attached (running/job_disk.py)
    disk_use: DiskUse | None = None  # what the job left on it
    home_full: str | None = None  # a persistent job stopped at the home's reserve: why (it is paused)


@dataclass(frozen=True)
class Checked:
    """The verifier's result; all None when it did not run."""

    exit_code: int | None = None
    output: str | None = None
    error: str | None = None  # why it could not run, one line


def start_attempt(
    ctx: JobContext, job: JobSpec, jd: JobDir, *, waking: bool, previous: JobRecord | None
) -> Attempt:
    """A new attempt's 'running' record, written before anything else happens."""
    record = JobRecord(
        job_id=job.id,
        batch=ctx.batch,
        inputs_hash=job.inputs_hash(ctx.image.id),
        image_id=ctx.image.id,
        status=Status.RUNNING,
        spec=job,
        gateway_mode=job.gateway.mode,
        attempt=(previous.attempt + 1) if previous else 1,
        queued_at=now_iso(),
        started_at=now_iso(),
        versions=dict(ctx.image.versions),
        session=ctx.lease,
        backend=ctx.backend.name,
        # A wake goes on with the job's meter, so with its history of caps and spend too.
        budget_history=previous.budget_history if (waking and previous) else (),
        # and from the whole state the job left, when its root was writable
        state_image=previous.state_image if (waking and previous and job.root == "writable") else None,
    )
    if not waking:  # the new attempt starts now: the previous one moves to attempts/<n>/, kept
        keep_previous_attempt(jd, previous, record.attempt, ctx.disk_ops)
    write_record(jd.record_path, record)
    _state(ctx, job.id, Status.RUNNING)
    return Attempt(
        ctx,
        job,
        jd,
        record,
        stamp=new_stamp(job.id),
        gateway_mark=ctx.gateway.health.mark(),
        started=time.monotonic(),
        meter=meter_mark(jd.logs) if waking else MeterMark(),
        base_image=record.state_image or "",
        previous_state=previous.state_image if previous else None,
    )


async def run_container(
    attempt: Attempt, command: Callable[[str], list[str]], *, fresh: bool, ran: Ran | None = None
) -> Ran:
    """The job's container from create to remove. A failure becomes `Ran.error`; Ctrl-C stops the
    container, writes an 'interrupted' record and goes on. The job's own disk, when it got one,
    stays attached in `ran.disk` for its check (`_detach_disk` releases it)."""
    ctx, ran = attempt.ctx, ran if ran is not None else Ran()
    try:
        await _run_in_container(attempt, command, ran, fresh=fresh)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await _record_interrupted(attempt, ran.container)
        raise
    except LookupError as exc:  # a secret named in the job is not set on the host
        ran.error = str(exc).strip("'\"")
    except WorkspaceUnusable as exc:  # the job's input: a verdict, never retried as infrastructure
        ran.error, ran.input_failed = one_line(str(exc)), True
    except FlowerBatchError as exc:
        ran.error = one_line(str(exc))
    except TimeoutError:  # the container did not stop even after a kill
        ran.error = "the container did not stop after a kill; it was removed"
    except OSError as exc:  # the job's folder: copying the workspace, writing logs
        ran.error = one_line(f"{type(exc).__name__}: {exc}")
    finally:
        with anyio.CancelScope(shield=True):
            if ran.container:
                if not ran.inspected:  # it did not get to its end: which node it was on, still
                    _, ran.node = await _ending(ctx.backend, ran.container)
                await _remove_quietly(ctx.backend, ran.container)
            await ctx.gateway.close_job(attempt.job.id)
            await close_network(ctx, attempt.job)
    return ran


async def _run_in_container(
    attempt: Attempt, command: Callable[[str], list[str]], ran: Ran, *, fresh: bool
) -> None:
    # All of it inside run_container's try: a workspace that cannot be copied, a workflow that
    # cannot be found still end with a finished record saying why.
    ctx, job, jd = attempt.ctx, attempt.job, attempt.jd
    if ctx.gateway.health.gave_up:
        raise FlowerBatchError(f"not started: {ctx.gateway.health.gave_up}")
    if attempt.base_image:  # a wake from the state the job left: said in one line when it is gone
        await _state_image_present(ctx.backend, job, attempt.base_image)
    ran.root = await resolve_root(ctx.backend, job, attempt.image)
    # a run whose orchestrator was killed left the folders showing its disk: its files first
    await anyio.to_thread.run_sync(job_disk.recover_live, jd, ctx.disk_ops)
    await prepare_off_the_loop(
        jd, job, fresh=fresh, search=ctx.search, flows_from=ctx.flows_from, home=ctx.home
    )
    await _stage_for_the_sandbox(attempt, ran, fresh=fresh)
    ran.disk = await _attach_disk(ctx, job, jd)  # after staging: made from the job's folders
    reach = await ctx.gateway.open_job(job.id)
    await open_network(ctx, job)
    spec = job_container_spec(
        ctx, job, jd, command(ran.root.workdir), attempt.stamp, reach, root=ran.root, disk=ran.disk
    )
    ran.container = await ctx.backend.create(replace(spec, image=attempt.image))
    write_record(jd.record_path, replace(attempt.record, container=ran.container))
    await ctx.backend.start(ran.container)
    if ran.disk is not None:  # the engine mounted it: the host's folders show the job's progress
        await anyio.to_thread.run_sync(job_disk.show_live, ran.disk, jd)
    # flower stops itself at the deadline after a wrap-up window (running/deadline.py): wait for it.
    watch = ran.root.disk_bytes if ran.root.writable else None
    ran.exit_code, ran.timed_out = await _wait_unless_gateway_gone(
        ctx, ran.container, hard_timeout_s(job), watch=(watch, ran.over), ran=ran if job.persistent else None
    )
    ran.oom_killed, ran.node = await _ending(ctx.backend, ran.container)
    ran.inspected = True
    await save_logs(ctx.backend, ran.container, jd.logs / "container.log")
    if ran.root.writable:  # every process of it gone: its whole state, for the tests and a wake
        ran.state_image = await keep_state(
            ctx.backend, ran.container, home=str(ctx.home), batch=ctx.batch, lease=ctx.lease, job=job.id
        )
        if attempt.previous_state != ran.state_image:
            await drop_state(ctx.backend, attempt.previous_state)


async def _state_image_present(backend: Backend, job: JobSpec, image: str) -> None:
    try:
        await backend.image_info(image)
    except ImageMissing:
        raise FlowerBatchError(
            f"job {job.id}: its state image {image[:19]} is gone (`gc --images` removes them), so its "
            "changes outside the workspace are lost: run it again instead (matrix --fresh, or a new run)"
        ) from None


async def _stage_for_the_sandbox(attempt: Attempt, ran: Ran, *, fresh: bool) -> None:
    """The image's own workdir as the workspace (a job with none of its own), the oracle's
    solution, and the folders handed to the sandbox uid."""
    ctx, job, jd = attempt.ctx, attempt.job, attempt.jd
    if fresh and job.workspace is None and ran.root.workdir != WORKSPACE:
        skipped = await seed_from_image(
            ctx.backend, attempt.image, ran.root.workdir, jd.workspace,
            batch=ctx.batch, lease=ctx.lease, job=job.id, limit_bytes=job.workspace_limit,
        )  # fmt: skip
        if skipped:
            log.warning(
                "job %s: not copied from the image's %s: %s", job.id, ran.root.workdir, "; ".join(skipped[:5])
            )
    if ctx.oracle:
        await anyio.to_thread.run_sync(stage_solution, job, jd)
    for folder in (jd.workspace, jd.runs, jd.logs):  # the job's and the gateway's to write
        await anyio.to_thread.run_sync(hand_over, folder)


async def _record_interrupted(attempt: Attempt, container: str | None, *, ran: Ran | None = None) -> None:
    """The orchestrator is stopping (Ctrl-C): stop the container the way a timeout does, so
    flower records the in-flight step, then leave a record that says what happened. `ran`: the
    job's container had already ended (Ctrl-C came during the check), so keep what it did."""
    ctx, job, jd = attempt.ctx, attempt.job, attempt.jd
    if container and ran is None:
        await _stop_quietly(ctx.backend, container)
        await save_logs(ctx.backend, container, jd.logs / "container.log")
    first = attempt.record
    write_record(
        jd.record_path,
        replace(
            first,
            container=container,
            node=ran.node if ran else first.node,
            exit_code=ran.exit_code if ran else first.exit_code,
            status=Status.ERROR,
            reason="interrupted: the orchestrator was stopped",
            finished_at=now_iso(),
            duration_s=attempt.duration_s(),
            cost_usd=gateway_outcome(jd.logs, job.gateway.mode).cost_usd,
            gateway_health=ctx.gateway.health.for_job(attempt.gateway_mark),
        ),
    )
    _state(ctx, job.id, Phase.INTERRUPTED)


def _container_spec(
    ctx: JobContext,
    job: JobSpec,
    jd: JobDir,
    role: str,
    command: list[str],
    env: dict[str, str],
    mounts: Sequence[Mount],
    root: JobRoot | None = None,
    disk: JobDisk | None = None,
) -> ContainerSpec:
    """What the job's container and its check's share: the image, the host's user (the files
    stay theirs), the job's limits, our labels, the gateway's network, and the workspace as the
    working directory; `mounts` come after the workspace."""
    root = root or JobRoot()
    spec = ContainerSpec(
        image=_image_of(ctx, job),
        command=command,
        env=env,
        mounts=[
            Mount(disk.source("workspace") if disk else str(jd.workspace), root.workdir),
            *([disk.volume_mount()] if disk else []),
            *mounts,
        ],
        working_dir=root.workdir,
        cpus=job.cpus,
        memory=job.memory_bytes,
        labels=labels(ctx.batch, ctx.lease, role, job.id),
        network=job_network(ctx, job),
        placement=list(job.placement),  # the job's nodes, for its check too
        confinement=Confinement(
            pids=job.pids or DEFAULT_PIDS,
            tmpfs={**tmp_mount(job.disk_bytes), **(disk.covers() if disk else {})},
        ),
    )
    return root.applied(spec)


def _image_of(ctx: JobContext, job: JobSpec) -> str:
    """The runtime image, or the task's own: on a cluster its layered copy's digest (flower in it)."""
    if job.task_image is None:
        return ctx.image.id
    return job.task_image.layered or job.task_image.id


def job_network(ctx: JobContext, job: JobSpec) -> str:
    """The gateway's network ("none" on one machine: a socket reaches it), or, for a job that
    asked for the internet, a network of its own with a route out (no other job is on it)."""
    if job.network == "internet":
        return f"{ctx.gateway.name}-{socket_key(job.id)[:12]}"
    return ctx.gateway.network


async def open_network(ctx: JobContext, job: JobSpec) -> None:
    if job.network != "internet":
        return
    if not ctx.gateway.by_socket:
        raise FlowerBatchError(
            'network = "internet" runs on the local engine only: on a cluster the job\'s '
            "network is the gateway's overlay, which has no route out"
        )
    try:
        await ctx.backend.create_network(
            job_network(ctx, job), labels(ctx.batch, ctx.lease, "network", job.id)
        )
    except NameConflict:
        pass  # its check, or the container of an earlier try of the same lease


async def close_network(ctx: JobContext, job: JobSpec) -> None:
    if job.network == "internet" and ctx.gateway.by_socket:
        try:
            await ctx.backend.remove_network(job_network(ctx, job))
        except FlowerBatchError:
            pass


def job_container_spec(
    ctx: JobContext,
    job: JobSpec,
    jd: JobDir,
    command: list[str],
    stamp: str,
    reach: Sequence[Mount] = (),
    *,
    root: JobRoot | None = None,
    disk: JobDisk | None = None,
) -> ContainerSpec:
    """The job's container: flower on its runs and its (read-only) workflow code, its model behind
    the gateway. The one place the job's env and spec are built."""
    env = job.environment(ctx.environ)
    # The job's secrets and its gateway token travel as secrets, never as plain env.
    secret_env = {**{name: env.pop(name) for name in job.secrets}, **ctx.gateway.job_secrets(job.id)}
    env = {
        **_tools_path(job),
        **env,
        **ctx.gateway.job_env(job.id),
        "CLAUDE_CONFIG_DIR": f"{RUNS}/.claude",
        "HOME": "/tmp",
        # flower finds the workflow code here itself: no PYTHONPATH reaches the agent's commands
        "FLOWER_PATH": FLOWS,
        "FLOWER_BATCH_JOB": job.id,
        "FLOWER_RUN_STAMP": stamp,
        **limits_env(job, now=time.time(), spent_usd=gateway_outcome(jd.logs, job.gateway.mode).cost_usd),
    }
    if job.model:
        env["ANTHROPIC_MODEL"] = job.model
    if _has_instruction(job):
        env["FLOWER_BATCH_INSTRUCTION"] = f"{RUNS}/{INSTRUCTION_FILE}"
    # `reach`: the job's own socket into the gateway (one machine; nothing on a cluster)
    runs = disk.source("runs") if disk else str(jd.runs)
    mounts = [Mount(runs, RUNS), Mount(str(jd.flows), FLOWS, read_only=True), *reach]
    if job.task_image is not None and not job.task_image.layered:  # flower, brought into an image
        if ctx.bundle is None:
            raise FlowerBatchError(f"job {job.id}: its task image has no flower runtime volume to mount")
        mounts.append(Mount(ctx.bundle, BUNDLE_PATH, read_only=True, kind="volume"))
    if ctx.oracle:  # the task's solution, for the oracle only: never in a workflow's container
        mounts.append(Mount(str(solution_folder(jd)), SOLUTION_PATH, read_only=True))
    spec = _container_spec(ctx, job, jd, "job", command, env, mounts, root, disk)
    return replace(spec, secrets=secret_env)


def _tools_path(job: JobSpec) -> dict[str, str]:
    """The runtime image's PATH leads to flower's venv: its jobs' commands get the image's own
    (a task's own image keeps its PATH as it is). A job's `env` may set its own."""
    return {} if job.task_image is not None else {"PATH": TOOLS_PATH}


def check_container_spec(ctx: JobContext, job: JobSpec, jd: JobDir, ran: Ran | None = None) -> ContainerSpec:
    """The check's container: the task's check command, reading the job's runs, in the job's
    final state (`ran`: its sandbox, kept state image and own disk, whose writes it shares)."""
    assert job.check
    disk = ran.disk if ran else None
    env = {**_tools_path(job), "HOME": "/tmp", "FLOWER_BATCH_JOB": job.id}
    mounts = [Mount(disk.source("runs") if disk else str(jd.runs), RUNS, read_only=True)]
    spec = _container_spec(
        ctx, job, jd, "check", ["sh", "-c", job.check], env, mounts, ran.root if ran else None, disk
    )
    return replace(spec, image=ran.state_image) if ran and ran.state_image else spec


def verifier_container_spec(attempt: Attempt, ran: Ran, tests: Path, logs: Path) -> ContainerSpec:
    """The hidden tests' container: a fresh one of the job's final state (verifier.py), on the
    job's own disk when it has one."""
    ctx, job = attempt.ctx, attempt.job
    assert job.verifier
    env = {**_tools_path(job), "HOME": "/tmp", **job.verifier.env}
    spec = _container_spec(
        ctx,
        job,
        attempt.jd,
        "verifier",
        VERIFY_COMMAND,
        env,
        verifier_mounts(tests, logs),
        ran.root,
        ran.disk,
    )
    return replace(spec, image=ran.state_image or attempt.image)


async def check_if_due(attempt: Attempt, ran: Ran) -> Checked:
    """The check, only when the workflow exited 0 in time and nothing went wrong."""
    ctx, job = attempt.ctx, attempt.job
    if ran.error is not None or ran.timed_out or ran.exit_code != 0 or not job.check:
        return Checked()
    _state(ctx, job.id, Phase.CHECKING)
    try:
        code, output = await run_check(ctx, job, attempt.jd, ran)  # removes its container, even on Ctrl-C
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await _record_interrupted(attempt, ran.container, ran=ran)
        raise
    except TimeoutError:
        return Checked(error="the check's container did not stop after a kill; it was removed")
    except (FlowerBatchError, OSError) as exc:
        return Checked(error=one_line(f"the check could not run: {exc}"))
    return Checked(exit_code=code, output=output)


# flower's own causes of a failed run that are the agent's: its steps failed or its time ran out
_AGENT_ENDS = ("step", "timeout")


def agent_ended(attempt: Attempt, ran: Ran) -> bool:
    """The workflow ran and ended on its own account: it finished, ran out of time, or its steps
    failed. What it left is graded then, as Harbor grades a trial after an agent timeout or a
    failed agent; a run the infrastructure, a budget, a full disk or a signal cut is not."""
    if ran.error is not None or ran.over.written or ran.home_full is not None:
        return False
    if ran.exit_code == 0 or ran.timed_out:
        return True
    cause = flower_exit(attempt.jd.runs, attempt.stamp)
    return cause is not None and cause["class"] in _AGENT_ENDS


async def grade_if_due(attempt: Attempt, ran: Ran, checked: Checked) -> Graded | None:
    """The hidden tests, when the job has them, the agent ended on its own account
    (`agent_ended`) and any check got through."""
    ctx, job, jd = attempt.ctx, attempt.job, attempt.jd
    if job.verifier is None or not agent_ended(attempt, ran):
        return None
    if checked.error is not None or checked.exit_code not in (None, 0):
        return None
    _state(ctx, job.id, Phase.CHECKING)
    try:
        tests, logs = await anyio.to_thread.run_sync(stage_tests, job.verifier, jd)
        await open_network(ctx, job)
        try:
            spec = verifier_container_spec(attempt, ran, tests, logs)
            return await run_verifier(ctx.backend, spec, job.verifier, jd, logs)
        finally:
            with anyio.CancelScope(shield=True):
                await close_network(ctx, job)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await _record_interrupted(attempt, ran.container, ran=ran)
        raise
    except (FlowerBatchError, OSError) as exc:
        return Graded(error=one_line(f"the hidden tests could not run: {exc}"))


def finish_record(attempt: Attempt, ran: Ran, checked: Checked, graded: Graded | None = None) -> JobRecord:
    """The finished record: the verdict, what it cost, how the gateway fared (the caller writes
    it, last)."""
    ctx, job, jd = attempt.ctx, attempt.job, attempt.jd
    rows = jd.manifest()
    # metered outside the container: survives a kill
    gateway = gateway_outcome(jd.logs, job.gateway.mode, attempt.meter)
    health = ctx.gateway.health.for_job(attempt.gateway_mark)
    verdict = _blame_the_gateway(health, decide(attempt, ran, checked, gateway, rows, graded))
    costs: list[float] = [float(r["cost_usd"]) for r in rows if isinstance(r.get("cost_usd"), int | float)]
    outcome = JobOutcome(
        job_id=job.id,
        status=verdict.status,
        workflow_ok=_workflow_ok(ran),
        check_exit=checked.exit_code,
        cost_usd=gateway.cost_usd if gateway.metered else (round(sum(costs), 6) if rows else None),
        num_turns=sum(int(r.get("num_turns") or 0) for r in rows),
        duration_s=attempt.duration_s(),
        steps=steps_from_manifest(rows),
        gateway_mode=job.gateway.mode,
        reason=verdict.reason,
        check_output=checked.output if checked.output is not None else (graded.output if graded else None),
        failure_class=verdict.failure_class.value,
        reward=graded.reward if graded else None,
    )
    record = replace(
        attempt.record,
        container=ran.container,
        node=ran.node,
        state_image=ran.state_image or attempt.record.state_image,
        sandbox=ran.root.note,
    )
    record = record.with_outcome(outcome, finished_at=now_iso(), exit_code=ran.exit_code)
    if attempt.job.persistent:
        record = replace(record, continuity=continuity_of(jd.runs, attempt.stamp))
        if job.budget_usd is not None or ctx.gateway.batch_budget_usd is not None:
            entry = history_entry(
                attempt=record.attempt,
                status=verdict.status.value,
                spend=_spend(attempt, gateway),
                spent_before=attempt.meter.spent_usd,
                step=_interrupted_step(attempt, rows) if verdict.status is Status.PAUSED else None,
            )
            record = replace(record, budget_history=(*record.budget_history, entry))
    return replace(record, gateway_health=health)


# long: every source of a verdict in one order (the container, flower, the check, the hidden tests, the gateway)
def decide(
    attempt: Attempt,
    ran: Ran,
    checked: Checked,
    gateway: GatewayOutcome,
    rows: list[dict[str, Any]],
    graded: Graded | None = None,
) -> Verdict:
    """Status, reason and whose fault, from the container's end, flower's exit file, the check
    and the gateway's meter."""
    error = ran.error if ran.error is not None else checked.error
    if gateway.divergence and error is None:
        error = gateway.divergence
    cause = flower_exit(attempt.jd.runs, attempt.stamp)
    # flower's own graceful end at the deadline (its notes written) is the job's timeout too.
    stopped_itself = cause is not None and cause["class"] == "timeout"
    status, reason = decide_status(
        workflow_ok=_workflow_ok(ran),
        check_exit=checked.exit_code,
        timed_out=ran.timed_out or stopped_itself,
        over_budget=gateway.over_budget,
        error=error,
    )
    if status is Status.BUDGET:
        reason = gateway.budget_reason or reason
    if status is Status.TIMEOUT and stopped_itself and cause is not None:
        reason = f"{reason}: {cause['reason']}"
    ending = Ending(ran.exit_code, ran.timed_out, ran.oom_killed, attempt.job.memory_bytes)
    fallback = f"the workflow exited {ran.exit_code}" + _last_error(rows)
    verdict = explain(
        status,
        reason,
        ending,
        cause,
        check_exit=checked.exit_code,
        fallback=fallback,
    )
    if ran.input_failed:  # like a workflow module that does not import: the job's own input
        return Verdict(Status.FAILED, error, FailureClass.AGENT)
    if ran.home_full is not None:  # its session kept: the same command continues it once there is room
        return Verdict(Status.PAUSED, ran.home_full, FailureClass.PAUSED)
    if ran.disk_use is not None and ran.disk_use.full:
        # Its own doing, whatever it broke on the way (flower's writes to /runs fail too): never
        # retried as infrastructure, kept on a re-run like any verdict.
        return _at_its_disk(attempt, ran.disk_use)
    if ran.over.written:  # a writable root past its bound: its own doing, as a full disk
        return Verdict(Status.DISK, ran.over.reason, FailureClass.DISK)
    if graded is not None and verdict.status is Status.PASSED:
        return graded_verdict(graded, attempt.job.threshold)
    if graded is not None and verdict.status in (Status.TIMEOUT, Status.FAILED):
        return graded_after_agent_failure(verdict, graded, attempt.job.threshold)
    if error is not None and error == gateway.divergence:
        # The agent's requests left the recording: a verdict, not a fault.
        return replace(verdict, failure_class=FailureClass.AGENT)
    if verdict.status is Status.BUDGET and gateway.over_budget and attempt.record.persistent:
        # Its session and workspace stay as they are: a higher cap continues it (wake, matrix).
        reason = pause_reason(_spend(attempt, gateway), _interrupted_step(attempt, rows))
        return Verdict(Status.PAUSED, reason, FailureClass.PAUSED)
    return verdict


def _at_its_disk(attempt: Attempt, use: DiskUse) -> Verdict:
    """A job that filled its own disk; a persistent one is told how to continue on a larger one."""
    reason = use.reason()
    if attempt.record.persistent:  # its session kept
        reason += f"; `flower-batch wake {attempt.jd.job} --disk {format_memory(2 * use.size)}` continues it"
    return Verdict(Status.DISK, reason, FailureClass.DISK)


def _spend(attempt: Attempt, gateway: GatewayOutcome) -> Spend:
    """The job's metered spend and caps, and its batch's, as the attempt ends."""
    batch_cap = attempt.ctx.gateway.batch_budget_usd
    return Spend(
        job_spent=gateway.spent_usd,
        job_cap=attempt.job.budget_usd,
        batch_spent=batch_spent(attempt.jd.root.parent) if batch_cap is not None else 0.0,
        batch_cap=batch_cap,
    )


def _interrupted_step(attempt: Attempt, rows: list[dict[str, Any]]) -> str | None:
    """The step the budget cut: flower's own word (runs/.exit.json), else the last failed row."""
    cause = flower_exit(attempt.jd.runs, attempt.stamp)
    if cause and cause.get("step"):
        return str(cause["step"])
    return next((str(r.get("step")) for r in reversed(rows) if not r.get("ok") and r.get("step")), None)


def _blame_the_gateway(health: dict[str, Any] | None, verdict: Verdict) -> Verdict:
    """The gateway's trouble is the likelier cause of a job that did not pass: say it first."""
    if not health or verdict.status is Status.PASSED:
        return verdict
    reason = health["gave_up"] or f"{describe_health(health)}; {verdict.reason}"
    if not health["gave_up"]:
        return replace(verdict, reason=reason)
    # No verdict on the workflow: it lost its model.
    status = Status.ERROR if verdict.status is Status.FAILED else verdict.status
    return Verdict(status, reason, FailureClass.INFRASTRUCTURE)


def _workflow_ok(ran: Ran) -> bool | None:
    return None if ran.exit_code is None else ran.exit_code == 0


def _last_error(rows: list[dict[str, Any]]) -> str:
    for row in reversed(rows):
        if row.get("error"):
            return f": {str(row['error'])[:200]}"
    return ""


async def _wait_unless_gateway_gone(
    ctx: JobContext,
    container: str,
    timeout_s: float,
    watch: tuple[int | None, RootOver] = (None, RootOver()),
    *,
    ran: Ran | None = None,
) -> tuple[int, bool]:
    """As `_wait`; and once the gateway's supervisor gives up, the job is stopped the way a
    timeout stops it (flower records the step): it would only wait out flower's offline wait.
    `watch`: a writable root's bound, kept by root_watch.py meanwhile. With `ran` (a persistent
    job), also once the home's disk falls under its reserve: the job is paused, as at a budget
    (`ran.home_full` says why), and the same command continues it."""
    async with anyio.create_task_group() as tg:
        limit, over = watch
        if limit:
            tg.start_soon(watch_root, ctx.backend, container, limit, over)

        async def stop_when_gateway_gone() -> None:
            await ctx.gateway.gave_up.wait()
            await _stop_quietly(ctx.backend, container)

        async def pause_when_home_full(ran: Ran, home: Path, reserve: int) -> None:
            while (why := under_reserve(home, reserve, pausing=True)) is None:
                await anyio.sleep(RESERVE_POLL_S)
            ran.home_full = why
            await _stop_quietly(ctx.backend, container)

        tg.start_soon(stop_when_gateway_gone)
        if ran is not None and ctx.home is not None and ctx.reserve is not None:
            tg.start_soon(pause_when_home_full, ran, ctx.home, ctx.reserve)
        try:
            result: tuple[int, bool] | Exception = await _wait(ctx.backend, container, timeout_s)
        except (TimeoutError, FlowerBatchError) as exc:  # raised below, not as an ExceptionGroup
            result = exc
        tg.cancel_scope.cancel()
    if isinstance(result, Exception):
        raise result
    return result


async def _wait(backend: Backend, container: str, timeout_s: float) -> tuple[int, bool]:
    """Exit code and whether the timeout hit. At the timeout: SIGTERM (flower's rescue() records
    the in-flight step as killed-by-signal), a grace period, then kill."""
    try:
        return await backend.wait(container, timeout=timeout_s), False
    except TimeoutError:
        pass
    try:
        await backend.signal(container, signal.SIGTERM)
        return await backend.wait(container, timeout=GRACE_S), True
    except (TimeoutError, FlowerBatchError):
        await backend.stop(container, grace_s=0)
        return await backend.wait(container, timeout=30), True


async def _ending(backend: Backend, container: str) -> tuple[bool, str | None]:
    """Whether the ended container was OOM-killed, and which node ran it (a cluster node, for the
    record; None on a local engine): one inspect."""
    try:
        info = await backend.inspect(container)
    except FlowerBatchError:
        return False, None
    return info.oom_killed, info.node


async def run_check(ctx: JobContext, job: JobSpec, jd: JobDir, ran: Ran | None = None) -> tuple[int, str]:
    """The verifier: the task's check command in a fresh container on the job's workspace."""
    assert job.check
    await open_network(ctx, job)
    try:
        container = await ctx.backend.create(check_container_spec(ctx, job, jd, ran))
    except BaseException:
        with anyio.CancelScope(shield=True):
            await close_network(ctx, job)
        raise
    try:
        await ctx.backend.start(container)
        code, timed_out = await _wait(ctx.backend, container, job.check_timeout_s)
        output = await capped_text(ctx.backend.logs(container))  # the job's code wrote it: capped
    finally:
        with anyio.CancelScope(shield=True):
            await _remove_quietly(ctx.backend, container)
            await close_network(ctx, job)
    if timed_out:
        output += f"\n[flower-batch] check stopped after {job.check_timeout_s:.0f}s"
        code = code if code else 124
    (jd.logs / "check.log").write_text(f"$ {shlex.join(['sh', '-c', job.check])}\n{output}\n[exit {code}]\n")
    return code, output


async def save_logs(backend: Backend, container: str, path: Path) -> None:
    # Capped per run: head and tail kept (joblog.py), so a long job's log stays small.
    await save_capped(backend.logs(container), path, f"--- container {container[:12]} {now_iso()} ---")


async def _stop_quietly(backend: Backend, container: str) -> None:
    try:
        await backend.stop(container, grace_s=GRACE_S)
    except FlowerBatchError:
        pass


async def _remove_quietly(backend: Backend, container: str) -> None:
    try:
        await backend.remove(container, force=True)
    except FlowerBatchError:
        pass


def _state(ctx: JobContext, job_id: str, state: State) -> None:
    if ctx.on_state is not None:
        ctx.on_state(job_id, state)
