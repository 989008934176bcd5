"""Connecting to the Docker engine and turning its exceptions into flower-batch errors.

The only place (with its siblings in this package) that imports `docker`.
"""

from __future__ import annotations

import threading
from typing import Literal

import docker
import docker.errors
import requests.exceptions
from docker.transport import UnixHTTPAdapter

from flower_batch.errors import (
    BackendError,
    ContainerNotFound,
    ContainerNotRunning,
    DaemonUnavailable,
    FlowerBatchError,
    ImageMissing,
    NameConflict,
    NotFound,
    OutOfDisk,
)

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"

Kind = Literal["container", "network", "volume", "image", "engine"]


def daemon_address(base_url: str | None = None) -> str:
    """Where the engine is: `base_url`, else what the docker SDK finds the way the docker CLI
    does (DOCKER_HOST and its TLS settings), else the local socket."""
    if base_url:
        return base_url
    try:
        found = docker.utils.kwargs_from_env().get("base_url")
    except docker.errors.DockerException:  # e.g. TLS files missing: api() says so on connect
        found = None
    return str(found or DEFAULT_DOCKER_HOST)


class OneUnixPool(UnixHTTPAdapter):  # type: ignore[misc]
    """The docker SDK's unix-socket adapter keeps one connection pool per URL: every call on a
    container's own path (/containers/<id>/attach, /start, /wait, /json, /logs, its removal)
    opened a connection of its own, six or so a job, and the 26th path seen closed the oldest
    pool. Here the socket has one pool, and each call reuses a connection of it."""

    def get_connection(self, url: str, proxies: object = None) -> object:
        return super().get_connection("http+docker://localhost", proxies)


def share_one_pool(client: docker.APIClient, size: int, timeout: float) -> None:
    """Put OneUnixPool where the client's unix-socket adapter was (tcp, ssh: unchanged, their
    adapters already keep one pool a host)."""
    old = client.adapters.get("http+docker://")
    if type(old) is UnixHTTPAdapter:
        shared = OneUnixPool(f"http+unix://{old.socket_path}", timeout, max_pool_size=size)
        client.mount("http+docker://", shared)
        client._custom_adapter = shared  # what APIClient.get_adapter falls back to for this scheme
        old.close()


class Connection:
    """A lazily opened, thread-safe `docker.APIClient` (opening it already talks to the daemon)."""

    def __init__(self, base_url: str | None = None, timeout: float = 120.0, pool_size: int = 64):
        self.base_url = base_url
        self.timeout = timeout
        self.pool_size = pool_size  # connections kept open for reuse (more are opened as needed)
        self._client: docker.APIClient | None = None
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        return daemon_address(self.base_url)

    def api(self) -> docker.APIClient:
        with self._lock:
            if self._client is None:
                try:
                    kwargs = docker.utils.kwargs_from_env()
                    if self.base_url:
                        kwargs["base_url"] = self.base_url
                    self._client = docker.APIClient(
                        version="auto", timeout=self.timeout, max_pool_size=self.pool_size, **kwargs
                    )
                    share_one_pool(self._client, self.pool_size, self.timeout)
                except Exception as exc:  # noqa: BLE001 - every failure here means "no daemon"
                    raise translate(exc, "engine", "connect", address=self.address) from None
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def chain_text(exc: BaseException) -> str:
    parts, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        parts.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__ or cur.__context__
    return " | ".join(parts)


def _unreachable(address: str, text: str) -> DaemonUnavailable:
    if "Permission denied" in text or "PermissionError" in text:
        return DaemonUnavailable(
            f"permission denied on the Docker socket {address} — run as root or add your user "
            "to the 'docker' group (then log in again)"
        )
    return DaemonUnavailable(
        f"Docker daemon is not reachable at {address} — start it (systemctl start docker) or set DOCKER_HOST"
    )


def is_out_of_disk(text: str) -> bool:
    return "no space left on device" in text.lower()


OUT_OF_DISK_HINT = (
    "Docker ran out of disk space — free some with `flower-batch gc` and `docker system prune`, "
    "or move Docker's data-root to a larger disk"
)


def translate(exc: BaseException, kind: Kind, ref: str, *, address: str | None = None) -> FlowerBatchError:
    """Map an exception raised by the docker SDK (or requests below it) to our own error type."""
    if isinstance(exc, FlowerBatchError):
        return exc
    text = chain_text(exc)
    if is_out_of_disk(text):
        return OutOfDisk(OUT_OF_DISK_HINT)
    if isinstance(exc, docker.errors.ImageNotFound) or (
        kind == "image" and isinstance(exc, docker.errors.NotFound)
    ):
        return ImageMissing(
            f"image {ref} is not in the local Docker engine — build it with `flower-batch image build` "
            "(flower-batch never pulls images)"
        )
    if isinstance(exc, docker.errors.NotFound):
        if kind == "container":
            return ContainerNotFound(f"container {ref} does not exist (already removed?)")
        return NotFound(f"{kind} {ref} does not exist")
    if isinstance(exc, docker.errors.APIError):
        explanation = exc.explanation or str(exc)
        if exc.status_code == 409 and "not running" in explanation:
            return ContainerNotRunning(f"container {ref} is not running")
        if exc.status_code == 409 and ("already in use" in explanation or "already exists" in explanation):
            return NameConflict(
                f"{kind} name {ref} is already in use — pick another name or remove the old {kind}"
            )
        return BackendError(f"Docker refused to {_verb(kind)} {ref}: {explanation}")
    if isinstance(
        exc, requests.exceptions.ConnectionError | FileNotFoundError | ConnectionError | PermissionError
    ) or (isinstance(exc, docker.errors.DockerException) and "fetching server API version" in str(exc)):
        return _unreachable(address or daemon_address(), text)
    if isinstance(exc, docker.errors.DockerException):
        return BackendError(f"Docker error on {kind} {ref}: {exc}")
    return BackendError(f"unexpected error from Docker on {kind} {ref}: {type(exc).__name__}: {exc}")


def _verb(kind: Kind) -> str:
    return {"engine": "answer about", "image": "use image"}.get(kind, f"operate on {kind}")


def is_read_timeout(exc: BaseException) -> bool:
    text = chain_text(exc)
    return isinstance(exc, requests.exceptions.ReadTimeout) or "Read timed out" in text
