"""The HTTP core: a threaded server speaking enough of the Anthropic Messages API for the CLI.

`MessagesServer(responder)` parses requests, asks the responder for a ResponsePlan (plan.py),
logs the request and carries the plan out: JSON or chunked SSE, delays, cuts, dropped
connections and outages (the listening socket is really closed, then re-bound on the same port).
`ScriptedServer(scenario)` is a MessagesServer with a ScriptedResponder.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import struct
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .log import RequestLog, plan_facts, record_of
from .plan import UNMATCHED, Responder, ResponsePlan, new_request_id
from .render import encode_event
from .request import ParsedRequest, credential_digest, parse_body, redact_headers, split_path
from .responder import ScriptedResponder
from .scenario import Scenario

log = logging.getLogger(__name__)

API_KEY = "scripted-model"  # what the CLI is given; any value works, this one is recognisable
# Requests waiting for the log's writer, at most. Each holds its body parsed (about 3x its size);
# once the answer went out the client sends the next one while the writer still works, so every
# one more waiting was one more body at the peak: 4 gave 117-124 MiB at 4 MB bodies, 1 gives
# 62-82 MiB (bench/soak_gateway.py, long run). A writer that falls behind slows the handler.
LOG_QUEUE = 1
# The Messages API's own request limit (32 MB): no real request is larger, and a body is held
# whole while it is parsed, so a bigger one is refused unread (a job must not be able to make
# the gateway every job of its batch shares run out of memory).
MAX_BODY_BYTES = 32 * 1000 * 1000
_LOG_AFTER_S = 0.05  # a request still being answered after this is logged anyway
_REBIND_TRIES = 100  # x 50 ms: how long to keep trying to re-bind the port after an outage


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() resets open connections instead of waiting for them
    request_queue_size = 64
    core: MessagesServer


def _reset(sock: socket.socket, *, unblock: bool = False) -> None:
    """Make the socket's close send RST (the peer sees ECONNRESET).

    `unblock` also shuts it down, waking the thread blocked reading it (used from other threads).
    """
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if unblock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked SSE, like the real API
    server_version = "flower-scripted"
    sys_version = ""
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Answers go out in small writes (SSE chunks): without this, Nagle's algorithm and the
        # client's delayed ACK can hold the last of them back ~40 ms.
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.core = self.server.core
        self.core._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.core._forget(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # the request log is the record
        pass

    def do_POST(self) -> None:
        self._serve()

    do_GET = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_POST

    # -- one request ---------------------------------------------------------------------
    def _serve(self) -> None:
        core = self.core
        if core.in_outage():  # a kept-alive connection that slipped through: the server is "down"
            self._abort()
            return
        received = time.time()
        prefix, endpoint, _ = split_path(self.path)
        req = ParsedRequest(
            method=self.command,
            path=self.path,
            prefix=prefix,
            endpoint=endpoint,
            headers=redact_headers(dict(self.headers.items())),
            credential_sha256=credential_digest(dict(self.headers.items())),
            received_at=received,
        )
        if int(self.headers.get("Content-Length") or 0) > MAX_BODY_BYTES:
            self._refuse_unread(req)
            return
        try:
            self._read_and_begin(req)
        except (OSError, ValueError):
            _close_begun(req)
            self._abort()
            return
        if req.unparsed and core.log.keep:
            req.parse()  # a test reads the request, body and all, as soon as it has the answer
        # Unparsed: begin() forwarded the raw bytes, and the parse of a long history (several ms
        # a MB) waits for the log's writer, after the answer; the responder parses first if it
        # needs to (plan.py). Else the body is parsed here, and a bad one answered 400.
        problem = None if req.unparsed else parse_body(req)
        if endpoint == "messages" and not problem:
            session = req.session  # parses now a request that names its session only in its body
            problem = req.body_problem
            if not problem:
                req.nth = core._next_nth(session)
        plan = self._plan_for(req, problem)
        _close_begun(req)
        # In memory (keep_requests) before answering: a test sees the request once it has the
        # answer. On disk by the log's writer thread once the answer went out, or after
        # _LOG_AFTER_S if it is slow (a stalled request is on disk while it waits): serialising
        # and hashing a long history (logformat) is not the client's wait. stop() returns once
        # every line is written.
        facts = plan_facts(plan)
        record = record_of(req, facts) if core.log.keep else None
        if record is not None:
            core.log.remember(record)
        answered = threading.Event()
        core._log_later(req, facts, answered, plan.after, record)
        del req  # a long answer must not hold the request's body (the log's writer has it)
        try:
            self._carry_out(plan)
        finally:
            answered.set()

    def _refuse_unread(self, req: ParsedRequest) -> None:
        """413, logged, the body never read (so the connection cannot be used again)."""
        plan = ResponsePlan.error(
            413,
            f"request body over {MAX_BODY_BYTES} bytes (the Messages API's limit)",
            rule="server:too-large",
        )
        self.close_connection = True
        answered = threading.Event()
        self.core._log_later(req, plan_facts(plan), answered, plan.after, None)
        try:
            self._carry_out(plan)
        finally:
            answered.set()

    def _read_and_begin(self, req: ParsedRequest) -> None:
        """Read the body into `req.raw_body` and call the responder's begin(), if it has one
        (plan.py). A body of known length is handed to begin() as it arrives (a proxy forwards
        each piece at once); whatever begin() did not take is read after it."""
        begin = getattr(self.core.responder, "begin", None)
        if begin is None or req.method != "POST" or req.endpoint not in ("messages", "count_tokens"):
            req.raw_body = self._read_body()
            return
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked" or length <= 0:
            req.raw_body = self._read_body()
            self._begin(begin, req, None)
            return
        reader = _BodyReader(self.rfile, length)
        self._begin(begin, req, reader)
        req.raw_body = reader.rest()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size + sum(map(len, parts)) > MAX_BODY_BYTES:
                    raise ValueError(f"a chunked body over {MAX_BODY_BYTES} bytes")  # the connection is cut
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    @staticmethod
    def _begin(begin: Callable[..., None], req: ParsedRequest, body: _BodyReader | None) -> None:
        try:
            begin(req, body)
        except Exception:  # respond() still runs and answers (it does the work itself)
            log.exception("responder's begin failed on %s", req.path)

    def _plan_for(self, req: ParsedRequest, problem: str | None) -> ResponsePlan:
        if req.endpoint == "hello":
            return ResponsePlan.json(None, rule="hello")
        if req.endpoint is None:
            return ResponsePlan.error(
                404, f"[scripted model] no endpoint at {req.path}", rule="unknown-endpoint"
            )
        if req.method != "POST":
            return ResponsePlan.error(
                404, f"[scripted model] {req.endpoint} takes POST", rule="unknown-endpoint"
            )
        if problem:
            return ResponsePlan.error(400, f"[scripted model] {problem}", rule="bad-request")
        try:
            return self.core.responder.respond(req)
        except Exception as err:  # a responder bug must answer 500, not kill the connection thread
            log.exception("responder failed on %s", req.path)
            return ResponsePlan.error(
                500, f"[scripted model] responder failed: {err}", rule="responder-error"
            )

    # -- carrying out a plan ----------------------------------------------------------------
    def _carry_out(self, plan: ResponsePlan) -> None:
        if plan.delay_s > 0:
            time.sleep(plan.delay_s)
        if plan.outage_s is not None:
            self.core.begin_outage(plan.outage_s)
            self._abort()
            return
        if plan.events is None and plan.cut_after is not None:
            self._abort()
            return
        try:
            if plan.events is not None:
                self._send_events(plan)
            else:
                self._send_json(plan)
        except OSError:  # the client went away (or an outage reset us): nothing left to say
            self.close_connection = True

    def _start(self, status: int, content_type: str | None, headers: dict[str, str]) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("request-id", new_request_id())
        for name, value in headers.items():
            self.send_header(name, value)

    def _send_json(self, plan: ResponsePlan) -> None:
        data = b"" if plan.json_body is None else json.dumps(plan.json_body, ensure_ascii=False).encode()
        self._start(plan.status, "application/json" if data else None, plan.headers)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_events(self, plan: ResponsePlan) -> None:
        self._start(plan.status or 200, "text/event-stream; charset=utf-8", plan.headers)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")  # so a cut is a truncated body, not a normal end
        self.end_headers()
        assert plan.events is not None
        sent = 0
        for event in plan.events:
            if plan.cut_after is not None and sent >= plan.cut_after:
                break
            if sent and plan.chunk_delay_s > 0:
                time.sleep(plan.chunk_delay_s)
            data = encode_event(event)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            sent += 1
        if plan.cut_after is not None:
            self._abort()
            return
        self.wfile.write(b"0\r\n\r\n")

    def _abort(self) -> None:
        """Drop the connection now with a reset, as a crashed server or a broken network would."""
        self.close_connection = True
        _reset(self.connection)
        try:
            self.connection.close()
            self.rfile.close()  # releases the last reference: the socket really closes here
        except OSError:
            pass


class _BodyReader:
    """A request body of known length, as an iterable of the pieces read off the socket (each
    kept); `rest()` reads what the iteration did not and returns the whole body. A body cut
    short raises ConnectionError (a forwarded copy must not wait for bytes that never come)."""

    PIECE = 256 * 1024

    def __init__(self, rfile: Any, length: int) -> None:
        self._rfile = rfile
        self._left = length
        self._parts: list[bytes] = []

    def __iter__(self) -> Iterator[bytes]:
        while self._left > 0:
            piece = self._rfile.read1(min(self._left, self.PIECE))
            if not piece:
                raise ConnectionError("the client closed its connection in the middle of the body")
            self._left -= len(piece)
            self._parts.append(piece)
            yield piece

    def rest(self) -> bytes:
        for _ in self:
            pass
        return b"".join(self._parts)


def _close_begun(req: ParsedRequest) -> None:
    """Close what a responder's begin() started and respond() did not take over."""
    for left in req.begun.values():
        close = getattr(left, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                log.exception("could not close what begin() left")
    req.begun.clear()


def _run_after(after: list[Callable[[], None]]) -> None:
    for work in after:
        try:
            work()
        except Exception:  # one failing bookkeeping step must not skip the others, or the log
            log.exception("after-answer work failed")


# A request for the log's writer: the request, its plan's facts, answered, after-work, its record.
_LogItem = tuple[
    ParsedRequest, dict[str, Any], threading.Event, list[Callable[[], None]], dict[str, Any] | None
]


class _Pending:
    """A count of work in flight, and a way to wait until there is none."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = threading.Condition()

    def acquire(self) -> None:
        with self._idle:
            self._count += 1

    def release(self) -> None:
        with self._idle:
            self._count -= 1
            if self._count == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._count == 0, timeout=timeout)


class MessagesServer:
    """Threaded Messages-API server around a Responder. Use as a context manager or start()/stop()."""

    def __init__(
        self,
        responder: Responder,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | Path | None = None,
        *,
        keep_requests: bool = False,
    ):
        self.responder = responder
        self.host = host
        self.port = port
        # In memory only when asked (tests read `requests`): a long-lived server must not grow.
        self.log = RequestLog(log_path, keep=keep_requests)
        self._httpd: _HTTPServer | None = None
        self._state = threading.Lock()  # guards binding, outage and stop
        self._started = False
        self._stopped = False
        self._outage_until = 0.0
        self._timer: threading.Timer | None = None
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._nth: dict[str, int] = defaultdict(int)
        self._nth_lock = threading.Lock()
        self._writes = _Pending()  # log lines queued, not yet written
        self._log_queue: queue.Queue[_LogItem | None] = queue.Queue(maxsize=LOG_QUEUE)
        self._log_thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> MessagesServer:
        with self._state:
            if self._started:
                raise RuntimeError("server already started")
            self._bind()
            self._started = True
        self._log_thread = threading.Thread(
            target=self._write_log, name=f"scripted-log-{self.port}", daemon=True
        )
        self._log_thread.start()
        return self

    def stop(self) -> None:
        with self._state:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()
            if self._httpd is not None:
                self._unbind()
        self._reset_connections()
        self.flush_log()  # the log is complete once stop() returns
        if self._log_thread is not None:
            self._log_queue.put(None)
            self._log_thread = None

    def __enter__(self) -> MessagesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _bind(self) -> None:
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.core = self
        self.port = httpd.server_address[1]
        # A short poll interval makes an outage start (shutdown of the accept loop) within ~50 ms.
        threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-accept-{self.port}",
            daemon=True,
        ).start()
        self._httpd = httpd

    def _unbind(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    # -- outages --------------------------------------------------------------------------
    def in_outage(self) -> bool:
        return self._outage_until > time.monotonic()

    def begin_outage(self, seconds: float) -> None:
        """Refuse connections for `seconds` from now: close the listener and reset open connections."""
        with self._state:
            if self._stopped or not self._started:
                return
            self._outage_until = max(self._outage_until, time.monotonic() + seconds)
            if self._httpd is not None:
                self._unbind()
            self._schedule_rebind(self._outage_until - time.monotonic())
        self._reset_connections()

    def _schedule_rebind(self, after: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(max(0.0, after), self._end_outage)
        self._timer.daemon = True
        self._timer.start()

    def _end_outage(self, tries: int = 0) -> None:
        with self._state:
            if self._stopped or self._httpd is not None:
                return
            remaining = self._outage_until - time.monotonic()
            if remaining > 0:  # the outage was extended meanwhile
                self._schedule_rebind(remaining)
                return
            try:
                self._bind()
            except OSError as err:
                if tries >= _REBIND_TRIES:
                    log.error(
                        "scripted server could not listen on port %s again after the outage: %s",
                        self.port,
                        err,
                    )
                    return
                self._timer = threading.Timer(0.05, self._end_outage, kwargs={"tries": tries + 1})
                self._timer.daemon = True
                self._timer.start()

    # -- connections and counters -------------------------------------------------------------
    def _track(self, sock: socket.socket) -> None:
        with self._conns_lock:
            self._conns.add(sock)

    def _forget(self, sock: socket.socket) -> None:
        with self._conns_lock:
            self._conns.discard(sock)

    def _reset_connections(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for sock in conns:
            _reset(sock, unblock=True)

    def flush_log(self, timeout: float = 10.0) -> bool:
        """Wait until every request answered so far is in the log file (the writer thread writes
        each line just after its answer); False if that took longer than `timeout`."""
        return self._writes.wait_idle(timeout=timeout)

    def _log_later(
        self,
        req: ParsedRequest,
        facts: dict[str, Any],
        answered: threading.Event,
        after: list[Callable[[], None]],
        record: dict[str, Any] | None = None,
    ) -> None:
        """Queue a request (with what its plan said, the plan's `after` work and its record if
        made already) for the log's writer (blocks when it is LOG_QUEUE behind: bounded)."""
        if self._log_thread is None:  # not started, or stopped: no writer, write it now
            self._write_one(req, facts, after, record)
            return
        self._writes.acquire()
        self._log_queue.put((req, facts, answered, after, record))

    def _write_one(
        self,
        req: ParsedRequest,
        facts: dict[str, Any],
        after: list[Callable[[], None]],
        record: dict[str, Any] | None,
    ) -> None:
        req.parse()  # if it waited for the answer (see _serve)
        _run_after(after)  # first: a recording or meter summary is smaller and read sooner
        # Every request, answered by the responder or not (GET, unknown endpoint, bad JSON), is
        # logged as sent by its owner: the responder's `log_owner(request)` if it has one (the
        # gateway's JobRouter: the job whose valid token it carries, else None), else None.
        owner_of = getattr(self.responder, "log_owner", None)
        self.log.add(
            record or record_of(req, facts),
            remembered=True,
            raw=req.raw_body,
            owner=owner_of(req) if owner_of is not None else None,
            credential_sha256=req.credential_sha256,
        )

    def _write_log(self) -> None:
        while (item := self._log_queue.get()) is not None:
            req, facts, answered, after, record = item
            try:
                answered.wait(_LOG_AFTER_S)
                self._write_one(req, facts, after, record)
            except Exception:  # a full disk must not stop the server answering
                log.exception("could not write the request log")
            finally:
                del item, req, facts, after, record
                self._writes.release()

    def _next_nth(self, session: str) -> int:
        with self._nth_lock:
            self._nth[session] += 1
            return self._nth[session]

    # -- what clients and tests use --------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def env(self, config_dir: str | Path, *, prefix: str = "", max_retries: int | None = 0) -> dict[str, str]:
        """Environment for the CLI/SDK to use this server, fully offline. Creates `config_dir`.

        `prefix` (e.g. "/j/job1") is appended to the base URL; the CLI keeps it on every path.
        `max_retries=None` leaves the CLI's default retry count (10) in place.
        """
        config = Path(config_dir).resolve()
        config.mkdir(parents=True, exist_ok=True)
        env = {
            "ANTHROPIC_BASE_URL": self.base_url + prefix,
            "ANTHROPIC_API_KEY": API_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CONFIG_DIR": str(config),
            "IS_SANDBOX": "1",
        }
        if max_retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(max_retries)
        return env

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Snapshot of the request log (dicts, see log.make_record), oldest first.
        Only for a server made with keep_requests=True; else RuntimeError."""
        return self.log.snapshot()

    @property
    def unmatched(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["rule"] == UNMATCHED]


class ScriptedServer(MessagesServer):
    """The offline model: a MessagesServer answering from a Scenario (object, file path or dict)."""

    def __init__(
        self,
        scenario: Scenario | str | Path | dict[str, Any],
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | Path | None = None,
        *,
        keep_requests: bool = False,
    ):
        self.scenario = Scenario.coerce(scenario)
        super().__init__(
            ScriptedResponder(self.scenario),
            host=host,
            port=port,
            log_path=log_path,
            keep_requests=keep_requests,
        )

    def __enter__(self) -> ScriptedServer:
        self.start()
        return self
