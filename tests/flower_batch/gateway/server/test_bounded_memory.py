"""The gateway holds no history of requests (issue 10): after many requests, nothing per request
is left in memory; what it keeps is per job or per conversation, and bounded."""

from __future__ import annotations

import gc
import http.client
import json
from pathlib import Path

from flower.scripted import MessagesServer, ParsedRequest, read_request_log
from flower_batch.gateway.metering import SETTLE_AFTER, JobMeter, fold, read_lines, read_meter
from flower_batch.gateway.server.responders import build_gateway
from flower_batch.gateway.server.routing import JobRouter, PerJobLog
from flower_batch.gateway.tokens import job_token, new_secret

SCENARIO = '[[rules]]\nname = "answer"\nreply = [{ text = "done" }]\n'
JOBS = ("job-a", "job-b", "job-c")
SESSIONS = ("s-1", "s-2")
ROUNDS = 40


def body(session: str, n: int) -> bytes:
    messages = [{"role": "user", "content": [{"type": "text", "text": f"start {session} " + "p" * 2000}]}]
    for i in range(1, n):
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": f"step {i} " + "a" * 300}]},
            {"role": "user", "content": [{"type": "text", "text": f"result {i} " + "r" * 300}]},
        ]
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "stream": True,
            "system": "agent " * 100,
            "messages": messages,
        }
    ).encode()


def live_requests() -> tuple[int, int]:
    """This test's requests and log records still in memory. Only its jobs' are counted: a server
    of an earlier test (flower/scripted's) may still be letting go of its own while this one runs."""
    gc.collect()
    objects = gc.get_objects()
    prefixes = {f"/j/{job}" for job in JOBS}
    parsed = sum(isinstance(o, ParsedRequest) and o.prefix in prefixes for o in objects)
    records = sum(
        isinstance(o, dict) and "body_bytes" in o and "outcome" in o and o.get("prefix") in prefixes
        for o in objects
    )
    return parsed, records


def test_after_many_requests_nothing_per_request_is_retained(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(SCENARIO)
    # Other tests of the same process may still hold servers that keep requests (keep_requests=True):
    # what counts is that this gateway adds none.
    before = live_requests()
    secret = new_secret()
    tap = build_gateway("scripted", batch_dir=tmp_path / "batch", scenario=str(tmp_path / "s.toml"))
    server = MessagesServer(JobRouter(tap, secret))
    server.log = PerJobLog(tmp_path / "batch")  # type: ignore[assignment]
    server.start()
    sent: dict[tuple[str, str], list[bytes]] = {}
    try:
        conns = {job: http.client.HTTPConnection("127.0.0.1", server.port, timeout=30) for job in JOBS}
        for n in range(1, ROUNDS + 1):
            for job in JOBS:
                for session in SESSIONS:
                    data = body(session, n)
                    sent.setdefault((job, session), []).append(data)
                    conns[job].request(
                        "POST",
                        f"/j/{job}/v1/messages?beta=true",
                        body=data,
                        headers={
                            "x-api-key": job_token(secret, job),
                            "x-claude-code-session-id": session,
                            "content-type": "application/json",
                        },
                    )
                    resp = conns[job].getresponse()
                    assert resp.status == 200 and b"message_stop" in resp.read()
        for conn in conns.values():
            conn.close()
    finally:
        server.stop()
    assert live_requests() == before  # no request, no log record left anywhere
    log = server.log
    assert isinstance(log, PerJobLog) and log.retained() == 0
    assert log._encoder.conversations() == len(JOBS) * len(SESSIONS)
    # all but each conversation's first two requests proven from the raw body (rawprefix.py)
    assert log._encoder.fast_hits == len(JOBS) * len(SESSIONS) * (ROUNDS - 2)
    assert len(server._nth) == len(SESSIONS)  # counters per session, not per request
    responder = tap.inner
    assert len(responder._fired) <= len(SESSIONS) + 1 and len(responder._cursor) <= len(SESSIONS)
    assert set(tap.recorder._seq) == set(JOBS)
    for job in JOBS:
        meter = tap.meter(job)
        assert len(meter._exchanges) <= SETTLE_AFTER <= 64
        summary = meter.summary()
        assert summary.exchanges == ROUNDS * len(SESSIONS)
        on_disk = read_meter(tmp_path / "batch" / job / "logs")
        assert on_disk is not None and on_disk.tokens == summary.tokens
        # the log still rebuilds every request, byte for byte equal as JSON
        rebuilt = list(read_request_log(tmp_path / "batch" / job / "logs" / "gateway.jsonl", strict=True))
        for session in SESSIONS:
            mine = [r["body"] for r in rebuilt if r["session"] == session]
            assert mine == [json.loads(d) for d in sent[(job, session)]]


def test_a_meter_settles_old_exchanges_and_a_restart_counts_the_same(tmp_path: Path) -> None:
    meter = JobMeter(tmp_path, "job", "scripted")
    for i in range(300):
        ex = meter.new_exchange()
        meter.update(ex, "claude-sonnet-4-5", {"input_tokens": 100, "output_tokens": 1}, final=False)
        meter.update(ex, "claude-sonnet-4-5", {"output_tokens": 10 + i % 3}, final=True)
    open_ex = meter.new_exchange()
    meter.update(open_ex, "claude-sonnet-4-5", {"input_tokens": 7}, final=False)  # cut mid-stream
    meter.refused("budget spent")
    assert len(meter._exchanges) <= SETTLE_AFTER <= 64
    expected = fold(read_lines(tmp_path / "meter.jsonl"), job="job")
    got = meter.summary()
    assert (
        (got.exchanges, got.tokens, got.incomplete, got.refused)
        == (expected.exchanges, expected.tokens, expected.incomplete, expected.refused)
        == (301, got.tokens, 1, 1)
    )
    assert got.tokens["input_tokens"] == 300 * 100 + 7
    assert got.cost_usd == __import__("pytest").approx(expected.cost_usd)
    again = JobMeter(tmp_path, "job", "scripted")  # a gateway restarted on the same files
    assert len(again._exchanges) <= SETTLE_AFTER
    assert again.summary().tokens == got.tokens and again.summary().exchanges == 301
    assert json.loads((tmp_path / "meter.json").read_text())["exchanges"] == 301
