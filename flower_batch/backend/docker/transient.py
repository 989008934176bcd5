"""Which engine calls are sent again after a transient failure: reads and wait, never a change.

Safe to repeat: a second send cannot do anything the first did not. Those are the reads
(inspect, list, opening a log stream, image inspect) and `wait`, which only watches (a second
wait of a container that ended meanwhile returns its exit code at once). Never repeated: create
(our job containers are unnamed: a create sent twice would make two), start, exec, kill, stop,
remove and network changes; their failure reaches the job's record as it is.

Transient: the connection to the engine broke (reset, closed mid-answer, refused while the
engine is busy) or the engine answered 5xx; for a read, also a read timeout. Not transient: a
socket that is missing or refused by permissions (no engine, or not ours: said at once), a 4xx
(not found, a conflict), an out-of-disk, or a wait's own timeout (its meaning is "still running").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import docker.errors
import requests.exceptions

from flower_batch.backend.docker.connection import chain_text, is_out_of_disk, is_read_timeout

T = TypeVar("T")

BACKOFF_S = (0.5, 2.0)  # before the 2nd and the 3rd send: three sends in all


def is_transient(exc: BaseException, *, read_timeout_too: bool = True) -> bool:
    text = chain_text(exc)
    if is_out_of_disk(text) or "Permission denied" in text or "No such file" in text:
        return False
    if is_read_timeout(exc) or isinstance(exc, requests.exceptions.ConnectTimeout):
        return read_timeout_too  # (a body read that times out comes as a ConnectionError)
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.ChunkedEncodingError):
        return True
    if isinstance(exc, docker.errors.APIError) and not isinstance(exc, docker.errors.NotFound):
        return exc.status_code is not None and exc.status_code >= 500
    return False


def retrying(
    call: Callable[[], T],
    *,
    read_timeout_too: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    backoff: tuple[float, ...] | None = None,
) -> T:
    """`call()`, sent again after each transient failure, up to len(backoff) more times; the
    last failure (or any other) is raised as it came. Blocking: run it in a worker thread."""
    for pause in BACKOFF_S if backoff is None else backoff:
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc, read_timeout_too=read_timeout_too):
                raise
        sleep(pause)
    return call()
