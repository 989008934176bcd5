"""The job commands: run / wake / ls (status) / show / logs / stop / gc, as plain functions that
flower_batch.cli makes commands of."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from flower.catalogue.terminal import WAKE_LINE_MARKS
from flower_batch.backend.base import Backend
from flower_batch.commands import options as opt
from flower_batch.commands.common import (
    BACKEND_OPT,
    HOME_OPT,
    backend_for,
    chosen_backend,
    err,
    fail,
    home_at,
    home_named,
    host_settings,
    load_job,
    out,
    progress,
    run_async,
    status_cell,
)
from flower_batch.commands.completion import complete_batch, complete_job
from flower_batch.commands.environments import (
    build_recipe,
    describe_images,
    pin_environments,
    pinned_again,
    split_image,
)
from flower_batch.commands.gc_images import gc_images
from flower_batch.commands.ls_table import ls_table, wider
from flower_batch.commands.preflight import engine_for, preflight_job
from flower_batch.envnames import env_name_problem, looks_secret
from flower_batch.errors import RecordError
from flower_batch.gateway.host.health import describe_health
from flower_batch.gateway.metering import read_meter, read_summary
from flower_batch.jobmodel.budget import Budget
from flower_batch.jobmodel.classes import exit_code_for_job
from flower_batch.jobmodel.modes import mode_label
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.status import Status
from flower_batch.jobmodel.units import format_duration
from flower_batch.labels import BATCH, JOB, MANAGED
from flower_batch.layout import Home, JobDir
from flower_batch.running.batch import run_one
from flower_batch.running.causes import continuity_lines
from flower_batch.running.job_disk import gc_disks
from flower_batch.running.jobs import ADHOC_BATCH, Sandbox, adhoc_spec
from flower_batch.running.lease import Leak, find_leaks, on_the_nodes, remove_leaks
from flower_batch.running.liveness import Liveness
from flower_batch.running.plan import BatchPlan
from flower_batch.running.wake import WakeAsked, plan_wake

if TYPE_CHECKING:
    from flower_batch.running.attempts import Attempt  # loaded lazily by `show`


def parse_env(items: list[str]) -> dict[str, str]:
    env = {}
    for item in items:
        if "=" not in item:
            fail(f"--env {item!r}: expected KEY=VALUE (use --secret NAME for values from your environment)")
        key, value = item.split("=", 1)
        problem = env_name_problem(key)
        if problem:
            fail(f"--env {key}: {problem}")
        if looks_secret(key) and value:
            fail(
                f"--env {key}: looks like a secret; pass it with --secret {key} so its value is read from "
                "your environment at start and never stored"
            )
        env[key] = value
    return env


def _finish(record: JobRecord) -> None:
    colour = {Status.PASSED: "green", Status.PAUSED: "yellow"}.get(record.status, "red")
    cost = "unknown" if record.cost_usd is None else f"${record.cost_usd:.4f}"
    err.print(
        f"[{colour}]{escape(record.job_id)}: {record.status}[/{colour}]"
        + (f" — {escape(record.reason)}" if record.reason else "")
        + f"  cost {cost}  turns {record.num_turns or 0}  {format_duration(record.duration_s or 0)}"
        + f"  model: {mode_label(record.gateway_mode)}"
    )
    if record.gateway_health and record.status is Status.PASSED:  # a failed one already says it in its reason
        err.print(f"  gateway: {escape(describe_health(record.gateway_health))}")
    # paused (class paused) is 4 by matrix's rule: not a verdict yet, `wake --budget-usd` continues it
    raise typer.Exit(exit_code_for_job(record.failure_class, verdict_ok=record.status is Status.PASSED))


# long: each option is handed to adhoc_spec by name; the body checks, pre-flights, prints and runs
def run(
    workspace: opt.Workspace,
    task: opt.TaskText = None,
    workflow: opt.Workflow = None,
    prompt: opt.Prompt = None,
    image: opt.Image = opt.DEFAULT_IMAGE,
    build: opt.Build = None,
    timeout: opt.Timeout = "30m",
    cpus: opt.Cpus = None,
    memory: opt.Memory = None,
    disk: opt.Disk = None,
    pids: opt.Pids = None,
    network: opt.Network = "gateway",
    env: opt.Env = [],  # noqa: B006 - typer's default, never mutated
    secret: opt.Secret = [],  # noqa: B006
    name: opt.Name = None,
    persistent: opt.Persistent = False,
    scenario: opt.Scenario = None,
    budget_usd: opt.JobBudget = None,
    upstream: opt.Upstream = None,
    placement: opt.Placement = [],  # noqa: B006
    check: opt.Check = None,
    exclude: opt.Exclude = [],  # noqa: B006
    workspace_limit: opt.WorkspaceLimit = None,
    root: opt.Root = "read-only",
    user: opt.RunAs = "sandbox",
    workdir: opt.Workdir = None,
    tests: opt.Tests = None,
    pass_reward: opt.PassReward = None,
    home: Path | None = HOME_OPT,
    backend_choice: str | None = BACKEND_OPT,
) -> None:
    """Run one job in a fresh container.

    Exit codes: 0 passed, 1 not passed, 2 bad usage, 3 infrastructure error (no verdict)."""
    settings = host_settings(upstream)
    h = home_at(home)
    spec = adhoc_spec(
        workspace=workspace,
        task=task,
        workflow=workflow,
        prompt=prompt,
        name=name,
        timeout=timeout,
        cpus=cpus,
        memory=memory,
        disk=disk,
        env=parse_env(env),
        secrets_=secret,
        scenario=scenario,
        budget_usd=budget_usd,
        placement=tuple(placement),
        pids=pids,
        network=network,
        persistent=persistent,
        check=check,
        exclude=tuple(exclude),
        workspace_limit=workspace_limit,
        home=h.root,
        environ=settings.environ,
        sandbox=Sandbox(root, user, workdir, tests, pass_reward),
    )
    if h.job(ADHOC_BATCH, spec.id).record_path.exists():
        fail(f"job {spec.id} already exists: wake it (`flower-batch wake {spec.id}`) or pick another --name")
    if build is not None and image != opt.DEFAULT_IMAGE:
        fail("give --image or --build, not both: a job runs in one image")
    pinned, task_image = split_image(image)
    spec = replace(spec, image=task_image, build=build_recipe(build) if build else None)
    environments = pin_environments(
        [spec], pinned, home=h, where="run", backend=chosen_backend(backend_choice, None)
    )
    (spec,) = environments.jobs
    engine = engine_for(h.root, backend_choice, None)
    preflight_job(spec, pinned.id, ADHOC_BATCH, describe=None, flows_dir=None, engine=engine, copies_from=h.root, home_given=home_named(home))  # fmt: skip
    plan = BatchPlan(h, ADHOC_BATCH, ((spec, None),), pinned, settings=settings, bundle=environments.bundle)
    _run_planned(plan, backend_for(home, backend_choice))


def _run_planned(plan: BatchPlan, engine: Backend) -> None:
    """`run`'s one job, pre-flighted: said, run, and its verdict printed (the exit code follows)."""
    ((spec, _),) = plan.jobs
    shown = describe_images(spec, plan.image.id)
    err.print(
        f"job {ADHOC_BATCH}/{spec.id}  image {shown}  model: {mode_label(spec.gateway.mode)}", markup=False
    )

    async def go() -> JobRecord:
        async with engine as backend:
            return await run_one(backend, plan, progress)

    _finish(run_async(go))


