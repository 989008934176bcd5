"""The recording and meter.json are written after the answer (ResponsePlan.after, run by the
core's log writer): every exchange is still recorded, a stream slower than the writer's wait is
recorded at its end, and a stopped gateway has written every line."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

from flower.scripted import MessagesServer
from flower_batch.gateway.metering import read_meter, read_summary
from flower_batch.gateway.recording import read_recording
from flower_batch.gateway.server.responders import build_gateway
from flower_batch.gateway.server.routing import JobRouter, PerJobLog
from flower_batch.gateway.tokens import job_token, new_secret

SCENARIO = """
[defaults]
usage = { input_tokens = 100, output_tokens = 7 }

[[rules]]
name = "slow"
when = { last_user_contains = "slowly" }
reply = [{ text = "one" }, { text = "two" }]
chunk_delay_s = 0.03

[[rules]]
name = "answer"
reply = [{ text = "done" }]
"""


def _post(port: int, secret: str, text: str, stream: bool) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 20,
            "stream": stream,
            "messages": [{"role": "user", "content": text}],
        }
    )
    conn.request(
        "POST",
        "/j/job-a/v1/messages",
        body,
        {"x-api-key": job_token(secret, "job-a"), "content-type": "application/json"},
    )
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    assert resp.status == 200, data
    return data


def test_every_exchange_is_recorded_after_its_answer_fast_or_slow(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(SCENARIO)
    secret = new_secret()
    tap = build_gateway("scripted", batch_dir=tmp_path / "batch", scenario=str(tmp_path / "s.toml"))
    server = MessagesServer(JobRouter(tap, secret))
    server.log = PerJobLog(tmp_path / "batch")  # type: ignore[assignment]
    with server:
        _post(server.port, secret, "hi", stream=True)
        _post(server.port, secret, "hi", stream=False)
        # a stream that lasts longer than the writer waits (50 ms): recorded at its own end
        assert b"message_stop" in _post(server.port, secret, "answer slowly", stream=True)
    logs = tmp_path / "batch" / "job-a" / "logs"
    recording = read_recording(logs / "recording.jsonl")
    assert [(e["seq"], e["outcome"]) for e in recording] == [(1, "stream"), (2, "response"), (3, "stream")]
    assert recording[2]["response"]["events"][-1][0] == "message_stop"
    assert recording[2]["t_end"] - recording[2]["t"] >= 0.05
    meter = read_meter(logs)
    assert meter is not None and meter.exchanges == 3 and meter.tokens["input_tokens"] == 300
    summary = read_summary(logs)  # meter.json, written after the answers, agrees with meter.jsonl
    assert summary is not None and summary["exchanges"] == 3
