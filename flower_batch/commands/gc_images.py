"""`gc --images`: what flower-batch built for tasks and copied for their jobs, removed only when
asked. With `--batch`: the images built from task folders (`build =`) that the batch's records
pinned, its writable-root jobs' state images (after which those jobs cannot be woken), and the
copies with the runtime layered onto them that its jobs ran on a cluster (running/layered.py).
Without: every image built from a task folder (label org.flower-batch.task-build), every state
image, every layered copy (org.flower-batch.layered) and the runtime bundle's volumes
(running/bundle.py). Whatever a container still uses is kept, and said. State images go first: a
task image is not removed while an image committed from it exists. The engine is the one
DOCKER_HOST names: on a cluster, the manager's, where they were made."""

from __future__ import annotations

from flower_batch.backend.docker.images import DockerImages
from flower_batch.errors import RecordError
from flower_batch.jobmodel.record import read_record
from flower_batch.labels import LAYERED, RUNTIME_BUNDLE, STATE_IMAGE, TASK_BUILD
from flower_batch.layout import Home

from .common import err, out


def gc_images(home: Home, batch: str | None, dry_run: bool) -> None:
    images = DockerImages()
    try:
        built = {
            info.id: (info.tags or [info.id[:19]])[0]
            for info in [*images.labelled(TASK_BUILD), *images.labelled(LAYERED)]
            if info.labels.get(TASK_BUILD) or info.labels.get(LAYERED)  # a state image blanks its own
        }
        if batch is not None:
            pinned = _pinned_by(home, batch, images)
            built = {image_id: shown for image_id, shown in built.items() if image_id in pinned}
        found = []
        # writable-root jobs' kept state (running/state_image.py): what `wake` would run from;
        # first, as each is a child of its task image
        for info in images.labelled(STATE_IMAGE):
            owner = info.labels.get(STATE_IMAGE, "")
            if batch is None or owner.startswith(f"{batch}/"):
                found.append(("image", info.id, f"{(info.tags or [info.id[:19]])[0]} (state of {owner})"))
        found += [("image", image_id, shown) for image_id, shown in built.items()]
        if batch is None:
            # the copy before its marker: a volume in use keeps its marker, and stays usable
            volumes = images.labelled_volumes(RUNTIME_BUNDLE)
            found += [("volume", name, name) for name in volumes if not name.endswith("-ready")]
        removed = 0
        for kind, ref, shown in found:
            if dry_run:
                out.print(f"would remove {kind} {shown}", markup=False)
                continue
            if not images.remove_unused(kind, ref):
                err.print(f"kept {kind} {shown}: a container uses it", markup=False)
                continue
            if kind == "volume":
                images.remove_unused(kind, ref + "-ready")
            out.print(f"removed {kind} {shown}", markup=False)
            removed += 1
        verb = "would remove" if dry_run else "removed"
        err.print(f"{verb} {len(found) if dry_run else removed} task image(s) and runtime volume(s)")
    finally:
        images.close()


def _pinned_by(home: Home, batch: str, images: DockerImages) -> set[str]:
    """The task images the batch's records pinned, built from folders, and the layered copies
    they ran on a cluster (a record that cannot be read pins nothing)."""
    found = set()
    layered = set()
    for jd in home.jobs(batch):
        try:
            task_image = read_record(jd.record_path).spec.task_image
        except (OSError, RecordError):
            continue
        if task_image is not None and task_image.origin == "build":
            found.add(task_image.id)
        if task_image is not None and task_image.layered:
            layered.add(task_image.layered)
    for reference in layered:  # a repo digest: the engine that pushed it knows its image
        info = images.find(reference)
        if info is not None and info.labels.get(LAYERED):
            found.add(info.id)
    return found
