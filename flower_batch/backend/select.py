"""Choosing the engine jobs run on: `--backend`, else FLOWER_BATCH_BACKEND, else jobs.toml's
`[batch] backend`, else the local Docker engine. Both are reached the way the docker CLI is
(DOCKER_HOST / the current context): for `swarm`, that is a manager of the cluster.
"""

from __future__ import annotations

from pathlib import Path

from flower_batch.backend.base import Backend
from flower_batch.errors import BackendChoiceError

BACKENDS = ("docker", "swarm")
BACKEND_ENV = "FLOWER_BATCH_BACKEND"
REGISTRY_ENV = "FLOWER_BATCH_REGISTRY"
SWARM_CONTROL = ".swarm"  # under the home: the tasks' signal files, on the shared storage


def backend_name(flag: str | None = None, env_value: str | None = None, jobs_file: str | None = None) -> str:
    """`env_value`: $FLOWER_BATCH_BACKEND, as the command read it where it started."""
    for value, where in (
        (flag, "--backend"),
        (env_value, BACKEND_ENV),
        (jobs_file, "[batch] backend"),
    ):
        if value is not None and value.strip():
            name = value.strip().lower()
            if name not in BACKENDS:
                raise BackendChoiceError(f"{where} {value!r}: use one of {', '.join(BACKENDS)}")
            return name
    return "docker"


def open_backend(name: str, home: Path, registry: str | None = None, cache: Path | None = None) -> Backend:
    """A backend for `name`; `home` is where batches live (on a cluster: the shared storage);
    `registry`: the cluster's ($FLOWER_BATCH_REGISTRY), for pushing the runtime image;
    `cache`: the user's cache folder (loopback_hosts.cache_folder), for the local engine."""
    if name == "swarm":
        from flower_batch.backend.swarm.backend import SwarmBackend

        root = Path(home).resolve()
        return SwarmBackend(control_dir=root / SWARM_CONTROL, shared_root=root, registry=registry)
    from flower_batch.backend.docker.backend import DockerBackend

    return DockerBackend(hosts_folder=cache)
