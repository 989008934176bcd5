"""A helper container that runs commands as root in the orchestrator's own mount namespace, for an
orchestrator that is not root but may use the engine (the docker group): a job's own disk needs
a loop device, mounts and umounts (running/disk_ops.py).

One container, started at its first command and removed by `close`: root in the engine's machine's
namespaces (pid and user namespaces of the host, SYS_ADMIN for mounts and loop devices, SYS_PTRACE
to open the orchestrator's namespace file, block major 7 and loop-control among its devices, no
seccomp or LSM profile in the way). Not `--privileged`: that is more than it needs, and an engine
whose own capabilities lack one (some VMs) cannot start a privileged container at all. Its command
waits for the orchestrator's pid to end (`tail --pid`), and the engine removes it then: an
orchestrator killed leaves no helper behind for long (and `gc` finds it by its labels meanwhile).

Each command is a `docker exec` of `nsenter --mount=/proc/<our pid>/ns/mnt -- ARGV` (about 40 ms):
in our mount namespace, paths are ours and a mount made there is seen by us, as if we were root.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence

from flower_batch.backend.base import HostHelper
from flower_batch.backend.docker.connection import Connection, translate
from flower_batch.errors import BackendError, ContainerNotFound, ContainerNotRunning

CAPABILITIES = ["SYS_ADMIN", "SYS_PTRACE"]
DEVICES = ["b 7:* rmw", "c 10:237 rmw"]  # loop devices, /dev/loop-control
SECURITY = ["apparmor=unconfined", "seccomp=unconfined", "label=disable"]


class DockerHostHelper(HostHelper):
    def __init__(self, conn: Connection, image: str, labels: Mapping[str, str], name: str) -> None:
        self._conn = conn
        self._image = image
        self._labels = dict(labels)
        self._name = name
        self._pid = os.getpid()
        self._id: str | None = None
        self._lock = threading.Lock()

    def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        container = self._started()
        try:
            return self._exec(container, argv)
        except (ContainerNotFound, ContainerNotRunning):  # removed under us (a `gc`): once more
            with self._lock:
                self._id = None
            return self._exec(self._started(), argv)

    def _exec(self, container: str, argv: Sequence[str]) -> tuple[int, str, str]:
        command = ["nsenter", f"--mount=/proc/{self._pid}/ns/mnt", "--", *argv]
        try:
            api = self._conn.api()
            created = api.exec_create(container, command, stdout=True, stderr=True, user="0:0")
            out, err = api.exec_start(created["Id"], demux=True)
            code = api.exec_inspect(created["Id"])["ExitCode"]
        except Exception as exc:
            raise translate(exc, "container", self._name, address=self._conn.address) from None
        return int(code if code is not None else 1), _text(out), _text(err)

    def _started(self) -> str:
        with self._lock:
            if self._id is None:
                self._id = self._start()
            return self._id

    def _start(self) -> str:
        try:
            api = self._conn.api()
            host = api.create_host_config(
                cap_add=CAPABILITIES,
                security_opt=SECURITY,
                device_cgroup_rules=DEVICES,
                pid_mode="host",
                userns_mode="host",
                network_mode="none",
                auto_remove=True,
            )
            created = api.create_container(
                self._image,
                command=["tail", f"--pid={self._pid}", "-f", "/dev/null"],
                entrypoint=[],
                user="0:0",
                name=self._name,
                labels=self._labels,
                host_config=host,
            )
            container = str(created["Id"])
            api.start(container)
        except Exception as exc:
            raise BackendError(
                f"the disk helper container could not start: {translate(exc, 'container', self._name)}"
            ) from None
        # the pid it enters is ours only when we share the engine's pid namespace: checked once
        code, out, err = self._exec(container, ["stat", "-L", "-c", "%i", "/proc/self/ns/mnt"])
        if code != 0 or out.strip() != str(os.stat("/proc/self/ns/mnt").st_ino):
            self._remove(container)
            why = err.strip().splitlines()[-1] if err.strip() else "another process's mounts"
            raise BackendError(
                f"the disk helper container cannot reach this process's mounts ({why}): run flower-batch "
                "on the engine's machine, outside any container, or as root"
            )
        return container

    def _remove(self, container: str) -> None:
        try:
            self._conn.api().remove_container(container, force=True)
        except Exception as exc:  # noqa: BLE001 - gone already, or the engine: said once
            err = translate(exc, "container", self._name)
            if not isinstance(err, ContainerNotFound) and "already in progress" not in str(err):
                raise err from None

    def close(self) -> None:
        with self._lock:
            container, self._id = self._id, None
        if container is not None:
            self._remove(container)


def _text(data: bytes | None) -> str:
    return data.decode("utf-8", "replace") if data else ""
