"""Route a request to its job: check the per-job token, then hand it to the mode's responder."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from flower.scripted import ParsedRequest, Responder, ResponsePlan
from flower.scripted.log import DeltaWriter, append_closing_torn
from flower_batch.gateway.tokens import token_matches

NO_JOB_RULE = "gateway:no-job"
BAD_TOKEN_RULE = "gateway:bad-token"
# The router's refusals: whoever sent these is not the job in the URL. (gateway:budget is not one:
# a valid job refused for its budget stays in that job's log.)
REFUSAL_RULES = frozenset({NO_JOB_RULE, BAD_TOKEN_RULE})
JOB_PREFIX = re.compile(r"^/j/([A-Za-z0-9][A-Za-z0-9._-]{0,199})$")

UNROUTED = "gateway-unrouted.jsonl"
# The unrouted log's bound: past it the file is renamed to UNROUTED.1 (the one before is
# dropped) and a new one begun, so it never holds more than 2 x this on disk and nothing in
# memory. Rotation, not "stop and count": the newest refusals (what is going on now) stay
# readable, in the same format, and one rename is the whole mechanism.
UNROUTED_MAX_BYTES = 1 << 20
_CUT = 256  # characters of a refused request's path or prefix kept (an entry is < 4 KB)


def job_of(prefix: str) -> str | None:
    m = JOB_PREFIX.match(prefix or "")
    return m.group(1) if m else None


class JobRouter:
    """A Responder: refuses requests without a valid job token, delegates the rest."""

    def __init__(self, inner: Responder, secret: str) -> None:
        self.inner = inner
        self.secret = secret

    def authenticated_job(self, request: ParsedRequest) -> str | None:
        """The job this request may act for: the one its path names, if it carries that job's
        token (from the path and headers: no body needed); else None. The only place that
        decides it: answers, early starts and the log's split all ask here."""
        job = job_of(request.prefix)
        if job is None or not token_matches(self.secret, job, request.credential_sha256):
            return None
        return job

    def log_owner(self, request: ParsedRequest) -> str | None:
        """Whose log a request goes to (MessagesServer asks, for every request it logs, answered
        here or not): its job's if authenticated, else None (the unrouted log)."""
        return self.authenticated_job(request)

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        if self.authenticated_job(request) is not None:
            return self.inner.respond(request)
        job = job_of(request.prefix)
        if job is None:
            return ResponsePlan.error(
                404,
                "flower-batch gateway: send requests to /j/<job>/v1/messages (set by flower-batch)",
                rule=NO_JOB_RULE,
            )
        return ResponsePlan.error(
            401,
            f"flower-batch gateway: unknown token for job {job} — ANTHROPIC_API_KEY must be the "
            "per-job token flower-batch gave this container",
            rule=BAD_TOKEN_RULE,
        )

    def begin(self, request: ParsedRequest, body: Iterable[bytes] | None = None) -> None:
        """Pass an early start on only for a job with its valid token; respond() answers the rest."""
        begin = getattr(self.inner, "begin", None)
        if begin is not None and self.authenticated_job(request) is not None:
            begin(request, body)


def _cut(value: Any, limit: int = _CUT) -> Any:
    return value[:limit] if isinstance(value, str) else value if isinstance(value, int | float) else None


def unrouted_entry(record: dict[str, Any], why: str, credential_sha256: str = "") -> dict[str, Any]:
    """What the unrouted log keeps of a request: its shape, never its body or credential (the
    sha256 of the credential only), each field cut short, so an entry stays small whatever
    was sent. Read by read_request_log as it is (no `format`: a v1 line)."""
    return {
        "time": _cut(record.get("time")),
        "method": _cut(record.get("method"), 16),
        "path": _cut(record.get("path")),
        "prefix": _cut(record.get("prefix")),
        "endpoint": _cut(record.get("endpoint"), 32),
        "rule": _cut(record.get("rule"), 64),
        "status": _cut(record.get("status")),
        "outcome": _cut(record.get("outcome"), 32),
        "body_bytes": _cut(record.get("body_bytes")),
        "credential_sha256": credential_sha256[:64] or None,
        "unrouted": why,
    }


