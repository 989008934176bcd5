"""The commands' side of pre-flight: run the engine checks, print one line per problem, exit 2."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer

from flower_batch.errors import FlowerBatchError, one_line

from .backend.docker_backend import DockerBackend
from .backend.select import backend_name
from .cmd_common import err, run_async
from .matrix import JobSpec
from .preflight import Preflight


def preflight_job(spec: JobSpec, image_id: str, batch: str, *, describe: str | None, flows_dir: Path | None,
                  scratch: Path | None = None) -> None:
    """Pre-flight of one job (run, wake, repro): exit 2 with one line per problem, nothing written."""
    pf = Preflight(flag_describe if describe is None else (lambda f, v, _: f"{describe}: {f} {v}"), batch=batch)
    pf.add_jobs([spec], flows_dir=flows_dir)
    finish_preflight(pf, image_id, scratch)


def preflight_scratch(home: Path, flag: str | None, recorded: str | None) -> Path | None:
    """Where the import check stages its files: on a cluster the manager's engine runs it and
    sees only shared storage, so under the home; on one machine a temporary folder (None)."""
    try:
        return home / ".preflight" if backend_name(flag, recorded) == "swarm" else None
    except FlowerBatchError:
        return None  # a bad choice is refused, in one line, where the backend is opened


def finish_preflight(pf: Preflight, image_id: str | None, scratch: Path | None = None) -> None:
    """Engine checks (with an image to import the workflows in), then: any problem -> its lines, exit 2."""
    if image_id is not None:

        async def go() -> None:
            async with DockerBackend() as backend:
                await pf.check_engine(backend, image_id, scratch=scratch)

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