# long: each option takes a line; the body checks the record, plans, pre-flights, prints and runs
def wake(
    job: str = typer.Argument(..., help="job id (or batch/job)", autocompletion=complete_job),
    words: str | None = typer.Argument(
        None, help="more words for the work step (starter flow) or the workflow's prompt"
    ),
    scenario: Path | None = typer.Option(
        None, "--scenario", help="use this scenario instead of the job's copy"
    ),
    timeout: str | None = typer.Option(None, "--timeout"),
    budget_usd: opt.WakeBudget = None,
    disk: str | None = typer.Option(
        None,
        "--disk",
        help="the job's own disk from now on, e.g. 20g: continues a job that ended at its limit",
    ),
    home: Path | None = HOME_OPT,
    backend_choice: str | None = BACKEND_OPT,
) -> None:
    """Continue a persistent job in a new container on its recorded image id (any node of a cluster).

    Exit codes: 0 passed, 1 not passed, 2 bad usage, 3 infrastructure error (no verdict)."""
    settings = host_settings()
    h = home_at(home)
    jd, record = load_job(home, job)
    if not record.finished:
        # A record left `running` by an orchestrator that was killed is not a running job: only
        # a live container of the job is.
        if _running_containers(jd, backend_for(home, backend_choice, record.backend)):
            fail(f"job {jd.job} is still {record.status}; stop it first (`flower-batch stop {jd.job}`)")
        err.print(f"job {jd.job} was left {record.status} by an orchestrator that is gone; continuing it")
    asked = WakeAsked(scenario=scenario, timeout=timeout, budget_usd=budget_usd, words=words, disk=disk)
    waking = plan_wake(h, jd, record, asked, settings)  # a refusal is one line (cli.OneLineErrors)
    if budget_usd is not None:
        err.print(waking.budget_line, markup=False)
    plan = pinned_again(
        waking.plan, home=h, where=f"wake {jd.job}", backend=chosen_backend(backend_choice, record.backend)
    )
    ((spec, _record),) = plan.jobs
    preflight_job(
        spec,
        record.image_id,
        jd.batch,
        describe=f"job {jd.batch}/{jd.job}",
        flows_dir=jd.flows if spec.workflow else None,
        engine=engine_for(h.root, backend_choice, record.backend),
    )
    shown = describe_images(spec, record.image_id)
    err.print(f"waking {jd.batch}/{jd.job} (attempt {record.attempt + 1}) on image {shown}", markup=False)

    engine = backend_for(home, backend_choice, record.backend)

    async def go() -> JobRecord:
        async with engine as backend:
            return await run_one(backend, plan, progress)

    result = run_async(go)
    _print_container_tail(h.job(jd.batch, jd.job))
    for line in continuity_lines(result.continuity):  # flower is silent about a fresh start: we say it
        err.print(f"  {line}", markup=False)
    if result.persistent and not result.continuity and result.status is not Status.PASSED:
        err.print("  continuity unknown: flower did not get as far as its first step", markup=False)
    _finish(result)


