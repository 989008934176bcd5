"""`flower-batch matrix jobs.toml` and `flower-batch report <batch>`."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from flower.clock import now_iso
from flower.fileio import write_atomic
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
    out,
    run_async,
)
from flower_batch.commands.compare import ALPHA_OPT, FAIL_OPT, Baseline, baseline_or_exit
from flower_batch.commands.completion import complete_batch
from flower_batch.commands.environments import pin_environments, split_image
from flower_batch.commands.plan_summary import plan_lines, rerun_lines
from flower_batch.commands.preflight import engine_for, finish_preflight, print_warnings
from flower_batch.errors import FlowerBatchError, MatrixFileError
from flower_batch.gateway.host.setup import mode_problem
from flower_batch.gateway.host.sidecar import GatewaySettings
from flower_batch.jobmodel import fields
from flower_batch.jobmodel.classes import exit_code_for
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import JobRecord, load_records, new_record, write_record
from flower_batch.jobmodel.resume import ResumePlan, plan_resume
from flower_batch.jobmodel.spec import JobsFile, JobSpec
from flower_batch.jobmodel.status import Phase, State, Status, still_going
from flower_batch.jobmodel.units import parse_memory
from flower_batch.jobsfile import MAX_JOBS, load_jobs_file
from flower_batch.layout import Home
from flower_batch.preflight import Describe, Preflight
from flower_batch.preflight.include_keys import include_warnings
from flower_batch.reports import (
    BatchResults,
    comparison_table,
    log_tails,
    results_from_records,
    summary_line,
    write_reports,
)
from flower_batch.running.batch import BatchEvent, InfraRetry, reap_batch, run_batch
from flower_batch.running.home_space import overcommitted, reserve_bytes, reserve_problem
from flower_batch.running.job_disk import disk_problem
from flower_batch.running.jobs import option_value
from flower_batch.running.liveness import Liveness
from flower_batch.running.oracle import ORACLE_SUFFIX, oracle_failures, oracle_jobs, oracle_scenario
from flower_batch.running.plan import BatchPlan

# The live table's colours; a state not named here (an ended job that did not pass) is red.
STATE_COLOURS: dict[State, str] = {
    Status.PASSED: "green",
    Status.RUNNING: "cyan",
    Phase.CHECKING: "cyan",
    Status.QUEUED: "dim",
}


class MatrixProgress:
    """Live job states on a terminal; one plain line per change when there is no TTY (CI)."""

    def __init__(self, job_ids: list[str], kept: Mapping[str, State], console: Console) -> None:
        self.console = console
        self.states: dict[str, State] = {j: kept.get(j, Status.QUEUED) for j in job_ids}
        self.started: dict[str, float] = {}
        self.t0 = time.monotonic()
        self.costs: dict[str, float] = {}
        self.live: Live | None = None

    def __enter__(self) -> MatrixProgress:
        if self.console.is_terminal:
            # Built on each refresh (4 a second), not on each of the batch's state changes.
            self.live = Live(console=self.console, refresh_per_second=4, get_renderable=self.render)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.refresh()
            self.live.__exit__(None, None, None)

    def on_state(self, job_id: str, state: State) -> None:
        self.states[job_id] = state
        if state == Status.RUNNING:
            self.started[job_id] = time.monotonic()
        if not self.live:
            counts = self.counts()
            # markup=False: rich would take "[passed 2 queued 4]" for a style tag and drop it
            self.console.print(f"{time.strftime('%H:%M:%S')} {job_id}: {state}  [{counts}]", markup=False)

    def record_cost(self, job_id: str, cost: float | None) -> None:
        if cost is not None:
            self.costs[job_id] = cost

    def counts(self) -> str:
        tally: dict[str, int] = {}
        for s in self.states.values():
            tally[s] = tally.get(s, 0) + 1
        return " ".join(f"{k} {v}" for k, v in sorted(tally.items()))

    def render(self) -> Table:
        table = Table(
            title=f"matrix · {self.counts()} · {time.monotonic() - self.t0:.0f}s elapsed · "
            f"cost so far ${sum(self.costs.values()):.4f}"
        )
        table.add_column("job")
        table.add_column("state")
        table.add_column("elapsed")
        # Only the rows the screen shows, the running jobs first: a 512-job table rendered whole
        # four times a second is a core's quarter (Live crops it after rendering every row).
        room = max(5, self.console.height - 8)  # the title (may wrap), header, "more", border
        active = [j for j, s in self.states.items() if still_going(s) and s != Status.QUEUED]
        rest = [j for j, s in self.states.items() if not still_going(s) or s == Status.QUEUED]
        shown = (active + rest)[:room]
        going = set(active)
        for job in shown:
            state = self.states[job]
            elapsed = f"{time.monotonic() - self.started[job]:.0f}s" if job in going else ""
            colour = STATE_COLOURS.get(state, "red")
            table.add_row(Text(job), f"[{colour}]{escape(state)}[/{colour}]", elapsed)
        if len(self.states) > len(shown):
            table.add_row(Text(f"… and {len(self.states) - len(shown)} more"), "", "")
        return table


# long: its twenty options take a line each (commands/options.py); the body loads, checks, plans and prints
def matrix(
    jobs_file: opt.JobsFile,
    parallel: opt.Parallel = 2,
    image: opt.MatrixImage = None,
    retry_failed: opt.RetryFailed = False,
    fresh: opt.Fresh = False,
    fail_under: opt.FailUnder = None,
    dry_run: opt.DryRun = False,
    include: opt.OnlyTasks = [],  # noqa: B006 - typer's default, never mutated
    exclude: opt.SkipTasks = [],  # noqa: B006
    budget_usd: opt.BatchBudget = None,
    baseline_ref: opt.Baseline = None,
    alpha: float = ALPHA_OPT,
    fail_on_regression: bool = FAIL_OPT,
    upstream: opt.Upstream = None,
    infra_retries: opt.InfraRetries = 2,
    allow_large: opt.AllowLarge = False,
    oracle: opt.Oracle = False,
    reserve: opt.Reserve = None,
    home: Path | None = HOME_OPT,
    backend_choice: str | None = BACKEND_OPT,
) -> None:
    """Run a matrix of jobs side by side, each in its own container; resumable.

    Exit codes: 0 all passed (or --fail-under met), 1 below it, 2 bad usage, 3 infrastructure
    errors remained after --infra-retries, 4 below it with jobs paused at the budget (run
    again with a higher --budget-usd to continue them). Paused jobs count as not passed.
    """
    jf = _load(jobs_file, allow_large, include, exclude)
    jf = _as_oracle(jf, home_at(home)) if oracle else jf
    settings = _checked_options(
        jf, parallel=parallel, upstream=upstream, infra_retries=infra_retries, fail_under=fail_under
    )
    batch_budget = _batch_budget(budget_usd, jf)
    h = home_at(home)
    reserve_size = _reserve(reserve, h.root)
    # Read now: a missing baseline stops the run before anything is spent, and a baseline that
    # is this same batch means its results as they were before this run.
    baseline = baseline_or_exit(baseline_ref, h, alpha, fail_on_regression)
    engine = backend_for(home, backend_choice, jf.backend)  # a bad choice: refused before any write
    jf, pinned, bundle, unbuilt = _environments(
        jf, image, h, chosen_backend(backend_choice, jf.backend), dry_run, parallel
    )
    image_id = pinned.id
    records = load_records(h.batch_dir(jf.name), [j.id for j in jf.jobs])
    plan = plan_resume(jf.jobs, image_id, records, retry_failed=retry_failed, fresh=fresh)
    by_id = {j.id: j for j in jf.jobs}  # jf.job() is a scan: quadratic over 200,000 jobs
    pf = _preflight(jf, plan, by_id, h, home_given=home_named(home))
    finish_preflight(pf, image_id, engine_for(h.root, backend_choice, jf.backend), remember=not dry_run)
    modes = ", ".join(jf.gateway_modes)
    if dry_run and disk_problem(engine) is None:  # the plan says whether the jobs' disks fit together
        _say_disks(h, plan, by_id, reserve_bytes(parallel, reserve_size), parallel)
    _say_plan(jf, image_id, modes, plan, dry_run)
    _start_batch(h, jf, pinned, modes, unbuilt, plan)
    batch = BatchPlan(
        home=h,
        batch=jf.name,
        jobs=[(by_id[d.job_id], d.previous) for d in plan.to_run if d.job_id not in unbuilt],
        image=pinned,
        parallel=parallel,
        infra_retries=infra_retries,
        search=[jf.path.parent],
        budget_usd=batch_budget,
        settings=settings,
        wake=plan.to_wake,
        bundle=bundle,
        oracle=oracle,
        reserve=reserve_size,
    )
    kept = _kept(plan, unbuilt)
    _run(engine, batch, MatrixProgress([j.id for j in jf.jobs], kept, err))
    results = _report(h, jf.name, jobs=list(jf.jobs), image_id=image_id, baseline=baseline)
    if oracle:
        _oracle_verdict(h, jf)
    _exit(results, fail_under, regressed=fail_on_regression and baseline is not None and baseline.regressed)


def _say_disks(h: Home, plan: ResumePlan, by_id: Mapping[str, JobSpec], reserve: int, parallel: int) -> None:
    """One line when the jobs' own disks, at their limits at once, would not fit on the home."""
    disks = [by_id[d.job_id].disk_bytes for d in plan.to_run]
    existing = next((p for p in (h.root, *h.root.parents) if p.exists()), h.root)  # a dry run made none
    why = overcommitted(existing, reserve, disks, parallel)
    if why is not None:
        err.print(f"note: {why}", markup=False, highlight=False)


