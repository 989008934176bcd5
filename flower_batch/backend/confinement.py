"""What every container of ours is confined to: a job runs model-written code.

Every container (a job, its check, the gateway, pre-flight's import check) runs:
- as an unprivileged uid: the host's own when the orchestrator is not root (the files stay
  theirs), else SANDBOX_UID, with the folders it writes handed over to it (`hand_over`);
- with every capability dropped and no-new-privileges (no setuid binary gains anything);
- with a pids limit (a fork bomb stays inside its container);
- on a read-only root filesystem, with a tmpfs at /tmp (where HOME is; exec: a task may run
  what it builds there, as in its workspace).

docs/security.md says what each of these stops and what it does not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_UID = 10001
"""The uid (and gid) a container runs as when the orchestrator is root. The runtime image names
it `flower` in /etc/passwd (the CLI and git look their user up)."""

DEFAULT_PIDS = 2048
"""Processes and threads of one container: the CLI, flower, the agent's tools and a parallel
build fit; a fork bomb does not."""

ROOT_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID")
"""What uid 0 gets back, and only for a job whose task asks for `user = "root"`: the fewest with
which `apt-get update && apt-get install` and `dpkg -i` work (measured one by one, docs/security.md):
CHOWN (files of other owners), DAC_OVERRIDE (apt's partial folders owned by _apt), SETUID and
SETGID (apt drops to _apt). FOWNER, FSETID, SETFCAP, MKNOD, NET_RAW and the rest stay dropped."""
ROOT_USER = "0:0"

TMP_SIZE = "1g"
"""The tmpfs at /tmp (HOME): in memory, so it also counts against the container's memory limit."""


def sandbox_ids() -> tuple[int, int]:
    """(uid, gid) our containers run as: never 0."""
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        return SANDBOX_UID, SANDBOX_UID
    return uid, gid if gid != 0 else uid


def sandbox_user() -> str:
    uid, gid = sandbox_ids()
    return f"{uid}:{gid}"


def tmp_mount(disk: int | None = None) -> dict[str, str]:
    """/tmp's tmpfs: TMP_SIZE, or less when the job's disk is smaller (its writes are bounded by
    both its disk and its memory)."""
    size = TMP_SIZE if disk is None or disk >= 1024**3 else str(disk)
    return {"/tmp": f"rw,exec,nosuid,nodev,size={size}"}


@dataclass(frozen=True)
class Confinement:
    """The container settings that are not the job's business. Capabilities are always all
    dropped and no-new-privileges always set: nothing here turns them off. `cap_add`: only
    ROOT_CAPABILITIES, only for a uid-0 job (running/job_root.py)."""

    pids: int | None = DEFAULT_PIDS
    read_only_root: bool = True
    cap_add: tuple[str, ...] = ()
    tmpfs: dict[str, str] = field(default_factory=tmp_mount)


def hand_over(path: Path, *, recursive: bool = True) -> None:
    """Make `path` (and, recursively, what it holds) the sandbox user's, when the orchestrator is
    root and the container therefore runs as SANDBOX_UID. A non-root orchestrator's containers
    run as its own uid: nothing to do.

    Only folders that were not the sandbox user's already are entered: one that is was handed
    over before or made by the job, and so is everything in it. So a woken job's own tree (any
    depth, any size: hostile) is not walked; what is walked is what the host just copied in.
    Iterative, symlinks changed themselves and never followed."""
    if os.getuid() != 0:
        return
    ids = sandbox_ids()
    pending = [path]
    while pending:
        here = pending.pop()
        if not _lchown(here, ids) or not recursive:
            continue
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
                    else:
                        _lchown(Path(entry.path), ids)
        except (NotADirectoryError, FileNotFoundError):
            pass


def _lchown(path: Path, ids: tuple[int, int]) -> bool:
    """Change `path`'s owner to `ids`; True when it had another (so a folder's content may too)."""
    try:
        st = os.lstat(path)
        if (st.st_uid, st.st_gid) == ids:
            return False
        os.lchown(path, *ids)
        return True
    except FileNotFoundError:
        return False  # gone meanwhile (a job's own file): nothing to hand over
