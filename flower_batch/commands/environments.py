"""The commands' side of task images: which image is the runtime and which the task's, the
`--build` folder, and the pre-flight that pins every job's environment (running/task_images.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from flower_batch.errors import FlowerBatchError, ImageMissing, NotARuntimeImage, ReproError
from flower_batch.jobmodel.environment import BuildRecipe
from flower_batch.jobmodel.hashing import tree_hash
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.layout import Home
from flower_batch.running.image import DEFAULT_TAG, pinned_image
from flower_batch.running.plan import BatchPlan
from flower_batch.running.repro import ReproPlan
from flower_batch.running.task_images import Environments, resolve_environments, task_image_drift

from .common import cluster_registry_setting, err


def split_image(ref: str | None, fallback: str | None = None) -> tuple[PinnedImage, str | None]:
    """(the runtime, the task's own image or None). An image `image build` made is the runtime
    (flower-batch's own image, as before); any other image is the task's, run with flower
    brought in from the default runtime. `fallback`: jobs.toml's [defaults] image."""
    for candidate in (ref, fallback):
        if candidate is None:
            continue
        try:
            return pinned_image(candidate), None
        except NotARuntimeImage:
            if candidate is ref:
                return pinned_image(DEFAULT_TAG), ref
        except ImageMissing:
            if candidate == DEFAULT_TAG:
                raise
            raise FlowerBatchError(
                f"image {candidate} is not in the Docker engine (nothing is pulled): load or build it "
                f"(docker load, docker build -t {candidate} DIR), or give a folder with --build DIR"
            ) from None
    return pinned_image(DEFAULT_TAG), None


def build_recipe(folder: Path, dockerfile: str = "Dockerfile") -> BuildRecipe:
    """`--build DIR`, checked before anything is written."""
    resolved = folder.expanduser().resolve()
    if not resolved.is_dir():
        raise FlowerBatchError(f"--build {folder}: not a folder; give a folder with a Dockerfile")
    if not (resolved / dockerfile).is_file():
        raise FlowerBatchError(
            f"--build {folder}: the folder has no {dockerfile}; write one, or give another folder"
        )
    return BuildRecipe(resolved, tree_hash(resolved), dockerfile)


def pin_environments(
    jobs: Sequence[JobSpec],
    runtime: PinnedImage,
    *,
    home: Home,
    where: str,
    backend: str,
    dry_run: bool = False,
    keep_pinned: bool = False,
    parallel: int = 1,
    keep_going: bool = False,
) -> Environments:
    """Every job's task image pinned (built, probed) before any job folder is touched; on the
    swarm, with the runtime layered onto it and pushed to the cluster's registry. With
    `keep_going` a failed build leaves out only its task's jobs (`Environments.unbuilt`)."""
    if backend == "swarm" and any(job.root == "writable" for job in jobs):
        raise FlowerBatchError(
            f'{where}: root = "writable" keeps the job\'s state in an image of the machine that ran '
            "it: local Docker engine only, not yet on a cluster; run it with --backend docker"
        )
    return resolve_environments(
        jobs,
        runtime,
        where=where,
        home_root=home.root,
        log=lambda line: err.print(line, markup=False),
        dry_run=dry_run,
        keep_pinned=keep_pinned,
        parallel=parallel,
        keep_going=keep_going,
        on_cluster=backend == "swarm",
        registry=cluster_registry_setting(),
    )


def pinned_again(plan: BatchPlan, *, home: Home, where: str, backend: str) -> BatchPlan:
    """`wake`: the plan's job in the image its record pinned, by id (flower brought in again), or one line."""
    ((spec, record),) = plan.jobs
    found = pin_environments([spec], plan.image, home=home, where=where, backend=backend, keep_pinned=True)
    return replace(plan, jobs=((found.jobs[0], record),), bundle=found.bundle)


def for_repro(
    plan: ReproPlan, *, home: Home, backend: str, allow_drift: bool
) -> tuple[ReproPlan, str | None]:
    """`repro`: the image the original ran in, unless the task's image drifted since (its build
    folder's content, or the id its tag names): then refused, or with `allow_drift` the image the
    task names now, built if need be. Returns the plan and the runtime bundle's volume."""
    where = f"{plan.original.batch}/{plan.original.job}"
    drift = task_image_drift(plan.spec)
    if drift and not allow_drift:
        raise ReproError(
            f"refusing to reproduce {where}: {'; '.join(drift)} (pass --allow-drift to run anyway)"
        )
    found = pin_environments(
        [plan.spec], plan.image, home=home, where=f"repro {where}", backend=backend, keep_pinned=not drift
    )
    return replace(plan, spec=found.jobs[0], drift=[*plan.drift, *drift]), found.bundle


def describe_images(spec: JobSpec, runtime_id: str) -> str:
    """For the line a command prints: `debian:13 (sha256:…) + flower sha256:…`, or the runtime's id."""
    return f"{spec.task_image.describe()} + flower {runtime_id[:19]}" if spec.task_image else runtime_id[:19]