def _say_plan(jf: JobsFile, image_id: str, modes: str, plan: ResumePlan, dry_run: bool) -> None:
    """The batch's one line, what runs again and why; a dry run lists its jobs and ends here."""
    err.print(
        f"batch {jf.name}: {len(jf.jobs):,} jobs · image {image_id[:19]} · model: {modes} · {plan.summary()}",
        markup=False,
    )
    for line in rerun_lines(plan):
        err.print(line, markup=False, highlight=False)
    if dry_run:
        for line in plan_lines(plan, jf.jobs):
            out.print(line, markup=False, highlight=False)
        raise typer.Exit(0)


def _exit(results: BatchResults, fail_under: float | None, *, regressed: bool) -> NoReturn:
    """The batch's exit code: its classes, --fail-under, and a regression against the baseline."""
    raise typer.Exit(
        exit_code_for(
            results.class_counts(), threshold_met=results.ci_passed(fail_under), regression=regressed
        )
    )


def _as_oracle(jf: JobsFile, h: Home) -> JobsFile:
    """The jobs file's tasks as the oracle runs them: one job per task with hidden tests, in a
    batch of its own, asking no model; a task with no solution/solve.sh is said, and not run."""
    found = oracle_jobs(jf.jobs, oracle_scenario(h.root / ".cache"))
    for task in found.unsolvable:
        err.print(f"oracle: {task}: no solution/solve.sh, not checked", markup=False)
    if not found.jobs:
        fail(f"--oracle: no task of {jf.path.name} has hidden tests and a solution/solve.sh to run")
    return replace(jf, name=jf.name + ORACLE_SUFFIX, jobs=found.jobs)


