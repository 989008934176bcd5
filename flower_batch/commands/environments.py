"""The commands' side of task images: which image is the runtime and which the task's, the
`--build` folder, and the pre-flight that pins every job's environment (running/task_images.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from flower_batch.errors import FlowerBatchError, ImageMissing, NotARuntimeImage
from flower_batch.jobmodel.environment import BuildRecipe
from flower_batch.jobmodel.hashing import tree_hash
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.layout import Home
from flower_batch.running.image import DEFAULT_TAG, pinned_image
from flower_batch.running.task_images import Environments, resolve_environments

from .common import err


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
) -> Environments:
    """Every job's task image pinned (built, probed) before any job folder is touched."""
    if backend == "swarm" and any(job.image or job.build or job.task_image for job in jobs):
        raise FlowerBatchError(
            f"{where}: a task's own image (image/build) runs on the local Docker engine only, "
            "not yet on a cluster; run it with --backend docker"
        )
    return resolve_environments(
        jobs,
        runtime,
        where=where,
        home_root=home.root,
        log=lambda line: err.print(line, markup=False),
        dry_run=dry_run,
        keep_pinned=keep_pinned,
    )
