"""The scripted server at the HTTP level, with a plain client: framing, errors, cuts, outages, log."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest

from flower.scripted import UNMATCHED_TEXT, ScriptedServer, read_request_log

HELLO = {"rules": [{"name": "hi", "reply": [{"text": "hello from the script"}]}]}


def body(text: str = "hi", *, stream: bool = True, **extra) -> dict:
    return {
        "model": "claude-test",
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


def post(
    srv: ScriptedServer, payload: dict, path: str = "/v1/messages?beta=true", headers: dict | None = None
):
    """POST and return (status, headers, raw body bytes). Raises on a dropped/cut connection."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        hdrs = {"content-type": "application/json", "x-api-key": "sk-secret-value", **(headers or {})}
        conn.request("POST", path, body=json.dumps(payload), headers=hdrs)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def sse_events(raw: bytes) -> list[tuple[str, dict]]:
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_text_stream_is_framed_like_the_api():
    with ScriptedServer(HELLO, keep_requests=True) as srv:
        status, headers, raw = post(srv, body())
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert headers["Transfer-Encoding"] == "chunked" and headers["request-id"].startswith("req_")
    events = sse_events(raw)
    assert [name for name, _ in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip
    assert all(data["type"] == name for name, data in events)
    start = events[0][1]["message"]
    assert start["id"].startswith("msg_") and start["model"] == "scripted-model" and start["content"] == []
    assert start["usage"]["input_tokens"] == 10 and start["stop_reason"] is None
    assert events[1][1]["content_block"] == {"type": "text", "text": ""}
    assert events[2][1]["delta"] == {"type": "text_delta", "text": "hello from the script"}
    assert events[4][1]["delta"]["stop_reason"] == "end_turn" and events[4][1]["usage"]["output_tokens"] == 5


def test_several_blocks_with_tool_uses_and_unique_ids():
    scn = {
        "rules": [
            {
                "reply": [
                    {"text": "two tools"},
                    {"tool_use": {"name": "Read", "input": {"file_path": "/x/a.txt"}}},
                    {"tool_use": {"name": "Bash", "input": {"command": "ls -l", "description": "list"}}},
                ]
            }
        ]
    }
    with ScriptedServer(scn, keep_requests=True) as srv:
        first = sse_events(post(srv, body())[2])
        second = sse_events(post(srv, body())[2])
    starts = [d["content_block"] for n, d in first if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use", "tool_use"]
    assert [d["index"] for n, d in first if n == "content_block_start"] == [0, 1, 2]
    deltas = [d["delta"] for n, d in first if n == "content_block_delta"]
    assert deltas[1] == {"type": "input_json_delta", "partial_json": json.dumps({"file_path": "/x/a.txt"})}
    assert json.loads(deltas[2]["partial_json"]) == {"command": "ls -l", "description": "list"}
    assert first[-2][1]["delta"]["stop_reason"] == "tool_use"
    again = [d["content_block"] for n, d in second if n == "content_block_start"]
    ids = [b["id"] for b in starts[1:] + again[1:]]
    assert all(i.startswith("toolu_") for i in ids) and len(set(ids)) == 4
    assert first[0][1]["message"]["id"] != second[0][1]["message"]["id"]


def test_non_stream_request_gets_a_json_message():
    with ScriptedServer(HELLO, keep_requests=True) as srv:
        status, headers, raw = post(srv, body(stream=False))
    msg = json.loads(raw)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert msg["type"] == "message" and msg["role"] == "assistant" and msg["id"].startswith("msg_")
    assert msg["content"] == [{"type": "text", "text": "hello from the script"}]
    assert msg["stop_reason"] == "end_turn" and msg["usage"]["output_tokens"] == 5


def test_count_tokens_hello_prefix_and_unknown_paths():
    with ScriptedServer(HELLO, keep_requests=True) as srv:
        status, _, raw = post(srv, body("x" * 4000), path="/j/job1/v1/messages/count_tokens?beta=true")
        assert status == 200 and json.loads(raw)["input_tokens"] > 900
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        conn.request("HEAD", "/j/job1/api/hello")
        assert conn.getresponse().status == 200
        conn.close()
        status, _, raw = post(srv, body(), path="/j/job1/v1/models")
        assert status == 404 and json.loads(raw)["error"]["type"] == "not_found_error"
        status, _, _ = post(srv, body(), path="/tenant/a/v1/messages")
        assert status == 200
        reqs = srv.requests
    assert [(r["prefix"], r["endpoint"], r["rule"]) for r in reqs] == [
        ("/j/job1", "count_tokens", "count_tokens"),
        ("/j/job1", "hello", "hello"),
        ("/j/job1", None, "unknown-endpoint"),
        ("/tenant/a", "messages", "hi"),
    ]


def test_bad_json_body_is_a_400():
    with ScriptedServer(HELLO, keep_requests=True) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        conn.request("POST", "/v1/messages", body=b"{not json", headers={"content-type": "application/json"})
        resp = conn.getresponse()
        err = json.loads(resp.read())
        conn.close()
    assert resp.status == 400 and err["type"] == "error" and err["error"]["type"] == "invalid_request_error"


def test_a_body_over_the_apis_limit_is_refused_unread():
    from flower.scripted.server import MAX_BODY_BYTES

    with ScriptedServer(HELLO, keep_requests=True) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            # Says 1 GB, sends 1 KB: the answer comes at once, nothing waits for (or holds) the rest.
            sock.sendall(
                b"POST /v1/messages HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                b"Content-Length: 1000000000\r\n\r\n" + b"x" * 1024
            )
            answer = b""
            while b"request_too_large" not in answer and (piece := sock.recv(65536)):
                answer += piece
        assert answer.startswith(b"HTTP/1.1 413") and b"request_too_large" in answer
    assert MAX_BODY_BYTES == 32 * 1000 * 1000


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, "authentication_error"), (429, "rate_limit_error"), (500, "api_error"), (529, "overloaded_error")],
)
def test_errors_carry_the_anthropic_error_body(status, kind):
    scn = {"rules": [{"error": status}]}
    with ScriptedServer(scn, keep_requests=True) as srv:
        got, headers, raw = post(srv, body())
        assert srv.requests[0]["status"] == status and srv.requests[0]["outcome"] == "response"
    err = json.loads(raw)
    assert got == status and err["type"] == "error" and err["error"]["type"] == kind
    assert "[scripted model]" in err["error"]["message"] and headers["request-id"].startswith("req_")