def _oracle_verdict(h: Home, jf: JobsFile) -> None:
    """Every task whose solution did not reach reward 1, one line each; exit 1 if any."""
    records = load_records(h.batch_dir(jf.name), [j.id for j in jf.jobs])
    failures = oracle_failures([r for r in records.values() if isinstance(r, JobRecord)])
    for line in failures:
        err.print(f"oracle failed: {line}", markup=False)
    err.print(f"oracle: {len(jf.jobs) - len(failures)} of {len(jf.jobs)} task(s) solved", markup=False)
    raise typer.Exit(1 if failures else 0)


def _preflight(
    jf: JobsFile, plan: ResumePlan, by_id: Mapping[str, JobSpec], h: Home, *, home_given: bool
) -> Preflight:
    """The host's pre-flight of the jobs that would run (their workspaces too), before any
    folder, record or batch.json is written; the engine's part is finish_preflight's."""
    pf = Preflight(_describe(jf.path.name), batch=jf.name)
    pf.add_jobs([by_id[d.job_id] for d in plan.to_run], search=[jf.path.parent])
    fresh_copies = [by_id[d.job_id] for d in plan.to_run if d.job_id not in plan.to_wake]
    fix = f'workspace_limit = "2g" (or "none") in {jf.path.name}'
    pf.add_workspaces(fresh_copies, h.root, fix=fix, home_given=home_given)
    return pf


def _batch_budget(given: float | None, jf: JobsFile) -> float | None:
    """--budget-usd (checked by the field's one validator), else [batch].budget_usd."""
    if given is None:
        return jf.budget_usd
    return option_value("--budget-usd", f"{given:g}", fields.budget_usd(given))


def _reserve(given: str | None, home: Path) -> int | None:
    """--reserve as bytes, checked against the home's disk before anything is written."""
    if given is None:
        return None
    size = parse_memory(given)
    if size is None:
        raise FlowerBatchError(
            f'--reserve {given!r}: expected a size like "2g" (the free space to keep on the home\'s disk)'
        )
    existing = next((p for p in (home, *home.parents) if p.exists()), home)
    if (problem := reserve_problem(existing, size, given)) is not None:
        raise FlowerBatchError(problem)
    return size


