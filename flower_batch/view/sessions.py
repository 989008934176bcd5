"""Reading a job's `runs/sessions.db` without ever writing to it, even while the job runs.

The runtime's store is SQLite in WAL mode (flower/store.py). Opening it even with `mode=ro`
makes SQLite create `-wal`/`-shm` files when they are absent, which would write in the home.
So: while a `-wal` exists (a writer has it open) we join it read-only through those files; when
it does not (every writer closed, all content checkpointed into the main file) the file is
immutable for us and we open it with `immutable=1`, which creates nothing. A short busy timeout
keeps a page request from hanging behind a long write; the page polls again anyway.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

BUSY_TIMEOUT_S = 0.5


class SessionsUnreadable(Exception):
    """sessions.db exists but cannot be read right now (locked, corrupt, not SQLite)."""


@contextmanager
def open_readonly(db: Path) -> Iterator[sqlite3.Connection]:
    wal = db.with_name(db.name + "-wal")
    flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    uri = f"file:{quote(str(db.resolve()))}?{flags}"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    except sqlite3.Error as exc:
        raise SessionsUnreadable(f"{db}: {exc}") from exc
    try:
        yield conn
    except sqlite3.Error as exc:
        raise SessionsUnreadable(f"{db}: {exc}") from exc
    finally:
        conn.close()


def load_transcripts(db: Path, session_ids: set[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """store_key -> entries in append order, for every key in the db (or those of `session_ids`,
    their subagent transcripts included). {} when the db does not exist yet."""
    if not db.is_file():
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    with open_readonly(db) as conn:
        conn.execute("BEGIN")  # one snapshot: a concurrent append cannot split a transcript
        rows = conn.execute("SELECT store_key, payload FROM entries ORDER BY store_key, seq")
        for key, payload in rows:
            if session_ids is not None and session_of(key) not in session_ids:
                continue
            try:
                entry = json.loads(payload)
            except ValueError:
                continue  # one unreadable line must not hide the rest of the transcript
            if isinstance(entry, dict):
                out.setdefault(key, []).append(entry)
        conn.execute("COMMIT")
    return out


def session_of(store_key: str) -> str:
    """`project/session[/subpath]` -> session id."""
    parts = store_key.split("/")
    return parts[1] if len(parts) > 1 else store_key


def subpath_of(store_key: str) -> str | None:
    parts = store_key.split("/", 2)
    return parts[2] if len(parts) > 2 else None
