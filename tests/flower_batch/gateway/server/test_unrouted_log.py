"""The gateway writes in a job's folder only for that job's valid token (in-process, no Docker).

An attacker test found that, with no token, a GET, an unknown endpoint or a non-JSON body on
`/j/<B>/...` added lines to B's `logs/gateway.jsonl`, and that `/j/<any name>/...` made a
`<name>/logs/` folder in the batch. Here the real MessagesServer, JobRouter and PerJobLog on a
tmp batch: whatever is sent without the job's token is one small entry in the bounded
`<batch>/gateway-unrouted.jsonl` and nothing under any job folder.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.scripted import MessagesServer, Scenario, ScriptedResponder, read_request_log
from flower_batch.gateway.server.routing import UNROUTED, UNROUTED_MAX_BYTES, JobRouter, PerJobLog
from flower_batch.gateway.tokens import job_token, new_secret

SCENARIO = {"rules": [{"name": "hi", "reply": "hello from the scripted model"}]}
BODY = json.dumps({"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}).encode()
SECRET_TEXT = b"SECRET-BODY-TEXT"


class Gateway:
    def __init__(self, batch: Path) -> None:
        self.secret = new_secret()
        self.batch = batch
        self.server = MessagesServer(JobRouter(ScriptedResponder(Scenario.from_dict(SCENARIO)), self.secret))
        self.log = PerJobLog(batch)
        self.server.log = self.log  # type: ignore[assignment]
        self.conn: http.client.HTTPConnection | None = None

    def send(self, method: str, path: str, body: bytes | None = BODY, key: str | None = None) -> int:
        """One request on a kept-alive connection; its status."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
        if key is not None:
            headers["x-api-key"] = key
        try:
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
            resp.read()
        except (ConnectionError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise
        if resp.will_close:
            self.conn.close()
            self.conn = None
        return resp.status

    def token(self, job: str) -> str:
        return job_token(self.secret, job)

    def unrouted(self) -> list[dict]:
        assert self.server.flush_log()
        return list(read_request_log(self.batch / UNROUTED))


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    batch = tmp_path / "batch"
    (batch / "B").mkdir(parents=True)  # the orchestrator makes a job's folder before the job starts
    gateway = Gateway(batch)
    gateway.server.start()
    try:
        yield gateway
    finally:
        if gateway.conn is not None:
            gateway.conn.close()
        gateway.server.stop()


def tree(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): (p.stat().st_size if p.is_file() else -1) for p in sorted(root.rglob("*"))
    }


def test_requests_without_the_jobs_token_write_nothing_in_any_job_folder(gw: Gateway) -> None:
    before = tree(gw.batch)
    assert gw.send("GET", "/j/B/v1/messages", body=None) == 404  # no token, GET
    assert gw.send("POST", "/j/B/v1/foo") == 404  # no token, unknown endpoint
    assert gw.send("POST", "/j/B/v1/messages", body=b"not json " + SECRET_TEXT) == 400  # no token, not JSON
    assert gw.send("POST", "/j/B/v1/messages", key="fbj-wrong") == 401  # a bad token
    assert gw.send("POST", "/j/B/v1/messages", key=gw.token("other")) == 401  # another job's token
    assert gw.send("POST", "/j/newname/v1/messages", key=gw.token("B")) == 401  # B's token, another path
    assert gw.send("POST", "/j/newname/v1/messages") == 401  # no token, a job that does not exist
    assert gw.send("POST", "/j/newname2/v1/messages", key=gw.token("newname2")) == 200  # valid, no folder
    entries = gw.unrouted()

    after = tree(gw.batch)
    assert after.pop(UNROUTED) > 0
    assert after == before  # B's folder as it was (no logs/, no gateway.jsonl), no newname*/ folder
    assert not (gw.batch / "newname").exists() and not (gw.batch / "newname2").exists()
    assert [(e["method"], e["path"], e["status"], e["unrouted"]) for e in entries] == [
        ("GET", "/j/B/v1/messages", 404, "not-authenticated"),
        ("POST", "/j/B/v1/foo", 404, "not-authenticated"),
        ("POST", "/j/B/v1/messages", 400, "not-authenticated"),
        ("POST", "/j/B/v1/messages", 401, "not-authenticated"),
        ("POST", "/j/B/v1/messages", 401, "not-authenticated"),
        ("POST", "/j/newname/v1/messages", 401, "not-authenticated"),
        ("POST", "/j/newname/v1/messages", 401, "not-authenticated"),
        ("POST", "/j/newname2/v1/messages", 200, "no-job-folder"),
    ]
    # no body, no credential: only its size and the credential's sha256
    assert all("body" not in e and "headers" not in e for e in entries)
    assert (
        entries[2]["body_bytes"] == len(b"not json " + SECRET_TEXT)
        and entries[0]["credential_sha256"] is None
    )
    assert entries[3]["credential_sha256"] == hashlib.sha256(b"fbj-wrong").hexdigest()
    written = (gw.batch / UNROUTED).read_bytes()
    assert (
        SECRET_TEXT not in written and b"fbj-wrong" not in written and gw.token("B").encode() not in written
    )


