"""One behaviour, three backends: every test runs against FakeBackend, (marked docker) DockerBackend
and (marked swarm) SwarmBackend on the 3-node test cluster (tests/batch_fixtures/swarm.py).

Each container scenario is written twice, as the shell script a real container runs and as the
Python program the fake runs (`Rig.command`); the assertions are shared.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from flower_batch.backend.base import Backend, ContainerSpec, Mount
from flower_batch.errors import (
    BackendError,
    ContainerNotFound,
    ContainerNotRunning,
    ImageMissing,
    NameConflict,
    NotFound,
)
from tests.fake_backend import FakeBackend, FakeProcess, Program

TESTBOX = "flower-batch-testbox:2"  # :2 has tar and timeout (a secret hand-over)
# Host binaries copied (with their libraries) into a tiny image: imports in a second, works offline.
TESTBOX_BINARIES = [
    "/bin/sh",
    "/usr/bin/sleep",
    "/usr/bin/cat",
    "/usr/bin/id",
    "/usr/bin/touch",
    "/usr/bin/getent",
    "/usr/bin/tar",
    "/usr/bin/timeout",
]

pytestmark = pytest.mark.anyio


def ensure_testbox() -> str:
    from flower_batch.backend.docker.images import DockerImages

    images = DockerImages()
    try:
        if images.find(TESTBOX) is None:
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                for binary in TESTBOX_BINARIES:
                    _copy_with_libs(Path(binary), root)
                (root / "etc").mkdir(exist_ok=True)
                (root / "etc" / "nsswitch.conf").write_text("hosts: files dns\n")
                (root / "tmp").mkdir(mode=0o1777)
                images.import_rootfs(root, TESTBOX, ["ENV PATH=/usr/bin:/bin"])
        return TESTBOX
    finally:
        images.close()


def _copy_with_libs(binary: Path, root: Path) -> None:
    real = binary.resolve()
    libs = [
        line.split("=>")[-1].split("(")[0].strip()
        for line in subprocess.run(
            ["ldd", str(real)], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    ]
    for src in [str(real), *[lib for lib in libs if lib.startswith("/")]]:
        dest = root / src.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    if binary != real:  # /bin/sh -> dash
        link = root / str(binary).lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(real.name if real.parent == binary.parent else str(real))
    for lib64 in ["/lib64/ld-linux-x86-64.so.2"]:
        dest = root / lib64.lstrip("/")
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(lib64).resolve(), dest)


@dataclass
class Rig:
    backend: Backend
    image: str
    kind: str
    labels: dict[str, str]
    tmp_root: Path | None = None  # swarm: host folders must be on the storage every node shares
    seen_s: float = 5.0
    """The longest the engine may take to report that a process ended. A local engine knows at
    once; Swarm hears it from the node's agent through the manager: seconds, more under load."""
    programs: dict[str, Program] = field(default_factory=dict)
    _n: itertools.count = field(default_factory=itertools.count)

    def mkdtemp(self, prefix: str) -> Path:
        """Readable by any uid, as the folders the orchestrator mounts (a container never runs
        as the host's root: confinement.py)."""
        d = Path(tempfile.mkdtemp(prefix=prefix, dir=self.tmp_root))
        d.chmod(0o755)
        return d

    def command(self, sh: str, fake: Program) -> list[str]:
        """The same behaviour for every backend: a shell script, or its Python twin."""
        if self.kind != "fake":
            return ["sh", "-c", sh]
        key = f"program-{next(self._n)}"
        self.programs[key] = fake
        return [key]

    def spec(self, command: list[str], **kw) -> ContainerSpec:
        labels = {**self.labels, **kw.pop("labels", {})}
        return ContainerSpec(image=self.image, command=command, labels=labels, **kw)

    async def run(self, spec: ContainerSpec, timeout: float = 30) -> tuple[str, int]:
        cid = await self.backend.create(spec)
        await self.backend.start(cid)
        return cid, await self.backend.wait(cid, timeout=timeout)


@pytest.fixture(
    params=[
        "fake",
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("swarm", marks=pytest.mark.swarm),
    ]
)
async def rig(request) -> AsyncIterator[Rig]:
    labels = {"org.flower-batch.test": uuid.uuid4().hex[:12]}
    if request.param == "fake":
        async with FakeBackend() as fake:
            r = Rig(fake, FakeBackend.IMAGE, "fake", labels)
            fake.programs = r.programs
            yield r
        return
    if request.param == "swarm":
        async for r in _swarm_rig(labels):
            yield r
        return

    from flower_batch.backend.docker.backend import DockerBackend

    image = await anyio.to_thread.run_sync(ensure_testbox)  # marked docker: a dead daemon fails, never skips
    backend = DockerBackend()
    try:
        yield Rig(backend, image, "docker", labels)
    finally:  # nothing a test made may outlive it
        for c in await backend.list_by_label(labels):
            await backend.remove(c.id, force=True)
        for n in await backend.list_networks_by_label(labels):
            await backend.remove_network(n.id)
        for v in await backend.list_volumes_by_label(labels):
            await backend.remove_volume(v.name, force=True)
        await backend.aclose()