def _running_containers(jd: JobDir, engine: Backend) -> int:
    async def go() -> int:
        async with engine as backend:
            found = await backend.list_by_label({MANAGED: "1", BATCH: jd.batch, JOB: jd.job})
            return sum(c.running for c in found)

    return int(run_async(go))


def _print_container_tail(jd: JobDir) -> None:
    """Show the wake banner flower printed inside the container."""
    log = jd.logs / "container.log"
    if not log.exists():
        return
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    last_run = max((i for i, line in enumerate(lines) if line.startswith("--- container")), default=0)
    for line in lines[last_run:]:
        if any(mark in line for mark in WAKE_LINE_MARKS):
            err.print(f"  {line.strip()}", markup=False)  # flower's own line: text, never markup


def _rows(h: Home, batch: str | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    live = Liveness(h.root)
    for jd, rec in h.records(batch):
        if isinstance(rec, RecordError):
            rows.append({"batch": jd.batch, "job": jd.job, "status": "unreadable", "reason": str(rec)})
            continue
        meter = read_summary(jd.logs)  # the gateway's meter: live while the job runs
        cost = rec.cost_usd if rec.finished or not meter else meter.get("cost_usd")
        rows.append(
            {
                "batch": jd.batch,
                "job": jd.job,
                "status": live.status(rec),
                "recorded_status": rec.status,
                "class": rec.failure_class,
                "reason": live.reason(rec),
                "gateway_restarts": _restarts(rec),
                "cost_usd": cost,
                "metered": meter is not None,
                "num_turns": rec.num_turns,
                "duration_s": rec.duration_s,
                "started_at": rec.started_at,
                "gateway_mode": rec.gateway_mode,
                "attempt": rec.attempt,
                "persistent": rec.persistent,
                "image_id": rec.image_id,
                "task_image": rec.spec.task_image.to_dict() if rec.spec.task_image else None,
                "reward": rec.reward.value if rec.reward else None,
            }
        )
    return rows


def ls(
    batch: str | None = typer.Option(None, "--batch", "-b", autocompletion=complete_batch),
    as_json: bool = typer.Option(False, "--json"),
    home: Path | None = HOME_OPT,
) -> None:
    """List jobs and their status."""
    rows = _rows(home_at(home), batch)
    if as_json:
        out.print_json(json.dumps(rows))
        return
    table, width = ls_table(rows, out.width)
    wide = out if width <= out.width else wider(out, width)  # an id wider than the terminal: never cut
    wide.print(table)


def _restarts(record: JobRecord) -> int:
    return int((record.gateway_health or {}).get("restarts") or 0)


# long: one row per fact of the record, in the order people read them
def show(
    job: str = typer.Argument(..., help="job id (or batch/job)", autocompletion=complete_job),
    as_json: bool = typer.Option(False, "--json"),
    home: Path | None = HOME_OPT,
) -> None:
    """A job's record and its manifest rows (one per step attempt)."""
    from flower_batch.harbor.shown import harbor_rows, reward_text
    from flower_batch.running.attempts import list_attempts

    jd, record = load_job(home, job)
    rows = jd.manifest()
    meter = read_meter(jd.logs)
    live = Liveness(home_at(home).root)
    attempts = list_attempts(jd)
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "record": record.to_dict(),
                    "status": live.status(record),
                    "reason": live.reason(record),
                    "manifest": rows,
                    "meter": meter.to_dict() if meter else None,
                    "attempts": [a.to_dict() for a in attempts],
                }
            )
        )
        return
    info = Table.grid(padding=(0, 2))
    for key, value in (
        ("job", f"{jd.batch}/{jd.job}"),
        ("status", status_cell(live.status(record))),
        ("reason", live.reason(record) or ""),
        ("gateway", describe_health(record.gateway_health)),
        ("model", mode_label(record.gateway_mode)),
        ("image", record.image_id),
        *([("task image", record.spec.task_image.describe())] if record.spec.task_image else []),
        *(
            [("ran as", layered)]
            if record.spec.task_image and (layered := record.spec.task_image.layered)
            else []
        ),
        *([("reward", reward_text(record.reward, record.spec))] if record.reward else []),
        *harbor_rows(record.spec),
        *([("sandbox", record.sandbox)] if record.sandbox else []),
        *([("state image", record.state_image)] if record.state_image else []),
        ("versions", ", ".join(f"{k} {v}" for k, v in record.versions.items())),
        ("exit code", str(record.exit_code)),
        ("check exit", str(record.check_exit)),
        ("cost", "unknown" if record.cost_usd is None else f"${record.cost_usd:.4f}"),
        ("metered", meter.describe() if meter else "not metered by the gateway (cost from the CLI)"),
        ("budget", _budget_text(record)),
        ("turns", str(record.num_turns)),
        ("started", record.started_at or ""),
        ("finished", record.finished_at or ""),
        ("duration", format_duration(record.duration_s or 0)),
        ("attempt", str(record.attempt)),
        ("persistent", "yes" if record.persistent else "no"),
        ("folder", str(jd.root)),
        *(("continuity", line) for line in continuity_lines(record.continuity)),
        *((("class", record.failure_class),) if record.failure_class else ()),
    ):
        # Values are file and model text (a reason may quote `[[rules]]`): never markup.
        info.add_row(f"[bold]{key}[/bold]", value if key == "status" else Text(value))
    out.print(info)
    _print_manifest(rows)
    if attempts:
        _print_attempts(attempts)
    if record.check_output:
        out.print("[bold]check output[/bold]")
        out.print(record.check_output[-2000:], markup=False)


