"""`flower-batch export BATCH --format atif|inspect [--out DIR]`: a batch's results in the formats
other tools read (flower_batch/export/, docs/export.md). Parses the options, shows progress on a
terminal, prints where the files went and what was left out."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flower_batch.commands.common import HOME_OPT, err, home_at, out
from flower_batch.export.batch import export_batch, out_folder


def export(
    batch: str = typer.Argument(..., help="the batch to export"),
    fmt: str = typer.Option(
        ...,
        "--format",
        "-f",
        help="atif: each job's ATIF trajectory (Harbor); inspect: one Inspect AI eval log per task x variant",
    ),
    out_dir: Path | None = typer.Option(
        None,
        "--out",
        help="folder for the files (default: atif <job>/trajectory.json in the batch; "
        "inspect <batch>/report/inspect/)",
    ),
    home: Path | None = HOME_OPT,
) -> None:
    """Write a batch's results as ATIF trajectories or Inspect eval logs."""
    h = home_at(home)
    fmt = fmt.lower()
    out_folder(h, batch, fmt, out_dir)  # a wrong batch, format or folder says so before any work
    with Progress(
        TextColumn("export {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task(f"{batch} ({fmt})", total=None)
        done = export_batch(
            h, batch, fmt, out_dir, lambda n, total, _: bar.update(task, completed=n, total=total)
        )
    for problem in done.problems:
        err.print(f"[yellow]left out[/yellow] {escape(problem)}")
    what = "trajectories" if fmt == "atif" else "eval logs"
    out.print(
        f"{len(done.files)} {what} from {done.jobs} jobs of {escape(batch)} in {escape(str(done.folder))}"
        + (f" ({done.skipped} jobs left out)" if done.skipped else "")
    )
