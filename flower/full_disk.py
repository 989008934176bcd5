"""flower's own writes meeting a full disk: sessions.db, manifest.json, lineage.json,
continuity.json.

Bookkeeping never kills the turn under way, but it must not be silent either: a step whose
session or lineage could not be saved would start fresh next time and nobody would know. So the
first such failure is noted here (which file, what error), the workflow ends before its next step,
and `flower` exits 1 with class "disk" and one line naming the run directory. Every file keeps its
previous complete version (write_atomic; SQLite rolls the transaction back), and the in-memory
rows (manifest, lineage) are written whole by the next write that succeeds, so once space is freed
the same command continues every step whose session was saved.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from flower.exitinfo import one_line

SLACK = 1024**2
"""Less free space than this on the run directory's filesystem after a failed step counts as full
(the CLI, writing its own transcript there, fails with its own words, not an errno)."""

_SAYS_FULL = ("no space left on device", "database or disk is full", "disk quota exceeded")


def is_full(error: BaseException | str) -> bool:
    """The write failed because its filesystem is full: ENOSPC or EDQUOT, SQLite's SQLITE_FULL,
    or (a message relayed as text, such as the SDK's mirror error) words that say so."""
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(error, sqlite3.Error):
        return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or _says_full(str(error))
    return isinstance(error, str) and _says_full(error)


def _says_full(text: str) -> bool:
    low = text.lower()
    return any(words in low for words in _SAYS_FULL)


class FullDisk:
    """The first of flower's own writes in one run directory that found the disk full."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self.first: str | None = None

    def note(self, what: str, error: BaseException | str) -> bool:
        """Remember `what` (a file of the run directory) when `error` says the disk is full;
        False (nothing noted) for any other error, which the caller handles as before."""
        if not is_full(error):
            return False
        if self.first is None:  # said once, when the workflow stops (exitinfo.step_failure)
            self.first = f"{what} could not be written ({_one_line(error)})"
        return True

    def check_space(self, what: str = "the step's transcript") -> bool:
        """After a failure: the run directory's filesystem has (almost) no room left, so it was
        most likely the disk's (noted as `what` not written). True when the disk is noted full."""
        try:
            st = os.statvfs(self.run_dir)
        except OSError:
            return self.first is not None
        if st.f_bavail * st.f_frsize < SLACK:
            self.note(what, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        return self.first is not None

    def reason(self, step: str | None) -> str:
        where = f" after step {step}" if step else ""
        return (
            f"the disk of the run directory {self.run_dir} is full: {self.first}; flower stopped{where}. "
            "Every file keeps its last complete version: free space, then run the same command "
            "again to continue"
        )


def _one_line(error: BaseException | str) -> str:
    return one_line(
        error if isinstance(error, str) else (getattr(error, "strerror", None) or str(error)), 200
    )