def _budget_text(record: JobRecord) -> str:
    """The job's cap; for a persistent job, then a line per attempt: its cap and the spend."""
    now = Budget(record.budget_usd).describe()
    return "\n".join([now, *(_history_line(e) for e in record.budget_history)])


def _history_line(entry: dict[str, Any]) -> str:
    """One attempt of a persistent job's budget history, e.g.
    "attempt 1: paused · cap $0.0500 · spent $0.0523 in all ($0.0523 this run) · step count interrupted"."""
    cap = entry.get("budget_usd")
    parts = [
        f"attempt {entry.get('attempt')}: {entry.get('status')}",
        f"cap {Budget(float(cap) if isinstance(cap, int | float) else None).describe()}",
        f"spent ${float(entry.get('spent_usd') or 0):.4f} in all (${float(entry.get('attempt_usd') or 0):.4f} this run)",
    ]
    if isinstance(entry.get("batch_budget_usd"), int | float):
        parts.append(
            f"batch ${float(entry.get('batch_spent_usd') or 0):.4f} of ${float(entry['batch_budget_usd']):.4f}"
        )
    if entry.get("interrupted_step"):
        parts.append(f"step {entry['interrupted_step']} interrupted")
    return " · ".join(parts)


def _print_manifest(rows: list[dict[str, Any]]) -> None:
    table = Table(title="manifest (one row per step attempt)")
    for col in ("run", "step", "ok", "cost $", "turns", "seconds", "session", "error"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            str(r.get("run", ""))[-13:],
            Text(str(r.get("step"))),
            "yes" if r.get("ok") else "no",
            f"{r.get('cost_usd') or 0:.4f}",
            str(r.get("num_turns", "")),
            f"{r.get('duration_s') or 0:.1f}",
            str(r.get("session_id", ""))[:8],
            Text(str(r.get("error") or "")[:60]),
        )
    out.print(table)


