"""Engine calls sent again after a transient failure: reads and wait only, never a change."""

from __future__ import annotations

from typing import Any

import docker.errors
import pytest
import requests
import requests.exceptions

from flower_batch.backend.base import ContainerSpec
from flower_batch.backend.docker import transient
from flower_batch.backend.docker.backend import DockerBackend
from flower_batch.backend.docker.transient import is_transient
from flower_batch.errors import BackendError, ContainerNotFound, DaemonUnavailable

pytestmark = pytest.mark.anyio

RESET = requests.exceptions.ConnectionError("('Connection aborted.', ConnectionResetError(104))")
READ_TIMEOUT = requests.exceptions.ConnectionError(
    "UnixHTTPConnectionPool(host='localhost', port=None): Read timed out."
)


def _api_error(
    status: int, cls: type[docker.errors.APIError] = docker.errors.APIError, said: str = "engine said no"
) -> Exception:
    response = requests.Response()
    response.status_code = status
    return cls(said, response=response, explanation=said)


def test_what_is_transient() -> None:
    assert is_transient(RESET)
    assert is_transient(_api_error(500)) and is_transient(_api_error(503))
    assert not is_transient(_api_error(409)) and not is_transient(_api_error(404, docker.errors.NotFound))
    assert is_transient(READ_TIMEOUT) and not is_transient(READ_TIMEOUT, read_timeout_too=False)
    missing = requests.exceptions.ConnectionError("FileNotFoundError(2, 'No such file or directory')")
    assert not is_transient(missing)  # no engine at that address: said at once
    assert not is_transient(requests.exceptions.ConnectionError("PermissionError: Permission denied"))
    assert not is_transient(_api_error(500, said="write /var/lib/docker/x: no space left on device"))
    assert not is_transient(ValueError("a bug"))


class FakeApi:
    """Fails each named call with the queued exceptions first, then answers."""

    def __init__(self, **failures: list[Exception]) -> None:
        self.failures = failures
        self.calls: dict[str, int] = {}

    def _next(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        queued = self.failures.get(name) or []
        if queued:
            raise queued.pop(0)

    def inspect_container(self, cid: str) -> dict[str, Any]:
        self._next("inspect_container")
        state = {"Status": "exited", "ExitCode": 0, "OOMKilled": False}
        return {"Id": cid, "Name": "/x", "Config": {"Image": "i", "Labels": {}}, "State": state}

    def containers(self, **_: Any) -> list[dict[str, Any]]:
        self._next("containers")
        return []

    def wait(self, cid: str, timeout: float | None = None) -> dict[str, int]:
        self._next("wait")
        return {"StatusCode": 7}

    def start(self, cid: str) -> None:
        self._next("start")

    def remove_container(self, cid: str, **_: Any) -> None:
        self._next("remove_container")

    def create_host_config(self, **_: Any) -> dict[str, Any]:
        return {}

    def create_container(self, *_: Any, **__: Any) -> dict[str, str]:
        self._next("create_container")
        return {"Id": "new"}


class FakeConnection:
    address = "unix:///fake.sock"

    def __init__(self, api: FakeApi) -> None:
        self._api = api

    def api(self) -> FakeApi:
        return self._api

    def close(self) -> None:
        pass


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transient, "BACKOFF_S", (0.0, 0.0))


def _backend(api: FakeApi) -> DockerBackend:
    backend = DockerBackend()
    backend._conn = FakeConnection(api)  # type: ignore[assignment]
    return backend


async def test_reads_are_sent_again_after_a_broken_connection(no_backoff: None) -> None:
    api = FakeApi(inspect_container=[RESET, _api_error(500)], containers=[READ_TIMEOUT])
    backend = _backend(api)
    assert (await backend.inspect("c1")).exit_code == 0
    assert await backend.list_by_label({"k": None}) == []
    assert api.calls == {"inspect_container": 3, "containers": 2}


async def test_three_sends_at_most_then_the_failure_as_it_came(no_backoff: None) -> None:
    api = FakeApi(inspect_container=[RESET, RESET, RESET, RESET])
    with pytest.raises(DaemonUnavailable):
        await _backend(api).inspect("c1")
    assert api.calls == {"inspect_container": 3}


async def test_a_not_found_is_not_sent_again(no_backoff: None) -> None:
    api = FakeApi(inspect_container=[_api_error(404, docker.errors.NotFound)])
    with pytest.raises(ContainerNotFound):
        await _backend(api).inspect("c1")
    assert api.calls == {"inspect_container": 1}


async def test_changes_are_never_sent_again(no_backoff: None) -> None:
    """A create sent twice makes two containers; a start or a remove runs twice."""
    api = FakeApi(create_container=[RESET], start=[_api_error(500)], remove_container=[RESET])
    backend = _backend(api)
    with pytest.raises(DaemonUnavailable):
        await backend.create(ContainerSpec(image="i", command=["true"], init=False))
    with pytest.raises(BackendError):
        await backend.start("c1")
    with pytest.raises(DaemonUnavailable):
        await backend.remove("c1")
    assert api.calls == {"create_container": 1, "start": 1, "remove_container": 1}


async def test_wait_is_sent_again_but_its_timeout_is_its_answer(no_backoff: None) -> None:
    api = FakeApi(wait=[RESET])
    assert await _backend(api).wait("c1", timeout=30) == 7
    assert api.calls == {"wait": 2}
    api = FakeApi(wait=[READ_TIMEOUT])
    with pytest.raises(TimeoutError):
        await _backend(api).wait("c1", timeout=30)
    assert api.calls == {"wait": 1}
