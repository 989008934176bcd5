"""sessions.db: an SDK SessionStore on SQLite, upstream's schema, safe for several processes.

The SDK mirrors every transcript line here (`append`) and resumes from here (`load`), so this file
is the durable copy of every session. Entries are opaque JSON; `entry["uuid"]` makes appends
idempotent. Writes use BEGIN IMMEDIATE so parallel flower processes sharing one run_dir serialise
on SQLite's own lock (WAL + busy_timeout) instead of failing.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
from claude_agent_sdk import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
    fold_session_summary,
)

from flower.context.rows import parse_rows
from flower.errors import ConfigError

T = TypeVar("T")

BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    store_key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    uid TEXT,
    payload TEXT NOT NULL,
    PRIMARY KEY (store_key, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_uid ON entries (store_key, uid) WHERE uid IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta (
    store_key TEXT PRIMARY KEY,
    mtime INTEGER NOT NULL,
    next_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS summaries (
    project_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    mtime INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (project_key, session_id)
);
"""


def store_key(key: SessionKey | SessionListSubkeysKey) -> str:
    """`project_key/session_id[/subpath]`, the string every table is keyed by."""
    subpath = key.get("subpath")
    if subpath == "":
        raise ConfigError("SessionKey.subpath must be omitted for the main transcript, not empty")
    base = f"{key['project_key']}/{key['session_id']}"
    return f"{base}/{subpath}" if subpath else base


def context_tokens(usage: dict[str, Any]) -> int:
    """Tokens the model saw as input: fresh + cache read + cache creation."""
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


def context_from_newest(payloads: Iterable[str]) -> int | None:
    """Context size of the newest main-thread assistant entry, from entry payloads newest first.
    Sidechains (subagents) and synthetic error messages would misreport it, so they are skipped."""
    for payload in payloads:
        entry: dict[str, Any] = json.loads(payload)
        message = entry.get("message")
        if entry.get("type") != "assistant" or entry.get("isSidechain"):
            continue
        if not isinstance(message, dict) or message.get("model") == "<synthetic>":
            continue
        usage = message.get("usage")
        if isinstance(usage, dict):
            return context_tokens(usage)
    return None