def _print_attempts(attempts: list[Attempt]) -> None:
    table = Table(title="earlier attempts (kept in attempts/<n>/; `gc --attempts` prunes them)")
    for col in ("attempt", "status", "reason", "finished", "cost", "folder"):
        table.add_column(col)
    for a in attempts:
        d = a.to_dict()
        cost = "" if d.get("cost_usd") is None else f"${d['cost_usd']:.4f}"
        table.add_row(
            str(a.number),
            status_cell(d["status"]),
            escape(str(d.get("reason") or ""))[:60],
            d.get("finished_at") or "",
            cost,
            escape(str(a.folder)),
        )
    out.print(table)


def logs(
    job: str = typer.Argument(..., help="job id (or batch/job)", autocompletion=complete_job),
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing while the job runs"),
    home: Path | None = HOME_OPT,
) -> None:
    """The job's container output (and its check's)."""
    jd, record = load_job(home, job)
    log = jd.logs / "container.log"
    if log.exists():
        with log.open(encoding="utf-8", errors="replace") as saved:  # streamed: it may be MBs
            shutil.copyfileobj(saved, sys.stdout)
    if follow and record.status is Status.RUNNING and record.container:
        engine = backend_for(home, None, record.backend)

        async def tail() -> None:
            async with engine as backend:
                async for line in backend.logs(record.container, follow=True):  # type: ignore[arg-type]
                    print(line, flush=True)

        run_async(tail)
    check = jd.logs / "check.log"
    if check.exists():
        sys.stdout.write(check.read_text(encoding="utf-8", errors="replace"))


