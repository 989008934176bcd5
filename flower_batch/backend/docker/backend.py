"""`DockerBackend`: the Backend on the local Docker engine, through the docker SDK's low-level API.

Every SDK call runs in a worker thread (`anyio.to_thread.run_sync`). Calls that block until a
container does something (wait, followed logs) use their own thread limiter, so many running
jobs cannot starve the short calls of anyio's default pool of 40 threads. Reads and waits are
sent again after a transient failure of the engine (transient.py); changes never are.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import docker.errors
import docker.types

from flower_batch.backend.base import (
    Backend,
    ContainerInfo,
    ContainerSpec,
    HostHelper,
    ImageInfo,
    LabelFilter,
    NetworkInfo,
    VolumeInfo,
    signal_number,
)
from flower_batch.backend.docker.connection import Connection, Kind, is_read_timeout, translate
from flower_batch.backend.docker.container_config import create_options, host_config, networking_config
from flower_batch.backend.docker.host_helper import DockerHostHelper, sweep_stale_folders
from flower_batch.backend.docker.loopback_hosts import loopback_hosts_file
from flower_batch.backend.docker.secret_handover import receiving, start_handing_over
from flower_batch.backend.docker.transient import retrying
from flower_batch.errors import BackendError
from flower_batch.outputlines import LineSplitter

T = TypeVar("T")

_EXITED = re.compile(r"^Exited \((-?\d+)\)")
# A container with no network gets none from the engine either (create's NetworkDisabled): an
# engine-made sandbox would cost dockerd two re-execs per container (libnetwork-setkey and
# set-ipv6) for a namespace with loopback only, which runc sets up on its own. The engine then
# writes no /etc/hosts, so one of ours (localhost only, as the engine's: loopback_hosts.py) is
# mounted read-only: from this host's disk, so only for an engine on this host's socket (one over
# TCP, e.g. a cluster's manager running an import check, keeps the engine's sandbox), and only
# where that file could be written (else the engine's sandbox, slower but the same to the job).


def label_filters(labels: LabelFilter) -> dict[str, list[str]]:
    return {"label": [k if v is None else f"{k}={v}" for k, v in labels.items()]}


class DockerBackend(Backend):
    def __init__(
        self,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_blocking_waits: int = 512,
        hosts_folder: Path | None = None,
    ):
        """`hosts_folder`: where the /etc/hosts of no-network containers is written (the user's
        cache, loopback_hosts.py); without it they keep the engine's own network sandbox."""
        # A connection per concurrent call kept for reuse: each running job holds one in its wait.
        self._conn = Connection(base_url, timeout, pool_size=max_blocking_waits + 64)
        self._waits = anyio.CapacityLimiter(max_blocking_waits)
        self._secrets: dict[str, dict[str, str]] = {}  # container id -> what each start hands over
        # once, not at each create: the address is read from the environment (DOCKER_HOST, TLS)
        self._on_this_host = self._conn.address.startswith(("unix://", "http+unix://"))
        self._hosts_file = loopback_hosts_file(hosts_folder) if self._on_this_host and hosts_folder else None
        self._quota: bool | None = None  # storage-opt size works here: learnt at the first create that asks

    @property
    def shares_unix_sockets(self) -> bool:
        return True

    @property
    def address(self) -> str:
        return self._conn.address

    @property
    def on_this_host(self) -> bool:
        """The engine is on this host's socket, so it sees this host's files."""
        return self._on_this_host

    async def _call(
        self, kind: Kind, ref: str, fn: Callable[..., T], *args: Any, safe: bool = False, **kwargs: Any
    ) -> T:
        """`fn(api, ...)` in a worker thread; `safe`: a read, sent again after a transient failure."""

        def run() -> T:
            try:
                if safe:
                    return retrying(lambda: fn(self._conn.api(), *args, **kwargs))
                return fn(self._conn.api(), *args, **kwargs)
            except Exception as exc:
                raise translate(exc, kind, ref, address=self._conn.address) from None

        return await anyio.to_thread.run_sync(run)

    # -- containers -------------------------------------------------------------------------
    async def create(self, spec: ContainerSpec) -> str:
        """A container for `spec` (container_config.py maps each field); `start` runs it."""
        command, env, tmpfs = list(spec.command), dict(spec.env), dict(spec.confinement.tmpfs)
        if spec.secrets:  # on stdin at each start (secret_handover.py), never in the config
            command, env, tmpfs = receiving(spec)
        hosts_file = self._hosts_file if spec.network == "none" else None

        def create_once(quota: bool) -> str:
            api = self._conn.api()
            created = api.create_container(
                spec.image,
                host_config=host_config(api, spec, tmpfs, hosts_file, quota),
                networking_config=networking_config(api, spec),
                **create_options(spec, command, env, hosts_file),
            )
            return str(created["Id"])

        def create_mapped() -> str:
            try:
                if not spec.disk_bytes or self._quota is False:
                    return create_once(False)
                try:
                    created = create_once(True)
                except docker.errors.APIError as exc:
                    # fuse-overlayfs, overlay2 off xfs pquota...: the runner's watchdog bounds it
                    if "storage" not in str(exc).lower() or self._quota:
                        raise
                    self._quota = False
                    return create_once(False)
                self._quota = True
                return created
            except docker.errors.ImageNotFound as exc:
                raise translate(exc, "image", spec.image) from None
            except Exception as exc:
                raise translate(
                    exc, "container", spec.name or spec.image, address=self._conn.address
                ) from None

        created = await anyio.to_thread.run_sync(create_mapped)
        if spec.secrets:
            self._secrets[created] = dict(spec.secrets)  # memory only, until it is removed
        return created

    async def start(self, container_id: str) -> None:
        secrets = self._secrets.get(container_id)
        if secrets:  # every start: its tmpfs is new
            await self._call("container", container_id, start_handing_over, container_id, secrets)
        else:
            await self._call("container", container_id, lambda api: api.start(container_id))

    async def wait(self, container_id: str, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout

        def once() -> Any:
            # The HTTP read timeout is what is left of the wait's; the thread never outlives it.
            left = None if deadline is None else max(0.01, deadline - time.monotonic())
            return self._conn.api().wait(container_id, timeout=left)

        def wait() -> int:
            try:
                result = retrying(once, read_timeout_too=False)  # a broken connection: wait again
            except Exception as exc:
                if timeout is not None and is_read_timeout(exc):
                    raise TimeoutError(
                        f"container {container_id[:12]} still running after {timeout:g}s"
                    ) from None
                raise translate(exc, "container", container_id, address=self._conn.address) from None
            return int(result["StatusCode"])

        return await anyio.to_thread.run_sync(wait, limiter=self._waits, abandon_on_cancel=True)

    async def signal(self, container_id: str, sig: int | str) -> None:
        number = signal_number(sig)
        await self._call("container", container_id, lambda api: api.kill(container_id, signal=number))

    async def stop(self, container_id: str, grace_s: float = 10.0) -> None:
        # Docker's stop takes whole seconds; round up so the process gets at least its grace.
        grace = max(0, int(-(-grace_s // 1)))
        await self._call("container", container_id, lambda api: api.stop(container_id, timeout=grace))

    async def logs(self, container_id: str, follow: bool = False) -> AsyncIterator[str]:
        # Streamed even when not following: a long job's output is never held whole in memory.
        stream = await self._call(
            "container",
            container_id,
            lambda api: api.logs(container_id, stdout=True, stderr=True, stream=True, follow=follow),
            safe=True,  # opening it only: a stream that breaks midway is not read again
        )
        splitter = LineSplitter()  # no line held past MAX_LINE_BYTES: the output is the job's
        done = object()

        def next_chunk() -> Any:
            try:
                return next(stream)
            except StopIteration:
                return done
            except Exception as exc:
                raise translate(exc, "container", container_id, address=self._conn.address) from None

        try:
            while True:
                chunk = await anyio.to_thread.run_sync(
                    next_chunk, limiter=self._waits, abandon_on_cancel=True
                )
                if chunk is done:
                    break
                for line in splitter.feed(chunk):
                    yield line
            for line in splitter.rest():
                yield line
        finally:
            stream.close()  # closes the socket, so a thread still blocked in next() returns

    async def inspect(self, container_id: str) -> ContainerInfo:
        data = await self._call(
            "container", container_id, lambda api: api.inspect_container(container_id), safe=True
        )
        state = data["State"]
        status = state["Status"]
        return ContainerInfo(
            id=data["Id"],
            name=data["Name"].lstrip("/"),
            image=data["Config"]["Image"],
            state=status,
            exit_code=int(state["ExitCode"]) if status in ("exited", "dead") else None,
            labels=dict(data["Config"].get("Labels") or {}),
            oom_killed=bool(state.get("OOMKilled")),
        )

    async def remove(self, container_id: str, force: bool = True) -> None:
        self._secrets.pop(container_id, None)
        await self._call(
            "container", container_id, lambda api: api.remove_container(container_id, force=force, v=True)
        )

    async def list_by_label(self, labels: LabelFilter) -> list[ContainerInfo]:
        rows = await self._call(
            "container",
            "list",
            lambda api: api.containers(all=True, filters=label_filters(labels)),
            safe=True,
        )
        infos = []
        for row in rows:
            exited = _EXITED.match(row.get("Status", ""))
            infos.append(
                ContainerInfo(
                    id=row["Id"],
                    name=(row.get("Names") or ["/"])[0].lstrip("/"),
                    image=row["Image"],
                    state=row["State"],
                    exit_code=int(exited.group(1)) if exited else None,
                    labels=dict(row.get("Labels") or {}),
                )
            )
        return infos

    # -- a writable root's state ----------------------------------------------------------------
    async def commit(self, container_id: str, ref: str, labels: Mapping[str, str]) -> str:
        repository, _, tag = ref.rpartition(":")
        changes = [f"LABEL {k}={json.dumps(v)}" for k, v in labels.items()]
        done = await self._call(
            "container",
            container_id,
            lambda api: api.commit(container_id, repository=repository, tag=tag, changes=changes),
        )
        return str(done["Id"])

    async def written_bytes(self, container_id: str) -> int | None:
        def sized(api: Any) -> Any:
            # the engine walks the container's layer for it: a few ms for a small one
            return api._result(
                api._get(api._url("/containers/{0}/json", container_id), params={"size": 1}), True
            )

        data = await self._call("container", container_id, sized, safe=True)
        size = data.get("SizeRw")
        return int(size) if isinstance(size, int) else None

    async def archive(self, container_id: str, path: str, dest: Path, limit_bytes: int) -> bool:
        def save() -> bool:
            try:
                stream, _ = self._conn.api().get_archive(container_id, path, chunk_size=1 << 20)
            except docker.errors.NotFound:
                return False
            except Exception as exc:
                raise translate(exc, "container", container_id, address=self._conn.address) from None
            written = 0
            with dest.open("wb") as out:
                for chunk in stream:
                    written += len(chunk)
                    if written > limit_bytes:
                        raise BackendError(f"{path} is over {limit_bytes} bytes")
                    out.write(chunk)
            return True

        return await anyio.to_thread.run_sync(save)

    async def remove_image(self, ref: str) -> None:
        await self._call("image", ref, lambda api: api.remove_image(ref))

    async def engine_security(self) -> tuple[str, ...]:
        info = await self._call("container", "info", lambda api: api.info(), safe=True)
        return tuple(str(o) for o in info.get("SecurityOptions") or ())

    # -- networks ---------------------------------------------------------------------------
    async def create_network(self, name: str, labels: Mapping[str, str], internal: bool = False) -> str:
        created = await self._call(
            "network",
            name,
            lambda api: api.create_network(
                name, driver="bridge", labels=dict(labels), internal=internal, check_duplicate=True
            ),
        )
        return str(created["Id"])

    async def connect_network(
        self, network: str, container_id: str, aliases: list[str] | None = None
    ) -> None:
        await self._call(
            "network",
            network,
            lambda api: api.connect_container_to_network(container_id, network, aliases=aliases or None),
        )

    async def remove_network(self, name_or_id: str) -> None:
        await self._call("network", name_or_id, lambda api: api.remove_network(name_or_id))

    async def list_networks_by_label(self, labels: LabelFilter) -> list[NetworkInfo]:
        rows = await self._call(
            "network", "list", lambda api: api.networks(filters=label_filters(labels)), safe=True
        )
        return [NetworkInfo(id=r["Id"], name=r["Name"], labels=dict(r.get("Labels") or {})) for r in rows]

    # -- volumes ----------------------------------------------------------------------------
    async def create_volume(self, name: str, labels: Mapping[str, str]) -> str:
        created = await self._call(
            "volume", name, lambda api: api.create_volume(name, driver="local", labels=dict(labels))
        )
        return str(created["Name"])

    async def create_device_volume(
        self, name: str, labels: Mapping[str, str], device: str, fstype: str
    ) -> str:
        options = {"type": fstype, "device": device, "o": "nosuid,nodev"}
        created = await self._call(
            "volume",
            name,
            lambda api: api.create_volume(name, driver="local", driver_opts=options, labels=dict(labels)),
        )
        return str(created["Mountpoint"])

    @property
    def mounts_devices(self) -> bool:
        return True

    def host_helper(self, image: str, labels: Mapping[str, str], name: str) -> HostHelper:
        if not self._on_this_host:
            return super().host_helper(image, labels, name)
        return DockerHostHelper(self._conn, image, labels, name)

    def sweep_host_helpers(self) -> list[Path]:
        return sweep_stale_folders()

    async def remove_volume(self, name: str, force: bool = False) -> None:
        await self._call("volume", name, lambda api: api.remove_volume(name, force=force))

    async def list_volumes_by_label(self, labels: LabelFilter) -> list[VolumeInfo]:
        found = await self._call(
            "volume", "list", lambda api: api.volumes(filters=label_filters(labels)), safe=True
        )
        return [
            VolumeInfo(name=v["Name"], labels=dict(v.get("Labels") or {})) for v in found.get("Volumes") or []
        ]

    # -- images -----------------------------------------------------------------------------
    async def image_info(self, ref: str) -> ImageInfo:
        data = await self._call("image", ref, lambda api: api.inspect_image(ref), safe=True)
        return image_info_from_inspect(data)

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._conn.close)


def image_info_from_inspect(data: Mapping[str, Any]) -> ImageInfo:
    return ImageInfo(
        id=data["Id"],
        tags=list(data.get("RepoTags") or []),
        labels=dict((data.get("Config") or {}).get("Labels") or {}),
        size_bytes=int(data.get("Size") or 0),
        architecture=str(data.get("Architecture") or ""),
        workdir=str((data.get("Config") or {}).get("WorkingDir") or ""),
    )
