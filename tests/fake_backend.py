"""`FakeBackend`: an in-memory Backend for fast scheduler tests. It lives under tests/, not in the
package: nothing selects it but a test (no `--backend fake`), so shipping it would make a public
API nobody outside the tests uses.


A container runs a *program* — an async Python callable `program(proc) -> exit code` — chosen
by the container's `command[0]`'s file name (`programs`: "flower" runs /opt/flower/bin/flower), by a `resolve(spec)` function, or the default.
`Script` is a ready-made program: log lines, a duration, an exit code, and how it reacts to
SIGTERM. Signals behave as in a container with an init: SIGKILL ends the program at once (137);
a signal the program `trap`s is queued for it (`await proc.next_signal()`); any other
terminating signal ends it with 128+signal. Errors are the same types DockerBackend raises.

    async with FakeBackend(programs={"work": Script(duration_s=0.2, exit_code=0)}) as backend:
        cid = await backend.create(ContainerSpec(image=FakeBackend.IMAGE, command=["work"]))
"""

from __future__ import annotations

import hashlib
import itertools
import math
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import TracebackType

import anyio
import anyio.abc

from flower_batch.backend.base import (
    Backend,
    ContainerInfo,
    ContainerSpec,
    ContainerState,
    ImageInfo,
    LabelFilter,
    Mount,
    NetworkInfo,
    VolumeInfo,
    labels_match,
    signal_number,
)
from flower_batch.errors import (
    BackendError,
    ContainerNotFound,
    ContainerNotRunning,
    ImageMissing,
    NameConflict,
    NotFound,
)
from flower_batch.labels import RELAY_WAITS

Program = Callable[["FakeProcess"], Awaitable[int]]

SIGKILL = 9
# Signals whose default action ends a process; the rest (SIGCHLD, SIGWINCH, ...) are ignored.
_FATAL_BY_DEFAULT = {1, 2, 3, 6, 9, 10, 12, 13, 14, 15}


class _Killed(Exception):
    def __init__(self, code: int):
        self.code = code


class FakeProcess:
    """What a program sees: its spec, its log, its signals and its files (through the mounts)."""

    def __init__(self, container: _Container):
        self._c = container
        self._trapped: set[int] = set()
        self._send, self._recv = anyio.create_memory_object_stream[int](math.inf)
        self.signals: list[int] = []
        """Every signal delivered, trapped or not (for assertions)."""

    @property
    def spec(self) -> ContainerSpec:
        return self._c.spec

    @property
    def env(self) -> dict[str, str]:
        return {**self._c.spec.env, **self._c.spec.secrets}

    @property
    def command(self) -> list[str]:
        return self._c.spec.command

    def log(self, line: str) -> None:
        self._c.append_log(line)

    def trap(self, *sigs: int | str) -> None:
        """Handle these signals (queued for `next_signal`) instead of dying from them."""
        self._trapped.update(signal_number(s) for s in sigs)

    async def next_signal(self, timeout: float | None = None) -> int | None:
        """The next trapped signal, or None after `timeout` seconds."""
        with anyio.move_on_after(timeout):
            return await self._recv.receive()
        return None

    def host_path(self, container_path: str) -> Path:
        """Where a container path lives on the host, through the longest matching mount."""
        mount, rel = self._mount_for(container_path)
        return self._c.backend._mount_source(mount) / rel

    def write_text(self, container_path: str, text: str) -> None:
        """Write a file as the container would (PermissionError on a read-only mount)."""
        mount, _ = self._mount_for(container_path)
        if mount.read_only:
            raise PermissionError(f"read-only file system: {container_path}")
        self.host_path(container_path).write_text(text)

    def read_text(self, container_path: str) -> str:
        return self.host_path(container_path).read_text()

    def _mount_for(self, container_path: str) -> tuple[Mount, str]:
        path = PurePosixPath(self._abs(container_path))
        best: Mount | None = None
        for m in self._c.spec.mounts:
            if path.is_relative_to(m.target) and (best is None or len(m.target) > len(best.target)):
                best = m
        if best is None:
            raise FileNotFoundError(f"{container_path} is not under any mount of this fake container")
        return best, str(path.relative_to(best.target))

    def _abs(self, p: str) -> str:
        return p if p.startswith("/") else str(PurePosixPath(self._c.spec.working_dir or "/") / p)

    def oom_kill(self) -> None:
        """End the program as the kernel's OOM killer would: SIGKILL (137) and OOMKilled set."""
        self._c.oom_killed = True
        raise _Killed(128 + SIGKILL)

    def _deliver(self, sig: int) -> None:
        self.signals.append(sig)
        if sig == SIGKILL:
            raise _Killed(128 + SIGKILL)
        if sig in self._trapped:
            self._send.send_nowait(sig)
        elif sig in _FATAL_BY_DEFAULT:
            raise _Killed(128 + sig)