def test_error_message_can_be_set():
    scn = {"rules": [{"error": 429, "error_message": "slow down, scripted"}]}
    with ScriptedServer(scn, keep_requests=True) as srv:
        _, _, raw = post(srv, body())
    assert json.loads(raw)["error"]["message"] == "slow down, scripted"


def read_until_dropped(srv: ScriptedServer, payload: dict) -> tuple[bytes, Exception | None]:
    """Read a response chunk by chunk; return what arrived and the error that ended it (None if whole)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    got = b""
    try:
        conn.request(
            "POST", "/v1/messages", body=json.dumps(payload), headers={"content-type": "application/json"}
        )
        resp = conn.getresponse()
        while chunk := resp.read1(65536):
            got += chunk
        return got, None
    except (http.client.HTTPException, OSError) as err:
        return got, err
    finally:
        conn.close()


def test_cut_after_sends_n_events_then_resets():
    scn = {"rules": [{"reply": [{"text": "never finished"}], "cut_after": 2}]}
    with ScriptedServer(scn, keep_requests=True) as srv:
        got, err = read_until_dropped(srv, body())
        assert srv.requests[0]["outcome"] == "cut"
    assert err is not None  # the chunked body never ended
    names = [
        frame.split("\n")[0] for frame in got.decode(errors="replace").split("\n\n") if "event:" in frame
    ]
    assert names == ["event: message_start", "event: content_block_start"]


def test_cut_on_a_non_stream_request_drops_without_answer():
    scn = {"rules": [{"reply": [{"text": "x"}], "cut_after": 3}]}
    with ScriptedServer(scn, keep_requests=True) as srv:
        got, err = read_until_dropped(srv, body(stream=False))
        assert srv.requests[0]["outcome"] == "dropped" and srv.requests[0]["status"] == 0
    assert got == b"" and err is not None


def test_delays_before_and_between_events():
    scn = {"rules": [{"reply": [{"text": "slow"}], "delay_s": 0.3, "chunk_delay_s": 0.05}]}
    with ScriptedServer(scn, keep_requests=True) as srv:
        t0 = time.monotonic()
        status, _, raw = post(srv, body())
        took = time.monotonic() - t0
    assert status == 200 and len(sse_events(raw)) == 6
    assert took >= 0.3 + 5 * 0.05


def connect_refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


def closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""  # FIN (the server shut it down)
    except ConnectionResetError:  # RST (it was still waiting to be accepted)
        return True


def test_outage_refuses_connections_then_listens_again_on_the_same_port():
    scn = {
        "rules": [{"name": "down", "outage_s": 0.8, "times": 1}, {"name": "up", "reply": [{"text": "back"}]}]
    }
    with ScriptedServer(scn, keep_requests=True) as srv:
        port = srv.port
        idle = socket.create_connection(("127.0.0.1", port))  # a kept-alive connection dies too
        got, err = read_until_dropped(srv, body())
        t_drop = time.monotonic()
        assert got == b"" and err is not None
        assert connect_refused(port)
        assert closed_by_peer(idle)
        idle.close()
        while time.monotonic() - t_drop < 3 and connect_refused(port):
            time.sleep(0.05)
        back_after = time.monotonic() - t_drop
        status, _, raw = post(srv, body())
        assert srv.port == port
        assert [r["rule"] for r in srv.requests] == ["down", "up"]
        assert srv.requests[0]["outcome"] == "outage"
    assert 0.5 < back_after < 2.0
    assert status == 200 and "back" in raw.decode()


def test_stop_ends_listening():
    srv = ScriptedServer(HELLO, keep_requests=True).start()
    port = srv.port
    assert post(srv, body())[0] == 200
    srv.stop()
    assert connect_refused(port)


def test_unmatched_requests_answer_and_are_logged():
    scn = {"rules": [{"last_user_contains": "only this", "reply": [{"text": "matched"}]}]}
    with ScriptedServer(scn, keep_requests=True) as srv:
        _, _, raw = post(srv, body("something else"))
        assert [r["rule"] for r in srv.unmatched] == ["unmatched"]
    deltas = [d["delta"]["text"] for n, d in sse_events(raw) if n == "content_block_delta"]
    assert deltas == [UNMATCHED_TEXT] and "[scripted model]" in UNMATCHED_TEXT


def test_request_log_in_memory_and_jsonl_without_secrets(tmp_path):
    log_path = tmp_path / "logs" / "model.jsonl"
    with ScriptedServer(HELLO, log_path=log_path, keep_requests=True) as srv:
        post(
            srv,
            body("first"),
            headers={"x-claude-code-session-id": "s-1", "authorization": "Bearer tok-secret"},
        )
        post(srv, body("second", stream=False), headers={"x-claude-code-session-id": "s-1"})
        post(srv, body("other"), path="/j/7/v1/messages", headers={"x-claude-code-session-id": "s-2"})
        mem = srv.requests
    text = log_path.read_text()
    assert "sk-secret-value" not in text and "tok-secret" not in text
    disk = list(read_request_log(log_path))
    assert disk == mem
    first = mem[0]
    assert first["method"] == "POST" and first["path"] == "/v1/messages?beta=true" and first["prefix"] == ""
    assert first["session"] == "s-1" and first["model"] == "claude-test" and first["stream"] is True
    assert first["n_messages"] == 1 and first["body"]["messages"][0]["content"] == "first"
    assert first["rule"] == "hi" and first["status"] == 200 and isinstance(first["time"], float)
    assert first["headers"]["x-api-key"] == "[redacted]" and first["headers"]["authorization"] == "[redacted]"
    assert [(r["session"], r["nth"], r["stream"], r["prefix"]) for r in mem] == [
        ("s-1", 1, True, ""),
        ("s-1", 2, False, ""),
        ("s-2", 1, True, "/j/7"),
    ]


def test_session_falls_back_to_metadata_user_id():
    with ScriptedServer(HELLO, keep_requests=True) as srv:
        post(srv, body(metadata={"user_id": json.dumps({"device_id": "d", "session_id": "from-meta"})}))
        assert srv.requests[0]["session"] == "from-meta"


def test_env_points_the_cli_at_the_server(tmp_path):
    with ScriptedServer(HELLO, keep_requests=True) as srv:
        env = srv.env(tmp_path / "cfg", prefix="/j/a")
        assert env == {
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{srv.port}/j/a",
            "ANTHROPIC_API_KEY": "scripted-model",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CONFIG_DIR": str((tmp_path / "cfg").resolve()),
            "IS_SANDBOX": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        assert (tmp_path / "cfg").is_dir()
        assert "CLAUDE_CODE_MAX_RETRIES" not in srv.env(tmp_path / "cfg", max_retries=None)


def test_a_custom_responder_plugs_into_the_core():
    """The Responder contract (plan.py): a generator of events, as a proxy would stream them."""
    from flower.scripted import MessagesServer, ParsedRequest, ResponsePlan, build_message, message_events

    class Echo:
        def respond(self, request: ParsedRequest) -> ResponsePlan:
            msg = build_message(
                [{"type": "text", "text": f"echo: {request.last_user_text}"}],
                model="echo",
                usage={"input_tokens": 1},
            )
            if not request.stream:
                return ResponsePlan.json(msg, rule="echo")
            return ResponsePlan.sse(
                (e for e in message_events(msg)), rule="echo", headers={"x-upstream": "none"}
            )

    with MessagesServer(Echo(), keep_requests=True) as srv:
        status, headers, raw = post(srv, body("ping"))
        _, _, plain = post(srv, body("pong", stream=False))
        assert [r["rule"] for r in srv.requests] == ["echo", "echo"]
    assert status == 200 and headers["x-upstream"] == "none"
    assert [d["delta"]["text"] for n, d in sse_events(raw) if n == "content_block_delta"] == ["echo: ping"]
    assert json.loads(plain)["content"][0]["text"] == "echo: pong"


def test_a_failing_responder_answers_500_and_keeps_serving():
    from flower.scripted import MessagesServer

    class Broken:
        def respond(self, request):
            raise RuntimeError("bug in responder")

    with MessagesServer(Broken(), keep_requests=True) as srv:
        status, _, raw = post(srv, body())
        again, _, _ = post(srv, body())
    assert status == again == 500 and "bug in responder" in json.loads(raw)["error"]["message"]


def test_a_log_writer_that_falls_behind_holds_back_the_next_answer_not_more_bodies(tmp_path, monkeypatch):
    """Memory stays bounded with a slow disk: while the writer is stuck, at most LOG_QUEUE
    requests wait for it (each holding its body) besides the one being written; the next request
    is not answered until the writer catches up (bench/soak_gateway.py measures what this buys)."""
    import threading

    from flower.scripted import server as server_module

    stuck, entered = threading.Event(), threading.Event()
    write_one = server_module.MessagesServer._write_one

    def slow_write(self, *args, **kwargs):
        entered.set()
        stuck.wait(30)
        write_one(self, *args, **kwargs)

    monkeypatch.setattr(server_module.MessagesServer, "_write_one", slow_write)
    answered: list[int] = []

    def client(n: int) -> None:
        for i in range(n):
            post(srv, body(f"request {i}"))
            answered.append(i)

    with ScriptedServer(HELLO, log_path=tmp_path / "log.jsonl") as srv:
        worker = threading.Thread(target=client, args=(server_module.LOG_QUEUE + 3,), daemon=True)
        worker.start()
        assert entered.wait(10)
        deadline = time.monotonic() + 10
        while len(answered) < server_module.LOG_QUEUE + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)  # time enough for one more answer, were the backlog unbounded
        assert len(answered) == server_module.LOG_QUEUE + 1, answered
        stuck.set()
        worker.join(10)
        assert len(answered) == server_module.LOG_QUEUE + 3
        assert srv.flush_log()
    assert len(list(read_request_log(tmp_path / "log.jsonl"))) == server_module.LOG_QUEUE + 3
