"""A job's own unix socket into the gateway, and flower's relay to it (no Docker: both ends here).

The chain is the one a job on one machine uses: the CLI's HTTP to 127.0.0.1:<port> -> flower's
relay (model_socket.start_from_env) -> the job's socket -> the gateway's relay (JobSockets) ->
the gateway's HTTP port."""

from __future__ import annotations

import http.server
import os
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.runtime import model_socket
from flower.runtime.resilience import reachable
from flower_batch.gateway.job_sockets import CONTROL, SOCKET, JobSockets, ask, serving, socket_key


class Echo(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-length", str(len(body) + len(self.path)))
        self.end_headers()
        self.wfile.write(self.path.encode() + body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(port: int, path: str, body: bytes, timeout: float = 10) -> bytes:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return bytes(answer.read())


def test_a_request_goes_through_the_jobs_own_socket_and_survives_a_restarted_gateway(
    tmp_path: Path, http_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder name longer than a socket path may be: the host reaches control.sock anyway.
    root = tmp_path / ("x" * 120) / "sockets"
    gateway = JobSockets(root, http_port).start()
    key = ask(root, "open job-a")
    assert key == socket_key("job-a") and sorted(os.listdir(root / key)) == ["gateway.sock", "job"]
    port = free_port()
    env = {
        model_socket.SOCKET_ENV: str(root / key / SOCKET),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}/j/job-a",
    }
    relay = model_socket.start_from_env(env)
    assert relay is not None
    body = b"x" * 300_000  # more than one chunk each way
    assert post(port, "/j/job-a/v1/messages", body) == b"/j/job-a/v1/messages" + body

    via = env[model_socket.SOCKET_ENV]
    assert reachable("127.0.0.1", port, via=via)  # the probe asks the socket, not the relay's port
    gateway.stop()  # the gateway dies; its next life binds every job's socket again
    assert not reachable("127.0.0.1", port, via=via)
    gateway = JobSockets(root, http_port).start()
    assert reachable("127.0.0.1", port, via=via)
    assert post(port, "/j/job-a/v1/messages", b"again") == b"/j/job-a/v1/messages" + b"again"

    ask(root, "close job-a")
    assert not (root / key / SOCKET).exists() and not reachable("127.0.0.1", port, via=via)
    relay.close()
    gateway.stop()


def test_a_jobs_folder_holds_its_own_socket_only(tmp_path: Path, http_port: int) -> None:
    root = tmp_path / "sockets"
    gateway = JobSockets(root, http_port).start()
    a, b = ask(root, "open a"), ask(root, "open b")
    assert a != b and (root / CONTROL).exists()
    assert sorted(os.listdir(root / a)) == sorted(os.listdir(root / b)) == ["gateway.sock", "job"]
    assert oct((root / a / SOCKET).stat().st_mode & 0o777) == oct(0o600)
    with pytest.raises(OSError, match="say 'open <job>'"):
        ask(root, "list")
    gateway.stop()


def test_no_socket_no_relay_and_a_relay_only_on_loopback() -> None:
    assert model_socket.start_from_env({}) is None
    with pytest.raises(ValueError, match="127.0.0.1"):
        model_socket.start_from_env(
            {model_socket.SOCKET_ENV: "/x.sock", "ANTHROPIC_BASE_URL": "http://gateway:8080/j/a"}
        )


def test_a_request_made_before_the_gateway_binds_the_socket_waits_for_it(
    tmp_path: Path, http_port: int
) -> None:
    # run/wake start the job's container beside its gateway: the job's folder is made on the
    # host first, and the CLI's first request may come before the gateway serves.
    root = tmp_path / "sockets"
    folder = root / socket_key("job-b")
    folder.mkdir(parents=True)
    port = free_port()
    relay = model_socket.start_from_env(
        {
            model_socket.SOCKET_ENV: str(folder / SOCKET),
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}/j/job-b",
        }
    )
    assert relay is not None
    answers: list[bytes] = []
    # The client waits as long as the relay may wait for the bind (BIND_WAIT_S), as the CLI does:
    # a client of its own 10 s gave up first on a loaded machine (CI, busier run), while the relay
    # was still doing what it promises.
    bound = model_socket.BIND_WAIT_S
    asking = threading.Thread(
        target=lambda: answers.append(post(port, "/j/job-b/v1/messages", b"early", timeout=bound + 10))
    )
    asking.start()
    asking.join(timeout=0.5)
    assert asking.is_alive() and not answers  # waiting for the bind, not reset
    gateway = JobSockets(root, http_port).start()
    assert ask(root, "open job-b") == folder.name
    asking.join(timeout=bound + 10)  # until the answer came, or the client gave up
    assert answers == [b"/j/job-b/v1/messages" + b"early"]
    relay.close()
    gateway.stop()


def test_waiting_for_the_bind_is_bounded_and_a_refusing_socket_fails_at_once(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        model_socket.connect_when_bound(tmp_path / "never.sock", wait_s=0.1)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(tmp_path / "dead.sock"))
    dead.close()  # the file stays, nobody listens: a gateway that died
    with pytest.raises(ConnectionRefusedError):
        model_socket.connect_when_bound(tmp_path / "dead.sock", wait_s=30)


def test_serving_is_a_live_gateways_answer_and_not_a_dead_ones_socket_file(
    tmp_path: Path, http_port: int
) -> None:
    # The sidecar waits on this instead of reading the container's log for its ready line.
    root = tmp_path / "sockets"
    assert not serving(root)  # nothing bound yet
    gateway = JobSockets(root, http_port).start()
    assert serving(root)
    gateway.stop()
    assert (root / CONTROL).exists() and not serving(root)  # its file stays, nobody answers
    gateway = JobSockets(root, http_port).start()
    assert serving(root)
    gateway.stop()
