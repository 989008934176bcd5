"""An upstream that checks the credential headers it receives, as an Anthropic-compatible API or
a LiteLLM-style gateway would, then relays the request to the tests' scripted "real API".

    gateway (proxy mode) -> HeaderCheckingUpstream -> MessagesServer(Counting)

A request with the wrong credential header gets `401 authentication_error` and goes no
further. Every request's credential headers are noted (raw values: this is the test's own
server, the values are the test's fake secrets)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CREDENTIAL_HEADERS = ("x-api-key", "authorization")


class HeaderCheckingUpstream:
    def __init__(self, inner_port: int, expect: Mapping[str, str], host: str = "127.0.0.1") -> None:
        """expect: the credential headers every request must carry, exactly (lower-case names);
        any other credential header is refused too."""
        self.expect = {k.lower(): v for k, v in expect.items()}
        self.inner_port = inner_port
        self.seen: list[dict[str, str]] = []  # the credential headers of each request
        self.refused = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> HeaderCheckingUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def problem(self, headers: Mapping[str, str]) -> str | None:
        got = {k.lower(): v for k, v in headers.items() if k.lower() in CREDENTIAL_HEADERS}
        with self._lock:
            self.seen.append(got)
        if got != self.expect:
            return f"expected credential headers {sorted(self.expect)}, got {sorted(got)} (or wrong values)"
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body (an SSE stream too) ends when the connection closes

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                problem = outer.problem(dict(self.headers.items()))
                if problem:
                    with outer._lock:
                        outer.refused += 1
                    data = json.dumps(
                        {"type": "error", "error": {"type": "authentication_error", "message": problem}}
                    )
                    self.send_response(401)
                    self.send_header("content-type", "application/json")
                    self.send_header("x-should-retry", "false")
                    self.end_headers()
                    self.wfile.write(data.encode())
                    return
                conn = http.client.HTTPConnection("127.0.0.1", outer.inner_port, timeout=60)
                passed = {
                    k: v for k, v in self.headers.items() if k.lower() not in (*CREDENTIAL_HEADERS, "host")
                }
                conn.request("POST", self.path, body=body, headers={**passed, "x-api-key": "inner"})
                resp = conn.getresponse()
                self.send_response(resp.status)
                for name, value in resp.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.end_headers()
                while chunk := resp.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                conn.close()

        return Handler
