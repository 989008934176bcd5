"""The sandbox a job asked for beyond the default one (`root`, `user`, `workdir` in jobs.toml),
resolved against its image and the engine before its container is made.

- `workdir`: where the workspace is mounted and the agent works; "image" is the pinned image's
  WORKDIR (its config: the same path on every run and wake), and an image without one ("/")
  works in /workspace.
- `root = "writable"`: no read-only root. What the job writes into it is bounded at its `disk`
  (the same limit as its own disk for its folders, running/job_disk.py): by the engine's own quota
  where it has one (storage-opt size), else by a watchdog on what the container wrote
  (root_watch.py); past it the job ends `disk`, its own doing.
- `user = "root"`: uid 0 with ROOT_CAPABILITIES only, no-new-privileges and the pids limit kept.
  What uid 0 is on the host depends on the engine (a user namespace, rootless, or host root):
  said in the record.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flower_batch.backend.base import Backend, ContainerSpec
from flower_batch.backend.confinement import ROOT_CAPABILITIES, ROOT_USER
from flower_batch.errors import FlowerBatchError
from flower_batch.jobmodel.spec import WORKDIR_FROM_IMAGE, WORKSPACE_PATH, JobSpec, reserved_workdir
from flower_batch.jobmodel.units import format_memory

HOST_ROOT = "host root: this engine has no user namespace"


@dataclass(frozen=True)
class JobRoot:
    """How the job's container is made: where its workspace is, its root and its uid."""

    workdir: str = WORKSPACE_PATH
    writable: bool = False
    as_root: bool = False
    disk_bytes: int | None = None
    note: str | None = None
    """For the record and the report; None: the default sandbox."""

    def applied(self, spec: ContainerSpec) -> ContainerSpec:
        """`spec` (the job's, its check's or its verifier's) in this sandbox."""
        jail = replace(
            spec.confinement,
            read_only_root=not self.writable,
            cap_add=ROOT_CAPABILITIES if self.as_root else (),
        )
        # The CLI refuses bypassPermissions as uid 0 unless told it is in a sandbox: it is.
        env = {**spec.env, "IS_SANDBOX": "1"} if self.as_root else spec.env
        return replace(
            spec,
            env=env,
            confinement=jail,
            user=ROOT_USER if self.as_root else spec.user,
            disk_bytes=self.disk_bytes if self.writable else None,
        )


async def resolve_root(backend: Backend, job: JobSpec, image: str) -> JobRoot:
    """The job's JobRoot on `backend`, its workdir read from `image` when it is the image's."""
    workdir = await _workdir(backend, job, image)
    if job.root != "writable" and job.user != "root":
        return JobRoot(workdir=workdir)
    parts = []
    disk = None
    if job.root == "writable":
        disk = job.disk_bytes
        parts.append(f"writable root (its writes bounded at {format_memory(disk)})")
    if job.user == "root":
        parts.append(f"uid 0 ({await _what_root_is(backend)})")
    return JobRoot(workdir, job.root == "writable", job.user == "root", disk, "; ".join(parts))


async def _workdir(backend: Backend, job: JobSpec, image: str) -> str:
    if job.workdir != WORKDIR_FROM_IMAGE:
        return job.workspace_path
    found = (await backend.image_info(image)).workdir.rstrip("/")
    if not found:
        return WORKSPACE_PATH
    if why := reserved_workdir(found):
        raise FlowerBatchError(
            f'job {job.id}: its image\'s WORKDIR {found} is reserved ({why}); set workdir = "/app" (a path of its own)'
        )
    return found


async def _what_root_is(backend: Backend) -> str:
    """uid 0 in the container, seen from the host."""
    options = " ".join(await backend.engine_security())
    if "name=rootless" in options:
        return "an unprivileged host uid: the engine is rootless"
    if "name=userns" in options:
        return "an unprivileged host uid: the engine remaps user namespaces"
    return HOST_ROOT
