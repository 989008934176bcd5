"""Proxy mode keeps its upstream connections alive (upstream_pool.py): reused when an answer was
read to the end, never when a stream stopped early, and a connection the upstream closed while
idle costs a retry on a fresh one, not the job's request."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path

from flower.scripted import MessagesServer, ParsedRequest, ScriptedServer
from flower_batch.gateway.server.proxy import ProxyResponder, Upstream
from flower_batch.gateway.server.responders import build_gateway
from flower_batch.gateway.server.routing import JobRouter, PerJobLog
from flower_batch.gateway.tokens import job_token, new_secret
from flower_batch.gateway.upstream_auth import UpstreamAuth

SCENARIO = {"rules": [{"name": "hi", "reply": [{"text": "hi"}]}]}
PRICED = {
    "rules": [
        {
            "name": "hi",
            "reply": [{"text": "hi"}],
            "reply_model": "{model}",
            "usage": {"input_tokens": 1000, "output_tokens": 100},
        }
    ]
}


def _request(stream: bool) -> ParsedRequest:
    body = json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 5,
            "stream": stream,
            "messages": [{"role": "user", "content": "say hi"}],
        }
    ).encode()
    return ParsedRequest(
        method="POST",
        path="/j/a/v1/messages",
        prefix="/j/a",
        endpoint="messages",
        headers={"content-type": "application/json"},
        raw_body=body,
    )


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


# -- begin(): the raw request goes upstream before the gateway parses it ------------------------------


def _wait(cond, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(cond())


def test_begin_forwards_the_raw_request_before_its_body_is_parsed() -> None:
    with ScriptedServer(SCENARIO, keep_requests=True) as up:
        proxy = _proxy(up)
        req = _request(True)
        assert req.body == {}  # not parsed yet: what the core hands begin()
        proxy.begin(req)
        assert _wait(lambda: len(up.requests) == 1)  # upstream has it, respond() not called yet
        req.body = json.loads(req.raw_body)
        plan = proxy.respond(req)
        assert plan.events is not None and [e[0] for e in plan.events][-1] == "message_stop"
        assert req.begun == {} and len(up.requests) == 1  # answered from the begun request, not resent
        assert len(proxy._pool._idle) == 1


def _gateway_server(batch: Path, upstream: str, secret: str, budget: float | None) -> MessagesServer:
    tap = build_gateway(
        "anthropic",
        batch_dir=batch,
        upstream=upstream,
        batch_budget_usd=budget,
        environ={"FB_UPSTREAM_KEY": "sk-test"},
    )
    server = MessagesServer(JobRouter(tap, secret))
    server.log = PerJobLog(batch)  # type: ignore[assignment]
    return server


def _post(port: int, secret: str, body: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(
        "POST",
        "/j/job-a/v1/messages",
        body=body,
        headers={"x-api-key": job_token(secret, "job-a"), "content-type": "application/json"},
    )
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def test_a_job_over_budget_is_refused_before_anything_goes_upstream(tmp_path: Path) -> None:
    secret = new_secret()
    with (
        ScriptedServer(PRICED, keep_requests=True) as up,
        _gateway_server(tmp_path, up.base_url, secret, budget=1e-9) as gw,
    ):
        assert _post(gw.port, secret, _request(True).raw_body)[0] == 200  # spends more than the budget
        status, data = _post(gw.port, secret, _request(True).raw_body)
        assert status == 402 and b"billing_error" in data
        up.flush_log()
        assert len(up.requests) == 1  # the refused request never reached the upstream


def test_a_bad_body_is_refused_and_the_begun_upstream_request_closed(tmp_path: Path) -> None:
    secret = new_secret()
    with ScriptedServer(SCENARIO) as up, _gateway_server(tmp_path, up.base_url, secret, budget=None) as gw:
        status, data = _post(gw.port, secret, b'{"model": "claude-sonnet-4-5", "messages": [')
        assert status == 400 and b"not JSON" in data
        proxy = gw.responder.inner.inner  # type: ignore[attr-defined]
        assert isinstance(proxy, ProxyResponder) and proxy._pool._idle == []  # closed, not kept
        assert _wait(lambda: _open_connections(up) == 0)  # the upstream saw it go
        assert _post(gw.port, secret, _request(False).raw_body)[0] == 200  # and the next one works


# -- the body's parse waits until after the answer ------------------------------------------------


def _post_in_session(port: int, secret: str, body: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(
        "POST",
        "/j/job-a/v1/messages",
        body=body,
        headers={
            "x-api-key": job_token(secret, "job-a"),
            "content-type": "application/json",
            "x-claude-code-session-id": "sess-1",
        },
    )
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def test_a_forwarded_body_is_parsed_after_the_answer_and_logged_whole(tmp_path: Path) -> None:
    secret = new_secret()
    seen: list[tuple[bool, dict, str]] = []
    with ScriptedServer(PRICED) as up, _gateway_server(tmp_path, up.base_url, secret, budget=None) as gw:
        proxy = gw.responder.inner.inner  # type: ignore[attr-defined]
        respond = proxy.respond

        def watching(request: ParsedRequest):  # type: ignore[no-untyped-def]
            seen.append((request.unparsed, dict(request.body), request.model))
            return respond(request)

        proxy.respond = watching
        for _ in range(2):
            assert _post_in_session(gw.port, secret, _request(True).raw_body)[0] == 200
    # the proxy answered from the raw bytes: nothing parsed yet, the model read off the body's head
    assert seen == [(True, {}, "claude-sonnet-4-5")] * 2
    from flower.scripted import read_request_log
    from flower_batch.gateway.metering import read_meter
    from flower_batch.gateway.recording import read_recording

    logs = tmp_path / "job-a" / "logs"
    logged = list(read_request_log(logs / "gateway.jsonl"))
    assert [(r["session"], r["nth"], r["model"], r["n_messages"]) for r in logged] == [
        ("sess-1", 1, "claude-sonnet-4-5", 1),
        ("sess-1", 2, "claude-sonnet-4-5", 1),
    ]
    assert logged[1]["body"] == json.loads(_request(True).raw_body)
    recorded = [e["request"] for e in read_recording(logs / "recording.jsonl")]
    assert [(r["nth"], r["model"], r["n_messages"], r["prompt_head"]) for r in recorded] == [
        (1, "claude-sonnet-4-5", 1, "say hi"),
        (2, "claude-sonnet-4-5", 1, "say hi"),
    ]
    meter = read_meter(logs)
    assert meter is not None and meter.exchanges == 2 and meter.tokens["input_tokens"] == 2000


def test_a_bad_forwarded_body_is_refused_by_the_gateway_once_the_upstream_refused_it(tmp_path: Path) -> None:
    secret = new_secret()
    with ScriptedServer(SCENARIO) as up, _gateway_server(tmp_path, up.base_url, secret, budget=None) as gw:
        # named session (header): forwarded unparsed; the upstream's 400 makes the gateway parse it
        status, data = _post_in_session(gw.port, secret, b'{"model": "claude-sonnet-4-5", "messages": [')
        assert status == 400 and b"not JSON" in data and b"flower-batch gateway" in data
        proxy = gw.responder.inner.inner  # type: ignore[attr-defined]
        assert isinstance(proxy, ProxyResponder) and proxy._pool._idle == []  # closed, not kept
        assert _wait(lambda: _open_connections(up) == 0)
        assert _post_in_session(gw.port, secret, _request(False).raw_body)[0] == 200


def test_the_model_is_read_off_the_head_of_a_body_only_when_it_is_the_first_key() -> None:
    from flower.scripted.request import leading_model

    assert leading_model(b'{"model":"claude-sonnet-4-5","messages":[]}') == "claude-sonnet-4-5"
    assert leading_model(b' {\n "model" : "m-1", "x": 1}') == "m-1"
    assert leading_model(b'{"messages":[{"model":"inner"}],"model":"outer"}') is None
    assert leading_model(b'{"model":"with\\"escape"}') is None  # not a plain string: parse instead
    assert leading_model(b"[]") is None
    req = ParsedRequest(
        method="POST",
        path="/v1/messages",
        prefix="",
        endpoint="messages",
        headers={},
        raw_body=b'{"messages":[],"model":"outer"}',
        unparsed=True,
    )
    assert req.model == "outer" and not req.unparsed  # parsed for it


# -- the body is forwarded as it arrives ------------------------------------------------------------


class _Listener:
    """A bare upstream: counts the bytes each connection sends it; answers when told to."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.received: list[bytes] = []
        self.closed = threading.Event()
        self.answer = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        conn.settimeout(10)
        with conn:
            while not self.answer.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    self.closed.set()
                    return
                self.received.append(data)
                if b"".join(self.received).endswith(b'"}]}'):
                    self.answer.wait(10)
            body = b'{"type":"message","role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":1}}'
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(body), body)
            )

    def body_bytes(self) -> int:
        return len(b"".join(self.received).partition(b"\r\n\r\n")[2])


