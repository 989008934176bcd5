"""Each job's environment resolved before anything runs: `image` and `build` to a pinned
`TaskImage`, the runtime bundle's volume made, and every task image probed.

Pre-flight, in this order, before any job folder is touched:
1. an `image` is looked up in the engine (never pulled): missing is one line naming the task;
2. a `build` folder is built once per content (its key: the folder's hash, the Dockerfile's name,
   the build args), reused when an image carrying that key exists; its output streams to `log`
   as progress, the whole log is kept under the home (`.builds/`), and a failed build is one line
   naming the task, the folder, the failing step and the log;
3. the runtime bundle's volume (running/bundle.py), once per runtime build;
4. each distinct task image is probed: one line if flower cannot run in it.
On a cluster, 3 and 4 are instead: the runtime layered onto each task image (once per pair of
ids), each probed, then each pushed to the cluster's registry (running/layered.py).
A task image equal to the runtime image is the runtime image: nothing is mounted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from flower_batch.backend.docker.images import DockerImages
from flower_batch.errors import FlowerBatchError, ImageBuildError
from flower_batch.jobmodel.environment import BuildRecipe, TaskImage
from flower_batch.jobmodel.hashing import tree_hash
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.labels import BUILD_KEY, CLI_VERSION, MANAGED, TASK_BUILD, VERSION
from flower_batch.running.bundle import build_lock, bundle_volume, probe
from flower_batch.running.layered import cluster_registry, layered_for_cluster, with_layered

from .. import __version__

Log = Callable[[str], None]
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")


@dataclass(frozen=True)
class Environments:
    """The jobs with their task images pinned, and the bundle's volume (None: every job runs in
    the runtime image)."""

    jobs: list[JobSpec]
    bundle: str | None
    unbuilt: dict[str, str] = field(default_factory=dict)
    """With `keep_going`: job id -> the one line of its task's failed build (those jobs are not
    in `jobs`: every other task still runs)."""


# long: each option takes a line; the body pins, builds (several at once), then mounts or layers
def resolve_environments(
    jobs: Sequence[JobSpec],
    runtime: PinnedImage,
    *,
    where: str,
    home_root: Path,
    log: Log,
    docker_host: str | None = None,
    dry_run: bool = False,
    keep_pinned: bool = False,
    parallel: int = 1,
    keep_going: bool = False,
    on_cluster: bool = False,
    registry: str | None = None,
) -> Environments:
    """`where`: the jobs file's name (or the command) for the error lines. `dry_run`: builds
    nothing, probes nothing (a folder not built yet is pinned by its key: its image is its
    content, so a job's inputs hash is the same either way). `keep_pinned`: each job runs in the
    image its record pinned (`wake`, `repro`), which must still be in the engine. `parallel`:
    folders built at once (matrix's -j). `keep_going`: a failed build leaves out only its task's
    jobs (`unbuilt`, one line each) instead of stopping everything (a matrix of hundreds), unless
    no job is left to run. `on_cluster`: the runtime is layered onto each task image and pushed
    to `registry` (running/layered.py), not mounted from a volume."""
    if keep_pinned:
        jobs = [replace(job, image=None, build=None) for job in jobs]
    if not any(job.image or job.build or job.task_image for job in jobs):
        return Environments(list(jobs), None)
    images = DockerImages(docker_host)
    try:
        pinned: dict[str, TaskImage | None] = {}
        to_build: dict[str, JobSpec] = {}
        labelled = images.ids_by_label(TASK_BUILD) if any(job.build for job in jobs) else {}  # one request
        for job in jobs:
            key = _key(job)
            if key in pinned or key in to_build:
                continue
            if dry_run and job.build is not None:  # a plan builds nothing: each folder by its key
                found = labelled.get(job.build.key)
                pinned[key] = TaskImage(found or job.build.key, "build", _shown_folder(job.build.folder))
                continue
            if job.build is not None and job.build.key not in labelled:
                to_build[key] = job  # built below, several at once
                continue
            pinned[key] = _pin(images, job, runtime, where=where, home_root=home_root, log=log)
        built, failed = _build_all(
            to_build, where=where, home_root=home_root, log=log, parallel=parallel, docker_host=docker_host
        )
        unbuilt = {job.id: str(failed[_key(job)]) for job in jobs if _key(job) in failed}
        if failed and (not keep_going or len(unbuilt) == len(jobs)):
            raise next(iter(failed.values()))  # the first in the jobs' order; nothing is written
        pinned.update(built)
        jobs = [job for job in jobs if job.id not in unbuilt]
        if dry_run:
            return Environments([replace(job, task_image=pinned[_key(job)]) for job in jobs], None)
        envs = (
            _layered(images, jobs, pinned, runtime, where, home_root, log, docker_host, registry)
            if on_cluster
            else _mounted(images, jobs, pinned, runtime, where, home_root, log)
        )
        return replace(envs, unbuilt=unbuilt)
    finally:
        images.close()


def _owners(
    jobs: Sequence[JobSpec], pinned: Mapping[str, TaskImage | None], where: str
) -> list[tuple[TaskImage, str]]:
    """Each distinct task image and the task an error line names for it."""
    found: dict[str, tuple[TaskImage, str]] = {}
    for job in jobs:
        task_image = pinned[_key(job)]
        if task_image is not None and task_image.id not in found:
            found[task_image.id] = (task_image, f"{where}: task {job.task}")
    return list(found.values())


def _mounted(
    images: DockerImages,
    jobs: Sequence[JobSpec],
    pinned: Mapping[str, TaskImage | None],
    runtime: PinnedImage,
    where: str,
    home_root: Path,
    log: Log,
) -> Environments:
    """One machine: the bundle's volume, and each task image probed with it mounted."""
    used = _owners(jobs, pinned, where)
    volume = bundle_volume(images, runtime.id, log) if used else None
    for task_image, whose in used:
        assert volume is not None
        _probe(images, task_image, volume, home_root, whose)
    return Environments([replace(job, task_image=pinned[_key(job)]) for job in jobs], volume)


def _layered(
    images: DockerImages,
    jobs: Sequence[JobSpec],
    pinned: Mapping[str, TaskImage | None],
    runtime: PinnedImage,
    where: str,
    home_root: Path,
    log: Log,
    docker_host: str | None,
    registry: str | None,
) -> Environments:
    """A cluster: each task image with the runtime layered onto it, probed, then pushed; each
    job's task image names the digest it runs (running/layered.py)."""
    used = _owners(jobs, pinned, where)
    layered = (
        layered_for_cluster(
            images,
            used,
            runtime,
            registry=cluster_registry(registry, runtime, docker_host),
            cache=home_root / ".cache" / "probed.json",
            log=log,
            docker_host=docker_host,
        )
        if used
        else {}  # every job named the runtime image itself
    )
    return Environments(
        [replace(job, task_image=with_layered(pinned[_key(job)], layered)) for job in jobs], None
    )


def _probe(images: DockerImages, task_image: TaskImage, volume: str, home_root: Path, whose: str) -> None:
    try:
        probe(images, task_image.id, volume, home_root / ".cache" / "probed.json", task_image.describe())
    except FlowerBatchError as exc:
        raise FlowerBatchError(f"{whose}: {exc}") from None


def _is_runtime(labels: Mapping[str, str]) -> bool:
    return bool(labels.get(BUILD_KEY) and labels.get(CLI_VERSION))


def _key(job: JobSpec) -> str:
    if job.build is not None:
        return "build " + job.build.key
    if job.image is not None:
        return "image " + job.image
    return "pinned " + (job.task_image.id if job.task_image else "")


def _pin(
    images: DockerImages,
    job: JobSpec,
    runtime: PinnedImage,
    *,
    where: str,
    home_root: Path,
    log: Log,
) -> TaskImage | None:
    if job.build is not None:
        return _built(images, job.task, job.build, where=where, home_root=home_root, log=log)
    if job.image is None and job.task_image is None:
        return None  # the runtime image
    if job.image is None:  # a record's pinned image (wake, repro): it must still be there
        assert job.task_image is not None
        ref, origin = job.task_image.id, job.task_image.origin
        shown = job.task_image.describe()
    else:
        ref, origin, shown = job.image, "image", job.image
    info = images.find(ref)
    if info is None and job.image is None:
        raise FlowerBatchError(
            f"{where}: task {job.task}: the image it ran in, {shown}, is no longer in the Docker engine "
            "(removed by gc?): rebuild or load it, or reproduce with --allow-drift"
        )
    if info is None:
        raise FlowerBatchError(
            f"{where}: task {job.task}: image {shown} is not in the Docker engine (nothing is pulled); "
            "load or build it first (docker load / docker build -t), or give the task a build folder"
        )
    if info.id == runtime.id or _is_runtime(info.labels):
        return None  # flower-batch's runtime image: a batch runs on one, its own
    if job.image is None and job.task_image is not None:
        return replace(job.task_image, layered=None)  # a cluster's copy is made again where needed
    return TaskImage(id=info.id, origin=origin, ref=ref)


def _build_all(
    jobs: Mapping[str, JobSpec],
    *,
    where: str,
    home_root: Path,
    log: Log,
    parallel: int,
    docker_host: str | None,
) -> tuple[dict[str, TaskImage | None], dict[str, FlowerBatchError]]:
    """The folders to build, at most `parallel` at once, each on a connection of its own: the
    images built, and each failed build's one line (by key, in the jobs' order)."""

    def one(job: JobSpec) -> TaskImage:
        assert job.build is not None
        images = DockerImages(docker_host)
        try:
            return _built(images, job.task, job.build, where=where, home_root=home_root, log=log)
        finally:
            images.close()

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(jobs) or 1))) as pool:
        futures = {key: pool.submit(one, job) for key, job in jobs.items()}
        wait(futures.values())
    built: dict[str, TaskImage | None] = {}
    failed: dict[str, FlowerBatchError] = {}
    for key, future in futures.items():
        error = future.exception()
        if isinstance(error, FlowerBatchError):
            failed[key] = error
        elif error is not None:
            raise error
        else:
            built[key] = future.result()
    return built, failed


