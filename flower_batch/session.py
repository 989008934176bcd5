"""An orchestrator session: one `flower-batch` process that owns containers while it runs.

Each session holds a file lock `<home>/.sessions/<id>.lock` for as long as it lives. Everything
it creates carries its id as a label, so `gc` can tell leaked resources (their session's lock
is free: the process is gone) from ones a live orchestrator still uses.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from filelock import FileLock, Timeout


def sessions_dir(home: Path) -> Path:
    return home / ".sessions"


class Session:
    def __init__(self, home: Path) -> None:
        self.id = secrets.token_hex(4)
        self.path = sessions_dir(home) / f"{self.id}.lock"
        self._lock = FileLock(str(self.path))

    def __enter__(self) -> Session:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        self.path.unlink(missing_ok=True)


def is_alive(home: Path, session_id: str) -> bool:
    """True while the session's process still holds its lock."""
    path = sessions_dir(home) / f"{session_id}.lock"
    if not path.exists():
        return False
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False
