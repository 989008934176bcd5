"""What every container of ours is confined to: a job runs model-written code.

Every container (a job, its check, the gateway, pre-flight's import check) runs:
- as an unprivileged uid: the host's own when the orchestrator is not root (the files stay
  theirs), else SANDBOX_UID, with the folders it writes handed over to it (`hand_over`);
- with every capability dropped and no-new-privileges (no setuid binary gains anything);
- with a pids limit (a fork bomb stays inside its container);
- on a read-only root filesystem, with a tmpfs at /tmp (where HOME is).

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


@dataclass(frozen=True)
class Confinement:
    """The container settings that are not the job's business. Capabilities are always all
    dropped and no-new-privileges always set: nothing here turns them off."""

    pids: int | None = DEFAULT_PIDS
    read_only_root: bool = True
    tmpfs: dict[str, str] = field(default_factory=lambda: {"/tmp": f"rw,nosuid,nodev,size={TMP_SIZE}"})


def hand_over(path: Path, *, recursive: bool = True) -> None:
    """Make `path` (and, recursively, what it holds) the sandbox user's, when the orchestrator is
    root and the container therefore runs as SANDBOX_UID. Symlinks are changed themselves, never
    followed. A non-root orchestrator's containers run as its own uid: nothing to do."""
    if os.getuid() != 0:
        return
    uid, gid = sandbox_ids()
    _lchown(path, uid, gid)
    if not recursive or not path.is_dir() or path.is_symlink():
        return
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in (*dirs, *files):
            _lchown(Path(root) / name, uid, gid)


def _lchown(path: Path, uid: int, gid: int) -> None:
    try:
        st = os.lstat(path)
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.lchown(path, uid, gid)
    except FileNotFoundError:
        pass  # gone meanwhile (a job's own file): nothing to hand over
