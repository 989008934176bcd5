"""The home's reserve: free space kept for what the orchestrator itself must still write (every
running job's records, logs and trajectory, the report) whatever the jobs do.

Before each job starts, the home's free space is read (one statvfs). Under the reserve no new job
starts: it ends `skipped` with the reason, and the same command again runs it once there is room.
A persistent job already running is paused when the home falls under the reserve (its runner
reads the free space every RESERVE_POLL_S), its session kept, as at a budget. The reserve is
`--reserve` when given, else RESERVE_PER_JOB for every job of the run at once,
and at least DEFAULT_RESERVE.
"""

from __future__ import annotations

import os
from pathlib import Path

from flower_batch.jobmodel.units import format_memory

DEFAULT_RESERVE = 1024**3
RESERVE_PER_JOB = 64 * 1024**2
"""A running job's records, its gateway's logs of the last requests, its trajectory.json and its
part of the report, with room to spare."""


def free_bytes(root: Path) -> int:
    """What an unprivileged writer may still write on `root`'s filesystem."""
    st = os.statvfs(root)
    return st.f_bavail * st.f_frsize


def total_bytes(root: Path) -> int:
    st = os.statvfs(root)
    return st.f_blocks * st.f_frsize


def reserve_bytes(parallel: int, chosen: int | None) -> int:
    """The reserve: `chosen` (--reserve), else RESERVE_PER_JOB a job running at once, at least
    DEFAULT_RESERVE."""
    if chosen is not None:
        return chosen
    return max(DEFAULT_RESERVE, parallel * RESERVE_PER_JOB)


RESERVE_POLL_S = 1.0
"""How often a running persistent job's runner reads the home's free space."""


def under_reserve(root: Path, reserve: int, *, pausing: bool = False) -> str | None:
    """Why no job may start now, or a running persistent job is paused (`pausing`): the home's
    free space is under its reserve; None when it is not."""
    try:
        free = free_bytes(root)
    except OSError:
        return None  # the home's writes will say what is wrong with it
    if free >= reserve:
        return None
    what = "paused at the home's reserve" if pausing else "not started"
    return (
        f"{what}: the home's disk ({root}) has {_size(free)} free, under its reserve of "
        f"{_size(reserve)} (--reserve); free space and run the same command again"
    )


def overcommitted(root: Path, reserve: int, disks: list[int], parallel: int) -> str | None:
    """Why the home could fill though every job keeps to its own disk, or None. A job's disk is a
    sparse file on the home: it takes space only as the job writes, so the home is shared, not
    divided; `parallel` jobs at their limits (the largest `disks`) may write more than it has
    free above the reserve. Said once when a run starts; the reserve still guards the home."""
    try:
        free = free_bytes(root)
    except OSError:
        return None
    at_once = sum(sorted(disks, reverse=True)[: max(1, parallel)])
    if not disks or at_once <= free - reserve:
        return None
    return (
        f"the jobs running at once could write {_size(at_once)} on their own disks, more than the "
        f"{_size(max(0, free - reserve))} the home's disk ({root}) has free above its reserve: a job's "
        "disk takes space as it writes, so the home may fill before a job reaches its limit; give "
        "the jobs a smaller disk (disk, --disk) or run fewer at once (-j) for a hard bound"
    )


def reserve_problem(root: Path, reserve: int, given: str | None = None) -> str | None:
    """A reserve that could never be met on the home's filesystem, or None (`given`: the
    option's value as typed)."""
    try:
        total = total_bytes(root)
    except OSError:
        return None
    if reserve >= total:
        return (
            f"--reserve {given or format_memory(reserve)}: larger than the home's whole disk ({root}, {_size(total)}); "
            "give a reserve below it, e.g. --reserve 1g"
        )
    return None


def _size(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB" if n >= 1024**3 else f"{n / 1024**2:.1f} MiB"
