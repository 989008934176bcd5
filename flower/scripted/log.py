"""The request log: every request the server saw, as JSONL on disk (logformat.py, v2), and in
memory only when asked for (`keep=True`, for tests): a long-lived server must not grow with the
requests it has seen."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .logformat import DeltaEncoder, prepare
from .plan import ResponsePlan
from .request import ParsedRequest


def plan_usage(plan: ResponsePlan) -> dict[str, Any] | None:
    """The usage a plan will send, when it is known before it is sent (a scripted answer)."""
    usage = plan.json_body.get("usage") if isinstance(plan.json_body, dict) else None
    if isinstance(usage, dict):
        return usage
    if isinstance(plan.events, list | tuple):  # not a generator (a proxied stream): nothing to peek at
        for name, data in plan.events:
            if name == "message_start" and isinstance(data, dict) and isinstance(data.get("message"), dict):
                usage = data["message"].get("usage")
                return usage if isinstance(usage, dict) else None
    return None


def plan_facts(plan: ResponsePlan) -> dict[str, Any]:
    """What the log keeps of a plan (the plan itself, holding a stream, is not kept)."""
    return {
        "rule": plan.rule,
        "step": plan.step,
        "status": plan.status,
        "outcome": plan.outcome,
        "usage": plan_usage(plan),
    }


def record_of(req: ParsedRequest, facts: dict[str, Any]) -> dict[str, Any]:
    """One log entry, from the request (parsed) and its plan's facts."""
    return {
        "time": req.received_at,
        "method": req.method,
        "path": req.path,
        "prefix": req.prefix,
        "endpoint": req.endpoint,
        "session": req.session,
        "nth": req.nth,
        "model": req.model,
        "stream": req.stream,
        "n_messages": len(req.messages),
        "body_bytes": len(req.raw_body),
        **facts,
        "headers": req.headers,
        "body": req.body,
    }


def make_record(req: ParsedRequest, plan: ResponsePlan) -> dict[str, Any]:
    """One log entry. Header values of secrets were already redacted when the request was parsed."""
    return record_of(req, plan_facts(plan))


def append_closing_torn(
    path: str | Path, line: bytes, *, sync: bool = False, opener: Callable[[str, int], int] | None = None
) -> None:
    """Append `line` (in the kernel once this returns: it outlives this process; on disk too if
    `sync`). A torn last line (a writer killed mid-line: a gateway's death) is closed first, so it
    costs only itself, not the line after it (the first line of a restarted gateway, which every
    later line of its conversation builds on). `opener` as for open() (e.g. O_NOFOLLOW, dir_fd)."""
    with open(path, "a+b", opener=opener) as out:
        if out.seek(0, os.SEEK_END) > 0:
            out.seek(-1, os.SEEK_END)
            if out.read(1) != b"\n":
                line = b"\n" + line
        out.write(line)
        out.flush()
        if sync:
            os.fsync(out.fileno())


class DeltaWriter:
    """Appends records to JSONL files as v2 entries (one encoder: conversations are followed per
    prefix and session, whichever file they go to). Thread-safe; O(conversations) memory."""

    def __init__(self, keep: bool = False) -> None:
        self.keep = keep
        self._encoder = DeltaEncoder()
        self._records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def remember(self, record: dict[str, Any]) -> None:
        """Keep `record` in memory, if this log keeps any (then add it with remembered=True)."""
        if self.keep:
            with self._lock:
                self._records.append(record)

    def write(
        self, path: Path | None, record: dict[str, Any], *, remembered: bool = False, raw: bytes | None = None
    ) -> None:
        # The costly part (proving the history unchanged, or serialising and hashing it) runs
        # outside the lock. `raw`, the body as received, makes it cheap (rawprefix.py).
        prep = prepare(record, raw) if path is not None else None
        if prep is not None and prep.stripped is not None:
            with self._lock:
                candidates = self._encoder.candidates(prep.key)
            self._encoder.prepare_hashes(prep, candidates)
        with self._lock:
            if self.keep and not remembered:
                self._records.append(record)
            if prep is None or path is None:
                return
            line = json.dumps(self._encoder.commit(prep), ensure_ascii=False, separators=(",", ":")) + "\n"
            self.append(path, line.encode("utf-8"))

    def append(self, path: Path, line: bytes) -> None:
        """Append one line to `path` (its folder made if missing); called holding the lock."""
        path.parent.mkdir(parents=True, exist_ok=True)
        append_closing_torn(path, line)

    def snapshot(self) -> list[dict[str, Any]]:
        if not self.keep:
            raise RuntimeError(
                "this server keeps no requests in memory: create it with keep_requests=True "
                "(tests), or read its log file with read_request_log()"
            )
        with self._lock:
            return list(self._records)

    def retained(self) -> int:
        """How many records are held in memory (0 unless keep=True)."""
        with self._lock:
            return len(self._records)


class RequestLog(DeltaWriter):
    """The scripted server's log: every record appended to `path` if set; kept in memory if `keep`."""

    def __init__(self, path: str | Path | None = None, keep: bool = False):
        super().__init__(keep=keep)
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def add(
        self,
        record: dict[str, Any],
        *,
        remembered: bool = False,
        raw: bytes | None = None,
        owner: str | None = None,
        credential_sha256: str = "",
    ) -> None:
        """`owner` and `credential_sha256` say who sent it, for a log split by sender (the
        gateway's PerJobLog, see server.py's _write_one); this single log ignores them."""
        self.write(self.path, record, remembered=remembered, raw=raw)
