"""A job's own disk: what it may write (workspace, runs folder, its check's writes) is one ext4
filesystem of `disk` bytes, so a job that writes without bound gets ENOSPC inside its own
container and nobody else's (docs/security.md, "A disk of its own").

How, on one machine's engine:
- the job's folders stay on the host and are the source of truth between runs; before a run,
  `mkfs.ext4 -d` formats a sparse file `<job>/disk.img` of `disk` bytes filled with the job's
  `workspace/` and `runs/` (a regular file: no root needed for that part);
- the file is attached to a loop device (`losetup`: root) and the engine mounts that device
  itself through a `local` volume (`type=ext4`, `device=/dev/loopN`): Docker 20.10's local
  driver calls mount(2) directly, so its `o=loop` (a mount(8) option) cannot do the attaching;
- the job's container and its check's name the volume (at VOLUME_MOUNT), so the engine mounts
  it on its machine before either starts, and bind `<where the engine mounts it>/workspace` and
  `/runs` at the usual paths. Those two folders are also made in the volume's own (unmounted)
  folder, so the engine's check that a bind's source exists passes at create, before the
  mount; at start the engine mounts every volume of the container before the container's own
  mounts are made, so the binds reach into the job's filesystem (no holder container: its
  start cost 0.2-1 s a job on this engine);
- after the check, the orchestrator mounts the filesystem read-only on the host, measures it
  (full: the job reached its limit), copies the two folders back over the host's (`cp -a`:
  nothing followed, a copy that fails keeps the host's previous folders), unmounts it and
  removes the volume and the image file. The orchestrator holds the loop device open while the
  job runs, with autoclear set: if the orchestrator dies, the device clears itself once `gc`
  has removed the containers (and so the engine's mount).

So every reader of a job's files (the report's diff, the viewer, wake, repro, attempts, gc)
reads the host's folders as before. While the job runs they show its disk, read-only
(`show_live`: binds over the host's folders); a killed orchestrator's binds stay until the job's
next run or `gc` copies what they show over the host's folders (`recover_live`, `recover_orphans`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from flower_batch.backend.base import Backend, Mount
from flower_batch.backend.confinement import sandbox_ids
from flower_batch.errors import FlowerBatchError, RecordError
from flower_batch.jobmodel.record import read_record
from flower_batch.jobmodel.units import format_memory
from flower_batch.labels import labels
from flower_batch.layout import Home, JobDir
from flower_batch.running.lease import is_alive
from flower_batch.untrusted_files import remove_tree

log = logging.getLogger(__name__)

DISK_IMAGE = "disk.img"
FOLDERS = ("workspace", "runs")
"""What the job's disk holds, as folders of its root (and of the job folder on the host)."""
_STAGING = ".disk-in"  # the job's folders moved (renamed) here while mkfs reads them
_OUT = ".disk-out"  # copied back here first, then swapped in by rename
_OLD = ".disk-old"
VOLUME_MOUNT = "/.flower-disk"
"""Where the job's and the check's containers name the disk's volume (nothing uses that path:
naming it is what makes the engine mount it)."""
_LO_FLAGS_AUTOCLEAR = 4
_LOOP_GET_STATUS64 = 0x4C05
_LOOP_SET_STATUS64 = 0x4C04
_LOOP_INFO64_SIZE = 232
_LO_FLAGS_OFFSET = 52  # five u64 then three u32 before lo_flags in struct loop_info64


