"""A helper container that runs commands as root in the orchestrator's own mount namespace, for an
orchestrator that is not root but may use the engine (the docker group): a job's own disk needs
a loop device, mounts and umounts (running/disk_ops.py).

One container, started at its first command and removed by `close`: root in the engine's machine's
namespaces (pid and user namespaces of the host, SYS_ADMIN for mounts and loop devices, SYS_PTRACE
to open the orchestrator's namespace file, block major 7 and loop-control among its devices, no
seccomp or LSM profile in the way). Not `--privileged`: that is more than it needs, and an engine
whose own capabilities lack one (some VMs) cannot start a privileged container at all.

It serves on a unix socket in a private folder of ours (0700) bound into it at the same path, the
socket itself ours and 0600: each command is one line of JSON there, run as
`nsenter --mount=/proc/<our pid>/ns/mnt -- ARGV` (in our mount namespace, paths are ours and a
mount made there is seen by us, as if we were root), its answer one line back: a few ms, where a
`docker exec` took 40-70 ms and the engine's CPU. It exits when our pid does, and the engine
removes it then: an orchestrator killed leaves no helper behind for long (and `gc` finds it by
its labels meanwhile).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from flower_batch.backend.base import HostHelper
from flower_batch.backend.docker.connection import Connection, translate
from flower_batch.errors import BackendError, ContainerNotFound

CAPABILITIES = ["SYS_ADMIN", "SYS_PTRACE"]
DEVICES = ["b 7:* rmw", "c 10:237 rmw"]  # loop devices, /dev/loop-control
SECURITY = ["apparmor=unconfined", "seccomp=unconfined", "label=disable"]
SOCKET = "helper.sock"
FOLDER_PREFIX = "flower-batch-disk-helper-"
START_S = 20.0  # its socket appears within this, or it did not start
SERVER = r"""
import json, os, socketserver, subprocess, sys, threading, time
path, pid, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
enter = ["nsenter", f"--mount=/proc/{pid}/ns/mnt", "--"]
class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            try:
                done = subprocess.run(enter + json.loads(line), capture_output=True)
                answer = [done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")]
            except Exception as exc:
                answer = [126, "", f"{type(exc).__name__}: {exc}"]
            self.wfile.write(json.dumps(answer).encode() + b"\n")
            self.wfile.flush()
class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
def orphaned():
    while True:
        time.sleep(1)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:  # its orchestrator was killed: its socket goes with it (the
            try:  # folder is where it is bound: ours to remove, left empty in the host's /tmp)
                os.unlink(path)
            finally:
                os._exit(0)
threading.Thread(target=orphaned, daemon=True).start()
old = os.umask(0o177)
server = Server(path + ".new", Handler)
os.umask(old)
os.chown(path + ".new", uid, gid)
os.rename(path + ".new", path)
server.serve_forever()
"""


class DockerHostHelper(HostHelper):
    def __init__(self, conn: Connection, image: str, labels: Mapping[str, str], name: str) -> None:
        self._conn = conn
        self._image = image
        self._labels = dict(labels)
        self._name = name
        self._pid = os.getpid()
        self._id: str | None = None
        self._folder: Path | None = None
        self._lock = threading.Lock()

    def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        self._started()
        try:
            return self._ask(argv)
        except BackendError:  # removed under us (a `gc`): started once more
            with self._lock:
                self._forget()
            self._started()
            return self._ask(argv)

    def _ask(self, argv: Sequence[str]) -> tuple[int, str, str]:
        folder = self._folder
        try:
            if folder is None:
                raise OSError("not started")
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(str(folder / SOCKET))
                conn.sendall(json.dumps(list(argv)).encode() + b"\n")
                with conn.makefile("rb") as answers:
                    line = answers.readline()
            code, out, err = json.loads(line)
        except (OSError, ValueError) as exc:
            raise BackendError(f"the disk helper container {self._name} did not answer: {exc}") from None
        return int(code), str(out), str(err)

    def _started(self) -> None:
        with self._lock:
            if self._id is None:
                self._start()

    def _start(self) -> None:
        sweep_stale_folders()
        folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))  # 0700, ours
        self._folder = folder
        try:
            api = self._conn.api()
            host = api.create_host_config(
                binds={str(folder): {"bind": str(folder), "mode": "rw"}},
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
                command=["python3", "-I", "-S", "-c", SERVER, str(folder / SOCKET), str(self._pid), *_ids()],
                entrypoint=[],
                user="0:0",
                name=self._name,
                labels=self._labels,
                host_config=host,
            )
            self._id = str(created["Id"])
            api.start(self._id)
        except Exception as exc:
            self._forget()
            raise BackendError(
                f"the disk helper container could not start: {translate(exc, 'container', self._name)}"
            ) from None
        self._wait_for_socket()
        # the pid it enters is ours only when we share the engine's pid namespace: checked once
        code, out, err = self._ask(["stat", "-L", "-c", "%i", "/proc/self/ns/mnt"])
        if code != 0 or out.strip() != str(os.stat("/proc/self/ns/mnt").st_ino):
            self._forget()
            why = err.strip().splitlines()[-1] if err.strip() else "another process's mounts"
            raise BackendError(
                f"the disk helper container cannot reach this process's mounts ({why}): run flower-batch "
                "on the engine's machine, outside any container, or as root"
            )

    def _wait_for_socket(self) -> None:
        assert self._folder is not None
        deadline = time.monotonic() + START_S
        while not (self._folder / SOCKET).exists():
            if time.monotonic() > deadline or not self._running():
                self._forget()
                raise BackendError(
                    f"the disk helper container {self._name} did not start serving (its image needs "
                    "python3 and nsenter: the runtime image has them)"
                )
            time.sleep(0.02)

    def _running(self) -> bool:
        try:
            return bool(self._conn.api().inspect_container(self._id)["State"]["Running"])
        except Exception:  # noqa: BLE001 - gone (auto-removed once it exited)
            return False

    def _forget(self) -> None:
        """The container removed (if any) and the socket's folder; the next command starts anew."""
        container, self._id = self._id, None
        folder, self._folder = self._folder, None
        if container is not None:
            self._remove(container)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def _remove(self, container: str) -> None:
        try:
            self._conn.api().remove_container(container, force=True)
        except Exception as exc:  # noqa: BLE001 - gone already, or the engine: said once
            err = translate(exc, "container", self._name)
            if not isinstance(err, ContainerNotFound) and "already in progress" not in str(err):
                raise err from None

    def close(self) -> None:
        with self._lock:
            self._forget()


def sweep_stale_folders(now: float | None = None) -> list[Path]:
    """Our helpers' folders no helper serves any more, removed: a helper removed by force (`gc`,
    an engine restart) never got to take its socket with it, and a killed one leaves its folder
    empty. A folder is stale when its socket refuses connections, or when it has had no socket
    for longer than a helper takes to start (a helper of ours starting right now is spared)."""
    removed = []
    now = time.time() if now is None else now
    for folder in Path(tempfile.gettempdir()).glob(FOLDER_PREFIX + "*"):
        try:
            st = folder.lstat()
        except OSError:
            continue
        if st.st_uid != os.getuid() or not folder.is_dir() or folder.is_symlink():
            continue
        sock = folder / SOCKET
        if sock.is_socket():
            if _served(sock):
                continue  # a live helper's
        elif now - st.st_mtime < 2 * START_S:
            continue  # a helper starting right now: its socket is not there yet
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _served(sock: Path) -> bool:
    """Someone listens on `sock` (a refused or failed connect: nobody does)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(2.0)
        try:
            conn.connect(str(sock))
        except OSError:
            return False
    return True


def _ids() -> list[str]:
    """Our uid and gid: the socket is ours alone."""
    return [str(os.getuid()), str(os.getgid())]
