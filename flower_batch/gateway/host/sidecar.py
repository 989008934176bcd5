"""Host side of the gateway: a private network for the batch and the gateway container on it."""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from flower_batch.backend.base import Backend, ContainerSpec, Mount
from flower_batch.backend.confinement import Confinement, hand_over
from flower_batch.errors import (
    ContainerNotFound,
    FlowerBatchError,
    GatewayConfigError,
    GatewayError,
    GatewayModeError,
)
from flower_batch.gateway.host.health import GatewayHealth
from flower_batch.gateway.host.setup import mode_setup
from flower_batch.gateway.host.supervisor import READY_LINE, RestartPolicy
from flower_batch.gateway.job_sockets import IN_JOB, SOCKET_IN_JOB, ask, serving, socket_key
from flower_batch.gateway.tokens import SECRET_ENV, job_token, new_secret
from flower_batch.jobmodel import fields
from flower_batch.jobmodel.modes import missing_need
from flower_batch.jobmodel.spec import GatewaySpec
from flower_batch.jobmodel.units import DOCKER_MIN_MEMORY, format_memory
from flower_batch.labels import labels
from flower_batch.layout import FLOWER_PYTHON

PORT = 8080
ALIAS = "gateway"
SOCKETS_IN_GATEWAY = "/sockets"
# Connections of every job of a batch, a thread each, and the relay's: more than a job needs.
GATEWAY_PIDS = 16384
# The gateway container's memory limit. It holds no request history (constant memory), but a
# request's body is parsed whole: a batch whose jobs send very large bodies may need more.
MEMORY_ENV = "FLOWER_BATCH_GATEWAY_MEMORY"
DEFAULT_MEMORY = "512m"
LOG_READ_S = 5.0  # one read of the gateway's log while waiting for its ready line


def gateway_memory(environ: Mapping[str, str]) -> int:
    """Bytes of the gateway container's memory limit: FLOWER_BATCH_GATEWAY_MEMORY, else 512m."""
    raw = environ.get(MEMORY_ENV, "").strip()
    size = fields.memory(raw or DEFAULT_MEMORY)
    if isinstance(size, fields.Problem):
        raise GatewayConfigError(
            f"{MEMORY_ENV}={raw!r}: give the gateway container's memory limit as a size of at "
            f"least {format_memory(DOCKER_MIN_MEMORY)}, e.g. 512m or 2g"
        )
    return size


@dataclass(frozen=True)
class GatewaySettings:
    """What the host's environment (and `--upstream`) says about the gateways a process starts,
    read once where the process starts (the command line: `from_environ(os.environ)`) and handed
    down to every sidecar; nothing below reads os.environ. The default: no host credential, a
    512m gateway, the default restart policy."""

    environ: Mapping[str, str] = field(
        default_factory=dict, repr=False
    )  # the credential, FLOWER_BATCH_UPSTREAM
    memory: int = 512 * 1024 * 1024
    restarts: RestartPolicy = field(default_factory=RestartPolicy)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> GatewaySettings:
        """Raises GatewayConfigError / FlowerBatchError on a bad memory size or restart count."""
        return cls(
            environ=dict(environ), memory=gateway_memory(environ), restarts=RestartPolicy.from_env(environ)
        )


MAX_NAME = 63 - len("-gateway")  # the gateway container is `<name>-gateway`, the egress network `<name>-out`


def gateway_name(batch: str, lease: str, suffix: str = "") -> str:
    """The Docker name of a gateway's network (and the stem of its container's): readable, at most
    MAX_NAME characters, and unique per (batch, lease, suffix) however long the batch name is."""
    readable = re.sub(r"[^a-z0-9]+", "-", batch.lower()).strip("-")[:24].rstrip("-") or "batch"
    name = f"fb-{readable}-{_digest(batch)}-{lease}{suffix}"
    if len(name) > MAX_NAME:  # an unusually long lease id or suffix: hash those too
        name = f"fb-{readable}-{_digest(batch)}-{_digest(lease + '/' + suffix, 12)}"
    return name


def _digest(text: str, size: int = 6) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()[:size]