@dataclass
class Script:
    """A ready-made program: logs its lines, runs `duration_s`, exits `exit_code`.

    SIGTERM: by default it dies (143). With `term_exit_code` set it traps SIGTERM, logs
    "got SIGTERM" and exits with that code. With `ignore_term` it traps SIGTERM and keeps going
    (only SIGKILL — e.g. stop() after its grace — ends it).
    """

    exit_code: int = 0
    duration_s: float = 0.0
    log_lines: Sequence[str] = ()
    files: Mapping[str, str] = field(default_factory=dict)
    """Container path -> text written at start (through the mounts)."""
    term_exit_code: int | None = None
    ignore_term: bool = False

    async def __call__(self, proc: FakeProcess) -> int:
        if self.term_exit_code is not None or self.ignore_term:
            proc.trap("SIGTERM")
        for path, text in self.files.items():
            proc.write_text(path, text)
        for line in self.log_lines:
            proc.log(line)
        deadline = anyio.current_time() + self.duration_s
        while (left := deadline - anyio.current_time()) > 0:
            sig = await proc.next_signal(timeout=left)
            if sig is not None and not self.ignore_term:
                proc.log("got SIGTERM")
                return self.term_exit_code if self.term_exit_code is not None else 128 + sig
        return self.exit_code


def starts_in_order(events: list[str], ready_after_s: float = 0.5) -> dict[str, Program]:
    """Programs for a gateway ("python") that serves after `ready_after_s` and jobs ("flower")
    that end at once, each saying in `events` when: which started first."""
    from flower_batch.gateway.host.sidecar import READY_LINE

    async def gateway(proc: FakeProcess) -> int:
        await anyio.sleep(ready_after_s)
        proc.log(f"{READY_LINE} on 0.0.0.0:8080 mode=scripted")
        events.append("gateway ready")
        await anyio.sleep(3600)
        return 0

    async def job(proc: FakeProcess) -> int:
        events.append("job started")
        return 0

    return {"python": gateway, "flower": job}


