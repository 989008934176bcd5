"""Proxy mode (`anthropic`): forward each job's request to an upstream Messages API with the
host's credential, and pass the answer back as it arrives.

The credential reaches the gateway as a secret file it reads at start, into the entry's copy of
its environment, never os.environ (`FB_UPSTREAM_KEY`, put on the upstream request's `x-api-key`,
or `FB_UPSTREAM_TOKEN`, sent as `Authorization: Bearer`; see upstream_auth.py); it is never
logged, recorded or written anywhere. The job's
own credential (its per-job token) never goes upstream.

Streams are relayed event by event: each SSE event is parsed off the upstream socket and
yielded to the core, which writes it to the job at once, so the tap meters it as it flows.
An upstream that breaks mid-stream makes the job's stream break too (the CLI then retries, as
it would against the real API); an unreachable upstream is a 502 `api_error` (retried).
"""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from flower.scripted import ParsedRequest, ResponsePlan, SSEEvent
from flower_batch.errors import UpstreamError
from flower_batch.gateway.recording import KEPT_RESPONSE_HEADERS
from flower_batch.gateway.server.upstream_pool import ConnectionPool
from flower_batch.gateway.upstream_auth import GATEWAY_KEY_ENV as KEY_ENV
from flower_batch.gateway.upstream_auth import UpstreamAuth, upstream_problem

# Never forwarded: hop-by-hop headers, the job's credentials, and what the proxy sets itself.
_DROP = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "upgrade",
        "expect",
        "proxy-connection",
        "proxy-authorization",
        "x-api-key",
        "authorization",
        "cookie",
        "accept-encoding",
    }
)


class Upstream:
    """Where proxy mode sends requests: `scheme://host[:port][/base]`."""

    def __init__(self, url: str, *, connect_timeout: float = 30.0, read_timeout: float = 600.0) -> None:
        if problem := upstream_problem(url):
            raise UpstreamError(problem)
        parts = urlsplit(url.strip())
        assert parts.hostname  # checked above
        self.url = url.strip().rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout

    def connect(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.connect_timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)


def forward_headers(headers: dict[str, str], auth: UpstreamAuth, length: int) -> dict[str, str]:
    """The job's headers minus its credential and hop-by-hop ones, plus the host's credential."""
    out = {k: v for k, v in headers.items() if k.lower() not in _DROP}
    out.update({**auth.headers(), "accept-encoding": "identity", "content-length": str(length)})
    return out