class GatewaySidecar:
    """Start with `async with`: makes the network and the gateway, removes both at the end."""

    def __init__(
        self,
        backend: Backend,
        *,
        batch: str,
        lease: str,
        image_id: str,
        batch_dir: Path,
        gateway: GatewaySpec,
        suffix: str = "",
        batch_budget_usd: float | None = None,
        settings: GatewaySettings | None = None,
    ) -> None:
        """`gateway`: the job's gateway spec (its mode and the file the mode needs); `settings`:
        the host's, from where the process started (default: no credential, 512m)."""
        settings = GatewaySettings() if settings is None else settings
        mode = gateway.mode
        self.scenario: Path | None = None  # the mode's file when it is the gateway's: copied next to it
        if mode.rules.gateways_file and mode.rules.needs:
            given = getattr(gateway, mode.rules.needs)
            if given is None or not Path(given).is_file():
                raise GatewayError(f"gateway {missing_need(mode, None)}; {given} does not exist")
            self.scenario = Path(given)
        try:  # mode-specific arguments, and for `anthropic` the host's key (a gateway secret)
            self.setup = mode_setup(
                mode,
                batch_budget_usd=batch_budget_usd,
                environ=settings.environ,
                scenario_path=f"/gateway/scenario{self.scenario.suffix}" if self.scenario else None,
            )
        except GatewayModeError as exc:
            raise GatewayError(str(exc)) from None
        self.backend = backend
        self.batch = batch
        self.batch_budget_usd = batch_budget_usd  # the cap its gateway enforces, for job records
        self.lease = lease
        self.image_id = image_id
        self.batch_dir = batch_dir
        self.mode = mode
        self.secret = new_secret()  # in this process's memory and the gateway's tmpfs only
        self.name = gateway_name(batch, lease, suffix)  # several gateways may serve one lease
        # One machine: each job reaches the gateway by a unix socket of its own and has no network
        # at all. A cluster: jobs and gateway share a private overlay network.
        self.by_socket = backend.shares_unix_sockets
        self.network = "none" if self.by_socket else self.name
        self.egress = f"{self.name}-out"  # anthropic mode: the gateway's (only) route out
        self.dir = batch_dir / ".gateway" / self.name
        self.sockets = self.dir / "sockets"
        self.container: str | None = None
        self.policy = settings.restarts  # how often supervisor.py may restart it
        self.memory = settings.memory
        self.health = GatewayHealth(name=f"{self.name}-gateway")
        self.gave_up = anyio.Event()  # set when the supervisor stops restarting it
        self.settled = anyio.Event()  # start_beside is over: it serves, or it gave up
        self.stopping = False
        self._spec: ContainerSpec | None = None  # kept (in memory only) to create it again
        self.serving = False  # its first ready line was seen: it answers on its control socket
        self._reserved: list[str] = []  # jobs whose socket start() opens once it serves
        self._networks_open = False

    def job_env(self, job_id: str) -> dict[str, str]:
        if self.by_socket:  # flower relays this loopback port to the job's socket (model_socket.py)
            return {
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{PORT}/j/{job_id}",
                "FLOWER_MODEL_SOCKET": SOCKET_IN_JOB,
            }
        return {"ANTHROPIC_BASE_URL": f"http://{ALIAS}:{PORT}/j/{job_id}"}

    async def open_job(self, job_id: str) -> list[Mount]:
        """What a job's container mounts to reach the gateway: its own socket's folder (one
        machine), or nothing (a cluster: the network)."""
        if not self.by_socket:
            return []
        if not self.serving:  # starting beside the job (start_beside): its folder now, the socket later
            return [Mount(str(self._reserve(job_id)), IN_JOB)]
        key = await anyio.to_thread.run_sync(ask, self.sockets, f"open {job_id}")
        return [Mount(str(self.sockets / key), IN_JOB)]

    def _reserve(self, job_id: str) -> Path:
        """The job's socket folder, made on the host before the gateway serves (the key is the
        job id's hash, so the same folder the gateway binds in); start() asks for the socket."""
        folder = self.sockets / socket_key(job_id)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        # The gateway's to write in (start() hands over the rest of its folder, whenever it runs).
        for made in (self.sockets, folder):
            hand_over(made, recursive=False)
        self._reserved.append(job_id)
        return folder

    async def close_job(self, job_id: str) -> None:
        """The job's container is gone: its socket goes too (a wake opens it again)."""
        if self.by_socket and self.container:
            try:
                await anyio.to_thread.run_sync(ask, self.sockets, f"close {job_id}")
            except OSError:
                pass  # a gateway that is down or gone has no socket to close

    def job_secrets(self, job_id: str) -> dict[str, str]:
        """The job's own token: a ContainerSpec secret (an engine secret on a cluster, where no
        inspect of its service or container may show it)."""
        return {"ANTHROPIC_API_KEY": job_token(self.secret, job_id)}

    async def __aenter__(self) -> GatewaySidecar:
        try:
            await self.start()
        except BaseException:
            # A gateway that did not come up leaves no network or container behind.
            with anyio.CancelScope(shield=True):
                await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            await self.stop()

    async def start_beside(self, supervise: Callable[[GatewaySidecar], None]) -> None:
        """Start while the job's container starts too (one job: run, wake, repro); once it serves,
        `supervise` it. A gateway that does not start is said the way one that died for good is
        (health.gave_up, `gave_up`): the job is stopped, or not started, and its record says why.
        The caller stops it (stop()) in every case."""
        try:
            await self.start()
        except FlowerBatchError as exc:
            self.health.gave_up = f"the gateway did not start: {' '.join(str(exc).split())}"
            self.gave_up.set()
            return
        finally:
            self.settled.set()
        supervise(self)

    async def started(self) -> GatewaySidecar:
        """Once start_beside is over: this gateway, serving; or its failure, raised."""
        await self.settled.wait()
        if self.health.gave_up and not self.serving:
            raise GatewayError(self.health.gave_up)
        return self

    async def open_networks(self) -> None:
        """Its networks, once: anthropic mode's route out (the gateway's only), and on a cluster
        the private overlay its jobs join."""
        if self._networks_open:
            return
        if self.setup.egress:
            await self.backend.create_network(self.egress, labels(self.batch, self.lease, "network"))
        if not self.by_socket:
            await self.backend.create_network(
                self.network, labels(self.batch, self.lease, "network"), internal=True
            )
        self._networks_open = True

    async def start(self) -> None:
        self.sockets.mkdir(parents=True, exist_ok=True)
        if self.scenario is not None:
            shutil.copyfile(self.scenario, self.dir / ("scenario" + self.scenario.suffix))
        for folder in (self.batch_dir, self.batch_dir / ".gateway"):
            hand_over(folder, recursive=False)  # the unrouted log; the gateway's own folder
        hand_over(self.dir)
        await self.open_networks()
        network = self.egress if (self.setup.egress and self.by_socket) else self.network
        where = ["--host", "127.0.0.1", "--sockets", SOCKETS_IN_GATEWAY] if self.by_socket else []
        spec = ContainerSpec(
            image=self.image_id,
            command=[
                FLOWER_PYTHON,
                "-m",
                "flower_batch.gateway.server",
                "serve",
                "--mode",
                self.mode,
                "--port",
                str(PORT),
                "--batch-dir",
                "/batch",
                *where,
                *self.setup.args,
            ],
            env={"HOME": "/tmp"},
            # The batch secret and the host's key: files in a tmpfs of the gateway (an engine secret
            # on a cluster), read by the gateway itself; in no environment (backend/secret_env.py).
            secrets={SECRET_ENV: self.secret, **self.setup.env},
            secrets_as_env=False,
            mounts=[
                Mount(str(self.batch_dir), "/batch"),
                Mount(str(self.dir), "/gateway", read_only=True),
                *([Mount(str(self.sockets), SOCKETS_IN_GATEWAY)] if self.by_socket else []),
            ],
            labels=labels(self.batch, self.lease, "gateway"),
            network=network,
            network_aliases=[] if self.by_socket else [ALIAS],
            name=f"{self.name}-gateway",
            memory=self.memory,
            restart=True,  # the engine restarts a gateway that dies (Swarm: a replicated service)
            # On a cluster the gateway stays on a manager: losing a worker must not take every
            # job's model (and the batch's meter) with it. One machine has nothing to place.
            placement=["node.role==manager"],
            confinement=Confinement(pids=GATEWAY_PIDS),
        )
        self._spec = spec
        self.container = await self.backend.create(spec)
        if self.setup.egress and not self.by_socket:
            await self.backend.connect_network(self.egress, self.container)
        await self.backend.start(self.container)
        await self._wait_ready()
        await self._open_reserved()

    async def _open_reserved(self) -> None:
        """It serves: bind the sockets of the jobs whose container started beside it."""
        self.serving = True
        for job_id in self._reserved:
            try:
                await anyio.to_thread.run_sync(ask, self.sockets, f"open {job_id}")
            except OSError as exc:
                raise GatewayError(f"the gateway did not open job {job_id}'s socket: {exc}") from None
        self._reserved.clear()

    async def restart(self, lives: int | None = None) -> None:
        """Start the dead gateway again: the same container (same alias; the backend hands the
        same secrets over again) when it still exists, else a new one from the same spec. `lives`: the ready
        lines its log held when it died (counted now if not given); the engine's own restart
        policy may have started it meanwhile, and its ready line then counts as the restart's."""
        assert self._spec is not None and self.container
        try:
            before = await self._ready_count() if lives is None else lives
            await self.backend.start(self.container)
        except ContainerNotFound:
            self.container = None
            self.container = await self.backend.create(self._spec)
            if self.setup.egress and not self.by_socket:
                await self.backend.connect_network(self.egress, self.container)
            before = 0
            await self.backend.start(self.container)
        await self._wait_ready(after=before)

    async def _ready_count(self) -> int:
        for _ in range(3):
            lines = await self._log_lines()
            if lines is not None:
                return sum(READY_LINE in line for line in lines)
        return 0

    async def _log_lines(self) -> list[str] | None:
        """The gateway's log so far, or None when the engine did not end the read within
        LOG_READ_S: seen under load, a read racing the ready line's write stays open (json-file
        driver), and the SDK reads a log stream with no timeout. The next poll reads again."""
        assert self.container
        with anyio.move_on_after(LOG_READ_S):
            return [line async for line in self.backend.logs(self.container)]
        return None

    async def _wait_ready(self, timeout: float = 60.0, after: int = 0) -> None:
        """Until the gateway serves. On one machine its control socket answers (polled every
        20 ms, no engine call); on a cluster its log holds the ready line, the `after`+1-th: a
        restarted container's log still holds the lines of its earlier lives. Either way a
        container that exited meanwhile is an error that says why."""
        assert self.container
        deadline = time.monotonic() + timeout
        next_look = 0.0  # when to ask the engine whether it exited
        while time.monotonic() < deadline:
            if self.by_socket:
                if await anyio.to_thread.run_sync(serving, self.sockets):
                    return
            else:
                lines = await self._log_lines() or []
                if sum(READY_LINE in line for line in lines) > after:
                    return
            if time.monotonic() >= next_look:
                await self._raise_if_exited()
                next_look = time.monotonic() + (0.5 if self.by_socket else 0.0)
            await anyio.sleep(0.02 if self.by_socket else 0.1)
        raise GatewayError(f"the gateway did not start within {timeout:.0f}s")

    async def _raise_if_exited(self) -> None:
        assert self.container
        info = await self.backend.inspect(self.container)
        if info.state not in ("exited", "dead"):
            return
        tail = " | ".join((await self._log_lines() or [])[-3:]) or "no output"
        if info.oom_killed:
            raise GatewayError(
                f"the gateway container was OOM-killed ({info.exit_code}) at its memory limit of "
                f"{format_memory(self.memory)}: raise {MEMORY_ENV}; last log: {tail}"
            )
        raise GatewayError(f"the gateway container exited ({info.exit_code}): {tail}")

    async def stop(self) -> None:
        self.stopping = True  # before the container goes: its supervisor must not restart it
        if self.container:
            try:
                await self.backend.remove(self.container, force=True)
            except FlowerBatchError:
                pass
            self.container = None
        networks = [] if self.by_socket else [self.network]
        for network in [*networks, *([self.egress] if self.setup.egress else [])]:
            try:
                await self.backend.remove_network(network)
            except FlowerBatchError:
                pass
        shutil.rmtree(self.sockets, ignore_errors=True)  # sockets and job names only
