"""`flower-batch image push REGISTRY`: put the pinned runtime image in a registry every node pulls from.

The image is tagged `REGISTRY/flower-batch-runtime:<first 12 hex of its id>` (the tag names the
bytes, so two builds never share one) and pushed; its repo digest (`REGISTRY/...@sha256:...`) is
what cluster jobs run, so no node can run other bytes under that name. A tag that already holds
an image with a different id in the engine is refused as drift.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flower_batch.backend.docker.connection import Connection, translate
from flower_batch.errors import BackendError, FlowerBatchError, ImageDrift, ImageMissing, RegistryError

REPOSITORY = "flower-batch-runtime"
TASK_REPOSITORY = "flower-batch-task"
"""Where the task images with the runtime layered onto them go (running/layered.py)."""


@dataclass(frozen=True)
class Pushed:
    image_id: str
    reference: str
    """`REGISTRY/flower-batch-runtime@sha256:...` (or `flower-batch-task@`): what services run."""


def push_reference(registry: str, image_id: str, repository: str = REPOSITORY) -> str:
    registry = registry.strip().rstrip("/")
    if not registry or "://" in registry or " " in registry:
        raise RegistryError(f"registry {registry!r}: expected HOST[:PORT] (e.g. registry.example:5000)")
    return f"{registry}/{repository}:{image_id.removeprefix('sha256:')[:12]}"


def repo_digest_for(repo_digests: list[str], registry: str, repository: str = REPOSITORY) -> str | None:
    """The repo digest of `registry`'s copy among an image's RepoDigests."""
    prefix = f"{registry.strip().rstrip('/')}/{repository}@sha256:"
    return next((d for d in repo_digests if d.startswith(prefix)), None)


def registries_holding(ref: str, docker_host: str | None = None) -> list[str]:
    """The registries the engine pushed the runtime image `ref` to (from its repo digests)."""
    conn = Connection(docker_host)
    try:
        try:
            digests = list(conn.api().inspect_image(ref).get("RepoDigests") or [])
        except Exception as exc:
            raise translate(exc, "image", ref, address=conn.address) from None
    finally:
        conn.close()
    marker = f"/{REPOSITORY}@sha256:"
    return sorted({d.split(marker, 1)[0] for d in digests if marker in d})


def push_image(
    ref: str,
    registry: str,
    docker_host: str | None = None,
    on_line: Callable[[str], None] = lambda _: None,
    repository: str = REPOSITORY,
) -> Pushed:
    """Tag and push the image `ref` (id or tag) to `registry` as `repository`; returns its repo
    digest."""
    conn = Connection(docker_host, timeout=1800)
    try:
        api = conn.api()
        try:
            image = api.inspect_image(ref)
        except Exception as exc:
            raise translate(exc, "image", ref, address=conn.address) from None
        image_id = image["Id"]
        target = push_reference(registry, image_id, repository)
        repo, _, tag = target.rpartition(":")
        try:
            held = api.inspect_image(target)["Id"]
        except Exception as exc:
            if not isinstance(translate(exc, "image", target), ImageMissing):
                raise translate(exc, "image", target, address=conn.address) from None
            held = None
        if held is not None and held != image_id:
            raise ImageDrift(
                f"{target} already names image {held[:19]}, not {image_id[:19]}: "
                "remove that tag from the engine and push again"
            )
        try:
            api.tag(image_id, repo, tag)
            for event in api.push(repo, tag=tag, stream=True, decode=True):
                if "error" in event:
                    detail = (event.get("errorDetail") or {}).get("message") or event["error"]
                    raise RegistryError(f"push of {target} failed: {' '.join(str(detail).split())}")
                if event.get("status") and not event.get("progressDetail"):
                    on_line(f"{event.get('id', '')} {event['status']}".strip())
            digests = list(api.inspect_image(image_id).get("RepoDigests") or [])
        except FlowerBatchError:
            raise
        except Exception as exc:
            raise translate(exc, "image", target, address=conn.address) from None
        reference = repo_digest_for(digests, registry, repository)
        if reference is None:
            raise BackendError(f"pushed {target} but the engine reports no repo digest for it")
        return Pushed(image_id=image_id, reference=reference)
    finally:
        conn.close()
