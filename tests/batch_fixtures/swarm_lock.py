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


class ClusterLock:
    def __init__(self, prefix: str) -> None:
        self.path = lock_path(prefix)
        self._file: IO[str] | None = None

    def _fd(self) -> IO[str]:
        if self._file is None:
            self._file = self.path.open("a")
        return self._file

    def shared(self, timeout: float) -> None:
        """Use the cluster: waits only while someone brings it up."""
        self._take(fcntl.LOCK_SH, timeout, "another session to finish bringing the cluster up")

    def exclusive(self, timeout: float) -> None:
        """Make or remake the cluster: waits for every session using it to end."""
        self._take(fcntl.LOCK_EX, timeout, "the test sessions using the cluster to end")

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

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
