"""A job whose workspace is its image's own folder (`workdir`, e.g. a Harbor task's /app with the
files its Dockerfile put there) and that has no `workspace` of its own starts with a copy of that
folder: taken out of a created (never started) container of the image as a tar, and unpacked as
hostile input (the image is the task's): regular files and folders only, no link, device or FIFO
(named, never made), no name that leaves the folder, within the entry and size bounds of a
workspace copy. The host then keeps the workspace as for any job (diff, report, wake)."""

from __future__ import annotations

import logging
import os
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from flower_batch.backend.base import Backend, ContainerSpec
from flower_batch.errors import WorkspaceUnusable
from flower_batch.labels import labels
from flower_batch.running.workspace_copy import limit_of
from flower_batch.untrusted_files import MAX_DEPTH, MAX_ENTRIES

log = logging.getLogger(__name__)
UNBOUNDED = 1 << 40  # workspace_limit = "none": the entry and depth bounds only


async def seed_from_image(
    backend: Backend, image: str, workdir: str, dest: Path, *, batch: str, lease: str, job: str,
    limit_bytes: int | None,
) -> list[str]:  # fmt: skip
    """Copy `image`'s `workdir` into the (empty) folder `dest`; what was left out, one line each."""
    limit = limit_of(limit_bytes) or UNBOUNDED
    spec = ContainerSpec(
        image=image, command=["true"], labels=labels(batch, lease, "seed", job), network="none"
    )
    container = await backend.create(spec)
    try:
        with tempfile.TemporaryDirectory(prefix="flower-seed-") as tmp:
            tar = Path(tmp) / "workdir.tar"
            try:
                found = await backend.archive(container, workdir, tar, limit_bytes=limit * 2)
            except Exception as exc:  # over the bound, or the engine's refusal: one line
                raise WorkspaceUnusable(f"the image's {workdir} could not be copied: {exc}") from None
            if not found:
                return []  # nothing there: an empty workspace, as the image has
            return unpack_untrusted(tar, dest, limit)
    finally:
        try:
            await backend.remove(container, force=True)
        except Exception as exc:  # noqa: BLE001 - a leftover for gc, never the job's failure
            log.warning("seed container %s not removed: %s", container[:12], exc)


def unpack_untrusted(tar: Path, dest: Path, limit_bytes: int) -> list[str]:
    """The tar's entries below its top folder into `dest` (made by us, holding no link: so no
    entry can be written outside it); what was skipped, one line each."""
    skipped: list[str] = []
    total = entries = 0
    with tarfile.open(tar, "r:") as archive:
        for member in archive:
            entries += 1
            if entries > MAX_ENTRIES:
                raise WorkspaceUnusable(f"the image's folder has over {MAX_ENTRIES} entries")
            rel = _inside(member.name)
            if rel is None:
                continue  # the top folder itself
            if rel == "" or ".." in PurePosixPath(rel).parts or len(PurePosixPath(rel).parts) > MAX_DEPTH:
                skipped.append(f"{member.name!r}: outside the folder or too deep")
                continue
            target = dest / rel
            if member.isdir():
                target.mkdir(mode=0o755, parents=True, exist_ok=True)
            elif member.isreg():
                total += member.size
                if total > limit_bytes:
                    raise WorkspaceUnusable(f"the image's folder is over {limit_bytes} bytes")
                _write(archive, member, target)
            else:
                skipped.append(f"{rel}: {_kind(member)}, not copied")
    return skipped


def _inside(name: str) -> str | None:
    """The entry's path below the archive's top folder (get_archive names the folder itself first)."""
    parts = PurePosixPath(name.lstrip("/")).parts
    return None if len(parts) <= 1 else str(PurePosixPath(*parts[1:]))


def _write(archive: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    source = archive.extractfile(member)
    if source is None:
        return
    mode = 0o755 if member.mode & 0o111 else 0o644
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as out, source:
        while chunk := source.read(1 << 20):
            out.write(chunk)


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym() or member.islnk():
        return "a link"
    if member.isfifo():
        return "a FIFO"
    return "a device" if member.ischr() or member.isblk() else "not a regular file"