async def _swarm_rig(labels: dict[str, str]) -> AsyncIterator[Rig]:
    from flower_batch.backend.docker.registry import push_reference
    from flower_batch.backend.swarm.backend import SwarmBackend
    from tests.batch_fixtures.swarm import cluster

    c = await anyio.to_thread.run_sync(cluster)
    root = c.shared / f"conformance-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True)
    backend = SwarmBackend(
        control_dir=root / ".swarm",
        base_url=c.docker_host,
        registry=c.registry,
        shared_root=c.shared,
        poll_s=0.2,
    )
    try:
        yield Rig(
            backend, push_reference(c.registry, c.image_id), "swarm", labels, tmp_root=root, seen_s=30.0
        )
    finally:
        for t in await backend.list_by_label(labels):
            await backend.remove(t.id, force=True)
        for n in await backend.list_networks_by_label(labels):
            await backend.remove_network(n.id)
        for sec in await backend.list_secrets_by_label(labels):
            await backend.remove_secret(sec.id)
        await backend.aclose()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def shared_dir(rig: Rig) -> Path:
    """A host dir any container uid may write to (on a cluster: on the shared storage)."""
    d = rig.mkdtemp("flower-conf-")
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


async def wait_for_file(path: Path, timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not path.exists():
            await anyio.sleep(0.02)


# -- containers ----------------------------------------------------------------------------------
async def test_exit_code_and_logs(rig: Rig) -> None:
    async def fake(p: FakeProcess) -> int:
        p.log("hello")
        p.log("oops")
        return 3

    cid, code = await rig.run(rig.spec(rig.command("echo hello; echo oops >&2; exit 3", fake)))
    assert code == 3
    # stdout and stderr are both kept; their relative order is not (Docker logs them separately)
    assert sorted([line async for line in rig.backend.logs(cid)]) == ["hello", "oops"]
    info = await rig.backend.inspect(cid)
    assert (info.state, info.exit_code) == ("exited", 3)


async def test_env_mounts_and_working_dir(rig: Rig, shared_dir: Path) -> None:
    ro = rig.mkdtemp("flower-conf-ro-")
    (ro / "in.txt").write_text("from host\n")

    async def fake(p: FakeProcess) -> int:
        p.write_text("env.txt", p.env["GREETING"] + "\n")
        p.write_text("/data/copy.txt", p.read_text("/ro/in.txt"))
        try:
            p.write_text("/ro/x", "")
            p.write_text("/data/ro.txt", "writable\n")
        except PermissionError:
            p.write_text("/data/ro.txt", "readonly\n")
        p.write_text("/data/pwd.txt", (p.spec.working_dir or "/") + "\n")
        return 0

    sh = (
        'echo "$GREETING" > env.txt; cat /ro/in.txt > /data/copy.txt; '
        "(touch /ro/x 2>/dev/null && echo writable || echo readonly) > /data/ro.txt; pwd > /data/pwd.txt"
    )
    spec = rig.spec(
        rig.command(sh, fake),
        env={"GREETING": "hi there"},
        mounts=[Mount(str(shared_dir), "/data"), Mount(str(ro), "/ro", read_only=True)],
        working_dir="/data",
    )
    try:
        _, code = await rig.run(spec)
        assert code == 0
        assert (shared_dir / "env.txt").read_text() == "hi there\n"
        assert (shared_dir / "copy.txt").read_text() == "from host\n"
        assert (shared_dir / "ro.txt").read_text() == "readonly\n"
        assert (shared_dir / "pwd.txt").read_text() == "/data\n"
        assert not (ro / "x").exists()
    finally:
        shutil.rmtree(ro, ignore_errors=True)


async def test_user_uid_gid_applied(rig: Rig, shared_dir: Path) -> None:
    async def fake(p: FakeProcess) -> int:
        p.write_text("/data/id.txt", f"{p.spec.user}\n")
        return 0

    spec = rig.spec(
        rig.command('echo "$(id -u):$(id -g)" > /data/id.txt', fake),
        user="1234:2345",
        mounts=[Mount(str(shared_dir), "/data")],
    )
    _, code = await rig.run(spec)
    assert code == 0
    assert (shared_dir / "id.txt").read_text() == "1234:2345\n"
    assert ((shared_dir / "id.txt").stat().st_uid, (shared_dir / "id.txt").stat().st_gid) == (
        (1234, 2345) if rig.kind != "fake" else (os.getuid(), os.getgid())
    )


async def test_list_by_label(rig: Rig) -> None:
    async def fake(p: FakeProcess) -> int:
        return 0

    a = await rig.backend.create(rig.spec(rig.command("true", fake), labels={"role": "a"}))
    b = await rig.backend.create(rig.spec(rig.command("true", fake), labels={"role": "b"}))
    assert {c.id for c in await rig.backend.list_by_label(rig.labels)} == {a, b}
    assert [c.id for c in await rig.backend.list_by_label({**rig.labels, "role": "a"})] == [a]
    assert {c.id for c in await rig.backend.list_by_label({**rig.labels, "role": None})} == {a, b}
    found = (await rig.backend.list_by_label({**rig.labels, "role": "b"}))[0]
    assert found.labels["role"] == "b" and found.state == "created" and found.exit_code is None
    await rig.backend.start(a)
    assert await rig.backend.wait(a, timeout=30) == 0
    listed = (await rig.backend.list_by_label({**rig.labels, "role": "a"}))[0]
    assert (listed.state, listed.exit_code) == ("exited", 0)


async def test_sigterm_reaches_the_process(rig: Rig, shared_dir: Path) -> None:
    async def fake(p: FakeProcess) -> int:
        p.trap("SIGTERM")
        p.write_text("/data/ready", "")
        await p.next_signal()
        p.write_text("/data/sig.txt", "term\n")
        return 7

    sh = "trap 'echo term > /data/sig.txt; exit 7' TERM; touch /data/ready; while true; do sleep 0.05; done"
    cid = await rig.backend.create(rig.spec(rig.command(sh, fake), mounts=[Mount(str(shared_dir), "/data")]))
    await rig.backend.start(cid)
    await wait_for_file(shared_dir / "ready")
    await rig.backend.signal(cid, "SIGTERM")
    assert await rig.backend.wait(cid, timeout=10) == 7
    assert (shared_dir / "sig.txt").read_text() == "term\n"
    with pytest.raises(ContainerNotRunning):
        await rig.backend.signal(cid, "SIGTERM")


async def test_stop_kills_after_grace_when_sigterm_is_ignored(rig: Rig, shared_dir: Path) -> None:
    async def fake(p: FakeProcess) -> int:
        p.trap("SIGTERM")
        p.write_text("/data/ready", "")
        while True:
            await p.next_signal()

    sh = "trap '' TERM; touch /data/ready; while true; do sleep 0.05; done"
    cid = await rig.backend.create(rig.spec(rig.command(sh, fake), mounts=[Mount(str(shared_dir), "/data")]))
    await rig.backend.start(cid)
    await wait_for_file(shared_dir / "ready")
    t0 = time.monotonic()
    await rig.backend.stop(cid, grace_s=1)
    assert 0.9 <= time.monotonic() - t0 < 3 + rig.seen_s  # the grace, the kill, the engine seeing it
    assert await rig.backend.wait(cid, timeout=5) == 137
    await rig.backend.stop(cid, grace_s=1)  # stopping a stopped container is a no-op


async def test_stop_returns_as_soon_as_the_process_exits(rig: Rig, shared_dir: Path) -> None:
    """stop's contract: SIGTERM, then return once the process has ended, not when the grace is
    over. So when it returns the process is gone (ended by the SIGTERM, not a kill), and it
    returned within the time the engine takes to see an exit, which the grace is twice of."""

    async def fake(p: FakeProcess) -> int:
        p.write_text("/data/ready", "")
        await anyio.sleep(600)
        return 0

    sh = "touch /data/ready; exec sleep 600"
    cid = await rig.backend.create(rig.spec(rig.command(sh, fake), mounts=[Mount(str(shared_dir), "/data")]))
    await rig.backend.start(cid)
    await wait_for_file(shared_dir / "ready")  # running in the container, whatever the engine says yet
    t0 = time.monotonic()
    await rig.backend.stop(cid, grace_s=2 * rig.seen_s)
    took = time.monotonic() - t0
    ended = await rig.backend.inspect(cid)
    assert (ended.state, ended.exit_code) == (
        "exited",
        143,
    )  # by SIGTERM's default action, before stop returned
    assert took < rig.seen_s  # not the grace: fake and docker, 5 s of a 10 s grace, as always


async def test_wait_timeout(rig: Rig) -> None:
    async def fake(p: FakeProcess) -> int:
        await anyio.sleep(60)
        return 0

    cid = await rig.backend.create(rig.spec(rig.command("exec sleep 60", fake)))
    await rig.backend.start(cid)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        await rig.backend.wait(cid, timeout=0.5)
    assert time.monotonic() - t0 < 3
    await rig.backend.stop(cid, grace_s=1)


async def test_follow_logs_until_exit(rig: Rig) -> None:
    async def fake(p: FakeProcess) -> int:
        for i in (1, 2, 3):
            p.log(f"line{i}")
            await anyio.sleep(0.1)
        return 0

    cid = await rig.backend.create(
        rig.spec(rig.command("for i in 1 2 3; do echo line$i; sleep 0.1; done", fake))
    )
    await rig.backend.start(cid)
    with anyio.fail_after(15):
        lines = [line async for line in rig.backend.logs(cid, follow=True)]
    assert lines == ["line1", "line2", "line3"]


async def test_remove(rig: Rig) -> None:
    async def fake(p: FakeProcess) -> int:
        await anyio.sleep(60)
        return 0

    cid = await rig.backend.create(
        rig.spec(rig.command("exec sleep 60", fake), name=f"conf-{uuid.uuid4().hex[:8]}")
    )
    await rig.backend.start(cid)
    await rig.backend.remove(cid, force=True)  # a running one, killed first
    assert await rig.backend.list_by_label(rig.labels) == []
    for op in (rig.backend.inspect, rig.backend.start, rig.backend.remove):
        with pytest.raises(ContainerNotFound):
            await op(cid)
    with pytest.raises(ContainerNotFound):
        await rig.backend.wait(cid)


async def test_name_conflict(rig: Rig) -> None:
    async def fake(p: FakeProcess) -> int:
        return 0

    name = f"conf-{uuid.uuid4().hex[:8]}"
    await rig.backend.create(rig.spec(rig.command("true", fake), name=name))
    with pytest.raises(NameConflict):
        await rig.backend.create(rig.spec(rig.command("true", fake), name=name))


# -- networks and volumes -------------------------------------------------------------------------
async def test_networks_by_label(rig: Rig) -> None:
    name = f"conf-net-{uuid.uuid4().hex[:8]}"
    net_id = await rig.backend.create_network(name, rig.labels, internal=True)
    listed = await rig.backend.list_networks_by_label(rig.labels)
    assert [(n.id, n.name) for n in listed] == [(net_id, name)]
    assert listed[0].labels == rig.labels
    with pytest.raises(NameConflict):
        await rig.backend.create_network(name, rig.labels)
    await rig.backend.remove_network(name)
    assert await rig.backend.list_networks_by_label(rig.labels) == []
    with pytest.raises(NotFound):
        await rig.backend.remove_network(name)


@pytest.mark.swarm
async def test_a_task_on_the_overlay_gives_up_a_dead_address_in_seconds() -> None:
    # (the gateway's replacement task has a new address: the old one must not hold a job 2 min)
    from flower_batch.backend.swarm.service_spec import SYN_RETRIES

    labels = {"org.flower-batch.test": uuid.uuid4().hex[:12]}
    async for rig in _swarm_rig(labels):
        name = f"conf-net-{uuid.uuid4().hex[:8]}"
        await rig.backend.create_network(name, rig.labels, internal=True)
        spec = rig.spec(["cat", "/proc/sys/net/ipv4/tcp_syn_retries"], network=name)
        cid, code = await rig.run(spec, timeout=60)
        assert code == 0 and [line async for line in rig.backend.logs(cid)] == [str(SYN_RETRIES)]
        assert SYN_RETRIES <= 3


async def test_volumes_by_label_and_mounted(rig: Rig) -> None:
    name = f"conf-vol-{uuid.uuid4().hex[:8]}"
    if rig.kind == "swarm":  # node-local on a cluster: refused in one line, nothing made
        with pytest.raises(BackendError, match="node-local"):
            await rig.backend.create_volume(name, rig.labels)
        assert await rig.backend.list_volumes_by_label(rig.labels) == []
        return
    assert await rig.backend.create_volume(name, rig.labels) == name
    assert [(v.name, v.labels) for v in await rig.backend.list_volumes_by_label(rig.labels)] == [
        (name, rig.labels)
    ]

    async def write(p: FakeProcess) -> int:
        p.write_text("/vol/note", "kept\n")
        return 0

    async def read(p: FakeProcess) -> int:
        p.log(p.read_text("/vol/note").strip())
        return 0

    mounts = [Mount(name, "/vol", kind="volume")]
    # A new volume is root's: the writer is root by its own spec (the orchestrator never asks
    # for uid 0 and makes no volumes); the reader runs as every container does.
    await rig.run(rig.spec(rig.command("echo kept > /vol/note", write), mounts=mounts, user="0:0"))
    cid, code = await rig.run(rig.spec(rig.command("cat /vol/note", read), mounts=mounts))
    assert code == 0
    assert [line async for line in rig.backend.logs(cid)] == ["kept"]
    for c in await rig.backend.list_by_label(rig.labels):
        await rig.backend.remove(c.id)
    await rig.backend.remove_volume(name)
    assert await rig.backend.list_volumes_by_label(rig.labels) == []
    with pytest.raises(NotFound):
        await rig.backend.remove_volume(name)


# -- errors and images ------------------------------------------------------------------------------
async def test_missing_image_is_image_missing(rig: Rig) -> None:
    async def fake(p: FakeProcess) -> int:
        return 0

    spec = rig.spec(rig.command("true", fake))
    spec.image = "flower-batch-no-such-image:never"
    with pytest.raises(ImageMissing, match="flower-batch image build"):
        await rig.backend.create(spec)
    with pytest.raises(ImageMissing):
        await rig.backend.image_info("flower-batch-no-such-image:never")


async def test_image_info(rig: Rig) -> None:
    info = await rig.backend.image_info(rig.image)
    assert info.id.startswith("sha256:") and rig.image in info.tags
    assert (await rig.backend.image_info(info.id)).id == info.id


# -- the parts of the contract a cluster reshaped ---------------------------------------------------
async def test_secrets_reach_the_process_as_env_and_a_cluster_removes_its_engine_secret_with_the_task(
    rig: Rig, shared_dir: Path
) -> None:
    # that no `docker service inspect` shows a value: test_swarm_cluster.py; on a local engine,
    # below (a tmpfs filled from stdin at the start, docker/secret_handover.py)
    value = f"s3cret-{uuid.uuid4().hex}"

    async def fake(p: FakeProcess) -> int:
        p.write_text("/data/secret.txt", p.env["FB_TEST_SECRET"] + "\n")
        return 0

    spec = rig.spec(
        rig.command('echo "$FB_TEST_SECRET" > /data/secret.txt', fake),
        secrets={"FB_TEST_SECRET": value},
        mounts=[Mount(str(shared_dir), "/data")],
    )
    cid, code = await rig.run(spec)
    assert code == 0 and (shared_dir / "secret.txt").read_text() == value + "\n"
    if rig.kind == "docker":
        assert value not in _docker_inspect(cid) and "FB_TEST_SECRET_FILE=/run/secrets/FB_TEST_SECRET" in (
            _docker_inspect(cid)
        )
    made = await rig.backend.list_secrets_by_label(rig.labels)
    # a cluster keeps it as an engine secret of the task's; a local engine makes none
    assert len(made) == (1 if rig.kind == "swarm" else 0), made
    await rig.backend.remove(cid, force=True)
    assert await rig.backend.list_secrets_by_label(rig.labels) == []


def _docker_inspect(container_id: str) -> str:
    return subprocess.run(
        ["docker", "inspect", container_id], capture_output=True, text=True, check=True
    ).stdout


async def test_placement_and_the_node_a_task_ran_on(rig: Rig) -> None:
    async def fake(p: FakeProcess) -> int:
        return 0

    spec = rig.spec(rig.command("true", fake), placement=["node.role==manager"])
    cid, code = await rig.run(spec, timeout=60)
    assert code == 0
    node = (await rig.backend.inspect(cid)).node
    if rig.kind == "swarm":  # placed where the constraint says, and the info names the machine
        from tests.batch_fixtures.swarm import PREFIX

        assert node == f"{PREFIX}-manager"
    else:  # one machine has nothing to place: the constraint is ignored, and no node is named
        assert node is None


async def test_check_ready_accepts_the_image_on_shared_storage(rig: Rig) -> None:
    # pre-flight's cluster check (the refusal of a home the nodes do not share: test_swarm_cluster.py)
    await rig.backend.check_ready(rig.image, {"org.flower-batch.batch": rig.labels["org.flower-batch.test"]})
    # its probe (on a cluster: a task on every node) left nothing
    assert (
        await rig.backend.list_by_label({"org.flower-batch.batch": rig.labels["org.flower-batch.test"]}) == []
    )
