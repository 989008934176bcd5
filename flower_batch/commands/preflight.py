"""The commands' side of pre-flight: run the engine checks, print one line per problem, exit 2."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer

from flower_batch.backend.docker_backend import DockerBackend
from flower_batch.commands.common import err, run_async
from flower_batch.errors import one_line
from flower_batch.matrix import JobSpec
from flower_batch.preflight import Preflight


def preflight_job(spec: JobSpec, image_id: str, batch: str, *, describe: str | None, flows_dir: Path | None) -> None:
    """Pre-flight of one job (run, wake, repro): exit 2 with one line per problem, nothing written."""
    pf = Preflight(flag_describe if describe is None else (lambda f, v, _: f"{describe}: {f} {v}"), batch=batch)
    pf.add_jobs([spec], flows_dir=flows_dir)
    finish_preflight(pf, image_id)


def finish_preflight(pf: Preflight, image_id: str | None) -> None:
    """Engine checks (with an image to import the workflows in), then: any problem -> its lines, exit 2."""
    if image_id is not None:

        async def go() -> None:
            async with DockerBackend() as backend:
                await pf.check_engine(backend, image_id)

        run_async(go)
    print_warnings(pf.warnings)
    if pf.problems:
        for line in dict.fromkeys(pf.problems):
            err.print(f"flower-batch: {one_line(line)}", markup=False, highlight=False)
        raise typer.Exit(2)


def print_warnings(lines: Sequence[str]) -> None:
    for line in lines:
        err.print(f"warning: {one_line(line)}", markup=False, highlight=False)


def flag_describe(field: str, value: str, jobs: Sequence[JobSpec]) -> str:
    """How `run` names a value: by its flag."""
    return f"--{field} {value}"
