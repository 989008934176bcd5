"""Each job's own unix socket into the gateway (local engine), where a job container has no network.

Inside the gateway container, under its sockets folder (`--sockets`):
  control.sock          the orchestrator asks for a job's socket here ("open <job>" / "close <job>"),
                        and whether this life serves ("ping": bound only once the HTTP port is)
  <key>/gateway.sock    one job's socket, relayed to the gateway's HTTP port on loopback
  <key>/job             which job <key> is, so a restarted gateway binds every socket again

Only `<key>/` is bind-mounted into the job's container: a job sees its own socket, never another
job's or the control socket. The folder, not the socket file, is mounted, so a gateway that dies
and binds the socket anew is reached through the same mount. The token check stays as it is; a
request for another job's path on this socket is refused there like any other.
"""

from __future__ import annotations

import hashlib
import os
import selectors
import socket
import threading
from pathlib import Path

from flower.runtime.model_socket import connect_unix, serve_connection, short_path

CONTROL = "control.sock"
SOCKET = "gateway.sock"
JOB_FILE = "job"
IN_JOB = "/run/flower-gateway"  # where a job's <key>/ is mounted
SOCKET_IN_JOB = f"{IN_JOB}/{SOCKET}"
MAX_COMMAND = 512


def socket_key(job_id: str) -> str:
    """A short folder name per job: a socket's path must fit in 108 bytes, a job id may not."""
    return hashlib.sha256(job_id.encode("utf-8", "surrogateescape")).hexdigest()[:16]


class JobSockets:
    """The gateway's side: one selector thread accepts on the control socket and on every job's
    socket; each job connection is relayed to 127.0.0.1:`http_port` in a thread of its own."""

    def __init__(self, root: str | Path, http_port: int) -> None:
        self.root = Path(root)
        self.http_port = http_port
        self._sel = selectors.DefaultSelector()
        self._jobs: dict[str, socket.socket] = {}  # key -> listener
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="job-sockets", daemon=True)

    def start(self) -> JobSockets:
        self.root.mkdir(parents=True, exist_ok=True)
        self._sel.register(_listen(self.root / CONTROL), selectors.EVENT_READ, "control")
        for job_file in sorted(self.root.glob(f"*/{JOB_FILE}")):  # a restart: every job as before
            self.open(job_file.read_text(encoding="utf-8", errors="surrogateescape"))
        self._thread.start()
        return self

    def open(self, job_id: str) -> str:
        key = socket_key(job_id)
        if key in self._jobs:
            return key
        folder = self.root / key
        folder.mkdir(mode=0o700, exist_ok=True)
        (folder / JOB_FILE).write_text(job_id, encoding="utf-8", errors="surrogateescape")
        listener = _listen(folder / SOCKET)
        self._jobs[key] = listener
        self._sel.register(listener, selectors.EVENT_READ, key)
        return key

    def close(self, job_id: str) -> None:
        key = socket_key(job_id)
        listener = self._jobs.pop(key, None)
        if listener is not None:
            self._sel.unregister(listener)
            listener.close()
        for name in (SOCKET, JOB_FILE):
            (self.root / key / name).unlink(missing_ok=True)

    def stop(self) -> None:
        """Stop accepting (the sockets' files stay: the next life binds them again)."""
        self._stopping.set()
        self._thread.join(timeout=5)
        for key in list(self._sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._sel.close()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            for key, _ in self._sel.select(timeout=0.5):
                listener = key.fileobj
                assert isinstance(listener, socket.socket)
                try:
                    conn, _ = listener.accept()
                    conn.setblocking(True)
                except OSError:
                    continue  # closed meanwhile, or the peer gave up
                if key.data == "control":
                    self._command(conn)  # here, so only this thread changes the selector
                else:
                    threading.Thread(
                        target=serve_connection,
                        args=(conn, self._upstream),
                        name=f"job-{key.data}",
                        daemon=True,
                    ).start()

    def _upstream(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.http_port), timeout=10)

    def _command(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                verb, _, job_id = _read_line(conn).partition(" ")
                if verb == "ping":
                    conn.sendall(b"ok\n")
                elif verb == "open" and job_id:
                    conn.sendall(f"ok {self.open(job_id)}\n".encode())
                elif verb == "close" and job_id:
                    self.close(job_id)
                    conn.sendall(b"ok\n")
                else:
                    conn.sendall(b"error: say 'open <job>', 'close <job>' or 'ping'\n")
            except OSError as exc:
                try:
                    conn.sendall(f"error: {exc}\n".encode())
                except OSError:
                    pass


def _listen(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)  # an earlier life's socket: nobody listens on it any more
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with short_path(path) as address:
        s.bind(address)
    os.chmod(path, 0o600)  # the job runs as the gateway's uid; nobody else may connect
    s.listen(64)
    s.setblocking(False)
    return s


def _read_line(conn: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n") and len(data) < MAX_COMMAND:
        chunk = conn.recv(MAX_COMMAND)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "surrogateescape").strip()


def ask(control_dir: Path, command: str, timeout: float = 10.0) -> str:
    """The orchestrator's side: send one command to a gateway's control socket, return its answer.
    (connect_unix reaches it however long the folder's path on the host is.)"""
    with connect_unix(control_dir / CONTROL, timeout) as conn:
        conn.settimeout(timeout)
        conn.sendall(command.encode("utf-8", "surrogateescape") + b"\n")
        answer = _read_line(conn)
    if not answer.startswith("ok"):
        raise OSError(f"the gateway answered {answer!r} to {command.split()[0]!r}")
    return answer.removeprefix("ok").strip()


def serving(control_dir: Path, timeout: float = 2.0) -> bool:
    """Whether a live gateway answers on its control socket. Any answer counts (an older image's
    gateway knows no "ping" and says so): the socket is bound after the HTTP port, and an earlier
    life's socket file refuses. Cheaper than reading the container's log for its ready line."""
    try:
        with connect_unix(control_dir / CONTROL, timeout) as conn:
            conn.settimeout(timeout)
            conn.sendall(b"ping\n")
            return bool(_read_line(conn))
    except OSError:
        return False
