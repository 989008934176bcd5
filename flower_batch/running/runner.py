"""Run one job in its container: prepare its folder, start flower, enforce the timeout, run the
check, and write the record. Used by `run`, `wake` and `matrix` alike.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from flower_batch.backend import Backend, ContainerSpec, Mount
from flower_batch.errors import FlowerBatchError
from flower_batch.gateway.health import describe_health
from flower_batch.gateway.recording import stage_recording
from flower_batch.gateway.sidecar import GatewaySidecar
from flower_batch.gateway.usage import gateway_outcome
from flower_batch.jobmodel.classes import FailureClass
from flower_batch.jobmodel.outcome import JobOutcome, decide_status, steps_from_manifest
from flower_batch.jobmodel.record import JobRecord, write_record
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.labels import labels
from flower_batch.layout import FLOWS, RUNS, WORKSPACE, JobDir
from flower_batch.running.attempts import keep_previous_attempt
from flower_batch.running.causes import Ending, continuity_of, explain, flower_exit, new_stamp
from flower_batch.running.joblog import save_capped
from flower_batch.running.targets import container_target, stage_workflow

GRACE_S = 10.0
LOG_TAIL = 4000


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class JobContext:
    """What every job of one orchestrator session shares."""

    backend: Backend
    batch: str
    session: str
    image_id: str
    gateway: GatewaySidecar
    versions: dict[str, str] = field(default_factory=dict)
    on_state: Callable[[str, str], None] | None = None  # (job id, state)
    search: list[Path] = field(default_factory=list)  # where workflow modules are looked up
    flows_from: Path | None = None  # repro: the original job's copy of its workflow code


def flower_command(job: JobSpec, *, persistent: bool, wake_words: str | None = None, waking: bool = False) -> list[str]:
    """The `flower` command line the container runs."""
    base = ["flower", "-w", WORKSPACE, "-r", RUNS]
    if job.workflow is None:
        # The starter flow: the job's prompt is the task. A wake continues it: words given on wake
        # go under 需求.md's 唤醒时追加, become the work step's prompt and re-derive 目标.md; a wake
        # without words changes none of these.
        words = wake_words if waking else job.prompt
        return [*base, "go", "--timeout", "0", *([words] if words else [])]
    cmd = [*base, "run", container_target(job.workflow)]
    if not persistent:
        cmd.append("--fresh")
    if job.prompt:
        cmd += ["--prompt", wake_words if (waking and wake_words) else job.prompt]
    for key, value in sorted(job.args.items()):
        cmd += ["--set", f"{key}={value}"]
    return cmd


def prepare(
    jd: JobDir, job: JobSpec, *, fresh: bool, search: Sequence[Path] = (), flows_from: Path | None = None
) -> None:
    """A fresh copy of the task's workspace and the workflow code, unless waking."""
    if fresh:
        for d in (jd.workspace, jd.runs, jd.logs, jd.flows):
            if d.exists():
                shutil.rmtree(d)
    jd.make()
    if fresh and job.workspace is not None:
        shutil.copytree(job.workspace, jd.workspace, dirs_exist_ok=True, symlinks=True)
    if fresh and flows_from is not None:
        shutil.copytree(flows_from, jd.flows, dirs_exist_ok=True)
    elif fresh and job.workflow is not None:
        stage_workflow(job.workflow, jd.flows, search)
    if fresh and job.gateway.mode == "replay" and job.gateway.recording is not None:
        stage_recording(job.gateway.recording, jd.root)  # what the replay gateway serves this job