def _load(jobs_file: Path, allow_large: bool, include: list[str], exclude: list[str]) -> JobsFile:
    """The jobs file, narrowed by `-i`/`-x` globs on task names; its problems one line each."""
    try:
        return load_jobs_file(
            jobs_file, max_jobs=None if allow_large else MAX_JOBS, include=include, exclude=exclude
        )
    except MatrixFileError as exc:  # one line per problem, each naming its file and field
        err.print(str(exc), markup=False)
        raise typer.Exit(2) from None


def _checked_options(
    jf: JobsFile, *, parallel: int, upstream: str | None, infra_retries: int, fail_under: float | None
) -> GatewaySettings:
    """The options and the host checked before anything is read or written; the host's settings."""
    if parallel < 1:
        fail(f"-j/--parallel {parallel}: give at least 1 (the number of jobs run at once)")
    settings = host_settings(upstream)
    if infra_retries < 0:
        fail(f"--infra-retries {infra_retries}: give 0 (never) or more re-runs of infrastructure errors")
    missing = jf.missing_secrets(settings.environ)
    # Each gateway mode's needs (anthropic: the host's key), checked before any job is queued.
    missing += [
        f"{jf.path.name}: {problem}"
        for mode in jf.gateway_modes
        if (problem := mode_problem(mode, settings.environ))
    ]
    if missing:
        for line in missing:
            err.print(f"[red]flower-batch:[/red] {escape(line)}")
        raise typer.Exit(2)
    if fail_under is not None and not 0 <= fail_under <= 1:
        fail("--fail-under: give a pass rate between 0 and 1, e.g. 0.8")
    print_warnings(include_warnings(jf.path, jf.axes))
    return settings


def _run(engine: Backend, batch: BatchPlan, progress: MatrixProgress) -> None:
    """Reap what a killed earlier run left, then run the batch (running/batch.py), printing it."""
    reaped = run_async(lambda: reap_batch(engine, batch.home, batch.batch))
    if reaped:
        err.print(
            f"removed {reaped} container(s)/network(s) left by an earlier run of {batch.batch} that was killed"
        )
    if not batch.jobs:
        return

    def on_event(event: BatchEvent) -> None:
        if isinstance(event, InfraRetry):
            err.print(
                f"infrastructure errors: running {len(event.job_ids)} job(s) again (retry {event.n}/"
                f"{batch.infra_retries}): " + ", ".join(event.job_ids),
                markup=False,
            )
            return
        progress.on_state(event.job_id, event.state)
        progress.record_cost(event.job_id, event.cost_usd)

    with progress:
        run_async(lambda: run_batch(engine, batch, on_event))


def _describe(file: str) -> Describe:
    def describe(field: str, value: str, jobs: Sequence[JobSpec]) -> str:
        tasks = list(dict.fromkeys(j.task for j in jobs))
        who = (
            f"task {tasks[0]}"
            if len(tasks) == 1
            else f"tasks {', '.join(tasks[:3])}" + ("…" if len(tasks) > 3 else "")
        )
        return f'{file}: {field} "{value}" ({who}, {len(jobs)} job{"" if len(jobs) == 1 else "s"})'

    return describe


def _environments(
    jf: JobsFile, image: str | None, h: Home, backend: str, dry_run: bool, parallel: int
) -> tuple[JobsFile, PinnedImage, str | None, dict[str, str]]:
    """The runtime, and every job's own image pinned (built, probed) before anything is written;
    a dry run builds nothing; folders build `parallel` at once. `--image` of an image `image build`
    did not make is the task image of every job that names none. A failed build is one line and
    leaves out only its task's jobs: the last value, job id -> that line (their records say so)."""
    pinned, task_image = split_image(image, jf.image)
    jobs = [j if j.image or j.build or not task_image else replace(j, image=task_image) for j in jf.jobs]
    found = pin_environments(
        jobs,
        pinned,
        home=h,
        where=jf.path.name,
        backend=backend,
        dry_run=dry_run,
        parallel=parallel,
        keep_going=True,
    )
    for line in dict.fromkeys(found.unbuilt.values()):
        err.print(f"{line}; its jobs are not run (the other tasks are)", markup=False)
    ready = {j.id: j for j in found.jobs}
    return replace(jf, jobs=tuple(ready.get(j.id, j) for j in jobs)), pinned, found.bundle, found.unbuilt


def _kept(plan: ResumePlan, unbuilt: Mapping[str, str]) -> dict[str, State]:
    """The live table's jobs that do not run: kept ones as they ended, unbuilt ones `error`."""
    kept: dict[str, State] = {d.job_id: d.previous.status for d in plan.to_keep if d.previous}
    return kept | dict.fromkeys(unbuilt, Status.ERROR)


