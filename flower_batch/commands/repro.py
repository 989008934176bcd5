"""`flower-batch repro <job>`: reproduce a recorded job in a clean container (see repro.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from flower_batch.commands.common import (
    BACKEND_OPT,
    HOME_OPT,
    backend_for,
    chosen_backend,
    err,
    fail,
    home_at,
    host_settings,
    load_job,
    out,
    progress,
    run_async,
    status_cell,
)
from flower_batch.commands.completion import complete_job
from flower_batch.commands.environments import for_repro
from flower_batch.commands.preflight import engine_for, preflight_job
from flower_batch.errors import FlowerBatchError
from flower_batch.jobmodel.classes import exit_code_for_job
from flower_batch.jobmodel.modes import mode_label
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.units import format_duration
from flower_batch.layout import JobDir
from flower_batch.running.attempts import attempt_dir, attempt_numbers
from flower_batch.running.batch import run_one
from flower_batch.running.plan import BatchPlan
from flower_batch.running.repro import (
    REPRO_BATCH,
    ReproDiff,
    ReproPlan,
    compare_jobs,
    pinned_image,
    plan_repro,
    write_report,
)


def _calls(step: dict[str, Any]) -> str:
    names = [c.get("name") or "?" for c in step["tool_calls"]]
    return ", ".join(names) if names else "-"


def _diff_table(diff: ReproDiff) -> Table:
    table = Table(title="original vs reproduction (one row per step attempt)", show_lines=False)
    for col in ("#", "step", "ok", "verdict", "tool calls", "same"):
        table.add_column(col)
    for i in range(max(len(diff.original), len(diff.repro))):
        a = diff.original[i] if i < len(diff.original) else None
        b = diff.repro[i] if i < len(diff.repro) else None

        def pair(
            key: str,
            fmt: Callable[[Any], str] = str,
            a: dict[str, Any] | None = a,
            b: dict[str, Any] | None = b,
        ) -> str:
            left = fmt(a[key]) if a else "—"
            right = fmt(b[key]) if b else "—"
            return escape(left if left == right else f"{left} → {right}")  # step names, verdicts: text

        same = (
            a is not None
            and b is not None
            and all(a[k] == b[k] for k in ("step", "ok", "verdict", "tool_calls"))
        )
        table.add_row(
            str(i + 1),
            pair("step"),
            pair("ok", lambda v: "yes" if v else "no"),
            pair("verdict", lambda v: v or ""),
            pair("tool_calls", lambda v: _calls({"tool_calls": v})),
            "[green]yes[/green]" if same else "[red]no[/red]",
        )
    return table


def _print_plan(plan: ReproPlan) -> None:
    err.print(
        f"reproducing {plan.original.batch}/{plan.original.job} as {REPRO_BATCH}/{plan.spec.id} · "
        f"image {plan.image.short} · model: {mode_label(plan.mode)}",
        markup=False,
    )
    for item in plan.drift:
        err.print(f"[yellow]drift (allowed):[/yellow] {escape(str(item))}")


def _print_result(plan: ReproPlan, record: JobRecord, diff: ReproDiff, report: Path) -> None:
    out.print(_diff_table(diff))
    same_files = diff.files_original == diff.files_repro and not diff.files_differing
    changed = ", ".join(f"{p} ({s})" for p, s in diff.files_repro.items()) or "none"
    out.print(f"files changed: {'same in both' if same_files else 'DIFFERENT'} — {changed}", markup=False)
    if diff.files_differing:
        out.print(f"files whose final content differs: {', '.join(diff.files_differing)}", markup=False)
    replay = json.loads(report.read_text()).get("replay")
    if replay:
        div = replay.get("divergence")
        out.print(
            f"replay: served {replay.get('served')} of {replay.get('recorded')} recorded responses"
            + (f" · [red]{escape(str(div['message']))}[/red]" if div else "")
        )
    out.print(
        f"status: original {status_cell(plan.record.status)} · reproduction {status_cell(record.status)}"
        + (f" — {escape(record.reason)}" if record.reason else "")
        + f" · {format_duration(record.duration_s or 0)}"
    )
    verdict = (
        "[green]identical[/green]"
        if diff.identical
        else f"[red]differs[/red]: {escape(str(diff.first_difference()))}"
    )
    out.print(f"reproduction {verdict} · report {escape(str(report))}")


def _earlier_attempt(jd: JobDir, n: int) -> tuple[JobDir, JobRecord]:
    kept = attempt_numbers(jd)
    if n not in kept:
        listing = ", ".join(map(str, kept)) if kept else "none kept"
        fail(
            f"job {jd.batch}/{jd.job} has no earlier attempt {n} (attempts: {listing}; "
            f"the current one is `repro {jd.batch}/{jd.job}` without --attempt)"
        )
    folder = attempt_dir(jd, n)
    try:
        return folder, folder.record()
    except (FileNotFoundError, FlowerBatchError) as exc:
        fail(f"job {jd.batch}/{jd.job} attempt {n}: its record is unreadable ({exc})")
        raise


# long: typer's option declarations take a third of it; the body plans, runs and prints
def repro(
    job: str = typer.Argument(..., help="the recorded job (id, or batch/job)", autocompletion=complete_job),
    live: bool = typer.Option(
        False, "--live", help="call the model again instead of replaying the recording"
    ),
    allow_drift: bool = typer.Option(
        False,
        "--allow-drift",
        help="run even if the image, SDK or CLI version (or the workspace source) changed",
    ),
    image: str | None = typer.Option(
        None, "--image", help="run on this image instead of the recorded id (drift)"
    ),
    workflow: str | None = typer.Option(
        None,
        "--workflow",
        "-f",
        help="use this workflow (module:attr or file.py:attr) instead of the recorded copy",
    ),
    name: str | None = typer.Option(None, "--name", help="id of the new job (default <batch>.<job>.r<n>)"),
    attempt: int | None = typer.Option(
        None, "--attempt", help="reproduce this earlier attempt (kept in <job>/attempts/<n>/; see `show`)"
    ),
    home: Path | None = HOME_OPT,
    backend_choice: str | None = BACKEND_OPT,
) -> None:
    """Reproduce a recorded job in a clean container (replay by default), then diff the manifests.

    Exit codes: 0 identical, 1 differs, 2 bad usage, 3 infrastructure error (no verdict)."""
    settings = host_settings()
    h = home_at(home)
    original, record = load_job(home, job)
    if attempt is not None:
        original, record = _earlier_attempt(original, attempt)
    pinned = pinned_image(image or record.image_id)
    plan = plan_repro(
        h,
        original,
        record,
        image=pinned,
        live=live,
        allow_drift=allow_drift,
        workflow=workflow,
        name=name,
    )
    backend = chosen_backend(backend_choice, record.backend)
    plan, bundle = for_repro(plan, home=h, backend=backend, allow_drift=allow_drift)
    preflight_job(
        plan.spec,
        plan.image.id,
        REPRO_BATCH,
        describe=f"reproduction of {original.batch}/{original.job}",
        flows_dir=plan.flows_from,
        engine=engine_for(h.root, backend_choice, record.backend),
    )
    _print_plan(plan)

    batch = BatchPlan(
        h,
        REPRO_BATCH,
        ((plan.spec, None),),
        plan.image,
        settings=settings,
        flows_from=plan.flows_from,
        bundle=bundle,
    )
    engine = backend_for(home, backend_choice, record.backend)

    async def go() -> JobRecord:
        async with engine as backend:
            return await run_one(backend, batch, progress)

    result = run_async(go)
    new = h.job(REPRO_BATCH, plan.spec.id)
    diff = compare_jobs(original, new, plan.spec.workspace)
    report = write_report(plan, new, result, diff)
    _print_result(plan, result, diff, report)
    # An infrastructure error in the reproduction is no verdict on it: 3, as matrix exits
    raise typer.Exit(exit_code_for_job(result.failure_class, verdict_ok=diff.identical))
