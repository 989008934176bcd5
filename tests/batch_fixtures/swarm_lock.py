"""Who may take the test swarm down: nobody while a test session uses it.

There is one cluster per prefix on the machine, whichever checkout made it, so the lock lives at a
fixed path per prefix (scripts/cluster/down.sh takes the same one). A test session holds it shared
for as long as the process lives; bringing the cluster up (or making it again) needs it exclusive,
which waits for the sessions using it to end; down.sh refuses while anyone holds it.
"""

from __future__ import annotations

import fcntl
import time
from pathlib import Path
from typing import IO


def lock_path(prefix: str) -> Path:
    return Path("/tmp") / f"flower-batch-cluster-{prefix}.lock"  # down.sh: the same path


def bring_up_path(prefix: str) -> Path:
    """One process at a time brings the cluster up (and loads and pushes the image): two that
    both found it down would each wait, holding it shared, for the other to let go (exclusive)."""
    return Path("/tmp") / f"flower-batch-cluster-{prefix}.up.lock"


class ClusterLock:
    def __init__(self, prefix: str, path: Path | None = None) -> None:
        self.path = path or lock_path(prefix)
        self._file: IO[str] | None = None

    def _fd(self) -> IO[str]:
        if self._file is None:
            self._file = self.path.open("a")
        return self._file

    def shared(self, timeout: float) -> None:
        """Use the cluster: waits only while someone brings it up."""
        self._take(fcntl.LOCK_SH, timeout, "another session to finish bringing the cluster up")

    def exclusive(self, timeout: float, what: str = "the test sessions using the cluster to end") -> None:
        """Make or remake the cluster: waits for every session using it to end."""
        self._take(fcntl.LOCK_EX, timeout, what)

    def _take(self, how: int, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self._fd(), how | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise AssertionError(
                        f"waited {timeout:.0f}s for {what} ({self.path} is held; "
                        f"`fuser -v {self.path}` names them)"
                    ) from None
                time.sleep(1)

    def exclusive_now(self) -> bool:
        """Exclusive if nobody holds it, without waiting."""
        try:
            fcntl.flock(self._fd(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def fileno(self) -> int:
        return self._fd().fileno()

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)

    def hand_over(self) -> None:
        """Forget the lock without unlocking it: a child started with this file descriptor holds
        it now (a flock belongs to the open file, which the child shares), until it exits."""
        if self._file is not None:
            self._file.close()
            self._file = None