def _open_nofollow(dir_fd: int | None = None) -> Callable[[str, int], int]:
    """An opener for open(): the last part of the name is never followed if a symlink."""

    def opener(name: str, flags: int) -> int:
        return os.open(name, flags | os.O_NOFOLLOW, 0o666, dir_fd=dir_fd)

    return opener


class PerJobLog(DeltaWriter):
    """The gateway's request log, split per job: `<batch_dir>/<job>/logs/gateway.jsonl` for a
    request with its job's valid token (`owner`, from JobRouter.log_owner), in the request log's
    v2 format (flower/scripted/logformat.py: new messages only), once the orchestrator made
    `<batch_dir>/<job>/` (this makes at most its logs/, following no symlink). Anything else
    (no or a wrong token, no job path, no job folder) is one small entry in
    `<batch_dir>/gateway-unrouted.jsonl` (unrouted_entry: no body, no credential), bounded by
    UNROUTED_MAX_BYTES: whoever sent it is not that job, so it must not write in a job's folder
    or make a folder for any name it likes. Nothing kept in memory but the digests of the
    conversations it follows (bounded; refused requests are not followed), unless `keep`."""

    def __init__(self, batch_dir: str | Path, keep: bool = False) -> None:
        super().__init__(keep=keep)
        self.batch_dir = Path(batch_dir)
        self.unrouted_max_bytes = UNROUTED_MAX_BYTES

    def path_for(self, job: str | None) -> Path:
        if job is None:
            return self.batch_dir / UNROUTED
        return self.batch_dir / job / "logs" / "gateway.jsonl"

    def add(
        self,
        record: dict[str, Any],
        *,
        remembered: bool = False,
        raw: bytes | None = None,
        owner: str | None = None,
        credential_sha256: str = "",
    ) -> None:
        job = owner if owner is not None and job_of(record.get("prefix", "")) == owner else None
        if job is None or record.get("rule") in REFUSAL_RULES:
            why = "no-job" if job_of(record.get("prefix", "")) is None else "not-authenticated"
        elif not self._job_folder(job):
            why = "no-job-folder"
        else:
            self.write(self.path_for(job), record, remembered=remembered, raw=raw)
            return
        self._unrouted(record, why, credential_sha256, remembered=remembered)

    def _job_folder(self, job: str) -> bool:
        try:
            return stat.S_ISDIR(os.lstat(self.batch_dir / job).st_mode)  # a symlink is not one
        except OSError:
            return False

    def append(self, path: Path, line: bytes) -> None:
        """A job's line: its logs/ made inside the existing job folder, no symlink followed on
        the way (O_NOFOLLOW: a job folder, logs/ or gateway.jsonl that is a link is refused)."""
        job_fd = os.open(path.parent.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            try:
                os.mkdir(path.parent.name, dir_fd=job_fd)
            except FileExistsError:
                pass
            logs_fd = os.open(path.parent.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=job_fd)
        finally:
            os.close(job_fd)
        try:
            append_closing_torn(path.name, line, opener=_open_nofollow(logs_fd))
        finally:
            os.close(logs_fd)

    def _unrouted(
        self, record: dict[str, Any], why: str, credential_sha256: str, *, remembered: bool
    ) -> None:
        line = json.dumps(unrouted_entry(record, why, credential_sha256), separators=(",", ":")) + "\n"
        data = line.encode("ascii")  # ensure_ascii: bounded bytes per character
        path = self.path_for(None)
        with self._lock:
            if self.keep and not remembered:
                self._records.append(record)
            self.batch_dir.mkdir(parents=True, exist_ok=True)
            try:
                size = os.lstat(path).st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(data) > self.unrouted_max_bytes:
                os.replace(path, path.with_name(UNROUTED + ".1"))
            append_closing_torn(path, data, opener=_open_nofollow())