class _Container:
    def __init__(self, backend: FakeBackend, cid: str, name: str, spec: ContainerSpec, program: Program):
        self.backend, self.id, self.name, self.spec, self.program = backend, cid, name, spec, program
        self.state: ContainerState = "created"
        self.exit_code: int | None = None
        self.oom_killed = False
        self.lines: list[str] = []
        self.changed = anyio.Event()
        self.exited = anyio.Event()
        self.process: FakeProcess | None = None
        self.scope: anyio.CancelScope | None = None

    def append_log(self, line: str) -> None:
        self.lines.append(line)
        self._notify()

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def info(self) -> ContainerInfo:
        return ContainerInfo(
            self.id,
            self.name,
            self.spec.image,
            self.state,
            self.exit_code,
            dict(self.spec.labels),
            oom_killed=self.oom_killed,
        )

    async def run(self, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.process = FakeProcess(self)
        self.state, self.exit_code, self.exited = "running", None, anyio.Event()
        self.oom_killed = False
        code = 0
        with anyio.CancelScope() as self.scope:
            task_status.started()
            try:
                code = await self.program(self.process)
            except _Killed as killed:  # oom_kill() from inside the program
                code = killed.code
            except Exception as exc:  # a crashing program is a crashing container, not a test error
                self.append_log(f"{type(exc).__name__}: {exc}")
                code = 1
        if self.scope.cancelled_caught:
            code = self._kill_code
        self.state, self.exit_code = "exited", code
        self.exited.set()
        self._notify()

    _kill_code = 128 + SIGKILL


class FakeBackend(Backend):
    IMAGE = "fake/runtime:latest"

    def __init__(
        self,
        programs: Mapping[str, Program] | None = None,
        default: Program | None = None,
        resolve: Callable[[ContainerSpec], Program | None] | None = None,
        images: Mapping[str, Mapping[str, str]] | None = None,
    ):
        """programs: by command[0]; resolve: any rule on the spec (tried first); default: the rest.
        images: tag -> labels of the images that exist (IMAGE exists unless `images` is given)."""
        self.programs: dict[str, Program] = dict(programs or {})
        self.default: Program = default or Script()
        self.resolve = resolve
        self._images: dict[str, ImageInfo] = {}
        for tag, labels in (images if images is not None else {self.IMAGE: {RELAY_WAITS: "1"}}).items():
            self.add_image(tag, labels)
        self._containers: dict[str, _Container] = {}
        self._networks: dict[str, NetworkInfo] = {}
        self._attached: dict[str, set[str]] = {}
        self._volumes: dict[str, VolumeInfo] = {}
        self._ids = itertools.count(1)
        self._root: Path | None = None
        self._tg: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> FakeBackend:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()  # the "engine" goes away with its containers
        try:
            await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            self._tg = None
            if self._root:
                shutil.rmtree(self._root, ignore_errors=True)

    # -- test helpers -----------------------------------------------------------------------
    def add_image(self, tag: str, labels: Mapping[str, str] | None = None, workdir: str = "") -> ImageInfo:
        digest = "sha256:" + hashlib.sha256(tag.encode()).hexdigest()
        info = ImageInfo(id=digest, tags=[tag], labels=dict(labels or {}), size_bytes=0, workdir=workdir)
        self._images[tag] = self._images[digest] = info
        return info

    def process(self, container_id: str) -> FakeProcess:
        """The running (or last) process of a container, e.g. to check `signals`."""
        proc = self._get(container_id).process
        if proc is None:
            raise ContainerNotRunning(f"container {container_id} was never started")
        return proc

    def volume_path(self, name: str) -> Path:
        if name not in self._volumes:
            raise NotFound(f"volume {name} does not exist")
        path = self._scratch() / "volumes" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    # -- containers -------------------------------------------------------------------------
    async def create(self, spec: ContainerSpec) -> str:
        if spec.image not in self._images:
            raise ImageMissing(
                f"image {spec.image} is not in the local Docker engine — build it with "
                "`flower-batch image build` (flower-batch never pulls images)"
            )
        if spec.memory is not None and not isinstance(spec.memory, int):
            raise TypeError(f"ContainerSpec.memory is bytes, not {spec.memory!r}")
        if spec.name and any(c.name == spec.name for c in self._containers.values()):
            raise NameConflict(
                f"container name {spec.name} is already in use — pick another name or remove the old container"
            )
        if spec.network and spec.network not in self._networks:
            raise NotFound(f"network {spec.network} does not exist")
        for m in spec.mounts:
            if m.kind == "bind" and not Path(m.source).exists():
                raise BackendError(
                    f"Docker refused to operate on container {spec.name or spec.image}: "
                    f"bind source path does not exist: {m.source}"
                )
            if m.kind == "volume" and m.source not in self._volumes:
                await self.create_volume(m.source, {})  # Docker creates a named volume on first use
        cid = hashlib.sha256(f"fake-{next(self._ids)}".encode()).hexdigest()
        program = (self.resolve(spec) if self.resolve else None) or self.programs.get(
            Path(spec.command[0]).name if spec.command else "", self.default
        )
        self._containers[cid] = _Container(self, cid, spec.name or f"fake_{cid[:8]}", spec, program)
        if spec.network:
            self._attached.setdefault(spec.network, set()).add(cid)
        return cid

    async def start(self, container_id: str) -> None:
        c = self._get(container_id)
        if c.state == "running":
            return
        if self._tg is None:
            raise BackendError(
                "FakeBackend is not running — use it as `async with FakeBackend() as backend:`"
            )
        await self._tg.start(c.run)

    async def wait(self, container_id: str, timeout: float | None = None) -> int:
        c = self._get(container_id)
        if c.state == "created":
            return 0  # as Docker: a never-started container is "not running"
        with anyio.fail_after(timeout):
            await c.exited.wait()
        assert c.exit_code is not None
        return c.exit_code

    async def signal(self, container_id: str, sig: int | str) -> None:
        c = self._get(container_id)
        if c.state != "running" or c.process is None:
            raise ContainerNotRunning(f"container {container_id} is not running")
        number = signal_number(sig)
        try:
            c.process._deliver(number)
        except _Killed as killed:
            c._kill_code = killed.code
            assert c.scope is not None
            c.scope.cancel()
        await anyio.sleep(0)  # let the program see it

    async def stop(self, container_id: str, grace_s: float = 10.0) -> None:
        c = self._get(container_id)
        if c.state != "running":
            return
        await self.signal(container_id, "SIGTERM")
        with anyio.move_on_after(grace_s):
            await c.exited.wait()
            return
        if c.state == "running":
            await self.signal(container_id, "SIGKILL")
        await c.exited.wait()

    async def logs(self, container_id: str, follow: bool = False) -> AsyncIterator[str]:
        c = self._get(container_id)
        i = 0
        while True:
            changed = c.changed
            while i < len(c.lines):
                yield c.lines[i]
                i += 1
            if not follow or c.state in ("exited", "dead", "created"):
                return
            await changed.wait()

    async def inspect(self, container_id: str) -> ContainerInfo:
        return self._get(container_id).info()

    async def remove(self, container_id: str, force: bool = True) -> None:
        c = self._get(container_id)
        if c.state == "running":
            if not force:
                raise BackendError(
                    f"container {container_id} is running — stop it first or remove with force"
                )
            await self.signal(container_id, "SIGKILL")
            await c.exited.wait()
        del self._containers[c.id]
        for attached in self._attached.values():
            attached.discard(c.id)

    async def list_by_label(self, labels: LabelFilter) -> list[ContainerInfo]:
        return [c.info() for c in self._containers.values() if labels_match(c.spec.labels, labels)]

    def _get(self, container_id: str) -> _Container:
        c = self._containers.get(container_id)
        if c is None:  # Docker also accepts a unique id prefix or the name
            matches = [
                x
                for x in self._containers.values()
                if x.name == container_id or (len(container_id) >= 4 and x.id.startswith(container_id))
            ]
            c = matches[0] if len(matches) == 1 else None
        if c is None:
            raise ContainerNotFound(f"container {container_id} does not exist (already removed?)")
        return c

    # -- networks ---------------------------------------------------------------------------
    async def create_network(self, name: str, labels: Mapping[str, str], internal: bool = False) -> str:
        if name in self._networks:
            raise NameConflict(
                f"network name {name} is already in use — pick another name or remove the old network"
            )
        info = NetworkInfo(
            id=hashlib.sha256(f"net-{name}-{next(self._ids)}".encode()).hexdigest(),
            name=name,
            labels=dict(labels),
        )
        self._networks[name] = info
        return info.id

    async def connect_network(
        self, network: str, container_id: str, aliases: list[str] | None = None
    ) -> None:
        net = self._network(network)
        self._attached.setdefault(net.name, set()).add(self._get(container_id).id)

    async def remove_network(self, name_or_id: str) -> None:
        net = self._network(name_or_id)
        busy = [cid for cid in self._attached.get(net.name, ()) if self._containers[cid].state == "running"]
        if busy:
            raise BackendError(
                f"network {net.name} has active endpoints (running containers) — stop them first"
            )
        del self._networks[net.name]
        self._attached.pop(net.name, None)

    async def list_networks_by_label(self, labels: LabelFilter) -> list[NetworkInfo]:
        return [n for n in self._networks.values() if labels_match(n.labels, labels)]

    def _network(self, name_or_id: str) -> NetworkInfo:
        for n in self._networks.values():
            if name_or_id in (n.name, n.id):
                return n
        raise NotFound(f"network {name_or_id} does not exist")

    # -- volumes ----------------------------------------------------------------------------
    async def create_volume(self, name: str, labels: Mapping[str, str]) -> str:
        self._volumes.setdefault(name, VolumeInfo(name=name, labels=dict(labels)))  # idempotent, as Docker
        return name

    async def remove_volume(self, name: str, force: bool = False) -> None:
        if name not in self._volumes:
            raise NotFound(f"volume {name} does not exist")
        users = [
            c.id
            for c in self._containers.values()
            if any(m.kind == "volume" and m.source == name for m in c.spec.mounts)
        ]
        if users and not force:
            raise BackendError(
                f"volume {name} is in use by container {users[0][:12]} — remove the container first"
            )
        del self._volumes[name]
        shutil.rmtree(self._scratch() / "volumes" / name, ignore_errors=True)

    async def list_volumes_by_label(self, labels: LabelFilter) -> list[VolumeInfo]:
        return [v for v in self._volumes.values() if labels_match(v.labels, labels)]

    # -- images -----------------------------------------------------------------------------
    async def image_info(self, ref: str) -> ImageInfo:
        if ref not in self._images:
            raise ImageMissing(
                f"image {ref} is not in the local Docker engine — build it with `flower-batch image build` "
                "(flower-batch never pulls images)"
            )
        return self._images[ref]

    # -- internals --------------------------------------------------------------------------
    def _scratch(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="flower-fake-backend-"))
        return self._root

    def _mount_source(self, mount: Mount) -> Path:
        return self.volume_path(mount.source) if mount.kind == "volume" else Path(mount.source)