class SQLiteSessionStore(SessionStore):
    """SessionStore backed by one SQLite file. Async methods run their SQL in a worker thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection guarded by a lock: calls arrive from the event loop's worker threads and
        # from sync callers; each statement is short local I/O, so serialising them costs nothing.
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
        )
        self._conn.execute("PRAGMA journal_mode = WAL")
        with self._write() as conn:
            # Statement by statement: executescript() would commit our open transaction.
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)

    # -- plumbing ---------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"session store {self.path} is closed")
        return self._conn

    def _write(self) -> _Transaction:
        return _Transaction(self._lock, self._connection)

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN")  # one snapshot for all of fn's statements
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn)

    @staticmethod
    def _now_ms(prev_mtime: int) -> int:
        # Strictly increasing per key, so back-to-back appends never share an mtime.
        return max(int(time.time() * 1000), prev_mtime + 1)

    # -- SessionStore protocol --------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        if entries:
            await self._in_thread(lambda: self._append_sync(key, entries))

    def _append_sync(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        k = store_key(key)
        with self._write() as conn:
            row = conn.execute("SELECT mtime, next_seq FROM meta WHERE store_key = ?", (k,)).fetchone()
            prev_mtime, seq = row if row else (0, 0)
            inserted: list[SessionStoreEntry] = []
            for entry in entries:
                uid = entry.get("uuid")
                cur = conn.execute(
                    "INSERT OR IGNORE INTO entries (store_key, seq, uid, payload) VALUES (?, ?, ?, ?)",
                    (k, seq, uid if isinstance(uid, str) else None, json.dumps(entry, ensure_ascii=False)),
                )
                if cur.rowcount == 1:  # 0 means this uuid was already stored: idempotent re-append
                    inserted.append(entry)
                    seq += 1
            if not inserted:
                return
            mtime = self._now_ms(prev_mtime)
            conn.execute(
                "INSERT INTO meta (store_key, mtime, next_seq) VALUES (?, ?, ?) "
                "ON CONFLICT(store_key) DO UPDATE SET mtime = excluded.mtime, next_seq = excluded.next_seq",
                (k, mtime, seq),
            )
            if key.get("subpath") is None:  # subagent transcripts never feed the main summary
                self._fold_summary(conn, key, inserted, mtime)

    @staticmethod
    def _fold_summary(
        conn: sqlite3.Connection, key: SessionKey, entries: list[SessionStoreEntry], mtime: int
    ) -> None:
        pk, sid = key["project_key"], key["session_id"]
        row = conn.execute(
            "SELECT mtime, data FROM summaries WHERE project_key = ? AND session_id = ?", (pk, sid)
        ).fetchone()
        prev: SessionSummaryEntry | None = (
            {"session_id": sid, "mtime": row[0], "data": json.loads(row[1])} if row else None
        )
        folded = fold_session_summary(prev, key, entries)
        conn.execute(
            "INSERT OR REPLACE INTO summaries (project_key, session_id, mtime, data) VALUES (?, ?, ?, ?)",
            (pk, sid, mtime, json.dumps(folded["data"], ensure_ascii=False)),
        )

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        return await self._in_thread(lambda: self.load_sync(key))

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        return [
            {"session_id": rest, "mtime": mtime}
            for rest, mtime in await self._in_thread(lambda: self._keys_under(project_key + "/"))
            if "/" not in rest
        ]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        rows = await self._in_thread(
            lambda: self._read(
                lambda c: c.execute(
                    "SELECT session_id, mtime, data FROM summaries WHERE project_key = ?", (project_key,)
                ).fetchall()
            )
        )
        return [{"session_id": sid, "mtime": mtime, "data": json.loads(data)} for sid, mtime, data in rows]

    async def delete(self, key: SessionKey) -> None:
        await self._in_thread(lambda: self._delete_sync(key))

    def _delete_sync(self, key: SessionKey) -> None:
        k = store_key(key)
        main = key.get("subpath") is None
        with self._write() as conn:
            for table in ("entries", "meta"):
                conn.execute(f"DELETE FROM {table} WHERE store_key = ?", (k,))
                if main:  # a main key takes its subagent transcripts with it
                    conn.execute(
                        f"DELETE FROM {table} WHERE substr(store_key, 1, ?) = ?", (len(k) + 1, k + "/")
                    )
            if main:
                conn.execute(
                    "DELETE FROM summaries WHERE project_key = ? AND session_id = ?",
                    (key["project_key"], key["session_id"]),
                )

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        prefix = store_key({"project_key": key["project_key"], "session_id": key["session_id"]}) + "/"
        return [rest for rest, _ in await self._in_thread(lambda: self._keys_under(prefix))]

    def _keys_under(self, prefix: str) -> list[tuple[str, int]]:
        """(rest of key, mtime) for every written key starting with `prefix`."""
        # substr, not LIKE: project keys and ids may contain LIKE's wildcards `_` and `%`.
        rows = self._read(
            lambda c: c.execute(
                "SELECT store_key, mtime FROM meta WHERE substr(store_key, 1, ?) = ? ORDER BY store_key",
                (len(prefix), prefix),
            ).fetchall()
        )
        return [(k[len(prefix) :], mtime) for k, mtime in rows]

    # -- synchronous helpers for the runtime ------------------------------------------------

    def load_sync(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Entries of `key` in append order; None if the key was never written."""
        k = store_key(key)

        def query(c: sqlite3.Connection) -> list[SessionStoreEntry] | None:
            if c.execute("SELECT 1 FROM meta WHERE store_key = ?", (k,)).fetchone() is None:
                return None
            rows = c.execute("SELECT payload FROM entries WHERE store_key = ? ORDER BY seq", (k,))
            return parse_rows(p for (p,) in rows)

        return self._read(query)

    def has_session(self, project_key: str, session_id: str) -> bool:
        """True if the main transcript of this session has at least one entry."""
        k = store_key({"project_key": project_key, "session_id": session_id})
        return (
            self._read(
                lambda c: c.execute("SELECT 1 FROM entries WHERE store_key = ? LIMIT 1", (k,)).fetchone()
            )
            is not None
        )

    def last_context_tokens(self, project_key: str, session_id: str) -> int | None:
        """Context size of the session's latest main-thread model call, or None if there is none.

        Synthetic assistant entries (CLI-made API-error messages) carry no real usage and are skipped.
        """
        k = store_key({"project_key": project_key, "session_id": session_id})

        def query(c: sqlite3.Connection) -> int | None:
            # Newest first, stopping at the first hit: no need to parse a long transcript whole.
            rows = c.execute("SELECT payload FROM entries WHERE store_key = ? ORDER BY seq DESC", (k,))
            try:
                return context_from_newest(payload for (payload,) in rows)
            finally:
                rows.close()

        return self._read(query)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class _Transaction:
    """`with` block holding the in-process lock and a BEGIN IMMEDIATE transaction (commit or rollback)."""

    def __init__(self, lock: threading.Lock, connection: Callable[[], sqlite3.Connection]) -> None:
        self._lock = lock
        self._connection = connection

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._conn = self._connection()
            self._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self._conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
        finally:
            self._lock.release()
