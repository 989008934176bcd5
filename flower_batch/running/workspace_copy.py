"""A job's workspace copied from its source folder (workspace_scan.py's rules and bounds), and the
pre-flight's word on it.

- `size_problem`: a copy over the job's size limit (200 MB unless `workspace_limit` allows more),
  or cut by the bounds, is one line: its size and its largest folders, and the fix.
- `copy_workspace`: regular files copied (mode and times kept, opened without following a
  symlink), symlinks that stay inside made again, directories made; what the scan skipped is
  returned, to be named. The first file that cannot be copied stops it with one line naming that
  path and the cause (`WorkspaceUnusable`): the job failed on its input. `stop` is checked between
  chunks, so a copy run in a worker thread ends (unfinished) as soon as the command is stopped.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from flower_batch.errors import WorkspaceUnusable
from flower_batch.untrusted_files import shown
from flower_batch.workspace_scan import DEFAULT_LIMIT_BYTES, Rules, Scan, scan

_CHUNK = 1 << 20
NO_LIMIT = 0  # workspace_limit = "none": only the entry and depth bounds apply


def limit_of(limit_bytes: int | None) -> int | None:
    """The size limit in bytes (None: no limit) from a job's `workspace_limit`."""
    if limit_bytes is None:
        return DEFAULT_LIMIT_BYTES
    return None if limit_bytes == NO_LIMIT else limit_bytes


def human_size(n: int) -> str:
    """Bytes as a person reads them: 3.0 MiB, 12 KiB, 512 B."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


def size_problem(found: Scan, limit_bytes: int | None, *, fix: str) -> str | None:
    """Why the scanned workspace may not be copied, in one line, or None."""
    where = shown(str(found.root))
    if found.cut:
        return (
            f"workspace {where}: {found.cut}, past what a job copies; leave folders out in "
            f"{found.root / '.flowerbatchignore'} (or `exclude`)"
        )
    limit = limit_of(limit_bytes)
    total = found.total_bytes
    if limit is None or total <= limit:
        return None
    biggest = ", ".join(f"{shown(name)} {human_size(size)}" for name, size in found.largest())
    return (
        f"workspace {where} is {human_size(total)}, over the {human_size(limit)} a job copies "
        f"(largest: {biggest}); leave them out in .flowerbatchignore (or `exclude`), or allow it: {fix}"
    )


def copy_workspace(
    src: Path, dest: Path, rules: Rules, *, limit_bytes: int | None, stop: threading.Event | None = None
) -> Scan:
    """Copy src into dest by the rules; returns the scan (its `skipped` are to be named)."""
    found = scan(src, rules)
    unreadable = next(((rel, why) for rel, why in found.skipped if why.startswith("unreadable")), None)
    if unreadable is not None:  # a part of the input missing: the job cannot start as it was asked
        rel, why = unreadable
        raise WorkspaceUnusable(f"workspace {shown(str(found.root))}: cannot copy {shown(rel)}: {why}")
    problem = size_problem(found, limit_bytes, fix="raise workspace_limit (run: --workspace-limit)")
    if problem:
        raise WorkspaceUnusable(problem)
    dest.mkdir(parents=True, exist_ok=True)
    for rel in found.dirs:
        (dest / rel).mkdir(parents=True, exist_ok=True)
    for rel in found.files:
        if not _copy_one(found.root, rel, dest / rel, stop):
            return found  # the command stopped: nobody waits for the rest
    for rel, target in found.symlinks.items():
        try:
            os.symlink(target, dest / rel)
        except OSError as exc:
            raise WorkspaceUnusable(_cannot(found.root, rel, exc)) from None
    return found


def _cannot(root: Path, rel: str, exc: OSError) -> str:
    return f"workspace {shown(str(root))}: cannot copy {shown(rel)}: {exc.strerror or exc}"


def _copy_one(root: Path, rel: str, out: Path, stop: threading.Event | None) -> bool:
    """One regular file, never through a symlink or into a FIFO swapped in since the scan;
    False when `stop` was set (the command stopped: Ctrl-C, SIGTERM)."""
    if stop is not None and stop.is_set():
        return False
    try:
        fd = os.open(root / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise WorkspaceUnusable(
                    f"workspace {shown(str(root))}: {shown(rel)} is no longer a regular file"
                )
            made = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(made, "wb") as w:
                while chunk := f.read(_CHUNK):
                    if stop is not None and stop.is_set():
                        return False
                    w.write(chunk)
        os.chmod(out, stat.S_IMODE(st.st_mode))
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError as exc:
        raise WorkspaceUnusable(_cannot(root, rel, exc)) from None
    return True