def passed_back(headers: http.client.HTTPMessage) -> dict[str, str]:
    """Response headers the job should see (rate-limit hints, retry advice, upstream's request id)."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        low = name.lower()
        if low in KEPT_RESPONSE_HEADERS or low.startswith("anthropic-ratelimit"):
            out[low] = value
        elif low == "request-id":
            out["upstream-request-id"] = value
    return out


class ProxyResponder:
    """A Responder (flower.scripted.plan) that forwards to `upstream` with `auth`."""

    def __init__(self, upstream: Upstream, auth: UpstreamAuth) -> None:
        if not auth.secret:
            raise UpstreamError(f"proxy mode needs the upstream credential (e.g. {KEY_ENV})")
        self.upstream = upstream
        self._auth = auth
        self._pool = ConnectionPool(upstream.connect)

    def begin(self, request: ParsedRequest, body: Iterable[bytes] | None = None) -> None:
        """Forward the request as it is read — `body` the pieces of a body of known length as
        they arrive (else the whole `raw_body`) — so the upstream has the last byte about when
        the gateway does; respond() reads the answer. Once it went, the gateway's own parse of
        the body (for the recording and the log) waits until after the answer (`unparsed`): an
        upstream that answered 200 parsed it. respond() parses first only when the upstream
        refused, to answer a bad body as the core would."""
        if request.endpoint not in ("messages", "count_tokens"):
            return
        path = self.upstream.base_path + request.path[len(request.prefix) :]
        length = int(request.headers["content-length"]) if body is not None else len(request.raw_body)
        sent = forward_headers(request.headers, self._auth, length)
        try:
            conn, reused = self._pool.take()
        except (OSError, http.client.HTTPException):
            return  # unreachable: respond() tries again and answers 502
        try:
            # With content-length set, http.client sends an iterable's pieces as they come.
            conn.request(request.method, path, body=request.raw_body if body is None else body, headers=sent)
        except (OSError, http.client.HTTPException):
            conn.close()  # respond() sends it again, on a fresh connection, and reports a failure
            return
        request.begun[_STARTED_KEY] = _Started(conn, reused)
        request.unparsed = True

    def _answer_of(
        self, started: _Started
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse] | None:
        """The upstream's status line for a request begin() sent; None when that connection
        turned out closed by the upstream while idle (the request is then sent again)."""
        conn = started.conn
        try:
            if conn.sock is not None:
                conn.sock.settimeout(self.upstream.read_timeout)
            return conn, conn.getresponse()
        except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
            conn.close()
            if not started.reused:
                raise
            return None
        except BaseException:
            conn.close()
            raise

    def _send(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send the request on a kept-alive connection (a fresh one if the upstream had closed
        it while idle: nothing was answered on it, so sending again is safe) and read the status."""
        while True:
            conn, reused = self._pool.take()
            try:
                conn.request(method, path, body=body, headers=headers)
                if conn.sock is not None:
                    conn.sock.settimeout(self.upstream.read_timeout)
                return conn, conn.getresponse()
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                conn.close()
                if not reused:
                    raise
            except BaseException:
                conn.close()
                raise

    def __repr__(self) -> str:  # never show the credential
        return f"ProxyResponder({self.upstream.url}, {self._auth.scheme})"

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        if request.endpoint not in ("messages", "count_tokens"):
            return ResponsePlan.error(
                404, f"flower-batch gateway: no endpoint at {request.path}", rule="proxy:unknown"
            )
        path = self.upstream.base_path + request.path[len(request.prefix) :]
        sent = forward_headers(request.headers, self._auth, len(request.raw_body))
        try:
            started = request.begun.pop(_STARTED_KEY, None)
            answered = self._answer_of(started) if isinstance(started, _Started) else None
            conn, resp = answered or self._send(request.method, path, request.raw_body, sent)
        except (OSError, http.client.HTTPException) as err:
            return ResponsePlan.error(
                502,
                f"flower-batch gateway: the upstream {self.upstream.url} did not answer ({type(err).__name__}: {err})",
                rule="proxy:unreachable",
            )
        if resp.status != 200 and request.unparsed and (problem := request.parse()):
            conn.close()  # its answer is not read: the connection cannot serve again
            return ResponsePlan.error(400, f"flower-batch gateway: {problem}", rule="bad-request")
        back = passed_back(resp.headers)
        if resp.status == 200 and "text/event-stream" in (resp.getheader("content-type") or ""):
            return ResponsePlan.sse(_relay(self._pool, conn, resp), status=200, headers=back, rule="proxy")
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            return ResponsePlan.error(
                502, f"flower-batch gateway: the upstream's answer broke off ({err})", rule="proxy:broken"
            )
        self._pool.give_back(conn, resp)
        return ResponsePlan.json(
            _json_or_error(raw, resp.status), status=resp.status, headers=back, rule="proxy"
        )


_STARTED_KEY = "proxy:started"


class _Started:
    """An upstream request begin() sent, waiting for respond() to read its answer."""

    def __init__(self, conn: http.client.HTTPConnection, reused: bool) -> None:
        self.conn = conn
        self.reused = reused

    def close(self) -> None:  # the core's, when respond() never came for it (a bad body)
        self.conn.close()


def _json_or_error(raw: bytes, status: int) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()[:500]
        return {
            "type": "error",
            "error": {"type": "api_error", "message": f"upstream answered {status}: {text}"},
        }


def _relay(
    pool: ConnectionPool, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse
) -> Iterator[SSEEvent]:
    """Parse SSE events off the upstream response, one at a time (no buffering of the stream)."""
    name: str | None = None
    data: list[bytes] = []
    live: http.client.HTTPConnection | None = conn
    try:
        while True:
            line = resp.readline()
            if not line:
                pool.give_back(conn, resp)  # the upstream ended its stream: the connection may serve again
                live = None
                return
            line = line.rstrip(b"\r\n")
            if not line:
                if data:
                    yield _event(name, b"\n".join(data))
                name, data = None, []
            elif line.startswith(b":"):
                continue  # an SSE comment (keep-alive)
            else:
                field, _, value = line.partition(b":")
                value = value[1:] if value.startswith(b" ") else value
                if field == b"event":
                    name = value.decode("utf-8", "replace")
                elif field == b"data":
                    data.append(value)
    except (OSError, http.client.HTTPException) as err:
        raise ConnectionResetError(f"the upstream stream broke off: {err}") from err
    finally:
        if live is not None:  # stopped early or broken: this connection is not reusable
            live.close()


def _event(name: str | None, payload: bytes) -> SSEEvent:
    try:
        data = json.loads(payload)
    except ValueError:
        data = {"type": name or "message", "data": payload.decode("utf-8", "replace")}
    if not isinstance(data, dict):
        data = {"type": name or "message", "data": data}
    return (name or str(data.get("type") or "message"), data)
