"""Route a request to its job: check the per-job token, then hand it to the mode's responder."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flower.scripted import ParsedRequest, Responder, ResponsePlan
from flower.scripted.log import DeltaWriter

from .tokens import token_matches

NO_JOB_RULE = "gateway:no-job"
BAD_TOKEN_RULE = "gateway:bad-token"
# The router's refusals: whoever sent these is not the job in the URL. (gateway:budget is not one:
# a valid job refused for its budget stays in that job's log.)
REFUSAL_RULES = frozenset({NO_JOB_RULE, BAD_TOKEN_RULE})
JOB_PREFIX = re.compile(r"^/j/([A-Za-z0-9][A-Za-z0-9._-]{0,199})$")


def job_of(prefix: str) -> str | None:
    m = JOB_PREFIX.match(prefix or "")
    return m.group(1) if m else None


class JobRouter:
    """A Responder: refuses requests without a valid job token, delegates the rest."""

    def __init__(self, inner: Responder, secret: str) -> None:
        self.inner = inner
        self.secret = secret

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        job = job_of(request.prefix)
        if job is None:
            return ResponsePlan.error(
                404, "flower-batch gateway: send requests to /j/<job>/v1/messages (set by flower-batch)",
                rule=NO_JOB_RULE,
            )
        if not token_matches(self.secret, job, request.credential_sha256):
            return ResponsePlan.error(
                401,
                f"flower-batch gateway: unknown token for job {job} — ANTHROPIC_API_KEY must be the "
                "per-job token flower-batch gave this container",
                rule=BAD_TOKEN_RULE,
            )
        return self.inner.respond(request)

    def begin(self, request: ParsedRequest, body: Iterable[bytes] | None = None) -> None:
        """Pass an early start on only for a job with its valid token (from the path and headers:
        no body needed); respond() answers the rest."""
        job = job_of(request.prefix)
        begin = getattr(self.inner, "begin", None)
        if begin is not None and job is not None and token_matches(self.secret, job, request.credential_sha256):
            begin(request, body)


class PerJobLog(DeltaWriter):
    """The gateway's request log, split per job: `<batch_dir>/<job>/logs/gateway.jsonl`; refused
    and unroutable requests in `<batch_dir>/gateway-unrouted.jsonl`. Written in the request
    log's v2 format (flower/scripted/logformat.py: new messages only); nothing kept in memory
    but the digests of the conversations it follows (bounded), unless `keep` (tests)."""

    def __init__(self, batch_dir: str | Path, keep: bool = False) -> None:
        super().__init__(keep=keep)
        self.batch_dir = Path(batch_dir)

    def path_for(self, job: str | None) -> Path:
        if job is None:
            return self.batch_dir / "gateway-unrouted.jsonl"
        return self.batch_dir / job / "logs" / "gateway.jsonl"

    def add(self, record: dict[str, Any], *, remembered: bool = False, raw: bytes | None = None) -> None:
        # A refused request (bad token, no job) goes to the unrouted log: whoever sent it is not
        # that job, and it must not make a folder under the batch for any name it likes.
        refused = record.get("rule") in REFUSAL_RULES
        self.write(self.path_for(None if refused else job_of(record.get("prefix", ""))), record, remembered=remembered, raw=raw)
