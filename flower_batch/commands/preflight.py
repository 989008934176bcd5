"""The commands' side of pre-flight: run the engine checks, print one line per problem, exit 2."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import typer

from flower_batch.backend.docker.backend import DockerBackend
from flower_batch.commands.common import chosen_backend, err, open_named, run_async, user_cache
from flower_batch.errors import FlowerBatchError, escape_controls
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.preflight import Preflight
from flower_batch.preflight.import_cache import ImportCache


@dataclass(frozen=True)
class Engine:
    """Where a command's jobs will run, as pre-flight needs to know it."""

    name: str  # backend/select.py's BACKENDS
    home: Path

    @property
    def scratch(self) -> Path | None:
        """Where the import check stages its files: on a cluster the manager's engine runs it and
        sees only shared storage, so under the home; on one machine a temporary folder (None)."""
        return self.home / ".preflight" if self.name == "swarm" else None


def engine_for(home: Path, flag: str | None, recorded: str | None) -> Engine:
    """The engine `--backend` (or the environment, or what the job or jobs file recorded) names."""
    try:
        return Engine(chosen_backend(flag, recorded), home)
    except FlowerBatchError:
        return Engine("docker", home)  # a bad choice is refused, in one line, where the backend is opened


def preflight_job(
    spec: JobSpec,
    image_id: str,
    batch: str,
    *,
    describe: str | None,
    flows_dir: Path | None,
    engine: Engine | None = None,
    copies_from: Path | None = None,
    home_given: bool = False,
) -> None:
    """Pre-flight of one job (run, wake, repro): exit 2 with one line per problem, nothing written.
    `copies_from`: the home of a job whose workspace is copied fresh (`run`), checked too."""
    pf = Preflight(
        flag_describe if describe is None else (lambda f, v, _: f"{describe}: {f} {v}"), batch=batch
    )
    pf.add_jobs([spec], flows_dir=flows_dir)
    if copies_from is not None:
        pf.add_workspaces([spec], copies_from, fix="--workspace-limit SIZE (or none)", home_given=home_given)
    finish_preflight(pf, image_id, engine)


def finish_preflight(
    pf: Preflight, image_id: str | None, engine: Engine | None = None, *, remember: bool = True
) -> None:
    """Engine checks (with an image to import the workflows in; on a cluster also the image and
    the shared storage from every node), then: any problem -> its lines, exit 2, nothing written.
    The targets seen to load are remembered in the home only when all passed and `remember`
    (not for --dry-run): a refused or dry command leaves the home as it was."""
    seen = ImportCache(engine.home) if engine is not None else None
    if image_id is not None:
        scratch = engine.scratch if engine is not None else None

        async def go() -> None:
            async with DockerBackend(hosts_folder=user_cache()) as backend:
                await pf.check_engine(backend, image_id, scratch=scratch, seen=seen)
            if engine is not None and engine.name != "docker":
                async with open_named(engine.name, engine.home) as cluster:
                    await pf.check_cluster(cluster, image_id)

        run_async(go)
    print_warnings(pf.warnings)
    if pf.problems:
        for line in dict.fromkeys(pf.problems):
            err.print(f"flower-batch: {escape_controls(line)}", markup=False, highlight=False)
        raise typer.Exit(2)
    if seen is not None and remember:
        seen.commit()


def print_warnings(lines: Sequence[str]) -> None:
    for line in lines:
        err.print(f"warning: {escape_controls(line)}", markup=False, highlight=False)


def flag_describe(field: str, value: str, jobs: Sequence[JobSpec]) -> str:
    """How `run` names a value: by its flag."""
    return f"--{field} {value}"
