"""`flower-batch view`: a read-only web server over a home's batches, on 127.0.0.1 only.

    GET /                          the page (app.js and app.css beside it; no inline script)
    GET /api/batches               every batch: job count, status counts
    GET /api/jobs?batch=B&status=S&q=TEXT&offset=N&limit=N     one page of job rows
    GET /api/job?batch=B&job=J[&since=V]   record, steps with messages, log tail
    GET /api/diff?batch=B&job=J    the workspace against the task's source, capped

The page polls; `version` fields let it skip re-rendering (and `since` lets the server skip
reading sessions.db) when nothing changed on disk. Nothing here writes in the home. Requests
whose Host is not this server's loopback address are refused, so a web page elsewhere cannot
reach the viewer through DNS rebinding. Responses carry a Content-Security-Policy that forbids
inline script: model text that slipped past escaping still could not run.

Every file of a job is read through flower_batch/untrusted_files.py (trajectory.read_in): a symlink a
job made is never followed, only regular files are opened, and each read is capped.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from flower.catalogue.names import SESSIONS_DB
from flower_batch.jobmodel.record import RECORD_NAME, JobRecord

from ..errors import FlowerBatchError, RecordError
from ..layout import Home, JobDir
from ..transcripts.steps import job_trajectory, read_in
from ..untrusted_files import read_tail
from ..workspace_diff import diff
from .index import RECORD_BYTES, RecordIndex, select
from .page import APP_CSS, APP_JS, PAGE_HTML

HOST = "127.0.0.1"
LOG_TAIL = 4000
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class ViewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, home: Home, port: int = 0) -> None:
        self.home = home
        self.index = RecordIndex(home.root)
        super().__init__((HOST, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def warm_up(self) -> None:
        """Read every batch's records in the background, so the first page finds them indexed."""
        threading.Thread(target=self.index.batches, name="flower-batch-view-index", daemon=True).start()

    def start_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="flower-batch-view", daemon=True)
        thread.start()
        return thread


class BadRequest(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — the stdlib's name
        pass  # a polling page would flood the terminal

    def do_GET(self) -> None:  # noqa: N802 — the stdlib's name
        if not self._host_ok():
            return self._send(HTTPStatus.FORBIDDEN, b"wrong Host header\n", "text/plain; charset=utf-8")
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        static = {
            "/": (PAGE_HTML, "text/html"),
            "/app.js": (APP_JS, "text/javascript"),
            "/app.css": (APP_CSS, "text/css"),
        }
        if url.path in static:
            body, kind = static[url.path]
            return self._send(HTTPStatus.OK, body.encode("utf-8"), f"{kind}; charset=utf-8")
        api = {
            "/api/batches": self._batches,
            "/api/jobs": self._jobs,
            "/api/job": self._job,
            "/api/diff": self._diff,
        }
        handler = api.get(url.path)
        if handler is None:
            return self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page {url.path}"})
        try:
            return self._json(HTTPStatus.OK, handler(query))
        except (BadRequest, FlowerBatchError) as exc:
            return self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
        except FileNotFoundError as exc:
            return self._json(HTTPStatus.NOT_FOUND, {"error": str(exc)})

    def _host_ok(self) -> bool:
        host = self.headers.get("Host", "")
        return host in (f"{HOST}:{self.server.port}", f"localhost:{self.server.port}")

    # -- endpoints ---------------------------------------------------------------------------

    def _batches(self, query: dict[str, str]) -> Any:
        return {"home": str(self.server.home.root), "batches": self.server.index.batches()}

    def _jobs(self, query: dict[str, str]) -> Any:
        batch = _required(query, "batch")
        if not self.server.home.batch_dir(batch).is_dir():
            raise FileNotFoundError(f"no batch {batch} under {self.server.home.root}")
        rows, version = self.server.index.rows(batch)
        page = select(
            rows,
            status=query.get("status", ""),
            text=query.get("q", ""),
            offset=_int(query, "offset", 0),
            limit=min(_int(query, "limit", 200), 1000),
        )
        return {"batch": batch, "version": version, **page}

    def _job(self, query: dict[str, str]) -> Any:
        jd = self.server.home.job(_required(query, "batch"), _required(query, "job"))
        version = _stamp(
            [
                jd.record_path,
                jd.manifest_path,
                jd.runs / SESSIONS_DB,
                jd.runs / f"{SESSIONS_DB}-wal",
                jd.logs / "container.log",
            ]
        )
        if query.get("since") == version:
            return {"version": version, "unchanged": True}
        try:
            record = _record(jd).to_dict()
        except RecordError as exc:
            record = {"job_id": jd.job, "status": "unreadable", "reason": str(exc), "spec": {}}
        return {
            "version": version,
            "batch": jd.batch,
            "job": jd.job,
            "record": record,
            "trajectory": job_trajectory(jd.runs, jd.workspace),
            "log_tail": _tail(jd),
        }

    def _diff(self, query: dict[str, str]) -> Any:
        jd = self.server.home.job(_required(query, "batch"), _required(query, "job"))
        try:
            spec = _record(jd).spec
        except RecordError as exc:
            raise BadRequest(str(exc)) from None
        return diff(spec.workspace, jd.workspace, exclude=spec.exclude).to_dict()

    # -- plumbing ----------------------------------------------------------------------------

    def _json(self, status: HTTPStatus, data: Any) -> None:
        self._send(
            status, json.dumps(data, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8"
        )

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.end_headers()
        self.wfile.write(body)


def _required(query: dict[str, str], name: str) -> str:
    value = query.get(name, "")
    if not value:
        raise BadRequest(f"missing query parameter {name}")
    return value


def _int(query: dict[str, str], name: str, default: int) -> int:
    try:
        return int(query.get(name, default))
    except ValueError:
        raise BadRequest(f"{name} must be a whole number") from None


def _stamp(paths: list[Path]) -> str:
    h = hashlib.sha1()
    for p in paths:
        try:
            st = os.lstat(p)  # a symlink's own stamp: its target is none of the job's business
            h.update(f"{p.name}:{st.st_mtime_ns}:{st.st_size}\n".encode())
        except OSError:
            h.update(f"{p.name}:-\n".encode())
    return h.hexdigest()[:16]


def _record(jd: JobDir) -> JobRecord:
    """The job's record, read capped and through no symlink; FileNotFoundError names the job."""
    try:
        read = read_in(jd.root, RECORD_NAME, RECORD_BYTES)
    except FileNotFoundError:
        raise FileNotFoundError(f"no job {jd.batch}/{jd.job}") from None
    except OSError as exc:
        raise RecordError(str(exc)) from None
    if read.cut:
        raise RecordError(f"{RECORD_NAME} is {read.size} bytes, over the viewer's {RECORD_BYTES}: not read")
    try:
        return JobRecord.from_dict(json.loads(read.data))
    except (ValueError, RecordError) as exc:
        raise RecordError(f"{jd.record_path}: {exc}") from None


def _tail(jd: JobDir) -> str | None:
    try:
        return read_tail(jd.root, "logs/container.log", LOG_TAIL).data.decode("utf-8", errors="replace")
    except OSError:
        return None
