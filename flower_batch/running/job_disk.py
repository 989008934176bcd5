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

Who does the steps that need root (the loop device, every mount and umount, the copy back): the
orchestrator itself when it is root; else, when it may use the engine (the docker group), one
helper container of the run does them in the orchestrator's own mount namespace, so every path
and mount above is the same (running/disk_ops.py). That way holds no descriptor on the loop
device: it is detached when the disk is released, and `gc` detaches those of a killed
orchestrator (`detach_orphan_loops`); the files copied back are handed to the orchestrator's uid.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from flower_batch.backend.base import Backend, Mount
from flower_batch.backend.confinement import sandbox_ids
from flower_batch.errors import FlowerBatchError, RecordError
from flower_batch.jobmodel.record import RECORD_NAME, read_record
from flower_batch.jobmodel.units import format_memory
from flower_batch.labels import labels
from flower_batch.layout import Home, JobDir
from flower_batch.running.disk_ops import AS_ROOT, DiskOps, choose_disk_ops, last_line, loop_backing
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
TOOLS = ("mkfs.ext4", "losetup", "mount", "cp", "du")
_SBIN = ("/usr/sbin", "/sbin")  # mkfs.ext4 and losetup live there, off a user's usual PATH


def disk_problem(backend: Backend) -> str | None:
    """Why a job's own disk cannot be made here, or None."""
    if not backend.mounts_devices:
        return f"the {backend.name} engine cannot mount a job's own disk"
    missing = [tool for tool in TOOLS if tool_path(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found (install e2fsprogs and util-linux)"
    return None


def tool_path(tool: str) -> str | None:
    """Where `tool` is: on PATH, or in the sbin folders a user's PATH leaves out."""
    return shutil.which(tool) or shutil.which(tool, path=os.pathsep.join(_SBIN))


@dataclass(frozen=True)
class JobDisk:
    """A job's disk while it is attached."""

    size: int
    image: Path
    loop: str
    volume: str
    mountpoint: Path  # where the engine mounts the volume on its machine
    loop_fd: int | None = None  # held open while the job runs, as root (see the module docstring)
    ops: DiskOps = AS_ROOT  # how its privileged steps are done (running/disk_ops.py)

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
    ops = disk.ops
    for folder in FOLDERS:
        source, target = disk.mountpoint / folder, jd.root / folder
        try:
            disk_dev, below = ops.devices([source, disk.mountpoint.parent])
            if disk_dev == below or mounted_at(target):
                continue  # the engine has it unmounted again, or it is shown already
        except OSError:
            continue
        bound = ops.run(["mount", "--bind", str(source), str(target)])
        if bound.returncode != 0:
            log.warning(
                "job %s: its %s is shown as of its start: %s", jd.job, folder, last_line(bound.stderr)
            )
            continue
        ops.run(["mount", "-o", "remount,bind,ro,nosuid,nodev,noexec", str(target)])
        if os.stat(target).st_dev != disk_dev:  # unmounted meanwhile: the bind caught the folder below
            _umount(target, ops)


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


def _umount(target: Path, ops: DiskOps) -> None:
    while mounted_at(target):  # binds stack: each one undone
        if ops.run(["umount", str(target)]).returncode:
            ops.run(["umount", "-l", str(target)])
            if mounted_at(target):
                return


def hide_live(jd: JobDir, ops: DiskOps = AS_ROOT) -> None:
    """The binds of `show_live` undone (lazily when a reader still holds a file there)."""
    for folder in FOLDERS:
        _umount(jd.root / folder, ops)


def recover_live(jd: JobDir, ops: DiskOps = AS_ROOT) -> None:
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
            done = ops.run(["cp", "-a", "--no-dereference", str(jd.root / folder), str(out / folder)])
            if done.returncode != 0 and not (out / folder).is_dir():
                raise OSError(f"recovering the job's {folder} from its disk failed: {last_line(done.stderr)}")
        ops.hand_back(out)
        hide_live(jd, ops)
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


def orphans(home: Home) -> list[JobDir]:
    """The jobs whose folders still show the disk of a run whose orchestrator died (a job whose
    orchestrator lives is left alone)."""
    return [
        jd
        for jd in home.jobs()
        if any(mounted_at(jd.root / folder) for folder in FOLDERS) and not _held(home, jd)
    ]


def _held(home: Home, jd: JobDir) -> bool:
    """The job's orchestrator lives."""
    try:
        session = read_record(jd.record_path).session
    except (OSError, RecordError):
        session = None
    return bool(session and is_alive(home.root, session))


def recover_orphans(home: Home, ops: DiskOps = AS_ROOT) -> list[str]:
    """`gc`: every job of `orphans` gets its files back on the host, and the binds undone. The
    ids of the jobs recovered."""
    done = []
    for jd in orphans(home):
        recover_live(jd, ops)
        done.append(jd.job)
    return done


def _loops() -> list[tuple[str, Path, bool]]:
    """Every attached loop device: (device, its backing file, whether that file was removed since).
    Read from sysfs: no root needed."""
    found = []
    for backing_file in sorted(Path("/sys/block").glob("loop*/loop/backing_file")):
        try:
            backing = backing_file.read_text().strip()
        except OSError:
            continue
        image = Path(backing.removesuffix(" (deleted)"))
        found.append((f"/dev/{backing_file.parent.parent.name}", image, backing.endswith(" (deleted)")))
    return found


def orphan_loops(home: Home) -> list[tuple[str, Path]]:
    """Loop devices still holding a job's disk.img of this home that no live orchestrator holds
    (its orchestrator died, or that image was replaced since): (device, image). Only a helper's
    are ever left (root's clear themselves)."""
    root = Path(os.path.realpath(home.root))
    found = []
    for loop, image, deleted in _loops():
        if image.name != DISK_IMAGE or image.parent.parent.parent != root:
            continue
        if deleted or not _held(home, home.job(image.parent.parent.name, image.parent.name)):
            found.append((loop, image))
    return found


def detach_orphan_loops(home: Home, ops: DiskOps) -> list[str]:
    """`gc`: the loop devices of `orphan_loops` detached (after their volumes were removed); the
    devices let go of."""
    done = []
    for loop, image in orphan_loops(home):
        backing = (loop_backing(loop) or "").removesuffix(" (deleted)")
        # looked at again just before: a device freed meanwhile may hold another job's disk now
        if backing == str(image) and ops.run(["losetup", "-d", loop]).returncode == 0:
            done.append(f"{loop} ({image})")
    return done


def gc_disks(backend: Backend, home: Home, environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """`gc`, once the dead orchestrators' containers and volumes are gone: the jobs whose folders
    still showed a disk get their files back (`recover_orphans`), and the loop devices left on
    their images are detached (`detach_orphan_loops`). Blocking. (jobs recovered, devices freed)"""
    backend.sweep_host_helpers()  # the folders of helpers gc removed by force just before
    jobs = orphans(home)
    loops = orphan_loops(home)
    if not jobs and not loops:
        return [], []  # no helper started for nothing
    try:  # the helper runs the image the dead run's jobs ran on
        image = read_record(jobs[0].record_path if jobs else loops[0][1].parent / RECORD_NAME).image_id
    except (OSError, RecordError):
        from flower_batch.running.image import DEFAULT_TAG  # the image builder's imports: only here

        image = DEFAULT_TAG
    ops = choose_disk_ops(
        backend,
        image=image,
        labels=labels("gc", "", "disk-helper"),
        name=f"fb-gc-disk-{os.getpid()}",
        environ=environ,
    )
    try:
        return recover_orphans(home, ops), detach_orphan_loops(home, ops)
    finally:
        ops.close()


def make_image(jd: JobDir, size: int, ops: DiskOps = AS_ROOT) -> Path:
    """`<job>/disk.img`: a sparse ext4 filesystem of `size` bytes holding the job's folders.
    Blocking. The folders are renamed into a staging folder for mkfs to read, and back."""
    recover_live(jd, ops)
    image = jd.root / DISK_IMAGE
    staging = jd.root / _STAGING
    if image.exists():  # a killed helper's run left it attached (root's clears itself): let go of
        for loop, backing, _deleted in _loops():
            if backing == Path(os.path.realpath(image)):
                ops.detach_loop(loop, backing)
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
                tool_path("mkfs.ext4") or "mkfs.ext4",
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
            raise OSError(f"mkfs.ext4 could not make the job's disk: {last_line(done.stderr)}")
    finally:
        for folder in moved:
            os.rename(staging / folder, jd.root / folder)
        with contextlib.suppress(OSError):
            staging.rmdir()
    return image


async def attach(
    backend: Backend,
    *,
    jd: JobDir,
    size: int,
    batch: str,
    lease: str,
    name: str,
    ops: DiskOps = AS_ROOT,
) -> JobDisk:
    """Make and attach the job's disk, and its volume `name` (unique), ready for the containers."""
    image = await anyio.to_thread.run_sync(make_image, jd, size, ops)
    loop, fd = await anyio.to_thread.run_sync(ops.attach_loop, image)
    disk = JobDisk(size, image, loop, name, Path(), fd, ops)
    try:
        mountpoint = await backend.create_device_volume(
            name, labels(batch, lease, "disk", jd.job), loop, "ext4"
        )
        disk = JobDisk(size, image, loop, name, Path(mountpoint), fd, ops)
        # for the engine's check at create (see the module docstring)
        await anyio.to_thread.run_sync(ops.make_dirs, [disk.mountpoint / folder for folder in FOLDERS])
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
    await anyio.to_thread.run_sync(disk.ops.detach_loop, disk.loop, disk.image)
    with contextlib.suppress(OSError):
        disk.image.unlink()


def _measure_and_copy_out(disk: JobDisk, jd: JobDir) -> DiskUse:
    """The disk mounted read-only on the host for a moment: measured, its folders copied back."""
    ops = disk.ops
    hide_live(jd, ops)
    where = Path(tempfile.mkdtemp(prefix=f"flower-batch-{disk.volume}-"))
    try:
        for options in ("ro,nosuid,nodev,noexec", "nosuid,nodev,noexec"):
            # read-only, unless a lazily undone bind still holds the filesystem read-write
            done = ops.run(["mount", "-t", "ext4", "-o", options, disk.loop, str(where)])
            if done.returncode == 0:
                break
        if done.returncode != 0:
            raise OSError(f"the job's disk could not be read back: {last_line(done.stderr)}")
        try:
            use = measure(where, disk.size)
            copy_out(where, jd, ops)
        finally:
            ops.run(["umount", str(where)])
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


def copy_out(root: Path, jd: JobDir, ops: DiskOps = AS_ROOT) -> None:
    """The disk's folders over the host's: copied beside them, then swapped in by rename, so a
    copy that fails (the host's disk full) leaves the previous folders whole."""
    out, old = jd.root / _OUT, jd.root / _OLD
    remove_tree(out)
    remove_tree(old)
    out.mkdir()
    try:
        for folder in FOLDERS:
            done = ops.run(["cp", "-a", "--no-dereference", str(root / folder), str(out / folder)])
            if done.returncode != 0 and not (out / folder).is_dir() or "No space left" in done.stderr:
                raise OSError(
                    f"copying the job's {folder} back from its disk failed: {last_line(done.stderr)}"
                )
            if done.returncode != 0:  # an odd file of the job's (a socket): the rest is copied
                log.warning("job %s: %s: %s", jd.job, folder, last_line(done.stderr))
        ops.hand_back(out)
        old.mkdir()
        for folder in FOLDERS:
            if (jd.root / folder).exists():
                os.rename(jd.root / folder, old / folder)
            os.rename(out / folder, jd.root / folder)
    finally:
        remove_tree(out)
        remove_tree(old)
