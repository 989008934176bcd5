"""A ContainerSpec mapped onto a Swarm service spec, one field group at a time. Pure: nothing here
asks the engine; `SwarmBackend.create` makes the secrets and the control folder, then builds the
service from these pieces.

- the command runs under `task_signals`, which forwards the signals written to the control file;
- the environment names each secret's file (NAME_FILE), the pinned build's key and, when the
  command takes its secrets as env, their names (never a value);
- mounts: the spec's binds and volumes, the task's control folder, confinement's tmpfs (its size);
- resources: cpus and memory reserved as much as they are limited, and confinement's pids;
- a job never restarts, a `restart` service (the gateway) does on failure;
- placement constraints, the network with its aliases, and a replicated service of 0 replicas
  (`start` asks for the one task) reached by DNS round robin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker.types

from flower_batch.backend.base import ContainerSpec
from flower_batch.backend.secret_env import SECRET_NAMES_ENV, SECRETS_DIR
from flower_batch.backend.swarm.task_signals import EXPECTED_KEY_ENV
from flower_batch.jobmodel import units
from flower_batch.layout import FLOWER_PYTHON

CONTROL_IN_TASK = "/run/flower-batch"
SECRETS_IN_TASK = SECRETS_DIR
# A task's peers on the overlay move: the gateway's replacement task has a new address, and a
# connect to the dead one is never refused, it waits out the kernel's SYN retries (6: ~127 s, a
# job stalled 135 s after its gateway was killed). Two (~7 s) let the CLI retry and resolve the
# name again: 21 s in all. The namespace is the task's own, so nothing else is touched.
SYN_RETRIES = 2
SECRET_NAME_MAX = 64  # characters, as Swarm allows


def task_command(command: list[str]) -> list[str]:
    """The spec's command under task_signals, which forwards what `signal`/`stop` write."""
    return [
        FLOWER_PYTHON,
        "-m",
        "flower_batch.backend.swarm.task_signals",
        f"{CONTROL_IN_TASK}/signal",
        "--",
        *command,
    ]


def secret_name(service: str, key: str, token: str) -> str:
    """The Swarm secret holding `key` for `service`: the service's name, the key and a random
    `token`, within Swarm's limit."""
    tail = f"{key.lower().replace('_', '-')[:20]}-{token}"
    return f"{service[: SECRET_NAME_MAX - 1 - len(tail)].rstrip('-_.')}-{tail}"


def secret_reference(secret_id: str, name: str, key: str, user: str | None) -> docker.types.SecretReference:
    """The secret mounted at /run/secrets/KEY, readable by the task's user only."""
    uid, _, gid = (user or "0:0").partition(":")
    return docker.types.SecretReference(secret_id, name, filename=key, uid=uid, gid=gid or uid, mode=0o400)


def task_env(spec: ContainerSpec, build_key: str) -> dict[str, str]:
    """The task's environment: the spec's, the build key the task checks its node ran (drift),
    each secret's NAME_FILE, and the secrets' names when the command takes them as env."""
    env = dict(spec.env)
    if build_key:
        env[EXPECTED_KEY_ENV] = build_key
    for key in spec.secrets:
        env[f"{key}_FILE"] = f"{SECRETS_IN_TASK}/{key}"
    if spec.secrets and spec.secrets_as_env:  # names only: task_signals hands each value as env NAME
        env[SECRET_NAMES_ENV] = ",".join(spec.secrets)
    return env


def tmpfs_mount(target: str, options: str) -> dict[str, Any]:
    """A tmpfs mount of a service from confinement's "rw,nosuid,nodev,size=1g" (its size only:
    a service's tmpfs takes no other options; it is nosuid and nodev as Docker makes them)."""
    size = next(
        (units.parse_memory(o.split("=", 1)[1]) for o in options.split(",") if o.startswith("size=")), None
    )
    return {"Target": target, "Type": "tmpfs", **({"TmpfsOptions": {"SizeBytes": size}} if size else {})}


def mounts(spec: ContainerSpec, control: Path) -> list[Any]:
    """The spec's binds and volumes, the task's control folder, and confinement's tmpfs."""
    return [
        *(docker.types.Mount(m.target, m.source, type=m.kind, read_only=m.read_only) for m in spec.mounts),
        docker.types.Mount(CONTROL_IN_TASK, str(control), type="bind"),
        *(tmpfs_mount(target, options) for target, options in spec.confinement.tmpfs.items()),
    ]


def container_spec(
    spec: ContainerSpec,
    image: str,
    env: dict[str, str],
    control: Path,
    secret_refs: list[docker.types.SecretReference],
) -> docker.types.ContainerSpec:
    """The task's container: its command, environment, mounts, secrets and confinement."""
    return docker.types.ContainerSpec(
        image,
        task_command(spec.command),
        env=env,
        workdir=spec.working_dir,
        user=spec.user,
        labels=dict(spec.labels),
        mounts=mounts(spec, control),
        secrets=secret_refs or None,
        init=spec.init or None,
        # Confinement as on one machine (confinement.py), but no-new-privileges: a
        # service has no such setting before API 1.44 (docs/security.md).
        cap_drop=["ALL"],
        read_only=spec.confinement.read_only_root,
        sysctls={"net.ipv4.tcp_syn_retries": str(SYN_RETRIES)} if spec.network else None,
    )


def resources(spec: ContainerSpec) -> docker.types.Resources:
    """Reserved as much as it may use: the scheduler places a task only where its share is
    free, so -j N never packs more onto a node than the node has."""
    nano = int(spec.cpus * 1e9) if spec.cpus else None
    found = docker.types.Resources(
        cpu_limit=nano, mem_limit=spec.memory, cpu_reservation=nano, mem_reservation=spec.memory
    )
    if spec.confinement.pids:
        found.setdefault("Limits", {})["Pids"] = spec.confinement.pids
    return found


def restart_policy(restart: bool) -> docker.types.RestartPolicy:
    """A job runs once; a `restart` service (the gateway) is restarted when it fails."""
    if restart:
        return docker.types.RestartPolicy(
            "on-failure", delay=1_000_000_000, max_attempts=3, window=60_000_000_000
        )
    return docker.types.RestartPolicy("none")


def placement(spec: ContainerSpec) -> docker.types.Placement | None:
    return docker.types.Placement(constraints=list(spec.placement)) if spec.placement else None


def networks(spec: ContainerSpec) -> list[docker.types.NetworkAttachmentConfig] | None:
    if not spec.network:
        return None
    return [docker.types.NetworkAttachmentConfig(spec.network, aliases=spec.network_aliases or None)]


def task_template(
    spec: ContainerSpec,
    image: str,
    env: dict[str, str],
    control: Path,
    secret_refs: list[docker.types.SecretReference],
) -> docker.types.TaskTemplate:
    """The whole task: its container, resources, restart policy, placement and network."""
    return docker.types.TaskTemplate(
        container_spec(spec, image, env, control, secret_refs),
        resources=resources(spec),
        restart_policy=restart_policy(spec.restart),
        placement=placement(spec),
        networks=networks(spec),
    )


def service_options(spec: ContainerSpec, name: str) -> dict[str, Any]:
    """`create_service`'s other arguments: a replicated service of 0 replicas (`start` asks for the
    one task), reached by DNS round robin, not a virtual IP: a service's alias resolves to its
    task itself, with no IPVS balancer in between (which nested engines may lack)."""
    return {
        "name": name,
        "labels": dict(spec.labels),
        "mode": docker.types.ServiceMode("replicated", replicas=0),
        "endpoint_spec": docker.types.EndpointSpec(mode="dnsrr"),
    }