def disk_problem(backend: Backend) -> str | None:
    """Why a job's own disk cannot be made here, or None."""
    if not backend.mounts_devices:
        return f"the {backend.name} engine cannot mount a job's own disk"
    if os.getuid() != 0:
        return "attaching a loop device needs root (run flower-batch as root, as CI does)"
    missing = [tool for tool in ("mkfs.ext4", "losetup", "mount", "cp", "du") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found (install e2fsprogs and util-linux)"
    return None


@dataclass(frozen=True)
class JobDisk:
    """A job's disk while it is attached."""

    size: int
    image: Path
    loop: str
    volume: str
    mountpoint: Path  # where the engine mounts the volume on its machine
    loop_fd: int | None = None  # held open while the job runs (see the module docstring)

    def source(self, folder: str) -> str:
        """The host path the engine binds for one of FOLDERS."""
        return str(self.mountpoint / folder)

    def volume_mount(self) -> Mount:
        """The volume itself, named by every container that binds from it: the engine mounts it."""
        return Mount(self.volume, VOLUME_MOUNT, kind="volume")

    @staticmethod
    def covers() -> dict[str, str]:
        """Empty read-only tmpfs mounts over the volume's folders at VOLUME_MOUNT: the job sees its
        files at /workspace and /runs only, never a second time under another path."""
        return {f"{VOLUME_MOUNT}/{folder}": "ro,nosuid,nodev,noexec,size=4k" for folder in FOLDERS}


@dataclass(frozen=True)
class DiskUse:
    """What the job left on its disk when it ended."""

    size: int
    free: int
    folders: tuple[tuple[str, int], ...]  # (folder, bytes) of FOLDERS
    largest: tuple[str, int] | None  # the biggest entry at the top of the folder that grew most

    @property
    def full(self) -> bool:
        """At its limit: what is left is within the filesystem's slack."""
        return self.free <= max(2 * 1024**2, self.size // 100)

    def reason(self) -> str:
        limit = f'disk full: the job reached its limit of {format_memory(self.size)} (disk = "{format_memory(self.size)}")'
        if not self.folders:
            return limit
        grown = max(self.folders, key=lambda f: f[1])
        rest = ", ".join(f"{name} {_mib(n)}" for name, n in self.folders if name != grown[0])
        biggest = f" (largest: {self.largest[0]}, {_mib(self.largest[1])})" if self.largest else ""
        return f"{limit}; {grown[0]} grew to {_mib(grown[1])}{biggest}" + (f", {rest}" if rest else "")


def _mib(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB"


def show_live(disk: JobDisk, jd: JobDir) -> None:
    """While the job runs, its folders on the host show its disk, read-only: the host's own copy
    is as of the job's start, and people (`show`, the viewer, `logs`) and a killed orchestrator's
    successor read the job's progress there. Bound from where the engine mounted the volume, only
    while it is mounted there (a job that already ended has nothing to show); a bind that fails,
    or that caught the volume's own folder, is undone and leaves the start's copy."""
    for folder in FOLDERS:
        source, target = disk.mountpoint / folder, jd.root / folder
        try:
            disk_dev = os.stat(source).st_dev
            if disk_dev == os.stat(disk.mountpoint.parent).st_dev or mounted_at(target):
                continue  # the engine has it unmounted again, or it is shown already
        except OSError:
            continue
        bound = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True, text=True)
        if bound.returncode != 0:
            log.warning(
                "job %s: its %s is shown as of its start: %s", jd.job, folder, _last_line(bound.stderr)
            )
            continue
        subprocess.run(
            ["mount", "-o", "remount,bind,ro,nosuid,nodev,noexec", str(target)], capture_output=True
        )
        if os.stat(target).st_dev != disk_dev:  # unmounted meanwhile: the bind caught the folder below
            _umount(target)


def mounted_at(path: Path) -> bool:
    """Something is mounted at `path` (a bind of a folder of the same filesystem too, which
    os.path.ismount cannot see): /proc/self/mountinfo."""
    want = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split(" ", 5)
                if len(fields) > 4 and _unescape(fields[4]) == want:
                    return True
    except OSError:
        return os.path.ismount(path)
    return False


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (a space is \\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _umount(target: Path) -> None:
    while mounted_at(target):  # binds stack: each one undone
        if subprocess.run(["umount", str(target)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(target)], capture_output=True)
            if mounted_at(target):
                return


def hide_live(jd: JobDir) -> None:
    """The binds of `show_live` undone (lazily when a reader still holds a file there)."""
    for folder in FOLDERS:
        _umount(jd.root / folder)


def recover_live(jd: JobDir) -> None:
    """Folders still bound to a disk by an orchestrator that was killed during the job: what they
    show (the job's files as it left them) copied over the host's, then the binds undone. A copy
    that fails raises OSError and keeps the binds (nothing is lost)."""
    mounted = [folder for folder in FOLDERS if mounted_at(jd.root / folder)]
    if not mounted:
        return
    out, old = jd.root / _OUT, jd.root / _OLD
    remove_tree(out)
    remove_tree(old)
    out.mkdir()
    try:
        for folder in mounted:
            done = subprocess.run(
                ["cp", "-a", "--no-dereference", str(jd.root / folder), str(out / folder)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0 and not (out / folder).is_dir():
                raise OSError(
                    f"recovering the job's {folder} from its disk failed: {_last_line(done.stderr)}"
                )
        hide_live(jd)
        old.mkdir()
        for folder in mounted:
            os.rename(jd.root / folder, old / folder)
            os.rename(out / folder, jd.root / folder)
        log.warning(
            "job %s: its %s recovered from the disk of a run whose orchestrator was killed", jd.job, mounted
        )
    finally:
        remove_tree(out)
        remove_tree(old)


def recover_orphans(home: Home) -> list[str]:
    """`gc`: every job whose folders still show the disk of a run whose orchestrator died gets
    its files back on the host, and the binds undone (a job whose orchestrator lives is left
    alone). The ids of the jobs recovered."""
    done = []
    for jd in home.jobs():
        if not any(mounted_at(jd.root / folder) for folder in FOLDERS):
            continue
        try:
            session = read_record(jd.record_path).session
        except (OSError, RecordError):
            session = None
        if session and is_alive(home.root, session):
            continue
        recover_live(jd)
        done.append(jd.job)
    return done


def make_image(jd: JobDir, size: int) -> Path:
    """`<job>/disk.img`: a sparse ext4 filesystem of `size` bytes holding the job's folders.
    Blocking. The folders are renamed into a staging folder for mkfs to read, and back."""
    recover_live(jd)
    image = jd.root / DISK_IMAGE
    staging = jd.root / _STAGING
    image.unlink(missing_ok=True)
    if staging.exists():  # an orchestrator killed during an earlier mkfs: its folders put back
        for folder in FOLDERS:
            if (staging / folder).exists() and not (jd.root / folder).exists():
                os.rename(staging / folder, jd.root / folder)
        if any(staging.iterdir()):  # both copies somehow: the staged one kept aside, never deleted
            kept = jd.root / f"{_STAGING}.{int(time.time())}"
            os.rename(staging, kept)
            log.warning("job %s: folders left by an interrupted disk set-up kept in %s", jd.job, kept)
        else:
            staging.rmdir()
    staging.mkdir()
    moved: list[str] = []
    try:
        for folder in FOLDERS:
            os.rename(jd.root / folder, staging / folder)
            moved.append(folder)
        with open(image, "wb") as f:
            f.truncate(size)
        uid, gid = sandbox_ids()
        done = subprocess.run(
            # -m 0: nothing reserved for root (the job is never root); lazy init: a sparse file
            # reads zeros, so nothing is written but the metadata (about 4 MB, 20 ms)
            [
                "mkfs.ext4",
                "-q",
                "-F",
                "-m",
                "0",
                "-E",
                f"root_owner={uid}:{gid},lazy_itable_init=1,lazy_journal_init=1",
                "-d",
                str(staging),
                str(image),
            ],  # fmt: skip
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            image.unlink(missing_ok=True)
            raise OSError(f"mkfs.ext4 could not make the job's disk: {_last_line(done.stderr)}")
    finally:
        for folder in moved:
            os.rename(staging / folder, jd.root / folder)
        with contextlib.suppress(OSError):
            staging.rmdir()
    return image


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def attach_loop(image: Path) -> tuple[str, int]:
    """A loop device on `image`, held open by the returned descriptor, with autoclear set: it
    detaches itself once nobody holds it (our descriptor closed, nothing mounted from it)."""
    done = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise FlowerBatchError(f"no loop device for the job's disk: {_last_line(done.stderr)}")
    loop = done.stdout.strip()
    fd = os.open(loop, os.O_RDONLY | os.O_CLOEXEC)
    try:
        info = bytearray(_LOOP_INFO64_SIZE)
        fcntl.ioctl(fd, _LOOP_GET_STATUS64, info)
        (flags,) = struct.unpack_from("<I", info, _LO_FLAGS_OFFSET)
        struct.pack_into("<I", info, _LO_FLAGS_OFFSET, flags | _LO_FLAGS_AUTOCLEAR)
        fcntl.ioctl(fd, _LOOP_SET_STATUS64, info)
    except OSError:
        os.close(fd)
        detach_loop(loop, image)
        raise
    return loop, fd


def detach_loop(loop: str, image: Path) -> None:
    """`losetup -d` when the loop still holds `image` (autoclear did not get to it)."""
    try:
        backing = Path(f"/sys/block/{Path(loop).name}/loop/backing_file").read_text().strip()
    except OSError:
        return  # cleared
    if backing == str(image):
        subprocess.run(["losetup", "-d", loop], capture_output=True, check=False)


async def attach(backend: Backend, *, jd: JobDir, size: int, batch: str, lease: str, name: str) -> JobDisk:
    """Make and attach the job's disk, and its volume `name` (unique), ready for the containers."""
    image = await anyio.to_thread.run_sync(make_image, jd, size)
    loop, fd = await anyio.to_thread.run_sync(attach_loop, image)
    disk = JobDisk(size, image, loop, name, Path(), fd)
    try:
        mountpoint = await backend.create_device_volume(
            name, labels(batch, lease, "disk", jd.job), loop, "ext4"
        )
        disk = JobDisk(size, image, loop, name, Path(mountpoint), fd)
        for folder in FOLDERS:  # for the engine's check at create (see the module docstring)
            (disk.mountpoint / folder).mkdir(exist_ok=True)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await release(backend, disk)
        raise
    return disk


async def detach(backend: Backend, disk: JobDisk, jd: JobDir) -> DiskUse:
    """Measure the disk, copy its folders back over the host's, and release it. A copy that
    fails raises OSError after the host's previous folders were kept."""
    try:
        use = await anyio.to_thread.run_sync(_measure_and_copy_out, disk, jd)
    finally:
        with anyio.CancelScope(shield=True):
            await release(backend, disk)
    return use


async def release(backend: Backend, disk: JobDisk) -> None:
    """The volume removed, the loop device let go (it clears itself) and the image gone."""
    if disk.mountpoint != Path():
        with contextlib.suppress(FlowerBatchError):
            await backend.remove_volume(disk.volume, force=True)
    if disk.loop_fd is not None:
        with contextlib.suppress(OSError):
            os.close(disk.loop_fd)
    await anyio.to_thread.run_sync(detach_loop, disk.loop, disk.image)
    with contextlib.suppress(OSError):
        disk.image.unlink()


def _measure_and_copy_out(disk: JobDisk, jd: JobDir) -> DiskUse:
    """The disk mounted read-only on the host for a moment: measured, its folders copied back."""
    hide_live(jd)
    where = Path(tempfile.mkdtemp(prefix=f"flower-batch-{disk.volume}-"))
    try:
        for options in ("ro,nosuid,nodev,noexec", "nosuid,nodev,noexec"):
            # read-only, unless a lazily undone bind still holds the filesystem read-write
            done = subprocess.run(
                ["mount", "-t", "ext4", "-o", options, disk.loop, str(where)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode == 0:
                break
        if done.returncode != 0:
            raise OSError(f"the job's disk could not be read back: {_last_line(done.stderr)}")
        try:
            use = measure(where, disk.size)
            copy_out(where, jd)
        finally:
            subprocess.run(["umount", str(where)], capture_output=True, check=False)
    finally:
        with contextlib.suppress(OSError):
            where.rmdir()
    return use


def measure(root: Path, size: int) -> DiskUse:
    """Free space of the disk mounted at `root`; when it is full, also what each folder holds
    (for the reason) and the largest entry of the one that grew most."""
    st = os.statvfs(root)
    use = DiskUse(size, st.f_bavail * st.f_frsize, (), None)
    if not use.full:
        return use
    sizes = tuple((folder, tree_bytes(root / folder)) for folder in FOLDERS)
    grown = max(sizes, key=lambda f: f[1])[0]
    return DiskUse(size, use.free, sizes, _largest(root / grown, grown))


def tree_bytes(root: Path) -> int:
    """Bytes allocated below `root`, by `du` (it walks a tree of any depth by descriptors, and
    follows no symlink); 0 when it cannot say."""
    done = subprocess.run(["du", "-s", "-x", "-B1", str(root)], capture_output=True, text=True, check=False)
    try:
        return int(done.stdout.split()[0])
    except (IndexError, ValueError):
        return 0


def _largest(root: Path, shown: str) -> tuple[str, int] | None:
    best: tuple[str, int] | None = None
    try:
        entries = list(os.scandir(root))
    except OSError:
        return None
    for entry in entries:
        try:
            size = (
                tree_bytes(Path(entry.path))
                if entry.is_dir(follow_symlinks=False)
                else entry.stat(follow_symlinks=False).st_blocks * 512
            )
        except OSError:
            continue
        if best is None or size > best[1]:
            best = (f"{shown}/{entry.name}", size)
    return best


def copy_out(root: Path, jd: JobDir) -> None:
    """The disk's folders over the host's: copied beside them, then swapped in by rename, so a
    copy that fails (the host's disk full) leaves the previous folders whole."""
    out, old = jd.root / _OUT, jd.root / _OLD
    remove_tree(out)
    remove_tree(old)
    out.mkdir()
    try:
        for folder in FOLDERS:
            done = subprocess.run(
                ["cp", "-a", "--no-dereference", str(root / folder), str(out / folder)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0 and not (out / folder).is_dir() or "No space left" in done.stderr:
                raise OSError(
                    f"copying the job's {folder} back from its disk failed: {_last_line(done.stderr)}"
                )
            if done.returncode != 0:  # an odd file of the job's (a socket): the rest is copied
                log.warning("job %s: %s: %s", jd.job, folder, _last_line(done.stderr))
        old.mkdir()
        for folder in FOLDERS:
            if (jd.root / folder).exists():
                os.rename(jd.root / folder, old / folder)
            os.rename(out / folder, jd.root / folder)
    finally:
        remove_tree(out)
        remove_tree(old)
