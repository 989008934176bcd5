"""DockerBackend specifics the fake cannot mirror: engine errors, cgroup limits, network aliases."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator

import anyio
import docker
import pytest

from flower_batch.backend.base import ContainerSpec
from flower_batch.backend.docker.backend import DockerBackend
from flower_batch.backend.docker.connection import translate
from flower_batch.errors import BackendError, DaemonUnavailable, OutOfDisk
from tests.flower_batch.backend.test_conformance import ensure_testbox

pytestmark = pytest.mark.anyio


async def test_daemon_down_is_one_actionable_line() -> None:
    backend = DockerBackend(base_url="unix:///nonexistent/docker.sock")
    with pytest.raises(DaemonUnavailable) as err:
        await backend.list_by_label({"x": None})
    msg = str(err.value)
    assert "unix:///nonexistent/docker.sock" in msg and "systemctl start docker" in msg and "\n" not in msg


def test_out_of_disk_is_recognised_anywhere_in_the_error() -> None:
    cause = OSError("write /var/lib/docker/tmp/x: no space left on device")
    err = translate(cause, "container", "job-1")
    assert isinstance(err, OutOfDisk) and "docker system prune" in str(err)
    assert type(translate(RuntimeError("boom"), "container", "job-1")) is BackendError


@pytest.fixture
async def docker_rig() -> AsyncIterator[tuple[DockerBackend, str, dict[str, str]]]:
    image = await anyio.to_thread.run_sync(ensure_testbox)  # marked docker: a dead daemon fails, never skips
    labels = {"org.flower-batch.test": uuid.uuid4().hex[:12]}
    backend = DockerBackend()
    try:
        yield backend, image, labels
    finally:
        for c in await backend.list_by_label(labels):
            await backend.remove(c.id, force=True)
        for n in await backend.list_networks_by_label(labels):
            await backend.remove_network(n.id)
        await backend.aclose()


async def _output(backend: DockerBackend, spec: ContainerSpec) -> tuple[int, list[str]]:
    cid = await backend.create(spec)
    await backend.start(cid)
    code = await backend.wait(cid, timeout=30)
    return code, [line async for line in backend.logs(cid)]


@pytest.mark.docker
async def test_cpu_and_memory_limits_reach_the_cgroup(docker_rig) -> None:
    backend, image, labels = docker_rig
    sh = (
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us "
        "/sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max"
    )
    code, out = await _output(
        backend, ContainerSpec(image, ["sh", "-c", sh], labels=labels, cpus=0.5, memory=64 * 1024 * 1024)
    )
    assert code == 0
    if len(out) == 3:  # cgroup v1
        assert out == [str(64 * 1024 * 1024), "50000", "100000"]
    else:  # cgroup v2
        assert out == [str(64 * 1024 * 1024), "50000 100000"]


@pytest.mark.docker
async def test_network_alias_resolves_for_other_containers(docker_rig) -> None:
    backend, image, labels = docker_rig
    net = f"conf-net-{uuid.uuid4().hex[:8]}"
    await backend.create_network(net, labels, internal=True)
    server = await backend.create(
        ContainerSpec(image, ["sleep", "30"], labels=labels, network=net, network_aliases=["gateway"])
    )
    await backend.start(server)
    code, out = await _output(
        backend, ContainerSpec(image, ["getent", "hosts", "gateway"], labels=labels, network=net)
    )
    assert code == 0 and out and out[0].split()[1] == "gateway"
    await backend.remove(server, force=True)


@pytest.mark.docker
async def test_no_network_is_loopback_only_with_localhost_and_no_engine_sandbox(docker_rig, tmp_path) -> None:
    # "none" is NetworkDisabled: runc's own namespace (loopback up), no sandbox from dockerd (it
    # cost two re-execs per container), and our read-only /etc/hosts in place of the engine's,
    # which the sandbox's uid reads even when the orchestrator runs under umask 077 (as CI did).
    _, image, labels = docker_rig
    old = os.umask(0o077)
    try:
        backend = DockerBackend(hosts_folder=tmp_path / "cache")
    finally:
        os.umask(old)
    try:
        sh = "echo /sys/class/net/*; getent hosts localhost; (echo x >> /etc/hosts) 2>/dev/null || echo read-only"
        spec = ContainerSpec(image, ["sh", "-c", sh], labels=labels, network="none")
        cid = await backend.create(spec)
        await backend.start(cid)
        assert await backend.wait(cid, timeout=30) == 0
        out = [line async for line in backend.logs(cid)]
        assert out[0] == "/sys/class/net/lo" and "localhost" in out[1].split() and out[-1] == "read-only"
        attrs = docker.APIClient().inspect_container(cid)
        assert attrs["Config"]["NetworkDisabled"] is True and not attrs["NetworkSettings"]["SandboxKey"]
    finally:
        await backend.aclose()  # its container goes with the rig's labels


def test_only_an_engine_on_this_hosts_socket_gets_our_hosts_file() -> None:
    # a cluster's manager over TCP cannot see it: it keeps the engine's own sandbox
    assert DockerBackend(base_url="unix:///var/run/docker.sock").on_this_host
    assert not DockerBackend(base_url="tcp://10.0.0.2:2375").on_this_host


@pytest.mark.docker
async def test_following_logs_can_be_abandoned_promptly(docker_rig) -> None:
    backend, image, labels = docker_rig
    cid = await backend.create(ContainerSpec(image, ["sh", "-c", "echo first; exec sleep 30"], labels=labels))
    await backend.start(cid)
    seen: list[str] = []
    t0 = time.monotonic()
    with anyio.move_on_after(1.0):
        async with contextlib.aclosing(backend.logs(cid, follow=True)) as lines:
            async for line in lines:
                seen.append(line)
    assert seen == ["first"] and time.monotonic() - t0 < 3
    await backend.stop(cid, grace_s=0)


@pytest.mark.docker
def test_calls_on_many_containers_paths_share_one_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    # The docker SDK's unix adapter kept a pool per URL: each call on a new container's path
    # (inspect, start, wait, logs, remove) opened a connection; 40 calls cost 40 connects.
    from docker.transport import unixconn

    from flower_batch.backend.docker.connection import Connection

    connects = []
    plain = unixconn.UnixHTTPConnection.connect
    monkeypatch.setattr(
        unixconn.UnixHTTPConnection, "connect", lambda self: (connects.append(1), plain(self))[1]
    )
    conn = Connection()
    try:
        api = conn.api()
        connects.clear()
        for i in range(40):
            with contextlib.suppress(Exception):
                api.inspect_container(f"fb-no-such-container-{uuid.uuid4().hex[:8]}-{i}")
    finally:
        conn.close()
    assert len(connects) == 1


def test_a_tcp_engine_keeps_its_own_adapter() -> None:
    # A cluster's manager or a registry's engine is reached over tcp: nothing to share there, and
    # opening its client must not fail (it did: the unix adapter was looked for on every client).
    import docker

    from flower_batch.backend.docker.connection import OneUnixPool, share_one_pool

    client = docker.APIClient(base_url="tcp://127.0.0.1:9", version="1.41")  # no call made
    before = dict(client.adapters)
    share_one_pool(client, 8, 5.0)
    assert client.adapters == before and not any(isinstance(a, OneUnixPool) for a in before.values())
    unix = docker.APIClient(base_url="unix:///var/run/docker.sock", version="1.41")
    share_one_pool(unix, 8, 5.0)
    assert isinstance(unix.adapters["http+docker://"], OneUnixPool)
