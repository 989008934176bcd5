"""The steps of a job's own disk that need root (running/job_disk.py): its loop device attached and
detached, its filesystem mounted and its folders bound and unmounted, its files copied back as
root, and folders made in the engine's volume folder. One interface, two ways:

- `AsRoot`: the orchestrator is root and does them itself (a subprocess, an ioctl): the loop
  device held open with autoclear set, so it clears itself whenever its holders are gone;
- `ViaHelper`: the orchestrator is not root but may use the engine (the docker group): each step
  is a command of one helper container (Backend.host_helper), root in our own mount namespace, so
  paths and mounts are the same as root's. Started at the first step that needs it, removed when
  the run ends. No descriptor can hold a loop device across processes: it is detached explicitly
  when the job's disk is released, and `gc` detaches the ones of dead orchestrators. Files copied
  back are handed to our uid (what the jobs run as when we are not root).

`choose_disk_ops` picks one for this process: root does it itself unless FLOWER_BATCH_DISK_VIA=helper
(the tests and bench/overhead.py measure the helper's way as root).
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from flower_batch.backend.base import Backend, HostHelper
from flower_batch.errors import FlowerBatchError

log = logging.getLogger(__name__)

VIA_ENV = "FLOWER_BATCH_DISK_VIA"
_LO_FLAGS_AUTOCLEAR = 4
_LOOP_GET_STATUS64 = 0x4C05
_LOOP_SET_STATUS64 = 0x4C04
_LOOP_INFO64_SIZE = 232
_LO_FLAGS_OFFSET = 52  # five u64 then three u32 before lo_flags in struct loop_info64


class DiskOps:
    """What needs root, done as root (the base: this process is root)."""

    def problem(self) -> str | None:
        """Why these steps cannot be done here, one line, or None."""
        return None

    def run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        """`argv` as root in our mount namespace; never raises for the command's failure."""
        return subprocess.run(list(argv), capture_output=True, text=True, check=False)

    def attach_loop(self, image: Path) -> tuple[str, int | None]:
        """A loop device on `image`, held open by the returned descriptor, with autoclear set: it
        detaches itself once nobody holds it (our descriptor closed, nothing mounted from it)."""
        loop = self._losetup(image)
        fd = os.open(loop, os.O_RDONLY | os.O_CLOEXEC)
        try:
            info = bytearray(_LOOP_INFO64_SIZE)
            fcntl.ioctl(fd, _LOOP_GET_STATUS64, info)
            (flags,) = struct.unpack_from("<I", info, _LO_FLAGS_OFFSET)
            struct.pack_into("<I", info, _LO_FLAGS_OFFSET, flags | _LO_FLAGS_AUTOCLEAR)
            fcntl.ioctl(fd, _LOOP_SET_STATUS64, info)
        except OSError:
            os.close(fd)
            self.detach_loop(loop, image)
            raise
        return loop, fd

    def _losetup(self, image: Path) -> str:
        done = self.run(["losetup", "--find", "--show", str(image)])
        if done.returncode != 0:
            raise FlowerBatchError(f"no loop device for the job's disk: {last_line(done.stderr)}")
        return done.stdout.strip()

    def detach_loop(self, loop: str, image: Path) -> None:
        """`losetup -d` when the loop still holds `image` (a device still mounted from is only
        marked to clear itself once it is not)."""
        if loop_backing(loop) == str(image):
            self.run(["losetup", "-d", loop])

    def devices(self, paths: Sequence[Path]) -> list[int]:
        """The st_dev of each path (OSError when one cannot be read)."""
        return [os.stat(p).st_dev for p in paths]

    def make_dirs(self, paths: Sequence[Path]) -> None:
        for path in paths:
            path.mkdir(exist_ok=True)

    def hand_back(self, path: Path) -> None:
        """What was copied as root at `path` made ours: root is us already."""

    def warm(self) -> None:
        """Nothing to get ready."""

    def close(self) -> None:
        """Nothing to let go of."""


