"""The gateway keeps metering exactly on a full disk (issue 36): a request it could not meter is
refused as a transient overload (529, retried by the CLI and waited out by flower's resilience),
never sent on unmetered; once there is room the same job's requests are answered and metered."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from typing import Any

import pytest

from flower.scripted import MessagesServer
from flower_batch.gateway import metering
from flower_batch.gateway.metering import METER_ROOM, read_meter
from flower_batch.gateway.recording import read_recording
from flower_batch.gateway.server.responders import build_gateway
from flower_batch.gateway.server.routing import JobRouter, PerJobLog
from flower_batch.gateway.tokens import job_token, new_secret

SCENARIO = """
[defaults]
usage = { input_tokens = 100, output_tokens = 7 }

[[rules]]
name = "answer"
reply = [{ text = "done" }]
"""


def _post(port: int, secret: str) -> tuple[int, dict[str, Any] | bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps(
        {"model": "claude-sonnet-4-5", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
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
    return resp.status, (json.loads(data) if resp.status != 200 else data)


def test_a_request_that_cannot_be_metered_is_refused_as_retryable_and_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "s.toml").write_text(SCENARIO)
    logs = tmp_path / "batch" / "job-a" / "logs"
    logs.mkdir(parents=True)
    full = {"now": True}
    real = os.statvfs

    def statvfs(path: Any) -> Any:
        st = real(path)
        if full["now"] and Path(path) == logs:
            return os.statvfs_result((st.f_bsize, st.f_frsize, st.f_blocks, 0, 0, *st[5:]))
        return st

    monkeypatch.setattr(metering.os, "statvfs", statvfs)
    secret = new_secret()
    tap = build_gateway("scripted", batch_dir=tmp_path / "batch", scenario=str(tmp_path / "s.toml"))
    server = MessagesServer(JobRouter(tap, secret))
    server.log = PerJobLog(tmp_path / "batch")  # type: ignore[assignment]
    with server:
        status, body = _post(server.port, secret)
        assert status == 529 and isinstance(body, dict), body
        assert (
            body["error"]["type"] == "overloaded_error"
            and "cannot meter job job-a" in body["error"]["message"]
        )
        assert read_meter(logs) is None or read_meter(logs).exchanges == 0  # type: ignore[union-attr]
        full["now"] = False
        status, _ = _post(server.port, secret)
        assert status == 200
    meter = read_meter(logs)
    assert meter is not None and meter.exchanges == 1 and meter.tokens["input_tokens"] == 100
    assert [e["outcome"] for e in read_recording(logs / "recording.jsonl")] == ["response"]
    assert (logs / METER_ROOM).stat().st_size == metering.METER_ROOM_BYTES  # held for the next full disk


def test_an_exchange_under_way_when_the_disk_fills_is_metered_in_the_meters_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    meter = metering.JobMeter(tmp_path, "job-a", "scripted")
    assert meter.room_to_meter() is None and (tmp_path / METER_ROOM).exists()
    real = metering.append_line

    def full_while_room_held(path: Path, record: dict[str, Any], *, sync: bool = False) -> None:
        if (tmp_path / METER_ROOM).exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, record, sync=sync)

    monkeypatch.setattr(metering, "append_line", full_while_room_held)
    meter.update(meter.new_exchange(), "claude-sonnet-4-5", {"input_tokens": 100}, final=True)
    read = read_meter(tmp_path)
    assert read is not None and read.exchanges == 1 and not (tmp_path / METER_ROOM).exists()