def _half_sent(port: int, secret: str, body: bytes):  # type: ignore[no-untyped-def]
    import socket

    client = socket.create_connection(("127.0.0.1", port))
    head = (
        f"POST /j/job-a/v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"x-api-key: {job_token(secret, 'job-a')}\r\nx-claude-code-session-id: s\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    client.sendall(head + body[: len(body) // 2])
    return client


def test_the_body_goes_upstream_as_it_arrives(tmp_path: Path) -> None:
    secret = new_secret()
    body = json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x" * 400_000}],
        }
    ).encode()
    up = _Listener()
    with _gateway_server(tmp_path, up.url, secret, budget=None) as gw:
        client = _half_sent(gw.port, secret, body)
        # half the body sent by the job: the upstream has (about) that half already
        assert _wait(lambda: up.body_bytes() >= len(body) // 2 - 65536), up.body_bytes()
        client.sendall(body[len(body) // 2 :])
        assert _wait(lambda: up.body_bytes() == len(body))
        up.answer.set()
        client.settimeout(10)
        assert client.recv(100).startswith(b"HTTP/1.1 200")
        client.close()
    logged = list(
        __import__("flower.scripted", fromlist=["read_request_log"]).read_request_log(
            tmp_path / "job-a" / "logs" / "gateway.jsonl"
        )
    )
    assert [r["body_bytes"] for r in logged] == [len(body)] and logged[0]["body"] == json.loads(body)


def test_a_body_cut_short_closes_its_forwarded_copy(tmp_path: Path) -> None:
    secret = new_secret()
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 400_000}]}).encode()
    up = _Listener()
    with _gateway_server(tmp_path, up.url, secret, budget=None) as gw:
        client = _half_sent(gw.port, secret, body)
        assert _wait(lambda: up.body_bytes() > 0)
        client.close()  # the job went away mid-body
        assert up.closed.wait(10)  # the upstream is not left waiting for the rest
