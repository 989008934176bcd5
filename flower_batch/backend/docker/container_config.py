"""A ContainerSpec mapped onto the engine's create call, one field group at a time: what
`DockerBackend.create` sends. Nothing here talks to the engine; the two configs are built by the
SDK's client, whose API version decides their shape.

- mounts: the spec's binds and volumes, and the loopback-only /etc/hosts of a no-network container;
- the host config: confinement (no capability, no new privileges, pids, a read-only root, tmpfs),
  cpus and memory, init, the network mode, and the engine's restart policy;
- the networking config: the network to join, with its aliases;
- the rest of the create call: command, environment, user, labels, name, and stdin kept open
  for the secrets handed over at each start (secret_handover.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker
import docker.types

from flower_batch.backend.base import ContainerSpec


def mounts(spec: ContainerSpec, hosts_file: Path | None) -> list[docker.types.Mount]:
    """The spec's binds and volumes, and `hosts_file` read-only at /etc/hosts when given."""
    # A read-only volume is never filled from the image (the runtime bundle over an image's own /opt/flower).
    found = [
        docker.types.Mount(
            m.target, m.source, type=m.kind, read_only=m.read_only, no_copy=m.kind == "volume" and m.read_only
        )
        for m in spec.mounts
    ]
    if hosts_file:
        found.append(docker.types.Mount("/etc/hosts", str(hosts_file), type="bind", read_only=True))
    return found


def restart_policy(spec: ContainerSpec) -> dict[str, Any] | None:
    """A `restart` container is restarted on failure by the engine, unless it has secrets: then
    its supervisor restarts it and hands them over again (the gateway,
    gateway/host/supervisor.py); the engine's own restart would leave it waiting for them."""
    return {"Name": "on-failure", "MaximumRetryCount": 3} if spec.restart and not spec.secrets else None


def host_config(
    api: docker.APIClient,
    spec: ContainerSpec,
    tmpfs: dict[str, str],
    hosts_file: Path | None,
    quota: bool = False,
) -> dict[str, Any]:
    """Confinement, limits, init, network mode and restart policy (`tmpfs`: confinement's, or
    secret_handover's with the secrets' own; `quota`: the engine bounds a writable root itself)."""
    jail = spec.confinement
    config: dict[str, Any] = api.create_host_config(
        mounts=mounts(spec, hosts_file),
        cap_drop=["ALL"],
        cap_add=list(jail.cap_add) or None,
        security_opt=["no-new-privileges"],
        pids_limit=jail.pids,
        read_only=jail.read_only_root,
        tmpfs=tmpfs or None,
        nano_cpus=int(spec.cpus * 1e9) if spec.cpus else None,
        mem_limit=spec.memory,
        init=spec.init or None,
        network_mode=spec.network,
        restart_policy=restart_policy(spec),
        storage_opt={"size": str(spec.disk_bytes)} if spec.disk_bytes and quota else None,
    )
    return config


def networking_config(api: docker.APIClient, spec: ContainerSpec) -> dict[str, Any] | None:
    """The network to join with its aliases; none for no network or the engine's default."""
    if not spec.network or spec.network == "none":
        return None
    endpoint = api.create_endpoint_config(aliases=spec.network_aliases or None)
    config: dict[str, Any] = api.create_networking_config({spec.network: endpoint})
    return config


def create_options(
    spec: ContainerSpec, command: list[str], env: dict[str, str], hosts_file: Path | None
) -> dict[str, Any]:
    """The create call's other keyword arguments. A container given `hosts_file` gets no network
    from the engine (loopback only, set up by runc)."""
    return {
        "command": command,
        "environment": env,
        "user": spec.user,
        "working_dir": spec.working_dir,
        "labels": dict(spec.labels),
        "name": spec.name,
        "network_disabled": hosts_file is not None,
        # stdin open for one attach (docker-py sets that with detach=False): the secrets
        "detach": not spec.secrets,
        "stdin_open": bool(spec.secrets),
    }
