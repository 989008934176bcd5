"""Kept-alive connections to the upstream, reused across requests.

A new TCP (and, for https, TLS) connection per request costs a handshake and a cold congestion
window for the ~1 MB body of a long conversation: that was most of the latency proxy mode added.
A connection goes back to the pool only once its answer was read to the end and the upstream did
not ask to close it; a stream stopped early closes its connection instead.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable

IDLE_MAX = 32  # idle connections kept at most (one per job streaming at once is the usual need)


class ConnectionPool:
    """Idle upstream connections. Thread-safe."""

    def __init__(self, connect: Callable[[], http.client.HTTPConnection], idle_max: int = IDLE_MAX) -> None:
        self._connect = connect
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.idle_max = idle_max

    def take(self) -> tuple[http.client.HTTPConnection, bool]:
        """A connection, and whether it was used before (a reused one may have been closed by
        the upstream meanwhile: its caller retries once on a fresh one)."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        conn = self._connect()
        conn.connect()
        try:  # the body goes in one large write, the request line and headers in a small one first
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, AttributeError):
            pass
        return conn, False

    def give_back(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """Keep `conn` for the next request if its answer `resp` was read to the end."""
        if resp.will_close or not resp.isclosed() or conn.sock is None:
            conn.close()
            return
        with self._lock:
            if len(self._idle) < self.idle_max:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
