"""flower brought into a task image on a cluster: the runtime layered onto the image, pushed to
the cluster's registry, so every node runs the same digest.

On one machine a job mounts the runtime bundle's volume (running/bundle.py); a named volume
stays on its node, so on a swarm the bundle is layered once onto each task image instead: a
generated Dockerfile, `FROM <task image id>` and `COPY --from=<runtime image id> /opt/flower
/opt/flower`, built on the manager's engine with no network, labelled with the pair of ids
(LAYERED: the same pair is never layered twice) and with the runtime's build key (the key each
task checks its node ran: backend/swarm/task_signals.py). Each layered image is probed like any
task image (no volume: it holds flower itself) before anything is pushed, and an image of no
glibc or no shell is refused before it is layered at all; then each is pushed as
`REGISTRY/flower-batch-task:<12 hex of its id>` and the job's service runs its repo digest.

Cost, measured (docs/scale.md): the copy and commit of /opt/flower per new task image, its push,
and each node's first pull of it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from flower_batch.backend.docker.images import DockerImages, label_line
from flower_batch.backend.docker.registry import TASK_REPOSITORY, push_image, registries_holding
from flower_batch.errors import FlowerBatchError, NotARuntimeImage
from flower_batch.jobmodel.environment import TaskImage
from flower_batch.jobmodel.hashing import json_hash
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.labels import BUILD_KEY, LAYERED, MANAGED, TASK_BUILD, VERSION
from flower_batch.running.bundle import BUNDLE_PATH, build_lock, probe, probe_without_flower

from .. import __version__

Log = Callable[[str], None]


def pair(task_image_id: str, runtime_id: str) -> str:
    """The LAYERED label's value: what the layered image was made from."""
    return f"{task_image_id} {runtime_id}"


def dockerfile(task_image_id: str, runtime_id: str, labels: dict[str, str]) -> str:
    """The whole recipe: the task image, and the runtime's /opt/flower on top (no RUN step, so
    nothing runs in the task image while it is made: an image of no shell layers too), and its
    labels in one LABEL step (given to the builder, they would be a step each: a container and a
    commit per label)."""
    return (
        f"FROM {task_image_id}\nCOPY --from={runtime_id} {BUNDLE_PATH} {BUNDLE_PATH}\n{label_line(labels)}\n"
    )


def labels_of(task_image: TaskImage, runtime_id: str, build_key: str) -> dict[str, str]:
    """The layered image's labels."""
    return {
        LAYERED: pair(task_image.id, runtime_id),
        BUILD_KEY: build_key,
        MANAGED: "1",
        VERSION: __version__,
        # not the build it was layered onto (an image inherits its base's labels): a lookup of
        # that build by its key must never find this copy
        TASK_BUILD: "",
    }


def cluster_registry(given: str | None, runtime: PinnedImage, docker_host: str | None = None) -> str:
    """The registry the nodes pull from: $FLOWER_BATCH_REGISTRY, else the one the runtime image
    was pushed to (one line when it was pushed nowhere, or to several)."""
    if given and given.strip():
        return given.strip().rstrip("/")
    found = registries_holding(runtime.id, docker_host)
    if len(found) == 1:
        return found[0]
    if not found:
        raise FlowerBatchError(
            f"the runtime image {runtime.short} is in no registry the nodes pull from: push it with "
            "`flower-batch image push REGISTRY`, then set FLOWER_BATCH_REGISTRY=REGISTRY"
        )
    raise FlowerBatchError(
        f"the runtime image {runtime.short} was pushed to {', '.join(found)}: set "
        "FLOWER_BATCH_REGISTRY to the one the nodes pull from"
    )


def layered_for_cluster(
    images: DockerImages,
    task_images: Sequence[tuple[TaskImage, str]],
    runtime: PinnedImage,
    *,
    registry: str,
    cache: Path,
    log: Log,
    docker_host: str | None = None,
) -> dict[str, str]:
    """{task image id: the repo digest its jobs run} for `task_images` ((image, whose: the task
    named in an error line)). Every image is layered and probed before the first push: an image
    flower cannot run in is one line, and nothing of the batch reaches the registry."""
    made: dict[str, str] = {}
    for task_image, whose in task_images:
        made[task_image.id] = _layered_and_probed(images, task_image, runtime, cache, log, whose)
    pushed = {}
    for task_image, _whose in task_images:
        log(f"pushing {task_image.describe()} with flower to {registry}")
        pushed[task_image.id] = push_image(
            made[task_image.id], registry, docker_host, repository=TASK_REPOSITORY
        ).reference
    return pushed


def with_layered(task_image: TaskImage | None, layered: dict[str, str]) -> TaskImage | None:
    """The job's task image naming the digest it runs on the cluster (None: the runtime image)."""
    if task_image is None:
        return None
    return replace(task_image, layered=layered[task_image.id])


def _layered_and_probed(
    images: DockerImages, task_image: TaskImage, runtime: PinnedImage, cache: Path, log: Log, whose: str
) -> str:
    made_now = False
    with build_lock(json_hash({"layered": pair(task_image.id, runtime.id)})):
        found = images.find_by_label(LAYERED, pair(task_image.id, runtime.id))[:1]
        image_id = found[0].id if found else ""
        if not image_id:
            try:  # an image of no glibc or no shell is refused before it costs a layer
                probe_without_flower(images, task_image.id, task_image.describe())
            except FlowerBatchError as exc:
                raise FlowerBatchError(f"{whose}: {exc}") from None
            image_id, made_now = layer_runtime_onto(images, task_image, runtime, log), True
    try:
        probe(images, image_id, None, cache, task_image.describe())
    except FlowerBatchError as exc:
        if made_now:  # of no use to anyone: flower cannot run in it
            images.remove(image_id)
        raise FlowerBatchError(f"{whose}: {exc}") from None
    return image_id


def layer_runtime_onto(images: DockerImages, task_image: TaskImage, runtime: PinnedImage, log: Log) -> str:
    """Build the layered image of the pair on the engine of `images`, with no network; its id.
    (`layered_for_cluster` finds one already made first.)"""
    info = images.find(runtime.id)
    key = info.labels.get(BUILD_KEY) if info else None
    if not key:
        raise NotARuntimeImage(
            f"image {runtime.short} carries no {BUILD_KEY} label: build the runtime with `flower-batch image build`"
        )
    log(f"layering flower ({runtime.short}) onto {task_image.describe()}, once")
    with tempfile.TemporaryDirectory(prefix="flower-batch-layer-") as folder:
        labels = labels_of(task_image, runtime.id, key)
        (Path(folder) / "Dockerfile").write_text(dockerfile(task_image.id, runtime.id, labels))
        return images.build(Path(folder), None, {}, {})