def _built(
    images: DockerImages, task: str, recipe: BuildRecipe, *, where: str, home_root: Path, log: Log
) -> TaskImage:
    """The image of a build folder: found by its key, else built (with the network: a task's
    Dockerfile may install packages). One build of a folder at a time on this machine: a second
    orchestrator finds the image the first built."""
    with build_lock(recipe.key):
        return _found_or_built(images, task, recipe, where=where, home_root=home_root, log=log)


def _found_or_built(
    images: DockerImages, task: str, recipe: BuildRecipe, *, where: str, home_root: Path, log: Log
) -> TaskImage:
    shown = _shown_folder(recipe.folder)
    for found in images.find_by_label(TASK_BUILD, recipe.key)[:1]:
        return TaskImage(id=found.id, origin="build", ref=shown)
    log_file = home_root / ".builds" / f"{recipe.key.removeprefix('sha256:')[:16]}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    step = ""
    log(f"building the image of task {task} from {shown} ({recipe.dockerfile})")
    with log_file.open("w", encoding="utf-8") as out:

        def on_line(line: str) -> None:
            nonlocal step
            out.write(line + "\n")
            found = _STEP.match(line.strip())
            if found:
                step = f"step {found[1]}/{found[2]} ({found[3][:80]})"
                log(f"  {task}: {step}")

        try:
            image_id = images.build(
                recipe.folder,
                f"flower-batch-task:{task.lower()[:40]}-{recipe.key.removeprefix('sha256:')[:12]}",
                dict(recipe.args),
                {TASK_BUILD: recipe.key, MANAGED: "1", VERSION: __version__},
                network_mode=None,
                on_line=on_line,
                dockerfile=recipe.dockerfile,
            )
        except ImageBuildError as exc:
            out.write(str(exc) + "\n")
            detail = str(exc).removeprefix("image build failed: ").split(" (last output:")[0]
            raise FlowerBatchError(
                f"{where}: task {task}: the build of {shown} failed at {step or 'its start'}: "
                f"{detail[:200]} (log: {log_file})"
            ) from None
    log(f"  {task}: built {image_id[:19]}")
    return TaskImage(id=image_id, origin="build", ref=shown)


def _shown_folder(folder: Path) -> str:
    """The folder relative to where the command runs, when it is under it."""
    try:
        return str(folder.relative_to(Path.cwd()))
    except ValueError:
        return str(folder)


def task_image_drift(job: JobSpec, docker_host: str | None = None) -> list[str]:
    """How the task's environment changed since the job ran (repro): its build folder's content,
    or the image its tag names now. Empty: the pinned image is still what the task names."""
    pinned = job.task_image
    if job.build is not None:
        now = tree_hash(job.build.folder) if job.build.folder.is_dir() else "(gone)"
        if now != job.build.folder_hash:
            return [f"build folder {job.build.folder} changed since the original ran"]
        return []
    if job.image is None or pinned is None or job.image == pinned.id:
        return []
    images = DockerImages(docker_host)
    try:
        info = images.find(job.image)
    finally:
        images.close()
    now_id = info.id if info else "(not in the engine)"
    return [] if now_id == pinned.id else [f"task image {job.image} {pinned.short} -> {now_id[:19]}"]