async def run_job(
    ctx: JobContext,
    job: JobSpec,
    jd: JobDir,
    *,
    persistent: bool = False,
    wake_words: str | None = None,
    waking: bool = False,
    previous: JobRecord | None = None,
) -> JobRecord:
    record = JobRecord(
        job_id=job.id, batch=ctx.batch, inputs_hash=job.inputs_hash(ctx.image_id), image_id=ctx.image_id,
        status="running", spec={**job.to_dict(), "persistent": persistent}, gateway_mode=job.gateway.mode,
        attempt=(previous.attempt + 1) if previous else 1, queued_at=now_iso(), started_at=now_iso(),
        versions=ctx.versions, session=ctx.session, backend=ctx.backend.name,
    )
    if not waking:  # the new attempt starts now: the previous one moves to attempts/<n>/, kept
        keep_previous_attempt(jd, previous, record.attempt)
    write_record(jd.record_path, record)
    _state(ctx, job.id, "running")
    gateway_mark = ctx.gateway.health.mark()  # the gateway's deaths from here on are this job's too
    started = time.monotonic()
    error: str | None = None
    timed_out = False
    exit_code: int | None = None
    container: str | None = None
    oom_killed = False
    stamp = new_stamp(job.id)  # tells this container's runs/.exit.json from an earlier one's
    try:
        # Inside the try: a workspace that cannot be copied, a workflow that cannot be found
        # still end with a finished record saying why.
        if ctx.gateway.health.gave_up:
            raise FlowerBatchError(f"not started: {ctx.gateway.health.gave_up}")
        prepare(jd, job, fresh=not waking, search=ctx.search, flows_from=ctx.flows_from)
        env = job.environment(os.environ)
        # The job's secrets and its gateway token travel as secrets, never as plain env.
        secret_env = {**{name: env.pop(name) for name in job.secrets}, **ctx.gateway.job_secrets(job.id)}
        env = {
            **env,
            **ctx.gateway.job_env(job.id),
            "CLAUDE_CONFIG_DIR": f"{RUNS}/.claude",
            "HOME": "/tmp",
            "PYTHONPATH": FLOWS,
            "FLOWER_BATCH_JOB": job.id,
            "FLOWER_RUN_STAMP": stamp,
        }
        if job.model:
            env["ANTHROPIC_MODEL"] = job.model
        spec = ContainerSpec(
            image=ctx.image_id,
            command=flower_command(job, persistent=persistent, wake_words=wake_words, waking=waking),
            env=env,
            secrets=secret_env,
            mounts=[
                Mount(str(jd.workspace), WORKSPACE),
                Mount(str(jd.runs), RUNS),
                Mount(str(jd.flows), FLOWS, read_only=True),
            ],
            working_dir=WORKSPACE,
            user=f"{os.getuid()}:{os.getgid()}",
            cpus=job.cpus,
            memory=job.memory_bytes,
            labels=labels(ctx.batch, ctx.session, "job", job.id),
            network=ctx.gateway.network,
            placement=list(job.placement),
        )
        container = await ctx.backend.create(spec)
        record = replace(record, container=container)
        write_record(jd.record_path, record)
        await ctx.backend.start(container)
        exit_code, timed_out = await _wait_unless_gateway_gone(ctx, container, job.timeout_s)
        oom_killed = await _oom_killed(ctx.backend, container)
        await _save_logs(ctx.backend, container, jd.logs / "container.log")
    except anyio.get_cancelled_exc_class():
        # The orchestrator is stopping (Ctrl-C): stop the container the way a timeout does, so
        # flower records the in-flight step, then leave a record that says what happened.
        with anyio.CancelScope(shield=True):
            if container:
                await _stop_quietly(ctx.backend, container)
                await _save_logs(ctx.backend, container, jd.logs / "container.log")
            write_record(jd.record_path, replace(
                record, status=Status.ERROR.value, reason="interrupted: the orchestrator was stopped",
                finished_at=now_iso(), duration_s=round(time.monotonic() - started, 2),
                cost_usd=gateway_outcome(jd.logs, job.gateway.mode).cost_usd,
                gateway_health=ctx.gateway.health.for_job(gateway_mark),
            ))
            _state(ctx, job.id, "interrupted")
        raise
    except LookupError as exc:  # a secret named in the job is not set on the host
        error = str(exc).strip("'\"")
    except FlowerBatchError as exc:
        error = _one_line(str(exc))
    except TimeoutError:  # the container did not stop even after a kill
        error = "the container did not stop after a kill; it was removed"
    except OSError as exc:  # the job's folder: copying the workspace, writing logs
        error = _one_line(f"{type(exc).__name__}: {exc}")
    finally:
        if container:
            with anyio.CancelScope(shield=True):
                record = replace(record, node=await _node_of(ctx.backend, container))
                await _remove_quietly(ctx.backend, container)

    rows = jd.manifest()
    workflow_ok = None if exit_code is None else exit_code == 0
    check_exit: int | None = None
    check_output: str | None = None
    if error is None and not timed_out and workflow_ok and job.check:
        _state(ctx, job.id, "checking")
        try:
            check_exit, check_output = await run_check(ctx, job, jd)
        except TimeoutError:
            error = "the check's container did not stop after a kill; it was removed"
        except (FlowerBatchError, OSError) as exc:
            error = _one_line(f"the check could not run: {exc}")
    gateway = gateway_outcome(jd.logs, job.gateway.mode)  # metered outside the container: survives a kill
    if gateway.divergence and error is None:
        error = gateway.divergence
    status, reason = decide_status(workflow_ok=workflow_ok, check_exit=check_exit, timed_out=timed_out,
                                   over_budget=gateway.over_budget, error=error)
    if status is Status.BUDGET:
        reason = gateway.budget_reason or reason
    verdict = explain(status, reason, Ending(exit_code, timed_out, oom_killed, job.memory_bytes),
                      flower_exit(jd.runs, stamp), check_exit=check_exit,
                      fallback=f"the workflow exited {exit_code}" + _last_error(rows))
    status, reason, klass = verdict.status, verdict.reason, verdict.failure_class
    if error is not None and error == gateway.divergence:
        klass = FailureClass.AGENT  # the agent's requests left the recording: a verdict, not a fault
    health = ctx.gateway.health.for_job(gateway_mark)
    if health and status is not Status.PASSED:
        # The gateway's trouble is the likelier cause: say it first.
        reason = health["gave_up"] or f"{describe_health(health)}; {reason}"
        if health["gave_up"]:
            klass = FailureClass.INFRASTRUCTURE  # no verdict on the workflow: it lost its model
            if status is Status.FAILED:
                status = Status.ERROR
    costs: list[float] = [float(r["cost_usd"]) for r in rows if isinstance(r.get("cost_usd"), int | float)]
    outcome = JobOutcome(
        job_id=job.id, status=status, workflow_ok=workflow_ok, check_exit=check_exit,
        cost_usd=gateway.cost_usd if gateway.metered else (round(sum(costs), 6) if rows else None),
        num_turns=sum(int(r.get("num_turns") or 0) for r in rows),
        duration_s=round(time.monotonic() - started, 2), steps=steps_from_manifest(rows),
        gateway_mode=job.gateway.mode, reason=reason, check_output=check_output, failure_class=klass.value,
    )
    record = record.with_outcome(outcome, finished_at=now_iso(), exit_code=exit_code)
    if persistent:
        record = replace(record, continuity=continuity_of(jd.runs, stamp))
    record = replace(record, gateway_health=health)
    write_record(jd.record_path, record)
    _state(ctx, job.id, status.value)
    return record


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _last_error(rows: list[dict[str, Any]]) -> str:
    for row in reversed(rows):
        if row.get("error"):
            return f": {str(row['error'])[:200]}"
    return ""


