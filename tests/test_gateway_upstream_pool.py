"""Proxy mode keeps its upstream connections alive (upstream_pool.py): reused when an answer was
read to the end, never when a stream stopped early, and a connection the upstream closed while
idle costs a retry on a fresh one, not the job's request."""

from __future__ import annotations

import json
import time

from flower.scripted import ParsedRequest, ScriptedServer
from flower_batch.gateway.proxy import ProxyResponder, Upstream
from flower_batch.gateway.upstream_auth import UpstreamAuth

SCENARIO = {"rules": [{"name": "hi", "reply": [{"text": "hi"}]}]}


def _request(stream: bool) -> ParsedRequest:
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5, "stream": stream,
                       "messages": [{"role": "user", "content": "say hi"}]}).encode()
    return ParsedRequest(method="POST", path="/j/a/v1/messages", prefix="/j/a", endpoint="messages",
                         headers={"content-type": "application/json"}, raw_body=body)


def _proxy(up: ScriptedServer) -> ProxyResponder:
    return ProxyResponder(Upstream(up.base_url), UpstreamAuth.from_gateway({"FB_UPSTREAM_KEY": "sk-test"}))


def _open_connections(up: ScriptedServer) -> int:
    with up._conns_lock:
        return len(up._conns)


def test_answers_read_to_the_end_reuse_one_connection() -> None:
    with ScriptedServer(SCENARIO) as up:
        proxy = _proxy(up)
        for stream in (True, False, True):
            plan = proxy.respond(_request(stream))
            if plan.events is not None:
                assert [e[0] for e in plan.events][-1] == "message_stop"
            else:
                assert plan.status == 200 and plan.json_body["type"] == "message"
        assert len(proxy._pool._idle) == 1
        assert _open_connections(up) == 1  # the upstream saw one connection for three requests


def test_a_stream_stopped_early_closes_its_connection() -> None:
    with ScriptedServer(SCENARIO) as up:
        proxy = _proxy(up)
        plan = proxy.respond(_request(True))
        assert plan.events is not None
        events = iter(plan.events)
        assert next(events)[0] == "message_start"
        events.close()  # type: ignore[attr-defined]  # what the tap does when the job went away
        assert proxy._pool._idle == []


def test_a_connection_the_upstream_dropped_while_idle_is_replaced() -> None:
    with ScriptedServer(SCENARIO, keep_requests=True) as up:
        proxy = _proxy(up)
        assert proxy.respond(_request(False)).status == 200
        (stale,) = proxy._pool._idle
        up._reset_connections()  # the upstream closes its idle keep-alive connection
        deadline = time.monotonic() + 5
        while _open_connections(up) and time.monotonic() < deadline:
            time.sleep(0.01)
        plan = proxy.respond(_request(False))
        assert plan.status == 200 and plan.json_body["type"] == "message"
        assert proxy._pool._idle and proxy._pool._idle[0] is not stale
        up.flush_log()
        assert len(up.requests) == 2  # resent once, on the fresh connection only
