"""The batch gateway's routing in-process (no Docker): per-job tokens, per-job logs, refusals.

The same pieces the sidecar container runs (`python -m flower_batch.gateway.server serve`): a
MessagesServer around a JobRouter around the scripted responder, its log split per job.
The Docker test of the same refusal from a container on the batch network is in
commands/test_job_commands_on_docker.py.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.scripted import MessagesServer, Scenario, ScriptedResponder, read_request_log
from flower_batch.gateway.server.__main__ import main as gateway_main
from flower_batch.gateway.server.routing import JobRouter, PerJobLog
from flower_batch.gateway.tokens import SECRET_ENV, job_token, new_secret, token_matches

SCENARIO = {"rules": [{"name": "hi", "reply": "hello from the scripted model"}]}
JOBS = ("job-1", "job-2")
BODY = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[MessagesServer, str, Path]]:
    secret = new_secret()
    server = MessagesServer(JobRouter(ScriptedResponder(Scenario.from_dict(SCENARIO)), secret))
    server.log = PerJobLog(tmp_path / "batch")  # type: ignore[assignment]
    for job in JOBS:  # the orchestrator makes a job's folder before the job starts
        (tmp_path / "batch" / job).mkdir(parents=True)
    server.start()
    try:
        yield server, secret, tmp_path / "batch"
    finally:
        server.stop()


def post(
    server: MessagesServer, path: str, headers: dict[str, str], body: dict | None = None
) -> tuple[int, dict]:
    req = urllib.request.Request(
        server.base_url + path,
        data=json.dumps(body or BODY).encode(),
        headers={"content-type": "application/json", "anthropic-version": "2023-06-01", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_jobs_own_token_is_served(gateway) -> None:
    server, secret, _ = gateway
    status, body = post(server, "/j/job-1/v1/messages", {"x-api-key": job_token(secret, "job-1")})
    assert status == 200 and body["content"][0]["text"] == "hello from the scripted model"
    status, _ = post(
        server, "/j/job-1/v1/messages", {"authorization": f"Bearer {job_token(secret, 'job-1')}"}
    )
    assert status == 200
    status, body = post(
        server, "/j/job-1/v1/messages/count_tokens", {"x-api-key": job_token(secret, "job-1")}
    )
    assert status == 200 and body["input_tokens"] > 0


@pytest.mark.parametrize(
    "path, key",
    [
        ("/j/job-1/v1/messages", "fbj-wrong"),  # a made-up token
        ("/j/job-2/v1/messages", "TOKEN-OF-job-1"),  # another job's token
        ("/j/job-1/v1/messages", ""),  # no key at all
        ("/j/job-1/v1/messages/count_tokens", "fbj-wrong"),  # every endpoint is guarded
    ],
)
def test_a_wrong_per_job_token_gets_401(gateway, path: str, key: str) -> None:
    server, secret, _ = gateway
    key = key.replace("TOKEN-OF-job-1", job_token(secret, "job-1"))
    status, body = post(server, path, {"x-api-key": key} if key else {})
    assert status == 401
    assert body["error"]["type"] == "authentication_error"
    assert "per-job token" in body["error"]["message"]


def test_a_token_from_another_batch_secret_gets_401(gateway) -> None:
    server, _, _ = gateway
    status, _ = post(server, "/j/job-1/v1/messages", {"x-api-key": job_token(new_secret(), "job-1")})
    assert status == 401


def test_requests_without_a_job_path_get_404(gateway) -> None:
    server, secret, _ = gateway
    status, body = post(server, "/v1/messages", {"x-api-key": job_token(secret, "job-1")})
    assert status == 404 and "/j/<job>/v1/messages" in body["error"]["message"]


def test_the_log_is_split_per_job_and_holds_no_token(gateway) -> None:
    server, secret, batch = gateway
    t1, t2 = job_token(secret, "job-1"), job_token(secret, "job-2")
    post(server, "/j/job-1/v1/messages", {"x-api-key": t1})
    post(server, "/j/job-2/v1/messages", {"x-api-key": t2})
    post(server, "/j/job-2/v1/messages", {"x-api-key": "fbj-wrong"})
    post(server, "/j/made-up/v1/messages", {"x-api-key": t1})
    post(server, "/v1/messages", {"x-api-key": t1})

    def statuses(path: Path) -> list[tuple[str, int]]:
        return [(r["prefix"], r["status"]) for r in read_request_log(path)]

    assert server.flush_log()  # lines are written just after their answers

    assert statuses(batch / "job-1" / "logs" / "gateway.jsonl") == [("/j/job-1", 200)]
    assert statuses(batch / "job-2" / "logs" / "gateway.jsonl") == [("/j/job-2", 200)]
    # refused requests are kept apart: they did not come from the job they name
    assert statuses(batch / "gateway-unrouted.jsonl") == [("/j/job-2", 401), ("/j/made-up", 401), ("", 404)]
    assert not (batch / "made-up").exists()
    written = "".join(p.read_text() for p in batch.rglob("*.jsonl"))
    assert t1 not in written and t2 not in written and secret not in written


def test_tokens_are_per_job_and_per_secret() -> None:
    import hashlib

    secret = new_secret()
    token = job_token(secret, "a")
    assert token == job_token(secret, "a") and token.startswith("fbj-")
    assert token != job_token(secret, "b") and token != job_token(new_secret(), "a")
    assert token_matches(secret, "a", hashlib.sha256(token.encode()).hexdigest())
    assert not token_matches(secret, "b", hashlib.sha256(token.encode()).hexdigest())


def test_the_gateway_process_refuses_to_start_without_its_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps(SCENARIO))
    assert gateway_main(["serve", "--scenario", str(scenario), "--batch-dir", str(tmp_path)]) == 2
    assert SECRET_ENV in capsys.readouterr().err


def test_budget_refusal_of_a_valid_job_stays_in_its_log(tmp_path: Path) -> None:
    log = PerJobLog(tmp_path)
    (tmp_path / "job-1").mkdir()
    log.add({"prefix": "/j/job-1", "rule": "gateway:budget", "status": 402}, owner="job-1")
    log.add({"prefix": "/j/job-1", "rule": "gateway:bad-token", "status": 401})
    log.add({"prefix": "", "rule": "gateway:no-job", "status": 404})
    own = list(read_request_log(tmp_path / "job-1" / "logs" / "gateway.jsonl"))
    unrouted = list(read_request_log(tmp_path / "gateway-unrouted.jsonl"))
    assert [r["rule"] for r in own] == ["gateway:budget"]
    assert [r["rule"] for r in unrouted] == ["gateway:bad-token", "gateway:no-job"]
