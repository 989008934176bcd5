"""The container backend interface the orchestrator schedules jobs on.

Implementations: `DockerBackend` (local engine, the default), `SwarmBackend` (a Docker Swarm
cluster: each "container" is a scheduled task, see backend/swarm/backend.py) and `FakeBackend` (in
memory, for fast scheduler tests). All pass `tests/flower_batch/backend/test_conformance.py`. All methods are
async; implementations keep blocking engine calls off the event loop.

The unit is a *task*: one run of a command in the pinned image, which the engine places (on this
host, or on any node of a cluster), with its own id, state, exit code and logs. Networks are the
engine's private networks (bridge locally, overlay on a cluster); `secrets` are handed to the
process without appearing in any inspect output, on every engine (backend/secret_env.py).

Errors are the project's own (`flower_batch.errors`): `DaemonUnavailable`, `ImageMissing`,
`OutOfDisk`, `ContainerNotFound`/`NotFound`, `NameConflict`, else `BackendError`.
`wait(..., timeout=)` raises the builtin `TimeoutError`.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

from flower_batch.backend.confinement import Confinement, sandbox_user
from flower_batch.errors import BackendError

LabelFilter = Mapping[str, str | None]
"""Labels to match: `{"k": "v"}` requires k=v, `{"k": None}` only requires k to be present."""


@dataclass(frozen=True)
class Mount:
    """A host directory (`kind="bind"`, absolute `source`) or a named volume (`kind="volume"`)."""

    source: str
    target: str
    read_only: bool = False
    kind: Literal["bind", "volume"] = "bind"


@dataclass
class ContainerSpec:
    image: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    working_dir: str | None = None
    user: str = field(default_factory=sandbox_user)
    """"uid:gid": never 0 (confinement.py), whoever runs the orchestrator."""
    cpus: float | None = None
    memory: int | None = None
    """Bytes (parsed where the size was given: jobs.toml, `--memory`, the gateway's setting)."""
    labels: dict[str, str] = field(default_factory=dict)
    network: str | None = None
    """A network to join; "none": no network at all (loopback only)."""
    network_aliases: list[str] = field(default_factory=list)
    name: str | None = None
    init: bool = True
    """Run a tiny init as PID 1 so signals reach the command and zombies are reaped."""
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    """NAME -> value: never in the container's configuration (no `docker inspect` shows one). The
    process finds each in the file named by env NAME_FILE (/run/secrets/NAME, mode 0400, in
    memory: an engine secret on a cluster, a tmpfs filled from stdin at the start on one machine), and
    with `secrets_as_env` also as env NAME of its command (backend/secret_env.py)."""
    secrets_as_env: bool = True
    """False: the command reads the files itself (the gateway), and no environment holds them."""
    placement: list[str] = field(default_factory=list)
    """Cluster placement constraints ("node.labels.pool==big"); one machine has nothing to place."""
    restart: bool = False
    """A long-running service: the engine restarts it when it dies (the gateway)."""
    confinement: Confinement = field(default_factory=Confinement)
    disk_bytes: int | None = None
    """A writable root's bound: the engine's own quota where it has one (storage-opt size);
    elsewhere the runner's watchdog (running/root_watch.py) enforces it."""


ContainerState = Literal["created", "running", "paused", "restarting", "removing", "exited", "dead"]


@dataclass(frozen=True)
class ContainerInfo:
    id: str
    name: str
    image: str
    state: ContainerState
    exit_code: int | None
    """None while the container has not exited."""
    labels: dict[str, str]
    oom_killed: bool = False
    """The kernel killed it for exceeding its memory limit (Docker's State.OOMKilled)."""
    node: str | None = None
    """The machine the task ran on (the node's hostname); None on a local engine."""

    @property
    def running(self) -> bool:
        return self.state == "running"


@dataclass(frozen=True)
class SecretInfo:
    id: str
    name: str
    labels: dict[str, str]


@dataclass(frozen=True)
class NetworkInfo:
    id: str
    name: str
    labels: dict[str, str]


@dataclass(frozen=True)
class VolumeInfo:
    name: str
    labels: dict[str, str]


@dataclass(frozen=True)
class NodeLeftover:
    """A container found on a cluster node's own engine (Backend.sweep_nodes)."""

    node: str
    id: str
    name: str
    labels: dict[str, str]
    removed: bool


@dataclass(frozen=True)
class ImageInfo:
    id: str
    """Immutable content id, "sha256:..."."""
    tags: list[str]
    labels: dict[str, str]
    size_bytes: int
    architecture: str = ""
    """The engine's name for its platform ("amd64"); empty when not known."""
    workdir: str = ""
    """The image's WORKDIR (its config's WorkingDir); empty: none, i.e. "/"."""


class HostHelper(abc.ABC):
    """Runs commands as root on this machine, through the engine (Backend.host_helper). Its methods
    block: call them from a worker thread."""

    @abc.abstractmethod
    def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        """`argv` run as root in this process's mount namespace: (exit code, stdout, stderr).
        BackendError when the helper cannot be started or reached."""

    @abc.abstractmethod
    def close(self) -> None:
        """The helper removed (nothing when it never started)."""


class Backend(abc.ABC):
    """Runs containers, and manages the networks and volumes they use, by label."""

    # -- containers -------------------------------------------------------------------------
    @abc.abstractmethod
    async def create(self, spec: ContainerSpec) -> str:
        """Create (not start) a container; returns its id."""

    @abc.abstractmethod
    async def start(self, container_id: str) -> None: ...

    @abc.abstractmethod
    async def wait(self, container_id: str, timeout: float | None = None) -> int:
        """Wait for the container to exit and return its exit code; TimeoutError after `timeout` s."""

    @abc.abstractmethod
    async def signal(self, container_id: str, sig: int | str) -> None:
        """Send a signal (number or name such as "SIGTERM") to the container's main process."""

    @abc.abstractmethod
    async def stop(self, container_id: str, grace_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace_s` seconds if still running. No-op if not running."""

    @abc.abstractmethod
    def logs(self, container_id: str, follow: bool = False) -> AsyncIterator[str]:
        """The container's stdout+stderr as lines (no trailing newline); `follow` runs until exit."""

    @abc.abstractmethod
    async def inspect(self, container_id: str) -> ContainerInfo: ...

    @abc.abstractmethod
    async def remove(self, container_id: str, force: bool = True) -> None:
        """Remove the container (killing it first when `force`); ContainerNotFound if absent."""

    @abc.abstractmethod
    async def list_by_label(self, labels: LabelFilter) -> list[ContainerInfo]:
        """All containers (running or not) carrying all of `labels`."""

    # -- networks ---------------------------------------------------------------------------
    @abc.abstractmethod
    async def create_network(self, name: str, labels: Mapping[str, str], internal: bool = False) -> str:
        """Create a bridge network; `internal` gives it no route outside the host. Returns its id."""

    @abc.abstractmethod
    async def connect_network(
        self, network: str, container_id: str, aliases: list[str] | None = None
    ) -> None:
        """Attach an existing container to a further network (e.g. a gateway on two networks)."""

    @abc.abstractmethod
    async def remove_network(self, name_or_id: str) -> None: ...

    @abc.abstractmethod
    async def list_networks_by_label(self, labels: LabelFilter) -> list[NetworkInfo]: ...

    # -- volumes ----------------------------------------------------------------------------
    @abc.abstractmethod
    async def create_volume(self, name: str, labels: Mapping[str, str]) -> str:
        """Create a named volume; returns its name."""

    @abc.abstractmethod
    async def remove_volume(self, name: str, force: bool = False) -> None: ...

    @abc.abstractmethod
    async def list_volumes_by_label(self, labels: LabelFilter) -> list[VolumeInfo]: ...

    async def create_device_volume(
        self, name: str, labels: Mapping[str, str], device: str, fstype: str
    ) -> str:
        """A volume whose filesystem is `device` (a block device of the engine's machine, of type
        `fstype`), mounted by the engine while a container uses it; returns where the engine
        mounts it on its machine (a job's own disk, running/job_disk.py). Only an engine whose
        machine is this one can: `mounts_devices`."""
        raise BackendError(f"the {self.name} engine cannot mount a job's own disk")

    @property
    def mounts_devices(self) -> bool:
        """`create_device_volume` works, and the path it returns is on this machine."""
        return False

    def host_helper(self, image: str, labels: Mapping[str, str], name: str) -> HostHelper:
        """A helper container that runs commands as root in this process's own mount namespace on
        the engine's machine (`image` must hold nsenter and tail), for an orchestrator that is not
        root: a job's own disk (running/disk_ops.py). Not started until its first command."""
        raise BackendError(f"the {self.name} engine cannot run a helper on this machine")

    def sweep_host_helpers(self) -> list[Path]:
        """What helpers of ours removed by force left on this machine (their sockets' folders),
        removed (`gc`); nothing where there are no helpers."""
        return []

    # -- images -----------------------------------------------------------------------------
    @abc.abstractmethod
    async def image_info(self, ref: str) -> ImageInfo:
        """Look up an image by id or tag (never pulls); ImageMissing if absent."""

    # -- a writable root's state (one machine's engine) ---------------------------------------
    async def commit(self, container_id: str, ref: str, labels: Mapping[str, str]) -> str:
        """The ended container's filesystem as an image tagged `ref` with `labels`; its id."""
        raise BackendError(
            f"the {self.name} engine cannot keep a container's files: run with --backend docker"
        )

    async def written_bytes(self, container_id: str) -> int | None:
        """What the container wrote into its own layer (SizeRw); None when the engine does not say."""
        return None

    async def archive(self, container_id: str, path: str, dest: Path, limit_bytes: int) -> bool:
        """`path` of a (created) container as a tar into the file `dest`; False when the path
        does not exist. More than `limit_bytes`: BackendError."""
        raise BackendError(
            f"the {self.name} engine cannot copy files out of an image: run with --backend docker"
        )

    async def remove_image(self, ref: str) -> None:  # noqa: B027 - an engine without images of ours
        """Remove an image of ours (a job's state image); NotFound when it is gone."""

    async def engine_security(self) -> tuple[str, ...]:
        """The engine's security options (`docker info`: "name=userns", "name=rootless", ...)."""
        return ()

    # -- engine secrets and shared storage (cluster engines) ----------------------------------
    async def list_secrets_by_label(self, labels: LabelFilter) -> list[SecretInfo]:
        """Engine secrets made for `ContainerSpec.secrets`; a local engine makes none."""
        return []

    async def remove_secret(self, secret_id: str) -> None:  # noqa: B027 - a local engine has none
        """Remove an engine secret (what `gc` does with a leaked one)."""

    async def sweep_nodes(
        self, filters: list[LabelFilter], remove: bool
    ) -> tuple[list[NodeLeftover], list[str]]:
        """Containers matching any of `filters` that only a cluster node's own engine still lists
        (their service is gone), removed when `remove`; and the nodes that could not be looked
        on. One engine has no such nodes: `list_by_label` already sees every container."""
        return [], []

    async def check_ready(self, image: str, labels: Mapping[str, str]) -> None:  # noqa: B027 - see below
        """Before anything of a batch is scheduled: raise a FlowerBatchError (one line) when this
        engine cannot run `image` with the batch's folders — a cluster checks from its nodes
        that they can pull the image and see the home as the same storage (what it starts for
        that carries `labels`). A local engine has nothing to check here."""

    async def reservation_problem(
        self, cpus: float | None, memory: int | None, placement: list[str]
    ) -> str | None:
        """Why no machine of this engine could ever hold a task of these cpus/memory (and
        placement), or None. A local engine's limits are judged against its host instead
        (pre-flight's limits: Docker accepts a limit above the host, so that is only a warning)."""
        return None

    @property
    def shares_unix_sockets(self) -> bool:
        """A unix socket in a bind-mounted folder reaches from one container to another: true on
        one machine (one kernel), so a job needs no network to reach its gateway; false across
        a cluster's nodes."""
        return False

    @property
    def name(self) -> str:
        """ "docker", "swarm", "fake": what records and messages call this engine."""
        return type(self).__name__.removesuffix("Backend").lower()

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release connections. Containers are left as they are."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def labels_match(have: Mapping[str, str], want: LabelFilter) -> bool:
    return all(k in have and (v is None or have[k] == v) for k, v in want.items())


SIGNALS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGKILL": 9, "SIGUSR1": 10, "SIGUSR2": 12, "SIGTERM": 15}


def signal_number(sig: int | str) -> int:
    """Linux signal number for 15, "15", "TERM" or "SIGTERM" (the container is Linux, whatever the host)."""
    if isinstance(sig, int):
        return sig
    s = sig.strip().upper()
    if s.isdigit():
        return int(s)
    s = s if s.startswith("SIG") else "SIG" + s
    if s not in SIGNALS:
        raise ValueError(f"unknown signal {sig!r}")
    return SIGNALS[s]