AS_ROOT = DiskOps()


class ViaHelper(DiskOps):
    """The same steps as commands of the helper container (its start is the first one's cost)."""

    def __init__(self, backend: Backend, image: str, labels: Mapping[str, str], name: str) -> None:
        self._backend, self._image, self._labels, self._name = backend, image, dict(labels), name
        self._helper: HostHelper | None = None
        self._problem: str | None = None
        self._lock = threading.Lock()

    def _get(self) -> HostHelper:
        with self._lock:
            if self._helper is None:
                self._helper = self._backend.host_helper(self._image, self._labels, self._name)
            return self._helper

    def problem(self) -> str | None:
        with self._lock:
            if self._problem is not None:
                return self._problem
        done = self.run(["true"])  # starts the helper, and checks it reaches our mounts
        if done.returncode != 0:
            why = last_line(done.stderr)
            with self._lock:
                self._problem = f"not root, and {why}" if os.getuid() != 0 else why
            return self._problem
        return None

    def warm(self) -> None:
        """The helper started in the background (0.3-0.5 s, once), while the run gets its jobs and
        gateways ready: the first job's disk then rarely waits for it."""
        threading.Thread(target=self.problem, name="disk-helper-start", daemon=True).start()

    def run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        try:
            code, out, err = self._get().run(argv)
        except FlowerBatchError as exc:  # the helper: said as a failed command's reason, one line
            return subprocess.CompletedProcess(list(argv), 125, "", " ".join(str(exc).split()))
        return subprocess.CompletedProcess(list(argv), code, out, err)

    def attach_loop(self, image: Path) -> tuple[str, int | None]:
        return self._losetup(image), None  # detached at release (no descriptor spans processes)

    def devices(self, paths: Sequence[Path]) -> list[int]:
        done = self.run(["stat", "-L", "-c", "%d", *map(str, paths)])
        try:
            found = [int(line) for line in done.stdout.split()]
        except ValueError:
            found = []
        if done.returncode != 0 or len(found) != len(paths):
            raise OSError(last_line(done.stderr))
        return found

    def make_dirs(self, paths: Sequence[Path]) -> None:
        done = self.run(["mkdir", "-p", *map(str, paths)])
        if done.returncode != 0:
            raise OSError(f"the job's disk's folders could not be made: {last_line(done.stderr)}")

    def hand_back(self, path: Path) -> None:
        uid, gid = os.getuid(), os.getgid()
        done = self.run(["chown", "-R", "--no-dereference", f"{uid}:{gid}", str(path)])
        if done.returncode != 0:
            raise OSError(f"the job's files copied back could not be made ours: {last_line(done.stderr)}")

    def close(self) -> None:
        with self._lock:
            helper, self._helper = self._helper, None
        if helper is not None:
            try:
                helper.close()
            except FlowerBatchError as exc:  # it ends with us anyway (tail --pid); gc finds it meanwhile
                log.warning("the disk helper container was not removed: %s", exc)


def choose_disk_ops(
    backend: Backend, *, image: str, labels: Mapping[str, str], name: str, environ: Mapping[str, str]
) -> DiskOps:
    """How this process does a job's disk's privileged steps: itself as root, else (or when
    `environ`, the host's environment as the process started, says FLOWER_BATCH_DISK_VIA=helper)
    through the engine's helper container."""
    if not backend.mounts_devices:
        return AS_ROOT  # no job's disk on such an engine (job_disk.disk_problem)
    if os.getuid() == 0 and environ.get(VIA_ENV) != "helper":
        return AS_ROOT
    return ViaHelper(backend, image, labels, name)


def loop_backing(loop: str) -> str | None:
    """The file a loop device holds (the kernel's path, " (deleted)" when it was removed), or
    None when it holds none: world-readable, so no root is needed to look."""
    try:
        return Path(f"/sys/block/{Path(loop).name}/loop/backing_file").read_text().strip()
    except OSError:
        return None


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