def _start_batch(
    h: Home, jf: JobsFile, pinned: PinnedImage, modes: str, unbuilt: Mapping[str, str], plan: ResumePlan
) -> None:
    """batch.json, and an `error` record for each job whose task's image did not build (the next
    run builds it again: a job with no verdict runs again)."""
    write_batch_file(h.batch_dir(jf.name), jf.path, pinned.id, dict(pinned.versions), modes)
    previous = {d.job_id: d.previous for d in plan.to_run if d.job_id in unbuilt}
    for job in jf.jobs:
        if job.id in unbuilt:
            before = previous.get(job.id)
            outcome = JobOutcome(job.id, Status.ERROR, reason=unbuilt[job.id], failure_class="infrastructure")
            record = new_record(
                job, batch=jf.name, image_id=pinned.id, attempt=before.attempt + 1 if before else 1
            )
            write_record(
                h.job(jf.name, job.id).record_path, record.with_outcome(outcome, finished_at=now_iso())
            )


def write_batch_file(
    batch_dir: Path, jobs_file: Path, image_id: str, versions: dict[str, str], modes: str
) -> None:
    batch_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "jobs_file": str(jobs_file),
        "image_id": image_id,
        "versions": versions,
        "gateway_modes": modes,
        "updated_at": now_iso(),
    }
    write_atomic(batch_dir / "batch.json", json.dumps(data, indent=2) + "\n")


def _report(
    h: Home, batch: str, *, jobs: list[JobSpec] | None, image_id: str | None, baseline: Baseline | None = None
) -> BatchResults:
    batch_dir = h.batch_dir(batch)
    loaded = load_records(batch_dir, [j.id for j in jobs] if jobs else None)
    records: dict[str, JobRecord] = {k: v for k, v in loaded.items() if isinstance(v, JobRecord)}
    for job_id, problem in loaded.items():
        if not isinstance(problem, JobRecord):
            err.print(f"[yellow]warning:[/yellow] {escape(job_id)}: {escape(str(problem))}")
    tails = log_tails(batch_dir, records)
    live = Liveness(h.root)  # records left running/queued by an orchestrator that is gone
    in_flight = {j: (live.status(r), live.reason(r)) for j, r in records.items() if not r.finished}
    results = results_from_records(
        records,
        batch=batch,
        image_id=image_id,
        jobs=jobs,
        log_tails=tails,
        batch_dir=batch_dir,
        in_flight=in_flight,
    )
    out.print(comparison_table(results))
    paths = write_reports(results, batch_dir / "report", baseline.sections(results) if baseline else ())
    err.print(summary_line(results), markup=False)
    err.print(f"results {paths.results_json}\njunit   {paths.junit_xml}\nreport  {paths.html}", markup=False)
    if baseline:
        baseline.finish(batch_dir / "report")
    return results


def report(
    batch: str = typer.Argument(
        ..., help="batch name (a folder under volumes/)", autocompletion=complete_batch
    ),
    baseline_ref: str | None = typer.Option(
        None,
        "--baseline",
        help="add a comparison with this batch or results.json to the report",
        autocompletion=complete_batch,
    ),
    alpha: float = ALPHA_OPT,
    fail_on_regression: bool = FAIL_OPT,
    home: Path | None = HOME_OPT,
) -> None:
    """Regenerate the table, results.json, junit.xml and report.html of a batch from its records."""
    h = home_at(home)
    bdir = h.batch_dir(batch)
    if not bdir.is_dir():
        fail(f"no batch {batch} under {h.root} (see `flower-batch ls`)")
    baseline = baseline_or_exit(baseline_ref, h, alpha, fail_on_regression)
    jobs = None
    meta = bdir / "batch.json"
    image_id = None
    if meta.exists():
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            err.print(
                f"[yellow]warning:[/yellow] {escape(str(meta))} is unreadable ({escape(str(exc))}); "
                "reporting from the job records",
                markup=True,
            )
            data = {}
        image_id = data.get("image_id")
        try:
            jobs = list(load_jobs_file(Path(data["jobs_file"])).jobs)
        except (FlowerBatchError, OSError, KeyError, TypeError):
            jobs = None  # the jobs file moved or changed: report what the records say
    _report(h, batch, jobs=jobs, image_id=image_id, baseline=baseline)
    if fail_on_regression and baseline is not None and baseline.regressed:
        raise typer.Exit(1)