def stop(
    job: str = typer.Argument(..., help="job id (or batch/job)", autocompletion=complete_job),
    grace: float = typer.Option(10.0, "--grace", help="seconds between SIGTERM and kill"),
    home: Path | None = HOME_OPT,
    backend_choice: str | None = BACKEND_OPT,
) -> None:
    """Stop a running job: SIGTERM (flower records the step as killed-by-signal), then kill."""
    jd, record = load_job(home, job)
    engine = backend_for(home, backend_choice, record.backend)

    async def go() -> int:
        async with engine as backend:
            found = await backend.list_by_label({MANAGED: "1", BATCH: jd.batch, JOB: jd.job})
            running = [c for c in found if c.running]
            for c in running:
                await backend.stop(c.id, grace_s=grace)
            return len(running)

    n = run_async(go)
    err.print(f"stopped {n} container(s) of {jd.batch}/{jd.job} (status was {record.status})")


# long: typer's option declarations take a third of it; the body removes, recovers and prints
def gc(
    dry_run: bool = typer.Option(False, "--dry-run", help="only list what would be removed"),
    attempts: bool = typer.Option(False, "--attempts", help="instead: prune jobs' kept earlier attempts"),
    keep: int = typer.Option(0, "--keep", help="with --attempts: keep each job's newest N earlier attempts"),
    batch: str | None = typer.Option(
        None,
        "--batch",
        "-b",
        help="with --attempts or --images: only this batch's",
        autocompletion=complete_batch,
    ),
    images: bool = typer.Option(
        False,
        "--images",
        help="instead: remove the task images built or layered by flower-batch and its runtime volumes",
    ),
    home: Path | None = HOME_OPT,
    backend_choice: str | None = BACKEND_OPT,
) -> None:
    """Remove containers, networks and volumes with our labels left by orchestrators of this home
    that died (their session lock is free); live ones and other homes' are never touched.
    With --attempts: remove the earlier attempts kept under <job>/attempts/ instead. With
    --images: task images built from folders or layered for a cluster, and the runtime volumes."""
    h = home_at(home)
    if images:  # with --batch: only what that batch's jobs pinned
        return gc_images(h, batch, dry_run)
    if attempts or keep or (batch and not images):
        from flower_batch.commands.attempts import gc_attempts

        if not attempts:
            fail("--keep and --batch go with --attempts (gc --attempts --keep N)")
        gc_attempts(h, keep=keep, batch=batch, dry_run=dry_run)
        return
    engine = backend_for(home, backend_choice)

    async def go() -> tuple[list[Leak], int, list[str], tuple[list[str], list[str]]]:
        async with engine as backend:
            leaks, foreign = await find_leaks(backend, h.root)
            if dry_run:
                swept, away = await on_the_nodes(backend, h.root, remove=False)
                return leaks + swept, foreign, away, ([], [])
            swept, away = await remove_leaks(backend, h.root, leaks, nodes=True)
            # a dead run's folders that still show its disk: its files back on the host, its
            # loop device let go of (once its volume is gone)
            disks = await anyio.to_thread.run_sync(gc_disks, backend, h, dict(os.environ))
            return leaks + swept, foreign, away, disks

    leaks, foreign, away, (recovered, loops) = run_async(go)
    for job in recovered:
        err.print(f"job {job}: its files recovered from the disk of a run whose orchestrator died")
    for loop in loops:
        err.print(f"detached loop device {loop} of a run whose orchestrator died")
    verb = "would remove" if dry_run else "removed"
    for leak in leaks:
        out.print(f"{verb} {leak.kind} {leak.name} {leak.role}".rstrip())
    err.print(f"{verb} {len(leaks)} leaked resource(s)")
    if away:
        err.print(
            f"could not look on node(s) {', '.join(away)}: what dead orchestrators left there stays "
            "until gc runs again with them up"
        )
    if foreign:
        err.print(
            f"left {foreign} resource(s) of orchestrators this home ({h.root}) does not know: "
            "run gc with their --home"
        )