async def _wait_unless_gateway_gone(ctx: JobContext, container: str, timeout_s: float) -> tuple[int, bool]:
    """As `_wait`; and once the gateway's supervisor gives up, the job is stopped the way a
    timeout stops it (flower records the step): it would only wait out flower's offline wait."""
    async with anyio.create_task_group() as tg:
        async def stop_when_gateway_gone() -> None:
            await ctx.gateway.gave_up.wait()
            await _stop_quietly(ctx.backend, container)

        tg.start_soon(stop_when_gateway_gone)
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


async def _oom_killed(backend: Backend, container: str) -> bool:
    try:
        return (await backend.inspect(container)).oom_killed
    except FlowerBatchError:
        return False


async def run_check(ctx: JobContext, job: JobSpec, jd: JobDir) -> tuple[int, str]:
    """The verifier: the task's check command in a fresh container on the job's workspace."""
    assert job.check
    spec = ContainerSpec(
        image=ctx.image_id,
        command=["sh", "-c", job.check],
        env={"HOME": "/tmp", "FLOWER_BATCH_JOB": job.id},
        mounts=[Mount(str(jd.workspace), WORKSPACE), Mount(str(jd.runs), RUNS, read_only=True)],
        working_dir=WORKSPACE,
        user=f"{os.getuid()}:{os.getgid()}",
        cpus=job.cpus,
        memory=job.memory_bytes,
        labels=labels(ctx.batch, ctx.session, "check", job.id),
        network=ctx.gateway.network,
    )
    container = await ctx.backend.create(spec)
    try:
        await ctx.backend.start(container)
        code, timed_out = await _wait(ctx.backend, container, job.check_timeout_s)
        lines = [line async for line in ctx.backend.logs(container)]
    finally:
        with anyio.CancelScope(shield=True):
            await _remove_quietly(ctx.backend, container)
    output = "\n".join(lines)
    if timed_out:
        output += f"\n[flower-batch] check stopped after {job.check_timeout_s:.0f}s"
        code = code if code else 124
    (jd.logs / "check.log").write_text(f"$ {shlex.join(['sh', '-c', job.check])}\n{output}\n[exit {code}]\n")
    return code, output


async def _save_logs(backend: Backend, container: str, path: Path) -> None:
    # Capped per run: head and tail kept (joblog.py), so a long job's log stays small.
    await save_capped(backend.logs(container), path, f"--- container {container[:12]} {now_iso()} ---")


async def _node_of(backend: Backend, container: str) -> str | None:
    """Which machine ran it (a cluster node), for the record; None on a local engine."""
    try:
        return (await backend.inspect(container)).node
    except FlowerBatchError:
        return None


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


def _state(ctx: JobContext, job_id: str, state: str) -> None:
    if ctx.on_state is not None:
        ctx.on_state(job_id, state)