def test_a_valid_token_still_lands_in_its_jobs_log_as_before(gw: Gateway) -> None:
    assert gw.send("POST", "/j/B/v1/messages", key=gw.token("B")) == 200
    assert gw.send("GET", "/j/B/v1/messages", body=None, key=gw.token("B")) == 404  # its own mistakes too
    assert gw.send("POST", "/j/B/v1/messages", body=b"{bad", key=gw.token("B")) == 400
    assert gw.server.flush_log()
    logged = list(read_request_log(gw.batch / "B" / "logs" / "gateway.jsonl", strict=True))
    assert [(r["method"], r["status"], r["rule"]) for r in logged] == [
        ("POST", 200, "hi"),
        ("GET", 404, "unknown-endpoint"),
        ("POST", 400, "bad-request"),
    ]
    assert logged[0]["body"]["messages"] == [{"role": "user", "content": "hi"}]  # the full request, as before
    assert not (gw.batch / UNROUTED).exists()


def test_no_symlink_is_followed_into_or_out_of_a_job_folder(gw: Gateway, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (gw.batch / "B" / "logs").symlink_to(elsewhere)  # logs/ a link: refused, nothing written there
    (gw.batch / "L").symlink_to(elsewhere, target_is_directory=True)  # a job folder that is a link
    assert gw.send("POST", "/j/B/v1/messages", key=gw.token("B")) == 200
    assert gw.send("POST", "/j/L/v1/messages", key=gw.token("L")) == 200
    assert gw.server.flush_log()
    assert list(elsewhere.iterdir()) == []
    assert [e["unrouted"] for e in gw.unrouted()] == ["no-job-folder"]  # L; B's line was refused by the OS
    (gw.batch / "B" / "logs").unlink()
    (gw.batch / "B" / "logs").mkdir()
    (gw.batch / "B" / "logs" / "gateway.jsonl").symlink_to(elsewhere / "target")
    assert gw.send("POST", "/j/B/v1/messages", key=gw.token("B")) == 200
    assert gw.server.flush_log()
    assert list(elsewhere.iterdir()) == []


def test_huge_refused_requests_leave_small_entries(gw: Gateway) -> None:
    huge = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * (8 << 20) + b'"}]}'
    long_path = "/j/B/v1/messages?" + "q" * 30_000
    assert gw.send("POST", "/j/B/v1/messages", body=huge) == 401
    assert gw.send("POST", long_path, body=huge, key="fbj-" + "k" * 50_000) == 401
    assert gw.send("PUT", "/j/B/" + "p" * 30_000, body=huge) == 404
    entries = gw.unrouted()
    assert len(entries) == 3 and all(e["body_bytes"] == len(huge) for e in entries)
    assert all(len(line) < 1024 for line in (gw.batch / UNROUTED).read_bytes().splitlines())
    assert not (gw.batch / "B" / "logs").exists()


def test_a_flood_of_refused_requests_keeps_the_unrouted_log_bounded(gw: Gateway) -> None:
    gw.log.unrouted_max_bytes = 64 * 1024  # the same rotation as at 1 MiB, over fewer requests
    for n in range(3000):
        status = gw.send("POST" if n % 2 else "GET", f"/j/B{n}/v1/messages?" + "f" * 200, key="fbj-flood")
        assert status in (401, 404)
    assert gw.server.flush_log()
    current, rotated = gw.batch / UNROUTED, gw.batch / (UNROUTED + ".1")
    assert current.stat().st_size <= 64 * 1024 and rotated.stat().st_size <= 64 * 1024
    assert sorted(p.name for p in gw.batch.iterdir()) == ["B", UNROUTED, UNROUTED + ".1"]
    assert list(read_request_log(current))[-1]["prefix"] == "/j/B2999"  # the newest are kept
    assert gw.log.retained() == 0 and gw.log._encoder.conversations() == 0  # none followed in memory


def test_ten_thousand_refusals_stay_under_the_default_bound(tmp_path: Path) -> None:
    log = PerJobLog(tmp_path)
    (tmp_path / "B").mkdir()
    record = {
        "time": 1.0,
        "method": "POST",
        "path": "/j/B/v1/messages?" + "z" * 100_000,
        "prefix": "/j/B",
        "endpoint": "messages",
        "rule": "gateway:bad-token",
        "status": 401,
        "body_bytes": 1 << 30,
        "body": {"messages": [{"role": "user", "content": "x" * 100_000}]},
        "headers": {"h": "v" * 10_000},
    }
    for _ in range(10_000):
        log.add(record, raw=b"x" * 1000, credential_sha256="ab" * 32)
    files = sorted(tmp_path.glob(UNROUTED + "*"))
    assert [p.name for p in files] == [UNROUTED, UNROUTED + ".1"]
    assert all(os.path.getsize(p) <= UNROUTED_MAX_BYTES for p in files)
    assert os.path.getsize(files[1]) > UNROUTED_MAX_BYTES - 1024  # filled before it was rotated
    assert list((tmp_path / "B").iterdir()) == []
