"""Reaching the model through a unix socket, for a process that has no network at all.

flower-batch runs a job in a container with no network: its one way out is a unix socket of its
own, bind-mounted from the gateway. The CLI only speaks HTTP over TCP, so when
`FLOWER_MODEL_SOCKET` names a socket, flower relays the loopback address of ANTHROPIC_BASE_URL
to it (`start_from_env`), and resilience's probe asks the socket, not the port.

`relay` moves bytes both ways between two connected sockets; the gateway uses it for the other
end (a job's socket to its HTTP port).
"""

from __future__ import annotations

import os
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import urlsplit

SOCKET_ENV = "FLOWER_MODEL_SOCKET"
CHUNK = 64 * 1024
# flower-batch starts a job's container and its gateway at the same time; the gateway binds the
# job's socket once it serves (about a second). A request made before that waits for the bind.
BIND_WAIT_S = 60.0
BIND_POLL_S = 0.02


@contextmanager
def short_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """A path to `path` that fits a socket address (108 bytes): its folder through /proc/self/fd
    when the path itself is longer (a home deep in the tree, a long batch name)."""
    text = os.fspath(path)
    if len(os.fsencode(text)) < 100:
        yield text
        return
    folder, name = os.path.split(text)
    fd = os.open(folder or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def reachable_socket(path: str, timeout: float = 5.0) -> bool:
    """True if something accepts a connection on the unix socket `path`."""
    try:
        connect_unix(path, timeout).close()
        return True
    except OSError:
        return False


def connect_unix(path: str | os.PathLike[str], timeout: float = 10.0) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        with short_path(path) as address:
            s.connect(address)
        s.settimeout(None)
    except OSError:
        s.close()
        raise
    return s


def connect_when_bound(
    path: str | os.PathLike[str], wait_s: float = BIND_WAIT_S, poll_s: float = BIND_POLL_S
) -> socket.socket:
    """`connect_unix`, waiting up to `wait_s` while the socket does not exist yet. A socket that
    exists and refuses (its gateway died) fails at once, as before: the CLI and resilience retry."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return connect_unix(path)
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(poll_s)


def relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until both sides have closed; an end of one direction is passed on
    as a half-close, so a request body's end still reaches the server. Closes both sockets."""
    peer = {client: upstream, upstream: client}
    open_reads = {client, upstream}
    with selectors.DefaultSelector() as sel:
        for s in open_reads:
            sel.register(s, selectors.EVENT_READ)
        try:
            while open_reads:
                for key, _ in sel.select():
                    src = key.fileobj
                    assert isinstance(src, socket.socket)
                    data = _recv(src)
                    if data:
                        peer[src].sendall(data)
                        continue
                    sel.unregister(src)
                    open_reads.discard(src)
                    _shutdown_write(peer[src])
        except OSError:
            pass  # a reset on either side ends the exchange: the CLI retries, the server logs
        finally:
            client.close()
            upstream.close()


def _recv(s: socket.socket) -> bytes:
    try:
        return s.recv(CHUNK)
    except ConnectionResetError:
        return b""


def _shutdown_write(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def serve_connection(client: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Relay one accepted connection to a fresh upstream; an upstream that refuses closes the
    client at once (the CLI sees a reset, which it and resilience retry)."""
    try:
        upstream = connect()
    except OSError:
        client.close()
        return
    relay(client, upstream)


class Relay:
    """Accepts on `listener` and relays each connection to `connect()`, a thread each."""

    def __init__(self, listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
        self.listener = listener
        self.connect = connect
        self._thread = threading.Thread(target=self._accept, name="model-relay", daemon=True)

    def start(self) -> Relay:
        self._thread.start()
        return self

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=serve_connection, args=(client, self.connect), name="model-relay-conn", daemon=True
            ).start()


def start_from_env(env: Mapping[str, str]) -> Relay | None:
    """When FLOWER_MODEL_SOCKET is set in `env` (the process's, read where it started): listen
    on ANTHROPIC_BASE_URL's loopback host and port and relay to the socket. None when it is not set."""
    path = env.get(SOCKET_ENV, "").strip()
    if not path:
        return None
    parts = urlsplit(env.get("ANTHROPIC_BASE_URL", ""))
    host, port = parts.hostname or "", parts.port
    if host not in ("127.0.0.1", "localhost") or port is None:
        raise ValueError(
            f"{SOCKET_ENV} needs ANTHROPIC_BASE_URL on http://127.0.0.1:<port>, not {parts.geturl()!r}"
        )
    listener = socket.create_server(("127.0.0.1", port))
    return Relay(listener, lambda: connect_when_bound(path)).start()
