"""Reading a job's `runs/sessions.db` without ever writing to it, even while the job runs.

The runtime's store is SQLite in WAL mode (flower/store.py). Opening it even with `mode=ro`
makes SQLite create `-wal`/`-shm` files when they are absent, which would write in the home.
So: while a `-wal` exists (a writer has it open) we join it read-only through those files; when
it does not (every writer closed, all content checkpointed into the main file) the file is
immutable for us and we open it with `immutable=1`, which creates nothing. A short busy timeout
keeps a page request from hanging behind a long write; the page polls again anyway.

The db is the job's (its model-written code can replace it), so before SQLite opens it, it and
its `-wal`/`-shm` must be regular files reached through no symlink (flower_batch/untrusted_files.py;
SQLite itself opens by path, so a swap in the instant between is not excluded), and what is read
is bounded: entries over ENTRY_BYTES are left out and reading stops at TOTAL_BYTES, each said in
the `notes` of the result.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..untrusted_files import open_file

BUSY_TIMEOUT_S = 0.5
ENTRY_BYTES = 4 * 1024 * 1024  # a transcript entry bigger than this is left out (and said)
TOTAL_BYTES = 128 * 1024 * 1024  # transcripts read per request at most


class SessionsUnreadable(Exception):
    """sessions.db exists but cannot be read right now (locked, corrupt, not SQLite)."""


def _check_files(db: Path) -> None:
    """SessionsUnreadable unless the db and any -wal/-shm beside it are regular files reached from
    the db's folder through no symlink (the folder itself included)."""
    for name in (db.name, db.name + "-wal", db.name + "-shm"):
        if name != db.name and not os.path.lexists(db.with_name(name)):
            continue
        try:
            with open_file(db.parent.parent, f"{db.parent.name}/{name}"):
                pass
        except OSError as exc:
            raise SessionsUnreadable(str(exc)) from None


@contextmanager
def open_readonly(db: Path) -> Iterator[sqlite3.Connection]:
    _check_files(db)
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


@dataclass
class Transcripts:
    by_key: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # store_key -> entries
    notes: list[str] = field(default_factory=list)  # what was left out, for the page


def load_transcripts(db: Path, session_ids: set[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """store_key -> entries in append order, for every key in the db (or those of `session_ids`,
    their subagent transcripts included). {} when the db does not exist yet."""
    return read_transcripts(db, session_ids).by_key


def read_transcripts(db: Path, session_ids: set[str] | None = None) -> Transcripts:
    """load_transcripts, with notes of what the size bounds left out (module docstring)."""
    out = Transcripts()
    if not os.path.lexists(db):
        return out
    too_big = 0
    total = 0
    with open_readonly(db) as conn:
        conn.execute("BEGIN")  # one snapshot: a concurrent append cannot split a transcript
        rows = conn.execute(
            "SELECT store_key, CASE WHEN length(CAST(payload AS BLOB)) > ? THEN NULL ELSE payload END,"
            " length(CAST(payload AS BLOB)) FROM entries ORDER BY store_key, seq",
            (ENTRY_BYTES,),
        )
        for key, payload, size in rows:
            if session_ids is not None and session_of(str(key)) not in session_ids:
                continue
            if payload is None:
                too_big += 1
                continue
            total += int(size or 0)
            if total > TOTAL_BYTES:
                out.notes.append(
                    f"transcripts cut: more than {TOTAL_BYTES} bytes in {db.name}, the rest not read"
                )
                break
            try:
                entry = json.loads(payload)
            except ValueError:
                continue  # one unreadable line must not hide the rest of the transcript
            if isinstance(entry, dict):
                out.by_key.setdefault(str(key), []).append(entry)
        conn.execute("COMMIT")
    if too_big:
        out.notes.append(f"{too_big} transcript entries over {ENTRY_BYTES} bytes each not shown")
    return out


def session_of(store_key: str) -> str:
    """`project/session[/subpath]` -> session id."""
    parts = store_key.split("/")
    return parts[1] if len(parts) > 1 else store_key


def subpath_of(store_key: str) -> str | None:
    parts = store_key.split("/", 2)
    return parts[2] if len(parts) > 2 else None
